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
    NoData { path: PathBuf },
    #[error("{path}: unsupported file version: {version}")]
    Version { path: PathBuf, version: u32 },
}

impl FormatError {
    pub(crate) fn invalid(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        FormatError::Invalid {
            path: path.into(),
            what: what.into(),
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
