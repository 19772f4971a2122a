//! The streaming conversion on crafted spools: two CPUs of the main buffer and two of the
//! block instance, a task migrating between CPUs while in a system call, a block request
//! issued on one CPU and completed on another, events at equal times on two CPUs, events
//! lost, a task seen switched in before its first system call, tasks not traced, and enough
//! events to fill many small pages, in and out.

use super::*;
use record_format::kernel::PageWriter;

/// Small pages: the spools and the kernel files span many of them.
const PAGE: usize = 256;

const FENTRY: u16 = 11;
const FEXIT: u16 = 10;
const SYS_ENTER: u16 = 20;
const SYS_EXIT: u16 = 21;
const SWITCH: u16 = 30;
const ISSUE: u16 = 40;
const COMPLETE: u16 = 41;
const POKE: u16 = 50;

const GETPPID: u64 = 0xffff_ffff_8100_0100;
const WRITE: u64 = 0xffff_ffff_8100_0200;
const SCHEDULE: u64 = 0xffff_ffff_8100_0300;

/// Traced tasks (they make system calls), and one that is not; above the largest pid, so
/// none is this process.
const A: u32 = 5_000_001;
const B: u32 = 5_000_002;
const C: u32 = 5_000_003;
const D: u32 = 5_000_004;

const COMMON: &str = "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
    \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
    \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
    \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n";

fn format(sys: &str, name: &str, id: u16, fields: &str) -> EventFormat {
    let text = format!("name: {name}\nID: {id}\nformat:\n{COMMON}\n{fields}\nprint fmt: \"\"\n");
    EventFormat::parse(sys, &text).unwrap()
}

fn formats() -> Vec<EventFormat> {
    let func = "\tfield:unsigned long func;\toffset:8;\tsize:8;\tsigned:0;\n\
        \tfield:int depth;\toffset:16;\tsize:4;\tsigned:1;\n";
    let block = "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
        \tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n";
    vec![
        format("ftrace", "funcgraph_entry", FENTRY, func),
        format("ftrace", "funcgraph_exit", FEXIT, func),
        format(
            "raw_syscalls",
            "sys_enter",
            SYS_ENTER,
            "\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\
             \tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n",
        ),
        format(
            "raw_syscalls",
            "sys_exit",
            SYS_EXIT,
            "\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n\
             \tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n",
        ),
        format(
            "sched",
            "sched_switch",
            SWITCH,
            "\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
             \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n",
        ),
        format("block", "block_rq_issue", ISSUE, block),
        format("block", "block_rq_complete", COMPLETE, block),
        format("test", "poke", POKE, ""),
    ]
}

fn kept() -> Vec<String> {
    [BLOCK_ISSUE, BLOCK_COMPLETE, "test:poke"]
        .map(String::from)
        .to_vec()
}

fn kallsyms() -> String {
    format!(
        "ffffffff81000000 T _stext\n{GETPPID:x} T __x64_sys_getppid\n\
         {WRITE:x} T __x64_sys_write\n{SCHEDULE:x} T schedule\n"
    )
}

/// A record of type `ty` of task `pid`, `len` bytes, with `fields` (offset, value) set.
fn rec(ty: u16, pid: u32, len: usize, fields: &[(usize, u64, usize)]) -> Vec<u8> {
    let mut p = vec![0u8; len];
    p[0..2].copy_from_slice(&ty.to_le_bytes());
    p[4..8].copy_from_slice(&pid.to_le_bytes());
    for &(at, v, size) in fields {
        p[at..at + size].copy_from_slice(&v.to_le_bytes()[..size]);
    }
    p
}

fn enter(pid: u32, nr: u64) -> Vec<u8> {
    rec(SYS_ENTER, pid, 64, &[(8, nr, 8)])
}

fn exit(pid: u32) -> Vec<u8> {
    rec(SYS_EXIT, pid, 24, &[])
}

fn switch(prev: u32, next: u32) -> Vec<u8> {
    rec(
        SWITCH,
        prev,
        64,
        &[(24, u64::from(prev), 4), (56, u64::from(next), 4)],
    )
}

fn block(ty: u16, pid: u32, sector: u64) -> Vec<u8> {
    rec(ty, pid, 32, &[(8, 8, 4), (16, sector, 8)])
}

fn poke(pid: u32) -> Vec<u8> {
    rec(POKE, pid, 12, &[])
}

