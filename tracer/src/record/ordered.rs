//! Each traced thread's records in file order while the pump writes them: the pump tells of
//! each chunk it writes ([`record_format::ring::Written`]), not necessarily in file order, and
//! [`DataStream`] hands out the byte runs of each thread as soon as the ones before them have
//! been. A chunk that comes early waits (within [`MAX_WAITING`] bytes in all). What comes
//! before it was either sealed in the ring and is told of within the pump's next whole pass,
//! or written by the traced thread itself (its ring was full: the pump fell behind), which the
//! pump never tells of: a gap still open two passes after it was seen is read from the data
//! file. What the pump never tells of at all (the salvage, flight dumps) is in the data files
//! from [`DataStream::sent`] on once the recording ended. Used by `record --host`
//! (`net::send`) and `record -S`/`live -S` (`script::live`).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Most bytes of early chunks held; past it a thread's streaming stops until the end.
const MAX_WAITING: usize = 64 << 20;

/// One thread's stream.
#[derive(Default)]
struct ThreadStream {
    /// Bytes of `<tid>.dat` sent: the file up to here is on its way.
    sent: u64,
    /// Early chunks by offset.
    waiting: BTreeMap<u64, Early>,
    /// Gave up (too much waiting, or the staging file could not be read): the final pass
    /// sends the rest.
    stopped: bool,
    /// Passes of this thread's pump completed when the last early chunk came.
    early_at: u64,
}

/// A chunk that came early: its length, and its bytes (none in offsets-only mode).
struct Early {
    len: u64,
    bytes: Vec<u8>,
}

/// What was sent while the program ran.
#[derive(Default)]
pub struct DataStream {
    /// Only how far each file is written in order is wanted (the runs handed out are empty):
    /// no early chunk is copied, no gap read.
    offsets_only: bool,
    threads: HashMap<u32, ThreadStream>,
    waiting_bytes: usize,
    /// Passes completed by each pump (pumps split the threads by `tid % pumps.len()`).
    passes: Vec<u64>,
}

impl DataStream {
    /// A stream whose user reads the data files itself and only wants [`DataStream::sent`]
    /// (`record -S`): the runs it hands out are empty.
    pub fn offsets_only() -> DataStream {
        DataStream {
            offsets_only: true,
            ..DataStream::default()
        }
    }

    /// How many bytes of `<tid>.dat` were sent.
    pub fn sent(&self, tid: u32) -> u64 {
        self.threads.get(&tid).map_or(0, |t| t.sent)
    }

    /// Takes the chunk of `tid` at `off`; returns the byte runs now ready to send, in order
    /// (the chunk itself borrowed: only early chunks are copied, to wait).
    pub fn take<'b>(&mut self, tid: u32, off: u64, bytes: &'b [u8]) -> Vec<Cow<'b, [u8]>> {
        let t = self.threads.entry(tid).or_default();
        if t.stopped || off < t.sent {
            return Vec::new();
        }
        if off > t.sent {
            t.early_at = match self.passes.len() {
                0 => 0,
                n => self.passes[tid as usize % n],
            };
            if self.waiting_bytes + bytes.len() > MAX_WAITING {
                t.stopped = true;
                self.waiting_bytes -= t.waiting.values().map(|e| e.bytes.len()).sum::<usize>();
                t.waiting.clear();
            } else {
                let len = bytes.len() as u64;
                let bytes = match self.offsets_only {
                    true => Vec::new(),
                    false => bytes.to_vec(),
                };
                self.waiting_bytes += bytes.len();
                t.waiting.insert(off, Early { len, bytes });
            }
            return Vec::new();
        }
        t.sent += bytes.len() as u64;
        let mut ready = vec![Cow::Borrowed(match self.offsets_only {
            true => &bytes[..0],
            false => bytes,
        })];
        while let Some(next) = t.waiting.remove(&t.sent) {
            self.waiting_bytes -= next.bytes.len();
            t.sent += next.len;
            ready.push(Cow::Owned(next.bytes));
        }
        ready
    }

    /// A pass of pump `index` of `count` ended: the gaps of its threads still open two passes
    /// after their last early chunk came were written by the threads themselves, and are read
    /// from `dir`. Returns the runs ready to send, by thread.
    pub fn pass(&mut self, index: u32, count: u32, dir: &Path) -> Vec<(u32, Vec<u8>)> {
        if self.passes.len() != count as usize {
            self.passes = vec![0; count as usize];
        }
        let Some(done) = self.passes.get_mut(index as usize) else {
            return Vec::new();
        };
        *done += 1;
        let done = *done;
        let mut ready = Vec::new();
        for (&tid, t) in self.threads.iter_mut() {
            if t.waiting.is_empty() || tid % count != index || done < t.early_at + 2 {
                continue;
            }
            let path = dir.join(format!("{tid}.dat"));
            while let Some((off, early)) = t.waiting.pop_first() {
                self.waiting_bytes -= early.bytes.len();
                if off > t.sent {
                    let gap = match self.offsets_only {
                        true => Ok(Vec::new()),
                        false => read_at(&path, t.sent, off - t.sent),
                    };
                    match gap {
                        Ok(gap) => ready.push((tid, gap)),
                        Err(_) => {
                            t.stopped = true;
                            self.waiting_bytes -=
                                t.waiting.values().map(|e| e.bytes.len()).sum::<usize>();
                            t.waiting.clear();
                            break;
                        }
                    }
                }
                t.sent = off + early.len;
                ready.push((tid, early.bytes));
            }
        }
        ready
    }
}

