//! damon-trace's VM lab and experiments: Debian guest kernels, the QEMU harness that runs
//! commands on them, and the measurements made there (`ab`, `patch-ab`, `kernel-ab`, `seed`,
//! `bench`, `soak`, `demo`). `cargo xtask` runs the commands of [`cli`].
//!
//! Guests boot through [`guest::Guest`] (over [`vm::run`]): the `vm_` tests in `lab/tests/`,
//! `seed`, `ab`, `patch-ab`, `soak`, `demo` and `bench` alike; their scenario shell is
//! [`script`]'s and their output parsers [`parse`]'s. The binary a guest runs is built here too
//! ([`bootstrap`], [`build`]), so xtask depends on this crate and not the other way round.
pub mod ab;
pub mod apt;
pub mod bench;
pub mod bootstrap;
pub mod build;
pub mod cli;
pub mod debroot;
pub mod demo;
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
pub mod soak;
pub mod sysimage;
pub mod util;
pub mod vm;