/// A function-graph record as the converter writes it.
fn graph(pid: u32, func: u64, depth: u32, exit: bool) -> Vec<u8> {
    let ty = if exit { FEXIT } else { FENTRY };
    let mut p = rec(ty, pid, if exit { 40 } else { 24 }, &[(8, func, 8)]);
    p[16..20].copy_from_slice(&depth.to_le_bytes());
    p
}

/// A spool file of `events`, a `lost` mark before the event of that index.
fn spool(path: &Path, events: &[(u64, Vec<u8>)], lost: Option<(usize, u64)>) {
    let mut w = PageWriter::new(PAGE);
    for (i, (time, p)) in events.iter().enumerate() {
        if let Some((_, n)) = lost.filter(|l| l.0 == i) {
            w.lose(Lost::Count(n));
        }
        w.push(*time, p);
    }
    fs::write(path, w.finish()).unwrap();
}

/// The filler of B's system calls on CPU 0: enough to fill pages.
const FILL: u64 = 60;

#[test]
fn spools_merged_and_converted_page_by_page() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let paths: Vec<PathBuf> = ["m0", "m1", "b0", "b1"]
        .iter()
        .map(|n| dir.join(format!("{n}.raw")))
        .collect();
    // CPU 0: A runs, switches to C (not traced), B's system calls (one at the time D makes
    // one on CPU 1), a kept event of A and one of C.
    let mut m0 = vec![
        (100, enter(A, 110)),
        (110, exit(A)),
        (120, switch(A, C)),
        (195, poke(A)),
        (196, poke(C)),
        (400, enter(B, 110)),
        (410, exit(B)),
    ];
    for i in 0..FILL {
        m0.push((1000 + 10 * i, enter(B, 110)));
        m0.push((1005 + 10 * i, exit(B)));
    }
    // CPU 1: B's first system call, A migrated here (in write while it goes off the CPU for
    // D), D switched in before its first system call, an unknown system call of D.
    let m1 = vec![
        (105, enter(B, 1)),
        (115, exit(B)),
        (130, switch(C, A)),
        (140, enter(A, 1)),
        (150, switch(A, D)),
        (160, enter(D, 9999)),
        (165, exit(D)),
        (180, switch(D, A)),
        (190, exit(A)),
        (400, enter(D, 110)),
        (420, exit(D)),
    ];
    // Block requests: A's issued on CPU 1, completed on CPU 0; C's (not traced); a
    // completion never issued; A's second, issued at the time of its exit.
    let b0 = vec![
        (142, block(ISSUE, C, 500)),
        (170, block(COMPLETE, 0, 100)),
        (175, block(COMPLETE, 0, 500)),
        (177, block(COMPLETE, 0, 777)),
        (500, block(COMPLETE, 0, 200)),
    ];
    let b1 = vec![(142, block(ISSUE, A, 100)), (190, block(ISSUE, A, 200))];
    spool(&paths[0], &m0, None);
    spool(&paths[1], &m1, Some((4, 3)));
    spool(&paths[2], &b0, Some((1, 2)));
    spool(&paths[3], &b1, None);
    let spools = Spools {
        main: &paths[..2],
        block: &paths[2..],
        cpus: 2,
        page_size: PAGE,
    };
    let stats = convert(dir, &spools, &formats(), &kept(), &kallsyms()).unwrap();
    let all = m0.len() + m1.len() + b0.len() + b1.len();
    assert_eq!((stats.events, stats.lost), (all as u64, 5));

    let completed = |sector: u64| block(COMPLETE, A, sector);
    // A, first seen on CPU 0, stays there.
    let cpu0 = vec![
        (100, graph(A, GETPPID, 0, false)),
        (110, graph(A, GETPPID, 0, true)),
        (120, graph(A, SCHEDULE, 0, false)),
        (130, graph(A, SCHEDULE, 0, true)),
        (140, graph(A, WRITE, 0, false)),
        (142, block(ISSUE, A, 100)),
        (150, graph(A, SCHEDULE, 1, false)),
        (170, completed(100)),
        (180, graph(A, SCHEDULE, 1, true)),
        (190, graph(A, WRITE, 0, true)),
        (190, block(ISSUE, A, 200)),
        (195, poke(A)),
        (500, completed(200)),
    ];
    // B and D, first seen on CPU 1; at equal times, CPU 0's event first.
    let mut cpu1 = vec![
        (105, graph(B, WRITE, 0, false)),
        (115, graph(B, WRITE, 0, true)),
        (180, graph(D, SCHEDULE, 0, false)),
        (400, graph(B, GETPPID, 0, false)),
        (400, graph(D, GETPPID, 0, false)),
        (410, graph(B, GETPPID, 0, true)),
        (420, graph(D, SCHEDULE, 0, true)),
        (420, graph(D, GETPPID, 0, true)),
    ];
    for i in 0..FILL {
        cpu1.push((1000 + 10 * i, graph(B, GETPPID, 0, false)));
        cpu1.push((1005 + 10 * i, graph(B, GETPPID, 0, true)));
    }
    for (cpu, want) in [cpu0, cpu1].iter().enumerate() {
        let mut w = PageWriter::new(PAGE);
        if cpu == 0 {
            w.lose(Lost::Count(5));
        }
        for (time, p) in want {
            w.push(*time, p);
        }
        let want = w.finish();
        let got = fs::read(dir.join(format!("kernel-cpu{cpu}.dat"))).unwrap();
        assert_eq!(got.len(), want.len(), "kernel-cpu{cpu}.dat");
        assert!(got == want, "kernel-cpu{cpu}.dat");
        assert!(!dir.join(format!("kernel-cpu{cpu}.dat.new")).exists());
    }
    // The pages: many, every one full but the last, read back in order.
    let got = fs::read(dir.join("kernel-cpu1.dat")).unwrap();
    assert!(got.len() / PAGE > 20);
    let times: Vec<u64> = got
        .chunks(PAGE)
        .flat_map(|p| {
            let page = Page::parse(p).unwrap();
            page.events().map(|e| e.unwrap().time).collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(times.len(), 8 + 2 * FILL as usize);
    assert!(times.windows(2).all(|t| t[0] <= t[1]));
}

/// A spool that cannot be read back, or a kernel file that cannot be made, fails the
/// conversion and leaves no kernel file.
#[test]
fn failed_conversion_leaves_no_kernel_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let main = [dir.join("m0.raw"), dir.join("m1.raw")];
    spool(&main[0], &[(100, enter(A, 110)), (110, exit(A))], None);
    spool(&main[1], &[], None);
    let kernel_files = || -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("kernel-cpu"))
            .collect()
    };
    let missing = [dir.join("missing.raw")];
    let mut spools = Spools {
        main: &main,
        block: &missing,
        cpus: 2,
        page_size: PAGE,
    };
    assert!(convert(dir, &spools, &formats(), &kept(), &kallsyms()).is_err());
    assert!(kernel_files().is_empty());
    // The second CPU's file cannot be made (a directory is in its way): the first one's,
    // made already, is removed.
    spools.block = &[];
    fs::create_dir_all(dir.join("kernel-cpu1.dat.new/x")).unwrap();
    assert!(convert(dir, &spools, &formats(), &kept(), &kallsyms()).is_err());
    assert_eq!(kernel_files(), ["kernel-cpu1.dat.new"]);
    fs::remove_dir_all(dir.join("kernel-cpu1.dat.new")).unwrap();
    convert(dir, &spools, &formats(), &kept(), &kallsyms()).unwrap();
    let mut made = kernel_files();
    made.sort();
    assert_eq!(made, ["kernel-cpu0.dat", "kernel-cpu1.dat"]);
}

