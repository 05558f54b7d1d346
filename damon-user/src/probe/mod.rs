//! Everything that touches the kernel: facts about it, attaching probes, reading the ring.
//!
//! By concept, imports pointing one way: [`facts`] (what the running kernel is and has) ←
//! [`loader`] (the eBPF object, its program names, loading and attaching) ← [`tracer`] (a
//! session's loaded probes, their maps and ring) ← [`calibrate`] (the probe floor).
pub mod calibrate;
pub mod facts;
pub mod loader;
pub mod tracer;

/// Drops every kernel file and parse kept for the start (the start is over: the programs are
/// attached and the calibration's loaded; see [`facts::sysfiles`]). The next use reads again.
pub fn release() {
    facts::sysfiles::release();
    facts::kernel::KALLSYMS_PARSED.release();
    loader::session::PARSED.release();
}
