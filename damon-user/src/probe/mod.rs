//! Everything that touches the kernel: facts about it, attaching probes, reading the ring.
pub mod attach;
pub mod btf;
pub mod calibrate;
pub mod calibration_text;
pub mod cgroup;
pub mod floor;
pub mod folio_node;
pub mod globals;
pub mod intervals;
pub mod inventory;
pub mod kernel;
pub mod programs;
pub mod ring;
pub mod session;
pub mod skips;
pub mod tracer;
pub mod trial;