/// A request inserted by a traced task and issued by a kworker (an unplug from another
/// context) is kept as the task's, and so is its completion; another task's is not.
#[test]
fn block_requests_follow_the_task_that_inserted_them() {
    let f = formats();
    let fields = "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
        \tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n";
    let insert = format("block", "block_rq_insert", POKE + 1, fields);
    let find = |name: &str| f.iter().find(|f| f.name == name).unwrap();
    let b = super::Block::new(
        find("block_rq_issue"),
        find("block_rq_complete"),
        [None, Some(&insert)],
    );
    let mut owners = crate::record::kernel::block::Owners::default();
    let traced = |pid: u32| pid == A;
    let mut owner = |p: Vec<u8>, cpu| b.owner(&p, cpu, &mut owners, traced);
    assert_eq!(owner(block(POKE + 1, A, 100), 1), Some((1, A, false)));
    // A bio merged into it (the format has no nr_sector: a request of one sector here).
    assert_eq!(owner(block(POKE + 1, A, 100), 1), Some((1, A, true)));
    assert_eq!(owner(block(ISSUE, C, 100), 0), Some((1, A, true)));
    assert_eq!(owner(block(ISSUE, C, 300), 0), None);
    assert_eq!(owner(block(COMPLETE, 0, 100), 0), Some((1, A, true)));
    assert_eq!(owner(block(COMPLETE, 0, 100), 0), None);
    assert_eq!(owner(block(COMPLETE, 0, 300), 0), None);
    assert!(owners.flight.is_empty());
}

