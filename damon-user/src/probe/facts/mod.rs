//! What the tool knows about the running kernel.
pub mod btf;
pub mod cgroup;
pub mod folio_node;
pub mod kernel;
pub mod sysfiles;
