//! The embedded eBPF object: its program and map names, loading and attaching programs (by aya,
//! or by our own session loader), and what `doctor` tries and finds loaded.
pub mod attach;
pub mod auto;
pub mod inventory;
pub mod probe_log;
pub mod programs;
pub mod session;
pub mod skips;
pub mod trial;