/// Graph mode: the function_graph tracer's records are copied to their CPU's file as they
/// are, with the lost count of each CPU on its first page, merged in time order with the
/// block records of the traced tasks (those with records, here A), completions rewritten as
/// the task's; without a block record kept, nothing is written.
#[test]
fn graph_mode_merges_the_block_requests_of_traced_tasks() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let paths: Vec<PathBuf> = ["m0", "m1", "b0", "b1"]
        .iter()
        .map(|n| dir.join(format!("{n}.raw")))
        .collect();
    let mut m0 = vec![(100, graph(A, WRITE, 0, false))];
    for i in 0..FILL {
        m0.push((110 + i, graph(A, GETPPID, 1, false)));
    }
    m0.push((300, graph(A, WRITE, 0, true)));
    let m1 = vec![
        (105, graph(B, WRITE, 0, false)),
        (400, graph(B, WRITE, 0, true)),
    ];
    // A's request issued on CPU 1 and completed on CPU 0; C's (no records) left out.
    let b0 = vec![(150, block(ISSUE, C, 500)), (250, block(COMPLETE, 0, 100))];
    let b1 = vec![(120, block(ISSUE, A, 100)), (260, block(COMPLETE, 0, 500))];
    spool(&paths[0], &m0, None);
    spool(&paths[1], &m1, Some((1, 4)));
    spool(&paths[2], &b0, None);
    spool(&paths[3], &b1, None);
    let spools = (&paths[..2], &paths[2..]);
    assert!(merge_graph(dir, spools, PAGE, &formats(), &kept()).unwrap());
    // The block records go to the file of the CPU that issued the request.
    let mut cpu1 = m1.clone();
    cpu1.push((120, block(ISSUE, A, 100)));
    cpu1.push((250, block(COMPLETE, A, 100)));
    cpu1.sort_by_key(|e| e.0);
    for (cpu, want) in [m0, cpu1].iter().enumerate() {
        let mut w = PageWriter::new(PAGE);
        if cpu == 1 {
            w.lose(Lost::Count(4));
        }
        for (time, p) in want {
            w.push(*time, p);
        }
        let got = fs::read(dir.join(format!("kernel-cpu{cpu}.dat"))).unwrap();
        assert!(got == w.finish(), "kernel-cpu{cpu}.dat");
    }
    // Only C's request: the main spools are the kernel files as they are.
    let tmp = tempfile::tempdir().unwrap();
    spool(&paths[2], &b0[..1], None);
    spool(&paths[3], &[], None);
    assert!(!merge_graph(tmp.path(), spools, PAGE, &formats(), &kept()).unwrap());
    assert_eq!(fs::read_dir(tmp.path()).unwrap().count(), 0);
}

/// The block reader of formats `f`, every one of them kept.
fn block_of_all(f: &[EventFormat]) -> super::Block {
    let kept: Vec<String> = f
        .iter()
        .map(|f| format!("{}:{}", f.system, f.name))
        .collect();
    super::Block::of(f, &kept).unwrap()
}

