//! What undoes a kernel session: the tracefs settings to write back, the block instance to
//! remove and the spool files to delete. [`Session`](super::Session) applies it at its end;
//! the recorder also hands it, as text, to its guardian (`record::guard`), which applies it
//! if the recorder is killed, so that tracing does not stay on in the kernel.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Settings that hold a list, one item per line (restored an item at a time).
pub(super) const LISTS: &[&str] = &["set_event", "set_ftrace_notrace", "set_graph_notrace"];

/// Writes `value` as the whole content of `root/name` (errors ignored: undoing goes on).
fn write_file(root: &Path, name: &str, value: &str) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(root.join(name))
    {
        let _ = f.write_all(value.as_bytes());
    }
}

/// The undo of one kernel session.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Undo {
    /// The tracefs directory.
    pub root: PathBuf,
    /// Settings as they were, in the order to write them back.
    pub saved: Vec<(String, String)>,
    /// The tracefs instance made for block requests.
    pub instance: Option<PathBuf>,
    /// Spool files of raw pages in the data directory.
    pub spool: Vec<PathBuf>,
}

impl Undo {
    /// Writes the settings back, removes the instance and deletes the spool files.
    pub fn apply(&self) {
        for (name, value) in &self.saved {
            // Lists take one item per write; an empty value clears them.
            if LISTS.contains(&name.as_str()) && !value.is_empty() {
                write_file(&self.root, name, "");
                for ev in value.lines() {
                    if let Ok(mut f) = std::fs::OpenOptions::new()
                        .append(true)
                        .open(self.root.join(name))
                    {
                        let _ = f.write_all(ev.as_bytes());
                    }
                }
                continue;
            }
            write_file(&self.root, name, value);
        }
        if let Some(path) = &self.instance {
            write_file(path, "set_event", "");
            let _ = std::fs::remove_dir(path);
        }
        for f in &self.spool {
            let _ = std::fs::remove_file(f);
        }
    }

    /// One line per item, fields separated by tabs (escaped inside fields).
    pub fn to_text(&self) -> String {
        let mut out = format!("root\t{}\n", escape(&self.root.to_string_lossy()));
        for (name, value) in &self.saved {
            out.push_str(&format!("set\t{}\t{}\n", escape(name), escape(value)));
        }
        if let Some(i) = &self.instance {
            out.push_str(&format!("instance\t{}\n", escape(&i.to_string_lossy())));
        }
        for f in &self.spool {
            out.push_str(&format!("spool\t{}\n", escape(&f.to_string_lossy())));
        }
        out
    }

    /// Reads [`Undo::to_text`]'s lines back (others are skipped); `None` without a root.
    pub fn from_text(text: &str) -> Option<Undo> {
        let mut undo = Undo::default();
        let mut root = None;
        for line in text.lines() {
            let fields: Vec<String> = line.split('\t').map(unescape).collect();
            match fields.as_slice() {
                [k, v] if k == "root" => root = Some(PathBuf::from(v)),
                [k, name, value] if k == "set" => undo.saved.push((name.clone(), value.clone())),
                [k, v] if k == "instance" => undo.instance = Some(PathBuf::from(v)),
                [k, v] if k == "spool" => undo.spool.push(PathBuf::from(v)),
                _ => {}
            }
        }
        undo.root = root?;
        Some(undo)
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\t', "\\t")
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trip() {
        let undo = Undo {
            root: "/sys/kernel/tracing".into(),
            saved: vec![
                (
                    "set_event".into(),
                    "sched:sched_switch\nraw_syscalls:*\n".into(),
                ),
                ("trace_clock".into(), "local".into()),
                ("odd".into(), "a\tb\\c".into()),
            ],
            instance: Some("/sys/kernel/tracing/instances/utrace-1".into()),
            spool: vec!["/d/kernel-cpu0.raw".into()],
        };
        assert_eq!(Undo::from_text(&undo.to_text()), Some(undo));
        assert_eq!(Undo::from_text("set\tx\ty\n"), None);
    }

    #[test]
    fn apply_writes_settings_back() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("trace_clock"), "mono").unwrap();
        std::fs::write(dir.path().join("set_event"), "x").unwrap();
        let spool = dir.path().join("kernel-cpu0.raw");
        std::fs::write(&spool, "pages").unwrap();
        Undo {
            root: dir.path().into(),
            saved: vec![
                ("trace_clock".into(), "local".into()),
                ("set_event".into(), "a:b\nc:d\n".into()),
            ],
            instance: None,
            spool: vec![spool.clone()],
        }
        .apply();
        let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();
        assert_eq!(read("trace_clock"), "local");
        // A list is cleared, then written one item at a time (tracefs appends them; a plain
        // file keeps the last).
        assert_eq!(read("set_event"), "a:bc:d");
        assert!(!spool.exists());
    }
}
