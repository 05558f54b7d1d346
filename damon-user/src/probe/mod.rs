//! Everything that touches the kernel: facts about it, attaching probes, reading the ring.
pub mod attach;
pub mod btf;
pub mod calibrate;
pub mod folio_node;
pub mod intervals;
pub mod kernel;
pub mod ring;
pub mod skips;
