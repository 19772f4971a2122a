//! Where the analysis commands write: stdout, or a pager when stdout is a terminal
//! (cli.md §1.5). Always buffered, since a trace can print gigabytes of text.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, ChildStdin, Command, Stdio};

/// Size of the output buffer.
const BUFFER_SIZE: usize = 64 * 1024;

/// Pagers tried, in order, when `$PAGER` is not set.
const DEFAULT_PAGERS: [&str; 2] = ["/usr/bin/pager", "/usr/bin/less"];

enum Sink {
    Stdout(io::Stdout),
    Pager(ChildStdin),
    /// After [`Output::finish`]: the pager's stdin is closed.
    Closed,
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Stdout(out) => out.write(buf),
            Sink::Pager(pipe) => pipe.write(buf),
            Sink::Closed => Err(io::ErrorKind::BrokenPipe.into()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Stdout(out) => out.flush(),
            Sink::Pager(pipe) => pipe.flush(),
            Sink::Closed => Ok(()),
        }
    }
}

/// A command's output. Call [`Output::finish`] at the end to see write errors; dropping it
/// also flushes and waits for the pager, ignoring errors.
pub struct Output {
    writer: BufWriter<Sink>,
    pager: Option<Child>,
}

impl std::fmt::Debug for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Output")
            .field("pager", &self.pager.as_ref().map(Child::id))
            .finish()
    }
}

fn is_executable(path: &str) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The pager command line: `$PAGER` if set (empty or `cat` means none), else the first
/// executable of [`DEFAULT_PAGERS`].
fn pager_command() -> Option<String> {
    match std::env::var_os("PAGER") {
        Some(pager) => {
            let pager = pager.to_string_lossy().into_owned();
            (!pager.is_empty() && pager != "cat").then_some(pager)
        }
        None => DEFAULT_PAGERS
            .into_iter()
            .find(|p| is_executable(p))
            .map(String::from),
    }
}

/// Starts `sh -c PAGER` reading from a pipe; `LESS=FRSX` unless the user set LESS (quit at
/// end of short output, keep colors, do not wrap, do not clear the screen).
fn spawn_pager(command: &str) -> Option<Child> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command).stdin(Stdio::piped());
    if std::env::var_os("LESS").is_none() {
        cmd.env("LESS", "FRSX");
    }
    cmd.spawn().ok()
}

impl Output {
    /// Plain buffered stdout.
    pub fn stdout() -> Output {
        Output {
            writer: BufWriter::with_capacity(BUFFER_SIZE, Sink::Stdout(io::stdout())),
            pager: None,
        }
    }

    /// Output through a pager if `allow_pager` (not `--no-pager`), stdout is a terminal and a
    /// pager is configured and starts; plain stdout otherwise.
    pub fn start(allow_pager: bool) -> Output {
        if !allow_pager || !io::stdout().is_terminal() {
            return Output::stdout();
        }
        let Some(mut child) = pager_command().and_then(|c| spawn_pager(&c)) else {
            return Output::stdout();
        };
        match child.stdin.take() {
            Some(pipe) => Output {
                writer: BufWriter::with_capacity(BUFFER_SIZE, Sink::Pager(pipe)),
                pager: Some(child),
            },
            None => {
                let _ = child.wait();
                Output::stdout()
            }
        }
    }

    /// The writer to print to.
    pub fn writer(&mut self) -> &mut dyn Write {
        &mut self.writer
    }

    fn close(&mut self) -> io::Result<()> {
        let flushed = self.writer.flush();
        // Dropping the pipe lets the pager see the end of its input.
        *self.writer.get_mut() = Sink::Closed;
        if let Some(mut child) = self.pager.take() {
            let _ = child.wait();
        }
        flushed
    }

    /// Flushes everything, closes the pager's input and waits until the user quits it.
    pub fn finish(mut self) -> io::Result<()> {
        self.close()
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
