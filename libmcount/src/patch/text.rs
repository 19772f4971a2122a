//! Writing code: the page of stubs and out-of-line code mapped next to a module ([`Near`]),
//! and the patch sites written into the module's text ([`Writable`], [`write_site`]).
//!
//! A `call rel32` reaches ±2 GiB, and libmcount is usually farther, so each patched module
//! gets its own region, mapped with `MAP_FIXED_NOREPLACE` at the first free hint after the
//! module's start (then after its end): 16-byte stubs `jmp qword ptr [rip]` + the address of
//! a libmcount trampoline, then the relocated prologues of fully patched functions (their
//! RIP-relative operands are rewritten for this address, so it must be near too). The region
//! is written while `RW`, then made `R-X` for good.
//!
//! The module's text is made `RWX` around the writes and given back the protection
//! `/proc/self/maps` showed for each page before. Atomicity (other threads may run when a
//! `dlopen`ed module is patched): the bytes that start an instruction stream — the 5-byte
//! `call`, or the 5/6-byte NOP of `-U` — are stored at once, with one aligned 8-byte store
//! when they lie in one aligned 8-byte word, else with `lock cmpxchg16b` when they lie in one
//! aligned 16-byte block. A site crossing a 16-byte boundary is written byte by byte only when
//! no other thread runs (the constructor); otherwise it is refused. The NOP padding after a
//! `call` is written after the call: no thread entering the function reaches it.

use core::sync::atomic::{AtomicU64, Ordering};

/// Size of one stub.
pub const STUB: usize = 16;
const PAGE: usize = 4096;
/// How far the hints go from the module (the farthest must keep every site within ±2 GiB).
const HINT_STEP: usize = 1 << 20;
const HINTS: usize = 512;
/// Lowest address tried (above the usual `vm.mmap_min_addr`).
const MIN_ADDR: usize = 1 << 20;

/// A region next to a module: stubs first, then out-of-line code.
pub struct Near {
    pub base: usize,
    pub len: usize,
    /// Next free byte.
    cursor: usize,
}

impl Near {
    /// Maps `len` bytes (rounded up to pages) within reach of `[lo, hi)`.
    pub fn map(lo: usize, hi: usize, len: usize) -> Option<Near> {
        let len = len.div_ceil(PAGE) * PAGE;
        let hi = hi.div_ceil(PAGE) * PAGE;
        let lo = lo & !(PAGE - 1);
        // Below the module first: above an executable lies the heap, which `brk` grows into.
        let before = (0..HINTS)
            .filter_map(|k| lo.checked_sub(k * HINT_STEP + len))
            .filter(|&h| h >= MIN_ADDR);
        let after = (0..HINTS).map(|k| hi + k * HINT_STEP);
        for hint in before.chain(after) {
            // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping; a new anonymous
            // mapping affects nothing else.
            let p = unsafe {
                libc::mmap(
                    hint as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                continue;
            }
            if p as usize != hint {
                // A kernel without MAP_FIXED_NOREPLACE took it as a hint only.
                // SAFETY: `p` is the mapping just made, referenced by nothing.
                unsafe { libc::munmap(p, len) };
                continue;
            }
            return Some(Near {
                base: hint,
                len,
                cursor: hint,
            });
        }
        None
    }

    /// Adds a stub jumping to `target`; returns its address.
    pub fn stub(&mut self, target: usize) -> Option<usize> {
        let at = self.reserve(STUB)?;
        let mut code = [0xccu8; STUB];
        code[..6].copy_from_slice(&[0xff, 0x25, 0, 0, 0, 0]);
        code[6..14].copy_from_slice(&(target as u64).to_le_bytes());
        self.put(at, &code);
        Some(at)
    }

    /// Room for `len` bytes at a 16-byte boundary, not written yet.
    pub fn reserve(&mut self, len: usize) -> Option<usize> {
        let at = self.cursor.next_multiple_of(16);
        (at + len <= self.base + self.len).then_some(at)
    }

    /// Writes `code` at `at` (from [`Near::reserve`]) and moves the cursor past it.
    pub fn put(&mut self, at: usize, code: &[u8]) {
        debug_assert!(at >= self.cursor && at + code.len() <= self.base + self.len);
        // SAFETY: `[at, at + len)` lies in this region, mapped writable until `freeze`.
        unsafe { core::ptr::copy_nonoverlapping(code.as_ptr(), at as *mut u8, code.len()) };
        self.cursor = at + code.len();
    }

    /// Makes the region executable and read-only, for good.
    pub fn freeze(&self) -> bool {
        // SAFETY: the region is this object's own mapping.
        unsafe {
            libc::mprotect(
                self.base as *mut libc::c_void,
                self.len,
                libc::PROT_READ | libc::PROT_EXEC,
            ) == 0
        }
    }
}

/// The `rel32` of a 5-byte `call`/`jmp` at `site` to `target`, if it reaches.
pub fn rel32(site: usize, target: usize) -> Option<i32> {
    let d = (target as i64).wrapping_sub(site as i64 + 5);
    i32::try_from(d).ok()
}

/// Pages made writable, given back their protection when dropped.
pub struct Writable {
    /// `(start, end, prot)` of each mapping piece as `/proc/self/maps` showed it.
    saved: Vec<(usize, usize, i32)>,
}

impl Writable {
    /// Makes the pages of `[lo, hi)` `RWX`; `None` when `mprotect` refuses (W^X policies).
    pub fn open(lo: usize, hi: usize) -> Option<Writable> {
        let lo = lo & !(PAGE - 1);
        let hi = hi.div_ceil(PAGE) * PAGE;
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        let mut saved = Vec::new();
        for line in maps.lines() {
            let mut it = line.split_whitespace();
            let (Some(range), Some(perms)) = (it.next(), it.next()) else {
                continue;
            };
            let Some((s, e)) = range.split_once('-') else {
                continue;
            };
            let (Ok(s), Ok(e)) = (usize::from_str_radix(s, 16), usize::from_str_radix(e, 16))
            else {
                continue;
            };
            if e <= lo || s >= hi {
                continue;
            }
            let b = perms.as_bytes();
            let mut prot = 0;
            if b.first() == Some(&b'r') {
                prot |= libc::PROT_READ;
            }
            if b.get(1) == Some(&b'w') {
                prot |= libc::PROT_WRITE;
            }
            if b.get(2) == Some(&b'x') {
                prot |= libc::PROT_EXEC;
            }
            saved.push((s.max(lo), e.min(hi), prot));
        }
        // SAFETY: the range is whole pages of this process's own mappings (the module's text,
        // which stays executable throughout).
        let r = unsafe {
            libc::mprotect(
                lo as *mut libc::c_void,
                hi - lo,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
            )
        };
        (r == 0).then_some(Writable { saved })
    }
}

impl Drop for Writable {
    fn drop(&mut self) {
        for &(s, e, prot) in &self.saved {
            // SAFETY: as in `open`: the same pages, back to what they were.
            unsafe { libc::mprotect(s as *mut libc::c_void, e - s, prot) };
        }
    }
}

/// Why a site could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteError {
    /// It crosses a 16-byte boundary while other threads may run.
    NotAtomic,
}

