//! Messages produced while the options are interpreted: `Usage:` complaints (stdout, processing
//! continues) and `WARN:` lines (stderr). They are collected so that unit tests can look at them,
//! and printed before the command's own output starts (or when dropped, so an error path still
//! shows them before its `ERROR:` line).

use std::io::Write;

#[derive(Debug)]
pub struct Notices {
    stdout: Vec<String>,
    stderr: Vec<String>,
    /// Collect only; never print (unit tests).
    silent: bool,
}

impl Notices {
    /// Notices that are printed by [`Notices::flush`] or on drop.
    pub fn new() -> Notices {
        Notices {
            stdout: Vec::new(),
            stderr: Vec::new(),
            silent: false,
        }
    }

    /// Notices that are only collected.
    #[cfg(test)]
    pub fn silent() -> Notices {
        Notices {
            stdout: Vec::new(),
            stderr: Vec::new(),
            silent: true,
        }
    }

    /// A usage-level complaint: stdout `Usage: <msg>`.
    pub fn usage(&mut self, msg: impl AsRef<str>) {
        self.stdout.push(format!("Usage: {}", msg.as_ref()));
    }

    /// A warning: stderr `WARN: <msg>`.
    pub fn warn(&mut self, msg: impl AsRef<str>) {
        self.stderr.push(format!("WARN: {}", msg.as_ref()));
    }

    /// A line printed on stderr as is.
    pub fn stderr_line(&mut self, line: impl Into<String>) {
        self.stderr.push(line.into());
    }

    #[cfg(test)]
    pub fn stdout_lines(&self) -> &[String] {
        &self.stdout
    }

    #[cfg(test)]
    pub fn stderr_lines(&self) -> &[String] {
        &self.stderr
    }

    /// Prints what was collected so far. Write errors are ignored: a closed stdout must not
    /// turn a notice into a failure (and `println!` would panic).
    pub fn flush(&mut self) {
        if self.silent {
            return;
        }
        if !self.stdout.is_empty() {
            let mut out = std::io::stdout().lock();
            for line in self.stdout.drain(..) {
                let _ = writeln!(out, "{line}");
            }
            let _ = out.flush();
        }
        for line in self.stderr.drain(..) {
            crate::diag::line(line);
        }
    }
}

impl Default for Notices {
    fn default() -> Self {
        Notices::new()
    }
}

impl Drop for Notices {
    fn drop(&mut self) {
        self.flush();
    }
}
