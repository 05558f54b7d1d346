//! Developer tasks for damon-trace: toolchain bootstrap, the static build, the QEMU harness
//! that runs commands on real Debian kernels, and the test pipeline (`cargo xtask test`).
//!
//! The VM API ([`vm::run`]) is what the `vm_` tests in `xtask/tests/vm.rs` use.
pub mod ab;
pub mod apt;
pub mod bench;
pub mod bootstrap;
pub mod build;
pub mod demo;
pub mod elf;
pub mod guest;
pub mod host;
pub mod initramfs;
pub mod kernel;
pub mod parse;
pub mod script;
pub mod seed;
pub mod soak;
pub mod testing;
pub mod util;
pub mod vm;
