//! Scripts over trace data (`utrace script -S FILE`, `record -S`, `live -S`), with uftrace's
//! script interface: `uftrace_begin(ctx)`, `uftrace_entry(ctx)`, `uftrace_exit(ctx)`,
//! `uftrace_event(ctx)` and `uftrace_end()`, an optional `UFTRACE_FUNCS` list selecting the
//! functions, and `uftrace-option:` comment lines adding record options.
//!
//! ```text
//! TraceDir ──▶ replay's walk (time order, -F -N -H -D -t -r --tid) ──▶ walk::run ──┐
//! pump's chunks ──▶ live (each thread's in file order) ──▶ records (decode, names) ─┤
//!                                                                   UFTRACE_FUNCS ─┴▶ Engine
//!                                        lua (LuaJIT, built in), python (plugin, dlopen'ed)
//! ```
//!
//! `script` runs the script over a data directory ([`walk`]); `record -S` and `live -S` run it
//! while the program runs, over each thread's records as the recorder writes them ([`live`],
//! [`records`]), on a thread of its own.
//!
//! The engine is chosen by the file's extension. Lua runs in `utrace` itself; Python runs in
//! a plugin `utrace` embeds and loads only for a `.py` script (`python`), so that `utrace`
//! never needs libpython otherwise. A script error stops the run: the interpreter's message
//! (traceback and location) goes to stderr and the command fails with one line.

mod live;
mod lua;
mod python;
mod records;
pub mod walk;
pub use live::LiveScript;
pub use records::Setup;

pub use script_abi::Value;
use std::path::Path;

/// Which script function a [`Ctx`] calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Begin,
    Entry,
    Exit,
    Event,
    End,
}

impl Kind {
    /// The script function's name.
    pub fn function(self) -> &'static str {
        match self {
            Kind::Begin => "uftrace_begin",
            Kind::Entry => "uftrace_entry",
            Kind::Exit => "uftrace_exit",
            Kind::Event => "uftrace_event",
            Kind::End => "uftrace_end",
        }
    }
}

/// The context of one call, uftrace's `ctx`.
#[derive(Debug, Clone, Copy)]
pub struct Ctx<'a> {
    pub kind: Kind,
    pub tid: i64,
    pub depth: i64,
    pub timestamp: u64,
    /// Exits only.
    pub duration: u64,
    pub address: u64,
    /// The function or event name; the version for [`Kind::Begin`].
    pub name: &'a str,
    /// Arguments (entry), the return value (exit), the event's text (event), the script's
    /// command line (begin); `None` when not recorded.
    pub values: Option<&'a [Value]>,
    /// [`Kind::Begin`]: the script runs while recording.
    pub record: bool,
}

impl<'a> Ctx<'a> {
    /// A context of `kind` with every field empty.
    pub fn empty(kind: Kind) -> Ctx<'a> {
        Ctx {
            kind,
            tid: 0,
            depth: 0,
            timestamp: 0,
            duration: 0,
            address: 0,
            name: "",
            values: None,
            record: false,
        }
    }
}

/// An error raised by the script: the interpreter's message, with its traceback.
#[derive(Debug)]
pub struct ScriptError(pub String);

/// Why a call of the script did not complete.
#[derive(Debug)]
pub enum CallError {
    /// The script raised an error.
    Script(ScriptError),
    /// Standard output is a pipe whose reader is gone (EPIPE, `| head`).
    OutputClosed,
}

impl From<ScriptError> for CallError {
    fn from(e: ScriptError) -> CallError {
        CallError::Script(e)
    }
}

/// The error of [`Script::call`] when standard output was closed ([`CallError::OutputClosed`]):
/// the run stops quietly, as `replay | head` does ([`walk::run`]).
#[derive(Debug)]
pub struct OutputClosed;

impl std::fmt::Display for OutputClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("output closed")
    }
}

impl std::error::Error for OutputClosed {}

/// A loaded script.
pub trait Engine {
    /// The strings of the script's `UFTRACE_FUNCS` list, `None` when it has none.
    fn funcs(&mut self) -> Option<Vec<String>>;
    /// Calls the script function of `ctx.kind` (nothing when the script does not define it).
    fn call(&mut self, ctx: &Ctx<'_>) -> Result<(), CallError>;
}

/// The scripting languages, by file extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Language {
    Python,
    Lua,
}

fn language(path: &Path) -> Option<Language> {
    match path.extension()?.to_str()? {
        "py" => Some(Language::Python),
        "lua" => Some(Language::Lua),
        _ => None,
    }
}

/// A script loaded and ready to be called, with its file name for messages.
pub struct Script {
    engine: Box<dyn Engine>,
    /// The path as given.
    pub path: String,
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Script").field("path", &self.path).finish()
    }
}

