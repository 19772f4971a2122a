//! The `perf-cpu<N>.dat` files (data-format §10, feature `PERF_EVENT`): the byte stream of one
//! CPU's perf ring buffer, as the kernel wrote it, for the traced process tree. Records are
//! the kernel's `perf_event_header {u32 type; u16 misc; u16 size}` followed by their body and
//! the `sample_id` trailer `{u32 pid; u32 tid; u64 time}` (`sample_type = TID|TIME`,
//! `sample_id_all`). The recorder writes them; the analysis reads them.
//!
//! | type | record | body before the trailer |
//! |---|---|---|
//! | 3 | COMM | u32 pid, u32 tid, name NUL-padded to 8 bytes (`misc` [`MISC_COMM_EXEC`] on exec) |
//! | 4, 7 | EXIT, FORK | u32 pid, ppid, tid, ptid, u64 time |
//! | 14 | SWITCH | none; `misc` [`MISC_SWITCH_OUT`], [`MISC_SWITCH_OUT_PREEMPT`] |

/// `perf_event_header.type` values.
pub const RECORD_COMM: u32 = 3;
pub const RECORD_EXIT: u32 = 4;
pub const RECORD_FORK: u32 = 7;
pub const RECORD_SWITCH: u32 = 14;
/// `perf_event_header.misc` bits.
pub const MISC_COMM_EXEC: u16 = 0x2000;
pub const MISC_SWITCH_OUT: u16 = 0x2000;
pub const MISC_SWITCH_OUT_PREEMPT: u16 = 0x4000;

/// Name prefix and suffix of the files.
pub const FILE_PREFIX: &str = "perf-cpu";
pub const FILE_SUFFIX: &str = ".dat";

/// The file of CPU `cpu`.
pub fn file_name(cpu: u32) -> String {
    format!("{FILE_PREFIX}{cpu}{FILE_SUFFIX}")
}

/// The CPU of a file name of this kind ([`crate::dir::cpu_file`]).
pub fn file_cpu(name: &str) -> Option<u32> {
    crate::dir::cpu_file(name, FILE_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(file_name(3), "perf-cpu3.dat");
        assert_eq!(file_cpu("perf-cpu12.dat"), Some(12));
        assert_eq!(file_cpu("kernel-cpu1.dat"), None);
        assert_eq!(file_cpu("perf-cpu+1.dat"), None);
    }
}