/// Writes `head` (at most 8 bytes: the instruction that starts the site) at `site` at once,
/// then `tail` after it (padding no thread reaches), inside pages made writable by a live
/// [`Writable`]. `concurrent`: other threads may run.
///
/// # Safety
/// `[site, site + head.len() + tail.len())` must be code of a loaded module, made writable.
pub unsafe fn write_site(
    site: usize,
    head: &[u8],
    tail: &[u8],
    concurrent: bool,
) -> Result<(), WriteError> {
    let n = head.len();
    debug_assert!(n <= 8);
    let word = site & !7;
    if site + n <= word + 8 {
        // SAFETY: an aligned word of writable text (caller); an atomic store makes the
        // instruction appear whole to every thread.
        let cell = unsafe { &*(word as *const AtomicU64) };
        let mut bytes = cell.load(Ordering::Relaxed).to_le_bytes();
        bytes[site - word..site - word + n].copy_from_slice(head);
        cell.store(u64::from_le_bytes(bytes), Ordering::SeqCst);
    } else if site + n <= (site & !15) + 16 {
        // SAFETY: an aligned 16-byte block of writable text (caller).
        unsafe { store16(site & !15, site - (site & !15), head) };
    } else if concurrent {
        return Err(WriteError::NotAtomic);
    } else {
        // SAFETY: writable text (caller); no other thread runs.
        unsafe { core::ptr::copy_nonoverlapping(head.as_ptr(), site as *mut u8, n) };
    }
    if !tail.is_empty() {
        // SAFETY: writable text (caller), after the head.
        unsafe { core::ptr::copy_nonoverlapping(tail.as_ptr(), (site + n) as *mut u8, tail.len()) };
    }
    Ok(())
}

/// Puts `bytes` (what [`write_site`] replaced, its head `head_len` bytes long) back at `site`:
/// the tail first (no thread reaches it while the head is the patched instruction), then the
/// head at once, so that a thread entering the function sees either the patch or the original.
///
/// # Safety
/// As for [`write_site`].
pub unsafe fn restore_site(
    site: usize,
    bytes: &[u8],
    head_len: usize,
    concurrent: bool,
) -> Result<(), WriteError> {
    let (head, tail) = bytes.split_at(head_len.min(bytes.len()));
    if !tail.is_empty() {
        // SAFETY: writable text (caller), after the head.
        unsafe {
            core::ptr::copy_nonoverlapping(
                tail.as_ptr(),
                (site + head.len()) as *mut u8,
                tail.len(),
            )
        };
    }
    // SAFETY: as above.
    unsafe { write_site(site, head, &[], concurrent) }
}