impl Script {
    /// Loads the script at `path` (its language from its extension) and runs its top level.
    pub fn open(path: &str) -> anyhow::Result<Script> {
        let p = Path::new(path);
        let Some(lang) = language(p) else {
            anyhow::bail!("unsupported script type: {path} (a script ends in .py or .lua)");
        };
        let meta = std::fs::metadata(p).map_err(|e| {
            anyhow::anyhow!(
                "cannot open script {path}: {}",
                crate::error::without_os_error_code(&e.to_string())
            )
        })?;
        if !meta.is_file() {
            anyhow::bail!("cannot open script {path}: not a regular file");
        }
        // Messages name the script by its absolute path, as uftrace's do.
        let full = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let full = full.to_string_lossy().into_owned();
        let loaded = match lang {
            Language::Lua => lua::LuaEngine::open(&full).map(|e| Box::new(e) as Box<dyn Engine>),
            Language::Python => {
                python::PythonEngine::open(&full).map(|e| Box::new(e) as Box<dyn Engine>)
            }
        };
        match loaded {
            Ok(engine) => Ok(Script {
                engine,
                path: path.to_string(),
            }),
            Err(LoadError::Script(ScriptError(text))) => {
                eprintln!("{text}");
                anyhow::bail!("cannot load script {path}")
            }
            Err(LoadError::Engine(e)) => Err(e),
        }
    }

    pub fn funcs(&mut self) -> Option<Vec<String>> {
        self.engine.funcs()
    }

    /// Calls the script; an error prints the script's message on stderr and becomes one line
    /// (or is [`OutputClosed`]).
    pub fn call(&mut self, ctx: &Ctx<'_>) -> anyhow::Result<()> {
        match self.engine.call(ctx) {
            Ok(()) => Ok(()),
            Err(CallError::OutputClosed) => Err(OutputClosed.into()),
            Err(CallError::Script(ScriptError(text))) => {
                eprintln!("{text}");
                anyhow::bail!("script {} failed in {}()", self.path, ctx.kind.function())
            }
        }
    }

    /// `uftrace_begin(ctx)` with the version and the script's command line.
    pub fn begin(&mut self, record: bool, cmds: &[String]) -> anyhow::Result<()> {
        let values: Vec<Value> = cmds.iter().cloned().map(Value::Str).collect();
        let version = crate::usage::version_line();
        // uftrace passes its version without the program name: `v0.13 ( x86_64 ... )`.
        let version = version.strip_prefix("utrace ").unwrap_or(&version);
        let mut ctx = Ctx::empty(Kind::Begin);
        ctx.name = version;
        ctx.values = Some(&values);
        ctx.record = record;
        self.call(&ctx)
    }

    /// `uftrace_end()`.
    pub fn end(&mut self) -> anyhow::Result<()> {
        self.call(&Ctx::empty(Kind::End))
    }
}

/// Prints `line` through C's stdout buffer (where Lua's `print` writes too), unflushed.
fn print_c_stdout(line: &str) {
    let Ok(line) = std::ffi::CString::new(line) else {
        return;
    };
    // SAFETY: puts takes a NUL-terminated string, which `line` is for the call.
    unsafe { libc::puts(line.as_ptr()) };
}

/// Flushes C's stdout buffer (Lua's `print`, [`print_c_stdout`]) at the end of a script, so
/// that its output comes before what utrace prints next.
fn flush_c_stdio() {
    // SAFETY: fflush(NULL) flushes every C stream; no stream is being closed meanwhile.
    unsafe { libc::fflush(std::ptr::null_mut()) };
}

extern "C" {
    /// C's standard output stream.
    static stdout: *mut libc::FILE;
}

/// Whether a write to C's stdout (Lua's `print`) failed because it is a pipe whose reader is
/// gone (`| head`): the stream's error flag is set and the descriptor polls as an error (as a
/// pipe's write end does once it has no reader).
fn c_stdout_closed() -> bool {
    // SAFETY: `stdout` is libc's stream, set before main and never closed; ferror and fileno
    // only read it.
    let (failed, fd) = unsafe { (libc::ferror(stdout) != 0, libc::fileno(stdout)) };
    if !failed {
        return false;
    }
    let mut p = libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & libc::POLLERR != 0
}

/// Why a script could not be loaded.
#[derive(Debug)]
pub enum LoadError {
    /// The script itself (a syntax error, an exception at its top level).
    Script(ScriptError),
    /// The engine (the Python plugin cannot be written out or loaded).
    Engine(anyhow::Error),
}

/// The record options a script asks for in its `uftrace-option:` comment lines (`# uftrace-option:
/// -A a@arg1` in Python, `-- uftrace-option: ...` in Lua), split into words.
pub fn record_options(path: &str) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let mut words = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        let Some(rest) = line.strip_prefix('#').or_else(|| line.strip_prefix("--")) else {
            continue;
        };
        if let Some(opts) = rest.trim_start().strip_prefix("uftrace-option:") {
            words.extend(opts.split_whitespace().map(str::to_string));
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_by_extension() {
        assert_eq!(language(Path::new("a/x.py")), Some(Language::Python));
        assert_eq!(language(Path::new("x.lua")), Some(Language::Lua));
        assert_eq!(language(Path::new("x.rb")), None);
        assert_eq!(language(Path::new("py")), None);
    }

    #[test]
    fn option_comments() {
        let dir = tempfile::tempdir().unwrap();
        let py = dir.path().join("a.py");
        std::fs::write(&py, "#\n# uftrace-option: -A a@arg1 -R b@retval\nx = 1\n").unwrap();
        assert_eq!(
            record_options(py.to_str().unwrap()),
            ["-A", "a@arg1", "-R", "b@retval"]
        );
        let lua = dir.path().join("a.lua");
        std::fs::write(&lua, "-- uftrace-option: --no-libcall\n").unwrap();
        assert_eq!(record_options(lua.to_str().unwrap()), ["--no-libcall"]);
    }
}
