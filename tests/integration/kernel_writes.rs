//! `record -k` + `report --io` on writes (the helpers are kernel_io.rs'): testprogs/sync_write's
//! O_SYNC writes waited for in pwrite64; testprogs/flush_write's buffered writes written back
//! by a flusher thread, linked to the write() that dirtied them and to the syncfs that waited
//! for them; and on a journaled ext4 file system (a 64 MiB image on a loop device, made and
//! mounted for the test) flush_write's fsync, which waits for the journal thread (jbd2) to
//! commit the file's metadata: those commit writes are linked to the fsync (`journal commit
//! transaction N`, Via `jbd2`) and reaped at its return. Needs root, tracefs with block
//! events, a directory on a block device (and for the journal, jbd2 events, mkfs.ext4 and loop
//! devices): skipped (with a message) without.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::kernel_io::{fs_events, possible, record, record_in, Req};
use crate::util;

#[test]
fn sync_writes_are_waited_for_in_their_call() {
    if !possible("block/block_rq_complete") {
        eprintln!("kernel_io skipped: needs root and tracefs with block events");
        return;
    }
    let Some((stdout, reqs, _)) = record("sync_write", &[]) else {
        return;
    };
    assert!(stdout.contains("sync_write: ok"), "{stdout}");
    // Both blocks' data went to the device inside pwrite64 (O_SYNC), which waited for them.
    let writes: Vec<&Req> = reqs
        .iter()
        .filter(|r| r.kind == "write" && r.submitted.contains("write_block"))
        .collect();
    let data = writes.iter().filter(|r| r.bytes >= 4096).count();
    assert!(data >= 2, "{reqs:#?}");
    // O_SYNC: pwrite64 runs ext4's fsync, which writes the blocks out.
    let fsync = fs_events("ext4/ext4_sync_file_enter", &["ef53"]);
    for r in writes {
        if fsync {
            assert!(r.submitted.contains(" ext4 fsync ino "), "{r:?}");
            assert_eq!(r.path[1].0, "fs", "{r:?}");
        }
        assert!(r.submitted.contains("[pwrite64]"), "{r:?}");
        let reaped = r.reaped.as_deref().unwrap_or_else(|| panic!("{r:?}"));
        assert!(reaped.starts_with("pwrite64 in "), "{r:?}");
    }
    // What the program's own fsync sent to the device (a flush, when the cache is volatile)
    // was sent by ext4's fsync.
    if fsync {
        for r in reqs
            .iter()
            .filter(|r| r.submitted.contains("sync_file > fsync [fsync]"))
        {
            assert!(r.submitted.contains(" ext4 fsync ino "), "{r:?}");
            assert_eq!(r.path[1].0, "fs", "{r:?}");
        }
    }
    // A device with a volatile write cache is flushed for it.
    let dev = reqs[0].dev.replace(',', ":");
    let cache = std::fs::read_to_string(format!("/sys/dev/block/{dev}/queue/write_cache"))
        .unwrap_or_default();
    if cache.trim() == "write back" {
        assert!(reqs.iter().any(|r| r.kind == "flush"), "{reqs:#?}");
    }
}

