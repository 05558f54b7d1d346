//! Everything that touches the kernel: facts about it, attaching probes, reading the ring.
//!
//! By concept, imports pointing one way: [`facts`] (what the running kernel is and has) ←
//! [`loader`] (the eBPF object, its program names, loading and attaching) ← [`tracer`] (a
//! session's loaded probes, their maps and ring) ← [`calibrate`] (the probe floor).
pub mod calibrate;
pub mod facts;
pub mod loader;
pub mod tracer;
