//! DAMON sysfs scenario driver (set up, run, restore) and its memory workload.
//!
//! Layout: [`sysfs`] paths and raw I/O under a replaceable root; [`features`] what the
//! kernel's DAMON offers, read from sysfs; [`plan`] the pure choice of operations set and
//! migration target from those features; [`writes`] the pure list of sysfs writes a scheme
//! needs; [`presets`] the presets and `scenario list`; [`restore`] the prior state and the
//! guard that puts it back; [`leftover`] a scenario configuration nobody restored (for
//! `doctor`); [`kdamond`] applying writes, start, stop and counters of the scenario's
//! kdamond; [`snapshot`] a serialisable summary of DAMON's configuration; [`workload`] the
//! hot/cold child process; [`scenario`] the run itself.
//!
//! Nothing here knows the command line: the `scenario` command turns its options into a
//! [`ScenarioSettings`] or [`WorkloadSizes`].
mod features;
mod guardian;
mod kdamond;
mod leftover;
mod plan;
mod presets;
mod restore;
mod scenario;
mod signals;
mod snapshot;
mod sysfs;
mod workload;
mod writes;

pub use leftover::{ScenarioLeftover, scenario_leftover};
pub use plan::DestNode;
pub use presets::Preset;
pub use scenario::{ScenarioSettings, list as list_presets, run_preset};
pub use snapshot::snapshot;
pub use sysfs::SysfsRoot;
pub use workload::{WorkloadSizes, run as run_workload};
