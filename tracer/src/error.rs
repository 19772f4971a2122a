//! Errors with a special meaning for `main`: how they are printed and which exit status they
//! give (cli.md §1.7). Everything else is a fatal `ERROR:` with status 1.

use std::fmt;

/// Stop with `code` after printing `stdout_lines` on stdout (uftrace prints some complaints,
/// such as an unknown field name, on stdout where its test suite looks).
#[derive(Debug)]
pub struct UsageExit {
    pub stdout_lines: Vec<String>,
    pub code: u8,
}

impl fmt::Display for UsageExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.stdout_lines.join("\n"))
    }
}

impl std::error::Error for UsageExit {}

/// The data directory of an analysis command could not be opened: `WARN: <message>`, 255.
#[derive(Debug)]
pub struct OpenDataError(pub record_format::FormatError);

impl fmt::Display for OpenDataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&without_os_error_code(&self.0.to_string()))
    }
}

impl std::error::Error for OpenDataError {}

/// Removes the ` (os error N)` that `std::io::Error` appends to strerror's text, so messages
/// read like uftrace's (`No such file or directory`).
pub fn without_os_error_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find(" (os error ") {
        let after = &rest[pos + " (os error ".len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after[digits..].starts_with(')') {
            out.push_str(&rest[..pos]);
            rest = &after[digits + 1..];
        } else {
            out.push_str(&rest[..pos + 1]);
            rest = &rest[pos + 1..];
        }
    }
    out.push_str(rest);
    out
}

/// True if the error is, or was caused by, a write to a closed pipe (`utrace replay | head`,
/// or the user quitting the pager): not an error for the user.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        let io = cause.downcast_ref::<std::io::Error>().or_else(|| {
            match cause.downcast_ref::<replay::ReplayError>() {
                Some(replay::ReplayError::Io(e)) => Some(e),
                _ => None,
            }
        });
        io.is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_error_codes_are_removed() {
        assert_eq!(
            without_os_error_code("x: No such file or directory (os error 2)"),
            "x: No such file or directory"
        );
        assert_eq!(
            without_os_error_code("a (os error x) b"),
            "a (os error x) b"
        );
        assert_eq!(
            without_os_error_code("a (os error 1): b (os error 13)"),
            "a: b"
        );
    }

    #[test]
    fn broken_pipe_is_found_in_the_chain() {
        let io = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let err = anyhow::Error::new(replay::ReplayError::Io(io)).context("replay");
        assert!(is_broken_pipe(&err));
        let other = anyhow::anyhow!("other");
        assert!(!is_broken_pipe(&other));
    }
}
