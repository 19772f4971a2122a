//! `--signal SIG@ACTION`: signals that switch recording (`trace_on`, `trace_off`, `finish`)
//! instead of functions, or dump the flight recorder (`dump`).
//!
//! The library constructor installs a handler for each named signal ([`install`]); the
//! handler only ORs the signal's actions into [`PENDING`] (an atomic store is all a signal
//! handler may do here). The hooks take the pending actions at their next entry or exit
//! ([`take`]) and apply them as a function trigger's would be: `trace_on`/`trace_off` before
//! that hook's record, `finish` after an exit's record (so the call the signal interrupted
//! still gets its EXIT, as uftrace records it) and before an entry's. Sessions with signal
//! triggers run the hooks' slow path (see `filter::Settings::active`).
//!
//! `dump` is done in the handler itself ([`crate::flight::request_dump`] is
//! async-signal-safe): the records up to the signal are taken before the handler returns, and
//! a signal that only dumps leaves the hooks' fast paths on.

use crate::frame_flags::{FINISH, TRACE_OFF, TRACE_ON};
use core::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use record_format::trigger::{parse_signal_trigger, SignalAction};

/// Highest signal number.
const MAX_SIGNAL: usize = 64;

/// Per signal number: the frame-flag bits of its actions.
static ACTIONS: [AtomicU16; MAX_SIGNAL + 1] = [const { AtomicU16::new(0) }; MAX_SIGNAL + 1];

/// Per signal number (bit [`dump_bit`]): `dump`.
static DUMPS: AtomicU64 = AtomicU64::new(0);

/// The bit of signal `sig` (1 to 64) in [`DUMPS`].
fn dump_bit(sig: libc::c_int) -> u64 {
    if (1..=MAX_SIGNAL as libc::c_int).contains(&sig) {
        1 << (sig - 1)
    } else {
        0
    }
}

/// The actions of the signals received since the hooks last looked.
static PENDING: AtomicU16 = AtomicU16::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    if let Some(a) = ACTIONS.get(sig as usize) {
        PENDING.fetch_or(a.load(Ordering::Relaxed), Ordering::Relaxed);
    }
    if DUMPS.load(Ordering::Relaxed) & dump_bit(sig) != 0 {
        crate::flight::request_dump();
    }
}

/// Installs the handlers of `list` (`UTRACE_SIGNAL`, validated by the recorder); returns
/// whether any that switches recording was installed (the hooks must look for them).
/// Library constructor only.
pub fn install(list: &str) -> bool {
    let mut any = false;
    for spec in list.split(';').filter(|s| !s.is_empty()) {
        let Ok((sig, actions)) = parse_signal_trigger(spec) else {
            continue;
        };
        let Some(slot) = ACTIONS.get(sig as usize) else {
            continue;
        };
        let bits = actions.iter().fold(0, |b, a| {
            b | match a {
                SignalAction::TraceOn => TRACE_ON,
                SignalAction::TraceOff => TRACE_OFF,
                SignalAction::Finish => FINISH,
                SignalAction::Dump => 0,
            }
        });
        slot.fetch_or(bits, Ordering::Relaxed);
        if actions.contains(&SignalAction::Dump) {
            DUMPS.fetch_or(dump_bit(sig), Ordering::Relaxed);
        }
        // SAFETY: an all-zero sigaction is valid (empty mask, no flags); the handler is an
        // `extern "C" fn(c_int)` that only touches atomics.
        let ok = unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig, &sa, core::ptr::null_mut()) == 0
        };
        any |= ok && bits != 0;
    }
    any
}

/// The actions pending since the last call (frame-flag bits: `TRACE_ON`, `TRACE_OFF`,
/// `FINISH`), cleared.
#[inline]
pub fn take() -> u16 {
    if PENDING.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    PENDING.swap(0, Ordering::AcqRel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_marks_its_actions_pending() {
        assert!(install("SIGUSR2@trace_off,finish"));
        assert_eq!(take(), 0);
        // SAFETY: raising a signal whose handler was just installed.
        unsafe { libc::raise(libc::SIGUSR2) };
        assert_eq!(take(), TRACE_OFF | FINISH);
        assert_eq!(take(), 0);
    }

    #[test]
    fn a_dump_signal_is_handled_without_the_slow_path() {
        // Dump only: nothing for the hooks to look at (the fast paths stay on)...
        assert!(!install("SIGPWR@dump"));
        // ...but the handler is installed (SIGPWR would end the test process), and outside
        // flight mode the dump is a no-op.
        // SAFETY: raising a signal whose handler was just installed.
        unsafe { libc::raise(libc::SIGPWR) };
        assert_ne!(DUMPS.load(Ordering::Relaxed) & dump_bit(libc::SIGPWR), 0);
        assert_eq!(ACTIONS[libc::SIGPWR as usize].load(Ordering::Relaxed), 0);
    }

    #[test]
    fn the_highest_signal_can_dump() {
        assert_eq!(dump_bit(64), 1 << 63);
        assert_eq!((dump_bit(0), dump_bit(65)), (0, 0));
        assert!(!install("64@dump"));
        assert_ne!(DUMPS.load(Ordering::Relaxed) & (1 << 63), 0);
    }
}
