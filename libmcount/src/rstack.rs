//! The per-thread shadow stack ("rstack"): one [`Frame`] per hooked function that has not
//! returned yet, innermost last.
//!
//! The storage is a fixed array allocated once per thread (in the thread's `mmap`ed state);
//! nothing here allocates, locks or panics. Ordering rule for signal safety: a frame is filled
//! before `len` grows, and `len` shrinks with a single store after the frame was read.
//!
//! A [`Frame::SENTINEL`] sits just below frame 0, so that the trampolines' fast paths can read
//! "the frame below" without testing for an empty stack: its return slot is above every real
//! one (an entry at depth 0 passes the "below the innermost frame" test) and matches no slot
//! (an exit with no frame takes the slow path).

/// `parent_loc` of frames pushed by `__cyg_profile_func_enter`: no return slot, no hijack.
pub const NO_SLOT: usize = 0;

/// One live function.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Address of the return slot that was hijacked (or [`NO_SLOT`]).
    pub parent_loc: usize,
    /// The slot's original content: where the function really returns to.
    pub parent_ip: usize,
    /// Address identifying the function in its records.
    pub child_ip: usize,
    /// Depth written into its records.
    pub depth: u32,
    /// [`crate::frame_flags`] bits.
    pub flags: u16,
    /// Always 0: the exit fast paths read `flags` and this as one 32-bit word.
    pub pad: u16,
    /// ENTRY timestamp.
    pub start: u64,
    /// The ENTRY record's header word ([`Frame::entry_word`]), kept so that the exit fast
    /// paths need not build it again. Valid whenever `flags` carries no `PENDING` bit: the
    /// pending entries' writer fills it in when it writes them.
    pub word: u64,
}

impl Frame {
    /// What lies below frame 0 (see the module docs).
    pub const SENTINEL: Frame = Frame {
        parent_loc: usize::MAX,
        parent_ip: 0,
        child_ip: 0,
        depth: 0,
        flags: 0,
        pad: 0,
        start: 0,
        word: 0,
    };

    /// A frame, with its ENTRY header word.
    pub fn new(
        parent_loc: usize,
        parent_ip: usize,
        child_ip: usize,
        depth: u32,
        flags: u16,
        start: u64,
    ) -> Frame {
        Frame {
            parent_loc,
            parent_ip,
            child_ip,
            depth,
            flags,
            pad: 0,
            start,
            word: Frame::entry_word(depth, child_ip),
        }
    }

    /// The header word of the ENTRY record of a function at `child_ip` and `depth` (without
    /// a payload).
    pub fn entry_word(depth: u32, child_ip: usize) -> u64 {
        Frame::header(record_format::raw::RecordKind::Entry, depth, child_ip)
    }

    /// The header word of its EXIT record (without a payload).
    pub fn exit_word(depth: u32, child_ip: usize) -> u64 {
        Frame::header(record_format::raw::RecordKind::Exit, depth, child_ip)
    }

    fn header(kind: record_format::raw::RecordKind, depth: u32, child_ip: usize) -> u64 {
        let depth = depth.min(u32::from(record_format::raw::MAX_DEPTH)) as u16;
        record_format::raw::header_word(kind, false, depth, child_ip as u64)
    }
}

/// A bounded LIFO of [`Frame`]s over caller-provided storage. `#[repr(C)]`: the trampolines'
/// fast paths push and pop through `frames` and `len`.
#[repr(C)]
#[derive(Debug)]
pub struct ShadowStack {
    pub(crate) frames: *mut Frame,
    cap: usize,
    pub(crate) len: usize,
    /// `-finstrument-functions` entries beyond `cap`: counted so that their exits are
    /// recognised, not stored.
    pub(crate) overflow: usize,
}

