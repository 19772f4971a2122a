//! Real ring-buffer pages of this machine's kernel (6.18, `raw_syscalls:*` for one `/bin/true`
//! run with `trace_clock` mono, read from `per_cpu/cpuN/trace_pipe_raw`) decode into
//! well-formed events: known IDs, one task tree, times in order, every exit after its enter.

use record_format::kernel::{EventFormat, Page};

const SYS_ENTER: &str = "name: sys_enter\nID: 443\nformat:\n\
    \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
    \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
    \tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\
    \tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n";
const SYS_EXIT: &str = "name: sys_exit\nID: 442\nformat:\n\
    \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
    \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
    \tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\
    \tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n";

#[test]
fn real_pages_decode() {
    let enter = EventFormat::parse("raw_syscalls", SYS_ENTER).unwrap();
    let exit = EventFormat::parse("raw_syscalls", SYS_EXIT).unwrap();
    let mut total = 0;
    let mut execve = false;
    for cpu in 0..2 {
        let path = format!(
            "{}/tests/data/raw_syscalls-cpu{cpu}.dat",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(bytes.len() % 4096, 0);
        let mut last = 0;
        // Per task: the syscall it is in.
        let mut open: std::collections::HashMap<u64, u64> = Default::default();
        for page in bytes.chunks(4096) {
            let page = Page::parse(page).unwrap();
            assert_eq!(page.lost, None);
            for e in page.events() {
                let e = e.unwrap();
                assert!(e.time >= last, "times go back");
                last = e.time;
                let ty = enter.value("common_type", e.payload).unwrap() as u16;
                let pid = enter.value("common_pid", e.payload).unwrap();
                let id = enter.value("id", e.payload).unwrap();
                if ty == enter.id {
                    execve |= id == 59;
                    open.insert(pid, id);
                } else {
                    assert_eq!(ty, exit.id, "unknown event {ty}");
                    // A task's first record may be the exit of the call that created it.
                    // `rt_sigreturn` (15) exits with id -1: the kernel clears the syscall
                    // number while restoring the signal frame.
                    if let Some(was) = open.remove(&pid) {
                        let id = exit.value("id", e.payload).unwrap() as i64;
                        assert!(id == was as i64 || (was == 15 && id == -1), "{was} -> {id}");
                    }
                }
                total += 1;
            }
        }
    }
    assert!(total > 50, "{total} events");
    assert!(execve, "no execve among the system calls");
}
