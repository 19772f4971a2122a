//! The modules' symbol files (data-format.md §7): one `<basename>.sym` per module named in a
//! session map or loaded with `dlopen`, and the build-ids of the session maps' module lines.
//!
//! The program's own file is written before it runs ([`super::finish::start`]) and is not
//! written again at the end; the others are read and written in parallel, a few threads
//! taking one module after another, since the C library alone has thousands of symbols.

use super::program::build_id_of;
use anyhow::Context;
use record_format::maps::parse_maps;
use record_format::task::{parse_task_txt, TaskLine};
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The session map files of `dir`, sorted.
fn map_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut maps: Vec<_> = fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("sid-") && n.ends_with(".map"))
        })
        .collect();
    maps.sort();
    Ok(maps)
}

/// Appends ` build-id:<hex>` to every module line of the session maps that lacks one, as
/// uftrace does at the end of recording (data-format §5).
pub fn add_map_build_ids(dir: &Path) -> anyhow::Result<()> {
    let mut ids: HashMap<String, Option<String>> = HashMap::new();
    for map in map_files(dir)? {
        let Ok(text) = fs::read_to_string(&map) else {
            continue;
        };
        let mut out = String::with_capacity(text.len() + 512);
        for line in text.lines() {
            out.push_str(line);
            let words: Vec<&str> = line.split_whitespace().collect();
            let has_id = words.iter().any(|w| w.starts_with("build-id:"));
            if words.len() > 5 && !words[5].starts_with('[') && !has_id {
                let path = words[5..].join(" ");
                let id = ids
                    .entry(path)
                    .or_insert_with_key(|p| build_id_of(Path::new(p)));
                if let Some(id) = id {
                    out.push_str(" build-id:");
                    out.push_str(id);
                }
            }
            out.push('\n');
        }
        if out != text {
            record_format::create::replace(&map, out.as_bytes())
                .with_context(|| format!("cannot write {}", map.display()))?;
        }
    }
    Ok(())
}

/// Writes `<basename>.sym` for every module named in a session map, and for every library
/// loaded with `dlopen` (`DLOP` lines of `task.txt`) that can still be found (data-format §7).
/// `written`: the module whose file is there already (the program's, written by
/// [`super::finish::start`]); its name stays taken.
pub fn write_sym_files(
    dir: &Path,
    with_syms: Option<&Path>,
    written: Option<&str>,
    prefetched: Option<&Prefetched>,
) -> anyhow::Result<()> {
    write_module_syms(dir, recorded_modules(dir)?, with_syms, written, prefetched)
}

/// Every module named in a session map or loaded with `dlopen` (`DLOP` lines of `task.txt`):
/// path and build-id as the map has it (the reader picks file names from it), libmcount left
/// out.
pub fn recorded_modules(dir: &Path) -> anyhow::Result<Vec<(String, Option<String>)>> {
    let mut modules: Vec<(String, Option<String>)> = Vec::new();
    for map in map_files(dir)? {
        let text = fs::read_to_string(&map).unwrap_or_default();
        for m in parse_maps(&text) {
            let base = basename(&m.path);
            if m.path.starts_with('[') || base.starts_with("libmcount") {
                continue;
            }
            if !modules.iter().any(|(p, _)| *p == m.path) {
                modules.push((m.path, m.build_id));
            }
        }
    }
    let tasks = fs::read_to_string(dir.join("task.txt")).unwrap_or_default();
    let tasks = parse_task_txt(&tasks, &dir.join("task.txt")).unwrap_or_default();
    for line in tasks {
        if let TaskLine::Dlop { libname, .. } = line {
            if !modules.iter().any(|(p, _)| *p == libname) {
                modules.push((libname, None));
            }
        }
    }
    Ok(modules)
}