/// A flusher's writeback of an inode a traced task dirtied is kept as that task's, with the
/// bios it queues meanwhile and the issue of a request that took one in at a later sector;
/// the writeback of another inode and the bios queued outside it are not.
#[test]
fn writeback_is_kept_for_the_task_that_dirtied_the_inode() {
    let rq = "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
        \tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n\
        \tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;\n";
    let ino16 = "\tfield:ino_t ino;\toffset:16;\tsize:8;\tsigned:0;\n";
    let ino40 = "\tfield:ino_t ino;\toffset:40;\tsize:8;\tsigned:0;\n";
    let (bio, dirty, start, end, pages) = (60, 70, 71, 72, 73);
    let f = vec![
        format("block", "block_rq_issue", ISSUE, rq),
        format("block", "block_rq_complete", COMPLETE, rq),
        format("block", "block_bio_queue", bio, rq),
        format("ext4", "ext4_da_write_begin", dirty, ino16),
        format("writeback", "writeback_single_inode_start", start, ino40),
        format("writeback", "writeback_single_inode", end, ino40),
        format("ext4", "ext4_writepages", pages, ino16),
    ];
    let b = block_of_all(&f);
    let mut flight = super::Flight::default();
    let traced = |pid: u32| pid == A;
    let io = |ty, pid, sector, n: u64| rec(ty, pid, 32, &[(8, 8, 4), (16, sector, 8), (24, n, 4)]);
    let ino = |ty, pid, at, ino| rec(ty, pid, 48, &[(at, ino, 8)]);
    b.note(&ino(dirty, A, 16, 7), &mut flight);
    let mut owner = |p: Vec<u8>| b.owner(&p, 0, &mut flight.owners, traced);
    // Another inode's writeback, and a bio outside a window: not kept.
    assert_eq!(owner(ino(start, C, 40, 8)), None);
    assert_eq!(owner(io(bio, C, 90, 8)), None);
    assert_eq!(owner(ino(end, C, 40, 8)), None);
    assert_eq!(owner(ino(start, C, 40, 7)), Some((0, A, true)));
    assert_eq!(owner(ino(pages, C, 16, 7)), Some((0, A, true)));
    assert_eq!(owner(io(bio, C, 108, 8)), Some((0, A, true)));
    assert_eq!(owner(ino(end, C, 40, 7)), Some((0, A, true)));
    assert_eq!(owner(io(bio, C, 116, 8)), None);
    // The request begins with the other bio, at 90, and takes in the kept one at 108.
    assert_eq!(owner(io(ISSUE, D, 90, 40)), Some((0, A, true)));
    assert_eq!(owner(io(COMPLETE, 0, 90, 40)), Some((0, A, true)));
    assert!(flight.owners.flight.is_empty());
    // Written out: a later writeback of the inode is not the task's until it dirties it again.
    let mut owner = |p: Vec<u8>| b.owner(&p, 0, &mut flight.owners, traced);
    assert_eq!(owner(ino(start, C, 40, 7)), None);
    // The task's own writeback is in its own buffer.
    assert_eq!(owner(ino(start, A, 40, 7)), None);
}

/// The journal thread's commit that begins while a traced task is in ext4's fsync on the
/// device is kept as that task's, with its bios; a commit of another device, or after the
/// fsync, is not.
#[test]
fn a_journal_commit_is_kept_for_the_task_in_fsync() {
    let rq = "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
        \tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n";
    let dev = "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n";
    let (bio, enter, exit, start, end) = (60, 80, 81, 82, 83);
    let f = vec![
        format("block", "block_rq_issue", ISSUE, rq),
        format("block", "block_rq_complete", COMPLETE, rq),
        format("block", "block_bio_queue", bio, rq),
        format("ext4", "ext4_sync_file_enter", enter, dev),
        format("ext4", "ext4_sync_file_exit", exit, dev),
        format("jbd2", "jbd2_start_commit", start, dev),
        format("jbd2", "jbd2_end_commit", end, dev),
    ];
    let b = block_of_all(&f);
    let mut flight = super::Flight::default();
    let traced = |pid: u32| pid == A;
    let on = |ty, pid, dev| rec(ty, pid, 32, &[(8, dev, 4), (16, 500, 8)]);
    b.note(&on(enter, A, 7), &mut flight);
    let mut owner = |p: Vec<u8>| b.owner(&p, 0, &mut flight.owners, traced);
    assert_eq!(owner(on(start, C, 9)), None);
    assert_eq!(owner(on(start, D, 7)), Some((0, A, true)));
    assert_eq!(owner(on(bio, D, 7)), Some((0, A, true)));
    assert_eq!(owner(on(end, D, 7)), Some((0, A, true)));
    assert_eq!(owner(rec(bio, D, 32, &[(8, 7, 4), (16, 600, 8)])), None);
    b.note(&on(exit, A, 7), &mut flight);
    let mut owner = |p: Vec<u8>| b.owner(&p, 0, &mut flight.owners, traced);
    assert_eq!(owner(on(start, D, 7)), None);
}
