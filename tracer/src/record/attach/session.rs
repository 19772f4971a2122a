//! Starting and ending libmcount's session inside the process: with one thread held, the
//! process's own `dlopen` loads libmcount and `utrace_attach` starts tracing (the stopped
//! threads' addresses noted for patching to avoid); `utrace_detach` ends it.

use super::caller::{caller, settle_others};
use super::inject::{self, Held, Modules, Saved, DATA};
use super::ptrace::{self, Stopped};
use anyhow::{bail, Context};
use record_format::env;
use std::path::Path;

/// `RTLD_NOW`.
const RTLD_NOW: u64 = 2;

/// Stops the process, loads libmcount and starts the session.
pub(super) fn attach(
    pid: i32,
    libmcount: &Path,
    attach_file: &Path,
    dlopen: u64,
    dlerror: u64,
) -> anyhow::Result<()> {
    let mut stopped = Stopped::stop_all(pid)?;
    let loaded = Modules::read(pid)?.at(libmcount).is_some();
    let tid = caller(&mut stopped, loaded.then_some(libmcount))?;
    let held = Held::take(tid)?;
    let result = load_and_start(
        &mut stopped,
        tid,
        held.saved(),
        libmcount,
        attach_file,
        dlopen,
        dlerror,
    );
    let restored = held.restore();
    stopped.detach_all();
    result.and(restored)
}

/// Adds the stopped threads' instruction addresses to the attach file (`env::ATTACH_AVOID`):
/// patching leaves their functions alone. The calling thread `tid`'s is the one it had
/// before the calls (`saved`).
fn note_avoid(
    stopped: &Stopped,
    tid: i32,
    saved: &Saved,
    attach_file: &Path,
) -> anyhow::Result<()> {
    use std::io::Write;
    let rips: Vec<String> = stopped
        .tids()
        .into_iter()
        .filter_map(|t| match t == tid {
            true => Some(saved.rip()),
            false => inject::position(t).map(|(rip, _)| rip),
        })
        .map(|rip| format!("{rip:x}"))
        .collect();
    let record = env::encode_vars([(env::ATTACH_AVOID, rips.join(",").as_bytes())]);
    std::fs::OpenOptions::new()
        .append(true)
        .open(attach_file)
        .and_then(|mut f| f.write_all(&record))
        .with_context(|| format!("cannot write {}", attach_file.display()))
}

fn cstring(path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    let mut bytes = path.as_os_str().as_bytes().to_vec();
    bytes.push(0);
    bytes
}

fn load_and_start(
    stopped: &mut Stopped,
    tid: i32,
    saved: &Saved,
    libmcount: &Path,
    attach_file: &Path,
    dlopen: u64,
    dlerror: u64,
) -> anyhow::Result<()> {
    let pid = stopped.pid;
    let handle = inject::call(
        stopped,
        tid,
        saved,
        (dlopen, inject::LOCK_WAIT),
        &[DATA, RTLD_NOW],
        &cstring(libmcount),
    )?;
    if handle == 0 {
        let why = (dlerror != 0)
            .then(|| inject::call(stopped, tid, saved, (dlerror, inject::LOCK_WAIT), &[], &[]).ok())
            .flatten()
            .filter(|&p| p != 0)
            .and_then(|p| inject::read_cstr(tid, p))
            .unwrap_or_else(|| "dlopen failed".to_string());
        bail!("cannot load libmcount into process {pid}: {why}");
    }
    let attach = lib_symbol(pid, libmcount, "utrace_attach")?;
    // The others ran during the dlopen perhaps: none may be inside libmcount or hold the C
    // library's locks now, and the addresses to avoid are theirs of now.
    settle_others(stopped, tid, libmcount)?;
    note_avoid(stopped, tid, saved, attach_file)?;
    let attach = (attach, inject::PATCH_WAIT);
    let rc = inject::call(stopped, tid, saved, attach, &[DATA], &cstring(attach_file))? as i32;
    if rc < 0 {
        let e = std::io::Error::from_raw_os_error(-rc);
        match -rc {
            libc::EBUSY => bail!("process {pid} is being traced by another utrace already"),
            libc::EEXIST => bail!("process {pid} was attached to before with other filters, triggers, arguments or -P/-U patterns: a later attach must use the same (libmcount keeps the first ones)"),
            _ => bail!("cannot start tracing in process {pid}: {e}"),
        }
    }
    Ok(())
}

/// The address of libmcount's `name` in process `pid`.
fn lib_symbol(pid: i32, libmcount: &Path, name: &str) -> anyhow::Result<u64> {
    let modules = Modules::read(pid)?;
    let (path, start) = modules
        .at(libmcount)
        .with_context(|| format!("libmcount is not mapped in process {pid}"))?;
    inject::symbol(pid, path, *start, name)
        .with_context(|| format!("no {name} in {}", libmcount.display()))
}

/// Stops the process again and ends the session; returns whether there was none to end
/// any more: the process ended, or ran another program (`exec`, which unmapped libmcount).
pub(super) fn detach(pid: i32, libmcount: &Path) -> anyhow::Result<bool> {
    let mut stopped = match Stopped::stop_all(pid) {
        Ok(s) => s,
        // It ended just now.
        Err(_) if ptrace::ended(pid, pid) => return Ok(true),
        Err(e) => return Err(e),
    };
    if Modules::read(pid)?.at(libmcount).is_none() {
        crate::diag::warn(format!(
            "process {pid} ran another program (exec): its recording ends there"
        ));
        return Ok(true);
    }
    let result = caller(&mut stopped, Some(libmcount)).and_then(|tid| {
        let detach = lib_symbol(pid, libmcount, "utrace_detach")?;
        let held = Held::take(tid)?;
        let detach = (detach, inject::PATCH_WAIT);
        let called = inject::call(&mut stopped, tid, held.saved(), detach, &[], &[]);
        held.restore()?;
        called.map(|_| false)
    });
    stopped.detach_all();
    result
}
