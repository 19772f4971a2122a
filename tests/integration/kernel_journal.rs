//! `record -k` + `report --io` on a journaled ext4 file system (a 64 MiB image on a loop
//! device, made and mounted for the test): testprogs/flush_write's fsync waits for the
//! journal thread (jbd2) to commit the file's metadata; those commit writes are linked to
//! the fsync (`journal commit transaction N`, Via `jbd2`) and reaped at its return, and the
//! flusher's writeback of its buffered writes to the write() that dirtied the pages. Needs
//! root, tracefs with block and jbd2 events, mkfs.ext4 and loop devices: skipped (with a
//! message) without.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::kernel_io::{record_in, Req};
use crate::util;

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
