//! Library target so that `damon-user` can list this crate as a build-dependency (cargo then
//! rebuilds the eBPF object when it changes). The programs are in main.rs.
#![no_std]