/// `len` bytes of `path` at `off`.
fn read_at(path: &Path, off: u64, len: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut bytes = vec![0u8; usize::try_from(len).map_err(std::io::Error::other)?];
    std::fs::File::open(path)?.read_exact_at(&mut bytes, off)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_sent_in_file_order() {
        let mut s = DataStream::default();
        assert_eq!(s.take(1, 0, b"aa"), [b"aa".to_vec()]);
        assert!(s.take(1, 4, b"cc").is_empty());
        assert!(s.take(1, 6, b"dd").is_empty());
        assert_eq!(s.waiting_bytes, 4);
        assert_eq!(
            s.take(1, 2, b"bb"),
            [b"bb".to_vec(), b"cc".to_vec(), b"dd".to_vec()]
        );
        assert_eq!(s.sent(1), 8);
        assert_eq!(s.waiting_bytes, 0);
        // Another thread, and a chunk from before what was sent.
        assert_eq!(s.sent(2), 0);
        assert!(s.take(1, 0, b"aa").is_empty());
    }

    #[test]
    fn gaps_the_pump_does_not_fill_are_read_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("4.dat"), b"aabbccdd").unwrap();
        let mut s = DataStream::default();
        assert!(s.pass(0, 2, dir.path()).is_empty());
        assert_eq!(s.take(4, 0, b"aa"), [b"aa".to_vec()]);
        // `bb` was written by the thread; `cc` comes early during pump 0's second pass.
        assert!(s.take(4, 4, b"cc").is_empty());
        // Pump 1's passes do not count for thread 4, nor does the pass under way.
        assert!(s.pass(1, 2, dir.path()).is_empty());
        assert!(s.pass(0, 2, dir.path()).is_empty());
        assert_eq!(
            s.pass(0, 2, dir.path()),
            [(4, b"bb".to_vec()), (4, b"cc".to_vec())]
        );
        assert_eq!(s.sent(4), 6);
        assert_eq!(s.waiting_bytes, 0);
        assert_eq!(s.take(4, 6, b"dd"), [b"dd".to_vec()]);
    }

    #[test]
    fn offsets_only_copies_and_reads_nothing() {
        let mut s = DataStream::offsets_only();
        assert_eq!(s.take(5, 0, b"aa").len(), 1);
        assert!(s.take(5, 4, b"cc").is_empty());
        assert_eq!(s.waiting_bytes, 0);
        // The gap is not read: there is no data file.
        let dir = tempfile::tempdir().unwrap();
        assert!(s.pass(0, 1, dir.path()).is_empty());
        let ready = s.pass(0, 1, dir.path());
        assert_eq!(ready, [(5, Vec::new()), (5, Vec::new())]);
        assert_eq!(s.sent(5), 6);
        assert_eq!(s.take(5, 6, b"dd").len(), 1);
        assert_eq!(s.sent(5), 8);
    }

    #[test]
    fn too_much_waiting_stops_a_thread() {
        let mut s = DataStream::default();
        let big = vec![0u8; MAX_WAITING];
        assert!(s.take(3, 16, &big[..16]).is_empty());
        assert!(s.take(3, 32, &big).is_empty());
        assert_eq!(s.waiting_bytes, 0);
        assert!(s.take(3, 0, b"x").is_empty());
        assert_eq!(s.sent(3), 0);
    }
}