impl ShadowStack {
    /// A stack over `storage`: its first frame becomes the [`Frame::SENTINEL`], the `cap`
    /// others the stack's frames.
    ///
    /// # Safety
    /// `storage` must point to `cap + 1` writable (possibly uninitialised) `Frame`s that stay
    /// valid and are used by nothing else for the lifetime of the returned stack.
    pub unsafe fn from_raw(storage: *mut Frame, cap: usize) -> ShadowStack {
        // SAFETY: the caller's guarantees: the first of the `cap + 1` frames.
        unsafe { storage.write(Frame::SENTINEL) };
        ShadowStack {
            // SAFETY: as above: the `cap` frames after it.
            frames: unsafe { storage.add(1) },
            cap,
            len: 0,
            overflow: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_full(&self) -> bool {
        self.len >= self.cap
    }

    /// Pushes `frame`; `false` (and nothing stored) when the stack is full.
    #[inline]
    pub fn push(&mut self, frame: Frame) -> bool {
        if self.len >= self.cap {
            return false;
        }
        // SAFETY: len < cap, so the slot lies inside the storage promised by `from_raw`.
        unsafe { self.frames.add(self.len).write(frame) };
        self.len += 1;
        true
    }

    /// Frame `i` (0 = outermost), writable.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut Frame> {
        if i < self.len {
            // SAFETY: as in `get`; `&mut self` makes the reference unique.
            Some(unsafe { &mut *self.frames.add(i) })
        } else {
            None
        }
    }

    /// Drops frames `n..` (single store: see the module docs).
    #[inline]
    pub fn truncate(&mut self, n: usize) {
        if n < self.len {
            self.len = n;
        }
    }

    /// Frame `i` (0 = outermost).
    #[inline]
    pub fn get(&self, i: usize) -> Option<&Frame> {
        if i < self.len {
            // SAFETY: i < len <= cap and frames below len were written by `push`.
            Some(unsafe { &*self.frames.add(i) })
        } else {
            None
        }
    }

    #[inline]
    pub fn top(&self) -> Option<&Frame> {
        self.len.checked_sub(1).and_then(|i| self.get(i))
    }

    /// Index of the innermost frame whose return slot is `parent_loc` (tail-call aliases share
    /// a slot: the innermost one returns first).
    #[inline]
    pub fn find_slot(&self, parent_loc: usize) -> Option<usize> {
        (0..self.len)
            .rev()
            .find(|&i| self.get(i).is_some_and(|f| f.parent_loc == parent_loc))
    }

    /// Index of the innermost `-finstrument-functions` frame of `child_ip`, looking only
    /// through the run of such frames at the top (a hijacked frame ends the search: popping it
    /// would leave its slot pointing at the exit trampoline).
    pub fn find_cyg(&self, child_ip: usize) -> Option<usize> {
        for i in (0..self.len).rev() {
            let f = self.get(i)?;
            if f.parent_loc != NO_SLOT {
                return None;
            }
            if f.child_ip == child_ip {
                return Some(i);
            }
        }
        None
    }

    /// Drops frames `n..`, handing each to `f` innermost first.
    #[inline]
    pub fn pop_to(&mut self, n: usize, mut f: impl FnMut(&Frame)) {
        while self.len > n {
            let i = self.len - 1;
            if let Some(frame) = self.get(i) {
                f(frame);
            }
            self.len = i;
        }
    }

    /// Notes a `-finstrument-functions` entry that did not fit.
    pub fn push_overflow(&mut self) {
        self.overflow += 1;
    }

    /// Consumes one overflowed entry, if any.
    pub fn pop_overflow(&mut self) -> bool {
        if self.overflow > 0 {
            self.overflow -= 1;
            true
        } else {
            false
        }
    }

    /// Depth a new entry would get (counting overflowed ones).
    pub fn depth(&self) -> usize {
        self.len + self.overflow
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(parent_loc: usize, child_ip: usize) -> Frame {
        Frame::new(parent_loc, parent_loc + 1, child_ip, 0, 0, 0)
    }

    fn with_stack(cap: usize, t: impl FnOnce(&mut ShadowStack)) {
        let mut store = vec![frame(0, 0); cap + 1];
        // SAFETY: `store` holds `cap + 1` frames and outlives the stack.
        let mut s = unsafe { ShadowStack::from_raw(store.as_mut_ptr(), cap) };
        t(&mut s);
        // The fast paths' view: the sentinel just below frame 0.
        // SAFETY: `store` is still alive; `s` is not used after this.
        let below = unsafe { *s.frames.sub(1) };
        assert_eq!(below, Frame::SENTINEL);
    }

    #[test]
    fn entry_words_cap_the_depth() {
        use record_format::raw::{header_word, RecordKind, MAX_DEPTH};
        let f = Frame::new(0x100, 0x101, 0x4000, 7, 0, 0);
        assert_eq!(f.word, header_word(RecordKind::Entry, false, 7, 0x4000));
        let deep = Frame::new(0x100, 0x101, 0x4000, 5000, 0, 0);
        assert_eq!(
            deep.word,
            header_word(RecordKind::Entry, false, MAX_DEPTH, 0x4000)
        );
    }

    #[test]
    fn push_pop_and_capacity() {
        with_stack(2, |s| {
            assert!(s.is_empty());
            assert!(s.push(frame(0x100, 1)));
            assert!(s.push(frame(0x80, 2)));
            assert!(s.is_full());
            assert!(!s.push(frame(0x40, 3)));
            assert_eq!(s.len(), 2);
            assert_eq!(s.top().unwrap().child_ip, 2);
            let mut seen = vec![];
            s.pop_to(0, |f| seen.push(f.child_ip));
            assert_eq!(seen, [2, 1]);
            assert!(s.top().is_none());
        });
    }

    #[test]
    fn finds_innermost_alias_and_skipped_frames() {
        with_stack(8, |s| {
            s.push(frame(0x100, 1));
            s.push(frame(0x80, 2)); // f
            s.push(frame(0x80, 3)); // g, tail-called by f: same slot
            s.push(frame(0x40, 4)); // skipped by longjmp
            assert_eq!(s.find_slot(0x80), Some(2));
            assert_eq!(s.find_slot(0x100), Some(0));
            assert_eq!(s.find_slot(0x10), None);
            let mut seen = vec![];
            s.pop_to(2, |f| seen.push(f.child_ip));
            assert_eq!(seen, [4, 3]);
            assert_eq!(s.find_slot(0x80), Some(1));
        });
    }

    #[test]
    fn cyg_search_stops_at_hijacked_frames() {
        with_stack(8, |s| {
            s.push(frame(NO_SLOT, 7));
            s.push(frame(0x80, 1));
            s.push(frame(NO_SLOT, 5));
            s.push(frame(NO_SLOT, 6));
            assert_eq!(s.find_cyg(6), Some(3));
            assert_eq!(s.find_cyg(5), Some(2));
            assert_eq!(s.find_cyg(7), None);
        });
    }

    #[test]
    fn overflow_counts_depth() {
        with_stack(1, |s| {
            s.push(frame(NO_SLOT, 1));
            s.push_overflow();
            assert_eq!(s.depth(), 2);
            assert!(s.pop_overflow());
            assert!(!s.pop_overflow());
            assert_eq!(s.depth(), 1);
        });
    }
}
