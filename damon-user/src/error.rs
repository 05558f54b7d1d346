//! Errors that decide the exit status: a usage error exits 2, every other failure 1.

/// A usage error (exit status 2): the command line asks for something impossible or unknown,
/// as opposed to a runtime failure (1). The message names the cause and, where there is one,
/// the remedy.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);