/// Replaces `bytes` at offset `off` of the aligned 16-byte block at `block` with one
/// `lock cmpxchg16b`, retried until no other writer changed the block in between.
///
/// # Safety
/// `block` must be 16-byte aligned, writable, and `off + bytes.len() <= 16`.
unsafe fn store16(block: usize, off: usize, bytes: &[u8]) {
    loop {
        // SAFETY: readable (caller); a torn read only makes the exchange fail and retry.
        let old = unsafe { core::ptr::read_volatile(block as *const [u8; 16]) };
        let mut new = old;
        new[off..off + bytes.len()].copy_from_slice(bytes);
        let (old_lo, old_hi) = split(&old);
        let (new_lo, new_hi) = split(&new);
        let ok: u64;
        // SAFETY: `block` is aligned and writable (caller). rbx, which the instruction needs
        // for the new value's low half but Rust cannot name as an operand, is swapped with
        // rsi around it; every register is named explicitly so none of them is rbx.
        unsafe {
            core::arch::asm!(
                "xor r8d, r8d",
                "xchg rbx, rsi",
                "lock cmpxchg16b [rdi]",
                "sete r8b",
                "xchg rbx, rsi",
                in("rdi") block,
                inout("rsi") new_lo => _,
                out("r8") ok,
                inout("rax") old_lo => _,
                inout("rdx") old_hi => _,
                in("rcx") new_hi,
            );
        }
        if ok != 0 {
            return;
        }
    }
}

fn split(b: &[u8; 16]) -> (u64, u64) {
    let mut lo = [0u8; 8];
    let mut hi = [0u8; 8];
    lo.copy_from_slice(&b[..8]);
    hi.copy_from_slice(&b[8..]);
    (u64::from_le_bytes(lo), u64::from_le_bytes(hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C, align(16))]
    struct Block([u8; 48]);

    #[test]
    fn sites_are_written_whole_in_every_alignment() {
        for off in 0..24 {
            let mut b = Block([0x90; 48]);
            let site = b.0.as_mut_ptr() as usize + off;
            let crosses16 = (site & 15) + 5 > 16;
            // SAFETY: the site lies in the local block.
            let r = unsafe { write_site(site, &[0xe8, 1, 2, 3, 4], &[0xcc], true) };
            if crosses16 {
                assert_eq!(r, Err(WriteError::NotAtomic), "offset {off}");
                continue;
            }
            assert_eq!(r, Ok(()));
            assert_eq!(&b.0[off..off + 6], &[0xe8, 1, 2, 3, 4, 0xcc]);
            assert!(b.0[..off].iter().chain(&b.0[off + 6..]).all(|&x| x == 0x90));
        }
        let mut b = Block([0x90; 48]);
        let site = b.0.as_mut_ptr() as usize + 14;
        // SAFETY: as above; alone, the crossing site is written byte by byte.
        let r = unsafe { write_site(site, &[1, 2, 3, 4, 5], &[], false) };
        assert_eq!(r, Ok(()));
        assert_eq!(&b.0[14..19], &[1, 2, 3, 4, 5]);
    }

    #[test]
    fn restored_sites_get_their_original_bytes() {
        let mut b = Block([0x90; 48]);
        let original = [0x55, 0x48, 0x89, 0xe5, 0x41, 0x57, 0x41, 0x56];
        b.0[20..28].copy_from_slice(&original);
        let site = b.0.as_mut_ptr() as usize + 20;
        // SAFETY: the site lies in the local block.
        unsafe {
            write_site(site, &[0xe8, 1, 2, 3, 4], &[0x90; 3], true).unwrap();
            assert_eq!(&b.0[20..28], &[0xe8, 1, 2, 3, 4, 0x90, 0x90, 0x90]);
            restore_site(site, &original, 5, true).unwrap();
        }
        assert_eq!(&b.0[20..28], &original);
        assert!(b.0[..20].iter().chain(&b.0[28..]).all(|&x| x == 0x90));
    }

    #[test]
    fn near_regions_are_within_reach() {
        let own = near_regions_are_within_reach as *const () as usize;
        let mut near = Near::map(own, own + 4096, 8192).expect("a free region near the code");
        assert!(rel32(own, near.base).is_some() && rel32(near.base, own).is_some());
        let stub = near.stub(own).unwrap();
        // SAFETY: the stub was just written into the mapping.
        let code = unsafe { core::slice::from_raw_parts(stub as *const u8, 14) };
        assert_eq!(&code[..6], &[0xff, 0x25, 0, 0, 0, 0]);
        assert_eq!(&code[6..], &(own as u64).to_le_bytes());
        assert!(near.freeze());
        // SAFETY: the region is this test's own, unused now.
        unsafe { libc::munmap(near.base as *mut libc::c_void, near.len) };
    }

    #[test]
    fn calls_reach_within_2gib_only() {
        assert_eq!(rel32(0x1000, 0x1005), Some(0));
        assert_eq!(rel32(0x1000, 0x1000), Some(-5));
        assert_eq!(rel32(0x1000, 0x1_0000_1000), None);
    }
}