/// Writes `<basename>.sym` for each module (path, build-id as the session map has it); two
/// modules of one base name get the second a suffix, as uftrace names them. With
/// `--with-syms DIR`, a module whose file is in DIR gets a copy of it (a stripped program's
/// symbols, kept from before it was stripped). `written`: a module whose file is there already.
/// `prefetched`: texts made while the program ran, used for the modules they are of.
///
/// The texts are made in parallel; the names are given in the modules' order.
pub fn write_module_syms(
    dir: &Path,
    modules: Vec<(String, Option<String>)>,
    with_syms: Option<&Path>,
    written: Option<&str>,
    prefetched: Option<&Prefetched>,
) -> anyhow::Result<()> {
    // The module whose file is there: under its first name (the program comes first in its
    // session map, so nothing took that name before it).
    let kept: Vec<bool> = modules
        .iter()
        .map(|(path, id)| {
            Some(path.as_str()) == written
                && record_format::sym::file_names(path, id.as_deref())
                    .first()
                    .is_some_and(|n| dir.join(n).is_file())
        })
        .collect();
    // The text of every module whose ELF file has symbols (the others take no name): the
    // prefetched one, else made now, in parallel.
    let mut texts: Vec<Option<String>> = vec![None; modules.len()];
    let mut missing = Vec::new();
    for (i, (path, _)) in modules.iter().enumerate() {
        if kept[i] {
            continue;
        }
        match prefetched.and_then(|p| p.take(path)) {
            Some(text) => texts[i] = text,
            None => missing.push(i),
        }
    }
    let made = in_parallel(missing.len(), |j| sym_text(&modules[missing[j]].0));
    for (&i, text) in missing.iter().zip(made) {
        texts[i] = text;
    }
    // File name -> module path already written under it.
    let mut taken: HashMap<String, String> = HashMap::new();
    for (i, (path, map_build_id)) in modules.iter().enumerate() {
        // The first name, else the one readers try next for a second module of that name.
        let names = record_format::sym::file_names(path, map_build_id.as_deref());
        let first = names.first().cloned();
        let Some(name) = names.into_iter().take(2).find(|n| !taken.contains_key(n)) else {
            continue;
        };
        if kept[i] && Some(&name) == first.as_ref() {
            taken.insert(name, path.clone());
            continue;
        }
        if let Some(from) = with_syms {
            if let Ok(text) = fs::read(from.join(&name)) {
                super::write_file(dir, &name, &text)?;
                taken.insert(name, path.clone());
                continue;
            }
        }
        let text = match kept[i] {
            true => sym_text(path),
            false => texts[i].take(),
        };
        if let Some(text) = text {
            crate::diag::debug(
                "symbol",
                2,
                format!("saving symbols to {}", dir.join(&name).display()),
            );
            super::write_file(dir, &name, text.as_bytes())?;
            taken.insert(name, path.clone());
        }
    }
    Ok(())
}

/// The `.sym` text of the module at `path`; `None` when it has no symbols (or is no ELF file).
fn sym_text(path: &str) -> Option<String> {
    let file = Path::new(path);
    let symbols = record_format::elf::read_sym_table(file)?;
    Some(record_format::sym::write_sym(
        path,
        build_id_of(file).as_deref(),
        &symbols,
    ))
}

/// What identifies a file's content for [`Prefetched`]: its device, inode, size and
/// modification time.
type FileId = (u64, u64, u64, i64, i64);

fn file_id(path: &str) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(path).ok()?;
    Some((m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec()))
}

/// The `.sym` texts of the libraries every traced program loads, made by a thread while the
/// program runs rather than after it ended: libmcount's own dependencies (the C library, the
/// dynamic loader, libgcc_s), which are this process's libraries too, found in its own maps.
pub struct Prefetch {
    thread: Option<std::thread::JoinHandle<Prefetched>>,
}

/// The texts made by [`Prefetch`], by module path, each taken once.
#[derive(Debug, Default)]
pub struct Prefetched {
    texts: Vec<(String, Option<FileId>, Mutex<Option<String>>)>,
}

impl Prefetch {
    /// Starts the thread (nothing when it cannot be started).
    pub fn start() -> Prefetch {
        let thread = std::thread::Builder::new()
            .name("utrace-syms".into())
            .spawn(prefetch)
            .ok();
        Prefetch { thread }
    }

    /// The texts, once the thread has made them.
    pub fn finish(self) -> Prefetched {
        self.thread.and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

impl Prefetched {
    /// The text made for `path`, if it was and the file has not changed since.
    fn take(&self, path: &str) -> Option<Option<String>> {
        let (_, id, text) = self.texts.iter().find(|(p, _, _)| p == path)?;
        if id.is_none() || *id != file_id(path) {
            return None;
        }
        let text = text.lock().unwrap_or_else(|e| e.into_inner()).take();
        Some(text)
    }
}

/// The prefetch thread: the libraries of this process's maps (its own executable left out).
fn prefetch() -> Prefetched {
    let maps = fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let exe = std::env::current_exe().ok();
    let mut paths: Vec<String> = Vec::new();
    for m in parse_maps(&maps) {
        let lib = m.path.starts_with('/') && exe.as_deref() != Some(Path::new(&m.path));
        if lib && !paths.contains(&m.path) {
            paths.push(m.path);
        }
    }
    let texts = paths
        .into_iter()
        .map(|path| {
            let id = file_id(&path);
            let text = sym_text(&path);
            (path, id, Mutex::new(text))
        })
        .collect();
    Prefetched { texts }
}

/// `f(0)`, ..., `f(count - 1)`, in that order, computed by up to as many threads as there are
/// CPUs (the calling one among them), each taking the next index.
fn in_parallel<R: Send>(count: usize, f: impl Fn(usize) -> Option<R> + Sync) -> Vec<Option<R>> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cpus.min(count).clamp(1, 4);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Option<R>)>> = Mutex::new(Vec::with_capacity(count));
    let work = || {
        let mut mine = Vec::new();
        loop {
            // Relaxed: only hands out indexes; the results go through the mutex.
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= count {
                break;
            }
            mine.push((i, f(i)));
        }
        results
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(mine);
    };
    std::thread::scope(|s| {
        for _ in 1..threads {
            // A thread that cannot be started leaves its share to the others.
            let _ = std::thread::Builder::new().spawn_scoped(s, work);
        }
        work();
    });
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
}

fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts made ahead are those of this process's libraries, the same as made at the end,
    /// and each is handed out once; a file that changed since is made again.
    #[test]
    fn prefetched_texts_are_the_libraries_texts() {
        let prefetched = Prefetch::start().finish();
        let libc = prefetched
            .texts
            .iter()
            .map(|(p, _, _)| p.clone())
            .find(|p| basename(p).starts_with("libc.so"))
            .expect("the test binary links the C library");
        assert_eq!(prefetched.take(&libc), Some(sym_text(&libc)));
        assert!(sym_text(&libc).is_some());
        assert_eq!(prefetched.take(&libc), Some(None), "taken once");
        assert_eq!(prefetched.take("/no/such/lib.so"), None);

        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("lib.so");
        fs::copy(&libc, &copy).unwrap();
        let copy = copy.to_string_lossy().into_owned();
        let stale = Prefetched {
            texts: vec![(copy.clone(), file_id(&copy), Mutex::new(Some("old".into())))],
        };
        fs::write(&copy, "changed").unwrap();
        assert_eq!(stale.take(&copy), None);
    }

    #[test]
    fn results_come_in_order() {
        let squares = in_parallel(50, |i| (i % 7 != 0).then_some(i * i));
        assert_eq!(squares.len(), 50);
        for (i, r) in squares.iter().enumerate() {
            assert_eq!(*r, (i % 7 != 0).then_some(i * i));
        }
        assert!(in_parallel(0, Some).is_empty());
    }

    #[test]
    fn maps_get_build_ids_and_modules_get_sym_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let map = "5555000-5556000 r-xp 00000000 00:00 0 /bin/true\n\
                   7f00000-7f01000 r-xp 00000000 00:00 0 /x/libmcount.so\n\
                   7ffd000-7ffe000 rw-p 00000000 00:00 0 [stack]\n";
        fs::write(d.join("sid-0123456789abcdef.map"), map).unwrap();
        // A second session with another module of the same basename.
        fs::write(
            d.join("sid-1123456789abcdef.map"),
            "5555000-5556000 r-xp 00000000 00:00 0 /usr/bin/true\n",
        )
        .unwrap();
        fs::write(
            d.join("task.txt"),
            "DLOP timestamp=1.000000000 tid=1 sid=0123456789abcdef base=7f0000 \
             libname=\"/bin/sh\"\n",
        )
        .unwrap();
        add_map_build_ids(d).unwrap();
        let text = fs::read_to_string(d.join("sid-0123456789abcdef.map")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        if let Some(id) = build_id_of(Path::new("/bin/true")) {
            assert_eq!(
                lines[0],
                format!("5555000-5556000 r-xp 00000000 00:00 0 /bin/true build-id:{id}")
            );
        }
        assert_eq!(lines[2], "7ffd000-7ffe000 rw-p 00000000 00:00 0 [stack]");
        write_sym_files(d, None, None, None).unwrap();
        let sym = record_format::sym::parse_sym(&fs::read_to_string(d.join("true.sym")).unwrap());
        assert_eq!(sym.path_name.as_deref(), Some("/bin/true"));
        assert!(!d.join("libmcount.so.sym").exists());
        let second: Vec<_> = fs::read_dir(d)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("true-") && n.ends_with(".sym"))
            .collect();
        assert_eq!(second.len(), 1, "{second:?}");
        assert!(d.join("sh.sym").is_file() || !Path::new("/bin/sh").is_file());
    }

    /// The program's file, written before it ran, is left as it is and keeps its name: a
    /// library of the same base name gets the second one.
    #[test]
    fn the_programs_file_is_not_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(
            d.join("sid-0123456789abcdef.map"),
            "5555000-5556000 r-xp 00000000 00:00 0 /bin/true\n\
             7f00000-7f01000 r-xp 00000000 00:00 0 /usr/bin/true\n",
        )
        .unwrap();
        fs::write(d.join("true.sym"), "kept\n").unwrap();
        write_sym_files(d, None, Some("/bin/true"), None).unwrap();
        assert_eq!(fs::read_to_string(d.join("true.sym")).unwrap(), "kept\n");
        let others: Vec<_> = fs::read_dir(d)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with("true-") && n.ends_with(".sym"))
            .collect();
        assert_eq!(others.len(), 1, "{others:?}");
    }
}
