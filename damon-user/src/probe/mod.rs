//! Everything that touches the kernel: facts about it, attaching probes, reading the ring.
pub mod attach;
pub mod auto;
pub mod btf;
pub mod calibrate;
pub mod calibration_text;
pub mod cgroup;
pub mod disturb;
// Attached by the instrument command `bench-floor` only (its program names are checked here).
#[cfg_attr(not(any(test, feature = "instruments")), allow(dead_code))]
pub mod floor;
pub mod folio_node;
pub mod globals;
pub mod intervals;
pub mod inventory;
pub mod kernel;
pub mod kernel_maps;
pub mod probe_log;
pub mod programs;
pub mod ring;
pub mod session;
pub mod skips;
pub mod sysfiles;
pub mod tracer;
pub mod trial;