#[test]
fn flusher_writeback_is_linked_to_the_write_and_the_syncfs() {
    let ext4 = fs_events("ext4/ext4_da_write_begin", &["ef53"]);
    if !possible("writeback/writeback_single_inode_start") || !ext4 {
        eprintln!("kernel_io skipped: needs root, tracefs with block and writeback events, ext4");
        return;
    }
    let Some((stdout, reqs, _)) = record("flush_write", &[]) else {
        return;
    };
    assert!(stdout.contains("flush_write: ok"), "{stdout}");
    // The 64 KiB fill_file wrote with 16 write()s went to the device from a flusher thread
    // (kworker) during syncfs: linked to the first write, the flusher's writeback of the
    // file's inode (the range the writes dirtied) and the syncfs that waited for them.
    let wb: Vec<&Req> = reqs
        .iter()
        .filter(|r| r.submitted.contains(" writeback ino "))
        .collect();
    assert!(!wb.is_empty(), "{reqs:#?}");
    assert!(wb.iter().map(|r| r.bytes).sum::<u64>() >= 65536, "{wb:#?}");
    for r in wb {
        assert_eq!(r.kind, "write", "{r:?}");
        let submitted = "main > fill_file > write [write] writeback ino ";
        assert!(r.submitted.starts_with(submitted), "{r:?}");
        assert!(r.submitted.ends_with(" offset 0 length 65536"), "{r:?}");
        let layers: Vec<&str> = r.path.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(layers[..2], ["syscall", "fs"], "{r:?}");
        assert_eq!(layers[layers.len() - 2..], ["complete", "reap"], "{r:?}");
        let reaped = r.reaped.as_deref().unwrap_or_else(|| panic!("{r:?}"));
        assert!(
            reaped.starts_with("syncfs in main > flush_all > syncfs "),
            "{r:?}"
        );
    }
}

/// A journaled ext4 file system on a loop device, mounted on `mnt` in a scratch directory;
/// unmounted when dropped (the directory, and the image in it, are then removed).
struct Journaled {
    mnt: PathBuf,
    _dir: tempfile::TempDir,
}

impl Journaled {
    fn mount() -> Option<Journaled> {
        let dir = tempfile::tempdir_in("/var/tmp").ok()?;
        let (img, mnt) = (dir.path().join("img"), dir.path().join("mnt"));
        std::fs::create_dir(&mnt).ok()?;
        std::fs::File::create(&img).ok()?.set_len(64 << 20).ok()?;
        let ok = |c: &mut Command| {
            c.stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        ok(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&img)).then_some(())?;
        ok(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&img)
            .arg(&mnt))
        .then_some(())?;
        Some(Journaled { mnt, _dir: dir })
    }
}

impl Drop for Journaled {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

#[test]
fn journal_writes_are_linked_to_the_fsync_that_waited() {
    let possible = ["block/block_rq_issue", "jbd2/jbd2_start_commit"]
        .iter()
        .chain(&[
            "ext4/ext4_sync_file_enter",
            "writeback/writeback_single_inode",
        ])
        .all(|e| util::kernel_event_possible(e));
    if !possible {
        eprintln!("kernel_journal skipped: needs root, tracefs with block, ext4 and jbd2 events");
        return;
    }
    let Some(fs) = Journaled::mount() else {
        eprintln!("kernel_journal skipped: cannot make and mount an ext4 image on a loop device");
        return;
    };
    let (stdout, reqs, _data) = record_in("flush_write", &[], &fs.mnt);
    assert!(stdout.contains("flush_write: ok"), "{stdout}");
    let with = |what: &str| -> Vec<&Req> {
        let found: Vec<&Req> = reqs.iter().filter(|r| r.submitted.contains(what)).collect();
        assert!(!found.is_empty(), "no request with {what:?}: {reqs:#?}");
        found
    };
    // The commit of the transaction commit_record's fsync waited for: the journal thread's
    // writes, linked to the fsync and reaped at its return.
    for r in with(" journal commit transaction ") {
        let submitted = "main > commit_record > fsync [fsync] journal commit transaction ";
        assert!(r.submitted.starts_with(submitted), "{r:?}");
        let layers: Vec<&str> = r.path.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(layers[..2], ["syscall", "fs"], "{r:?}");
        let reaped = r.reaped.as_deref().unwrap_or_else(|| panic!("{r:?}"));
        assert!(
            reaped.starts_with("fsync in main > commit_record > fsync "),
            "{r:?}"
        );
    }
    // fill_file's pages, written back by a flusher thread during syncfs.
    for r in with(" writeback ino ") {
        let submitted = "main > fill_file > write [write] writeback ino ";
        assert!(r.submitted.starts_with(submitted), "{r:?}");
        let reaped = r.reaped.as_deref().unwrap_or_else(|| panic!("{r:?}"));
        assert!(reaped.starts_with("syncfs in "), "{r:?}");
    }
}
