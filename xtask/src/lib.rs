//! Developer tasks for damon-trace: toolchain bootstrap, the static build, the QEMU harness
//! that runs commands on real Debian kernels, and the test pipeline (`cargo xtask test`).
//!
//! Guests boot through [`guest::Guest`] (over [`vm::run`]): the `vm_` tests in `xtask/tests/`,
//! `seed`, `ab`, `patch-ab`, `soak`, `demo` and `bench` alike; their scenario shell is
//! [`script`]'s and their output parsers [`parse`]'s.
pub mod ab;
pub mod apt;
pub mod bench;
pub mod bootstrap;
pub mod build;
pub mod debroot;
pub mod demo;
pub mod dist;
pub mod elf;
pub mod floor_check;
pub mod guest;
pub mod host;
pub mod initramfs;
pub mod kernel;
pub mod kernel_ab;
pub mod parse;
pub mod patch_ab;
pub mod script;
pub mod seed;
pub mod shape;
pub mod soak;
pub mod sysimage;
pub mod testing;
pub mod util;
pub mod vm;
pub mod vm_lanes;
