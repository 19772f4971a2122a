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
    waiting: BTreeMap<u64, Vec<u8>>,
    /// Gave up (too much waiting, or the staging file could not be read): the final pass
    /// sends the rest.
    stopped: bool,
    /// Passes of this thread's pump completed when the last early chunk came.
    early_at: u64,
}

/// What was sent while the program ran.
#[derive(Default)]
pub struct DataStream {
    threads: HashMap<u32, ThreadStream>,
    waiting_bytes: usize,
    /// Passes completed by each pump (pumps split the threads by `tid % pumps.len()`).
    passes: Vec<u64>,
}

impl DataStream {
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
                self.waiting_bytes -= t.waiting.values().map(Vec::len).sum::<usize>();
                t.waiting.clear();
            } else {
                self.waiting_bytes += bytes.len();
                t.waiting.insert(off, bytes.to_vec());
            }
            return Vec::new();
        }
        let mut ready = vec![Cow::Borrowed(bytes)];
        t.sent += bytes.len() as u64;
        while let Some(next) = t.waiting.remove(&t.sent) {
            self.waiting_bytes -= next.len();
            t.sent += next.len() as u64;
            ready.push(Cow::Owned(next));
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
            while let Some((off, bytes)) = t.waiting.pop_first() {
                self.waiting_bytes -= bytes.len();
                if off > t.sent {
                    match read_at(&path, t.sent, off - t.sent) {
                        Ok(gap) => ready.push((tid, gap)),
                        Err(_) => {
                            t.stopped = true;
                            self.waiting_bytes -= t.waiting.values().map(Vec::len).sum::<usize>();
                            t.waiting.clear();
                            break;
                        }
                    }
                }
                t.sent = off + bytes.len() as u64;
                ready.push((tid, bytes));
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
