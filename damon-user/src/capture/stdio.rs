//! `-` where a capture path is taken: stdin for a capture to read (`report -`, `compare - B`,
//! `export -`), stdout for one to write (`record -o -`, `compare --plot -`). The writer never
//! seeks, so a pipe can take a capture as well as a file can.
use std::{
    fs::File,
    io::{IsTerminal as _, Read as _},
    os::fd::AsFd as _,
    path::Path,
};

use super::error::CaptureError;

/// What error messages call stdin and stdout when `-` stands for them.
pub const STDIN_NAME: &str = "stdin";

/// Whether `path` is `-`.
pub fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// All of stdin, refusing a terminal (a capture is binary: waiting for one typed in would
/// hang).
pub fn read_stdin() -> Result<Vec<u8>, CaptureError> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err(CaptureError::StdinTerminal);
    }
    let mut bytes = Vec::new();
    stdin
        .lock()
        .read_to_end(&mut bytes)
        .map_err(|err| CaptureError::Unreadable {
            path: STDIN_NAME.to_owned(),
            err,
        })?;
    Ok(bytes)
}

/// Stdout for binary output, refusing a terminal (it cannot show a capture or an SVG).
pub fn check_stdout() -> Result<(), CaptureError> {
    if std::io::stdout().is_terminal() {
        return Err(CaptureError::StdoutTerminal);
    }
    Ok(())
}

/// Stdout as a file (a duplicate of descriptor 1), once [`check_stdout`] allows it.
pub fn stdout_file() -> Result<File, CaptureError> {
    check_stdout()?;
    let fd = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|err| CaptureError::Io {
            path: "stdout".to_owned(),
            err,
        })?;
    Ok(File::from(fd))
}
