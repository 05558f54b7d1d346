//! Developer tasks for damon-trace: packaging (`dist`), the code's shape, and the test pipeline
//! (`cargo xtask test`). The toolchain bootstrap, the static build and the VM lab with its
//! experiments are `damon_lab`'s; `cargo xtask` dispatches their commands there.
pub mod counts;
pub mod dist;
pub mod shape;
pub mod testing;
pub mod vm_lanes;
