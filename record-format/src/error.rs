//! Errors of the data-directory reader and writer. Each one names the file it concerns.

use std::path::PathBuf;

/// What went wrong while reading or writing a data directory.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("cannot open record data: {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: invalid data: {what}")]
    Invalid { path: PathBuf, what: String },
    #[error("cannot open record data: {path}: No data available")]
    NoData {
        path: PathBuf,
        /// Why the files that were there were left out (see `TraceDir::take_warnings`).
        warnings: Vec<String>,
    },
    #[error("{path}: unsupported file version: {version}")]
    Version { path: PathBuf, version: u32 },
    /// A name of the data directory that is not a regular file (after following symlinks).
    #[error("{path}: not a regular file ({kind})")]
    NotRegular { path: PathBuf, kind: &'static str },
    /// A file larger than its kind may be ([`crate::file::limit`]).
    #[error("{path}: too large (over {limit} bytes)")]
    TooLarge { path: PathBuf, limit: u64 },
}

impl FormatError {
    pub(crate) fn invalid(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        FormatError::Invalid {
            path: path.into(),
            what: what.into(),
        }
    }

    /// Whether this is a file that does not exist (an optional file's normal absence).
    pub fn is_not_found(&self) -> bool {
        match self {
            FormatError::Open { source, .. } | FormatError::Io { source, .. } => {
                source.kind() == std::io::ErrorKind::NotFound
            }
            _ => false,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        FormatError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = FormatError> = std::result::Result<T, E>;

/// The start of `s` (60 characters) for quoting data in an error: a line of a damaged file can
/// be megabytes long, and the error is one line.
pub(crate) fn clip(s: &str) -> &str {
    match s.char_indices().nth(60) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}
