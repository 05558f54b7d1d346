//! The one place where command-line arguments become the domain's vocabulary
//! (`crate::trace`): each conversion once, so that nothing past a command's entry point needs
//! a clap type.
use super::{
    AttachArg, CalibrationArgs, ClockArg, DebugProbesArg, ModeArg, ModeArgs, Selection, SlowArgs,
    TaskFilterArgs, TraceArgs,
};
use crate::trace::{
    Attach, AttachChoice, CalibrationPlan, FunctionNames, Mode, ModeConfig, ProbeLogLevel,
    SessionConfig,
};

impl From<super::TimeBasis> for crate::analysis::TimeBasis {
    fn from(t: super::TimeBasis) -> Self {
        match t {
            super::TimeBasis::Wall => crate::analysis::TimeBasis::Wall,
            super::TimeBasis::OnCpu => crate::analysis::TimeBasis::OnCpu,
        }
    }
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Stream => Mode::Stream,
            ModeArg::Kernel => Mode::Kernel,
            ModeArg::Both => Mode::Both,
        }
    }
}

impl From<AttachArg> for AttachChoice {
    fn from(a: AttachArg) -> AttachChoice {
        match a {
            AttachArg::Auto => AttachChoice::Auto,
            AttachArg::Fentry => AttachChoice::Only(Attach::Fentry),
            AttachArg::Kprobe => AttachChoice::Only(Attach::Kprobe),
            AttachArg::KprobeSession => AttachChoice::Only(Attach::KprobeSession),
            AttachArg::Fsession => AttachChoice::Only(Attach::Fsession),
        }
    }
}

impl From<DebugProbesArg> for ProbeLogLevel {
    fn from(a: DebugProbesArg) -> ProbeLogLevel {
        match a {
            DebugProbesArg::Off => ProbeLogLevel::Off,
            DebugProbesArg::Debug => ProbeLogLevel::Debug,
            DebugProbesArg::Trace => ProbeLogLevel::Trace,
        }
    }
}

impl From<ClockArg> for crate::capture::Clock {
    fn from(c: ClockArg) -> crate::capture::Clock {
        match c {
            ClockArg::Wall => crate::capture::Clock::Wall,
            ClockArg::Instructions => crate::capture::Clock::Instructions,
        }
    }
}

impl From<ModeArgs> for ModeConfig {
    fn from(m: ModeArgs) -> ModeConfig {
        ModeConfig {
            mode: m.mode.into(),
            hist_width_ns: m.hist_width,
            disturbance: m.disturbance,
        }
    }
}

impl From<&CalibrationArgs> for CalibrationPlan {
    fn from(c: &CalibrationArgs) -> CalibrationPlan {
        if c.no_calibrate {
            CalibrationPlan::Skip
        } else {
            CalibrationPlan::Measure {
                calls: c.calibrate_calls,
            }
        }
    }
}

impl Selection {
    /// What a session traces with these functions and arguments: the functions resolved and
    /// checked (usage errors for unknown or repeated names, see `crate::selection`).
    /// `calibration: None` stores no calibration at all (`serve`).
    pub fn session_config(
        &self,
        mode: ModeArgs,
        ring_size: u32,
        calibration: Option<&CalibrationArgs>,
        tasks: &TaskFilterArgs,
    ) -> anyhow::Result<SessionConfig> {
        let (functions, expanded) = {
            let _t = crate::timing::phase("select functions (names, globs)");
            crate::selection::select_and_expand(&self.into())?
        };
        for line in expanded {
            eprintln!("{line}");
        }
        Ok(SessionConfig {
            functions,
            attach: self.attach.into(),
            mode: mode.into(),
            ring_size,
            calibration: calibration.map(CalibrationPlan::from),
            filter: tasks.to_filter()?,
            debug_probes: Default::default(),
            clock: Default::default(),
            slow: None,
        })
    }
}

impl TraceArgs {
    /// What the session of `record` or `live` traces, with a ring of `ring_size` bytes.
    pub fn session_config(&self, ring_size: u32) -> anyhow::Result<SessionConfig> {
        let mut config = self.selection.session_config(
            self.mode,
            ring_size,
            Some(&self.calibration),
            &self.tasks,
        )?;
        config.debug_probes = self.debug_probes.into();
        config.clock = self.clock.into();
        Ok(config)
    }
}

impl SlowArgs {
    /// Puts `--slow` into `config` (whose mode is set): a usage error in kernel mode, where no
    /// call has a record to keep.
    pub fn apply(&self, config: &mut SessionConfig) -> anyhow::Result<()> {
        let Some(threshold) = self.slow else {
            return Ok(());
        };
        if !config.mode.mode.streams() {
            return Err(crate::error::UsageError(
                "--slow keeps slow calls' records with their stacks, and --mode kernel makes \
                 no records: use --mode stream (the default) with --slow"
                    .into(),
            )
            .into());
        }
        let threshold_ns = u64::try_from(threshold.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        config.slow = Some(crate::capture::SlowSettings {
            threshold_ns,
            stack_depth: damon_common::slow::SLOW_STACK_DEPTH as u32,
            max_per_function: self.slow_max,
        });
        Ok(())
    }
}

impl From<&Selection> for FunctionNames {
    fn from(s: &Selection) -> FunctionNames {
        FunctionNames {
            builtins: s.functions.clone(),
            others: s.func.clone(),
        }
    }
}

impl TaskFilterArgs {
    /// The filter the kernel applies; the cgroup directory resolved into its id (a usage
    /// error when it is not a cgroup v2 directory).
    pub fn to_filter(&self) -> anyhow::Result<crate::capture::TaskFilter> {
        Ok(crate::capture::TaskFilter {
            tgid: self.tgid,
            tid: self.pid,
            cgroup: self
                .cgroup
                .as_deref()
                .map(crate::probe::facts::cgroup::resolve)
                .transpose()?,
        })
    }
}
