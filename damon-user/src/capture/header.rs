//! The file header's magic and format version: below `error.rs` and `format.rs`, which both
//! name them.

pub const MAGIC: &[u8; 8] = b"DMNTRCAP";
/// The version this build writes (and the newest it reads).
pub const VERSION: u32 = 2;
