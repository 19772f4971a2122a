//! Unit tests of the PLT hooks' slot table.

use super::*;

#[test]
fn stub_encoding() {
    let c = stub_code(0x1000 + 16, 0x1000, 3);
    assert_eq!(&c[..9], &[0xf3, 0x0f, 0x1e, 0xfa, 0x68, 3, 0, 0, 0]);
    assert_eq!(&c[9..11], &[0xff, 0x25]);
    // jmp *[rip + disp]: rip after the jump = 0x101f; 0x101f + disp = 0x1000.
    assert_eq!(i32::from_le_bytes(c[11..15].try_into().unwrap()), -0x1f);
    assert_eq!(c[15], 0x90);
}

#[test]
fn special_names() {
    assert_eq!(kind_of("printf"), Some(Kind::Hook));
    assert_eq!(kind_of("__cxa_throw"), None);
    assert_eq!(kind_of("_setjmp"), Some(Kind::Setjmp));
    assert_eq!(kind_of("siglongjmp"), Some(Kind::Longjmp));
    assert_eq!(kind_of("dlopen"), Some(Kind::Dlopen));
    assert_eq!(kind_of("dlvsym"), Some(Kind::Dlsym));
    assert_eq!(kind_of("vfork"), Some(Kind::Vfork));
    assert_eq!(kind_of("__longjmp_chk"), Some(Kind::Longjmp));
    assert_eq!(kind_of("__sigsetjmp"), Some(Kind::Setjmp));
    assert_eq!(kind_of("fork"), Some(Kind::Hook));
    assert_eq!(kind_of("execve"), Some(Kind::Hook));
}

/// A table of `n` slots whose GOT words are in `gots`, stubs at a fake address.
fn test_plt(gots: &'static [AtomicUsize]) -> Plt {
    let slots: Vec<Slot> = gots
        .iter()
        .enumerate()
        .map(|(i, g)| Slot {
            fast: AtomicUsize::new(0),
            entry: AtomicUsize::new(0x1000 + i * 16),
            got: AtomicUsize::new(g.as_ptr() as usize),
            target: AtomicUsize::new(0x500),
            lazy: AtomicUsize::new(0x500),
            kind: AtomicU8::new(0),
            no_fast: AtomicBool::new(false),
            pending: AtomicUsize::new(0),
        })
        .collect();
    let plt = Plt {
        slots: Vec::leak(slots),
        len: AtomicUsize::new(gots.len()),
        names: Mutex::new(Vec::new()),
        stubs: 0x10_0000,
        pending: Box::leak(Box::new(AtomicUsize::new(0))),
        hooked: Mutex::new(Vec::new()),
        nest: false,
        relro: Mutex::new(Vec::new()),
    };
    for (i, g) in gots.iter().enumerate() {
        g.store(plt.stub(i), Ordering::Relaxed);
    }
    plt
}

#[test]
fn a_slot_stays_pending_until_the_binder_is_past() {
    let gots: &'static [AtomicUsize] = Vec::leak((0..3).map(|_| AtomicUsize::new(0)).collect());
    let plt = test_plt(gots);
    let pending = |p: &Plt| p.pending.load(Ordering::Relaxed);
    // Threads a and b call slot 2 unbound at once, c slot 0; no request is lost.
    let (mut a, mut b, mut c) = (Claims::new(), Claims::new(), Claims::new());
    plt.rearm_later(2, 0x9000, Some(&mut a));
    plt.rearm_later(2, 0x8000, Some(&mut b));
    plt.rearm_later(0, 0x7000, Some(&mut c));
    assert_eq!(pending(&plt), 3);
    // Another thread's hook re-arms before the binders wrote: nothing to do.
    plt.rearm_now();
    assert_eq!(plt.target(0), (0x500, true));
    // a's binder writes; the next hook restores the stub and learns the address.
    gots[2].store(0x7777, Ordering::Relaxed);
    assert_eq!(plt.target(1), (0x500, true));
    assert_eq!(gots[2].load(Ordering::Relaxed), plt.stub(2));
    assert_eq!(plt.target(2), (0x7777, false));
    assert_eq!(plt.slots[2].fast.load(Ordering::Relaxed), 0x7777);
    // a's next call, deeper (in the function, or a signal handler in the binder): a stays.
    plt.settle(&mut a, 0x8ff0);
    assert_eq!(pending(&plt), 3);
    plt.settle(&mut a, 0x9000);
    assert_eq!(pending(&plt), 2);
    // b's binder writes late, after the re-arm: the slot is still pending, re-armed again.
    gots[2].store(0x7777, Ordering::Relaxed);
    plt.rearm_now();
    assert_eq!(gots[2].load(Ordering::Relaxed), plt.stub(2));
    plt.settle(&mut b, 0x8010);
    assert_eq!(pending(&plt), 1);
    // c ends: its call is past the binder, whose address is learnt by the settling.
    gots[0].store(0x6666, Ordering::Relaxed);
    plt.settle(&mut c, usize::MAX);
    assert_eq!(gots[0].load(Ordering::Relaxed), plt.stub(0));
    assert_eq!(plt.target(0), (0x6666, false));
    assert_eq!(pending(&plt), 0);
    // Beyond a thread's room for claims, the slot stays pending.
    let mut d = Claims::new();
    for _ in 0..CLAIMS + 1 {
        plt.rearm_later(1, 0x6000, Some(&mut d));
    }
    plt.settle(&mut d, usize::MAX);
    assert_eq!(pending(&plt), 1);
}
