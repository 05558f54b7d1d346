//! The one place where command-line arguments become the domain's vocabulary
//! (`crate::trace`): each conversion once, so that nothing past a command's entry point needs
//! a clap type.
use super::{AttachArg, CalibrationArgs, ModeArg, ModeArgs, Selection, TraceArgs};
use crate::trace::{
    AttachChoice, AttachMethod, CalibrationPlan, FunctionNames, ModeConfig, SessionConfig,
    TraceMode,
};

impl From<ModeArg> for TraceMode {
    fn from(m: ModeArg) -> TraceMode {
        match m {
            ModeArg::Stream => TraceMode::Stream,
            ModeArg::Kernel => TraceMode::Kernel,
            ModeArg::Both => TraceMode::Both,
        }
    }
}

impl From<AttachArg> for AttachChoice {
    fn from(a: AttachArg) -> AttachChoice {
        match a {
            AttachArg::Auto => AttachChoice::Auto,
            AttachArg::Fentry => AttachChoice::Only(AttachMethod::Fentry),
            AttachArg::Kprobe => AttachChoice::Only(AttachMethod::Kprobe),
        }
    }
}

impl From<ModeArgs> for ModeConfig {
    fn from(m: ModeArgs) -> ModeConfig {
        ModeConfig {
            mode: m.mode.into(),
            hist_width_ns: m.hist_width,
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
    ) -> anyhow::Result<SessionConfig> {
        Ok(SessionConfig {
            functions: crate::selection::select_functions(&self.into())?,
            attach: self.attach.into(),
            mode: mode.into(),
            ring_size,
            calibration: calibration.map(CalibrationPlan::from),
        })
    }
}

impl TraceArgs {
    /// What the session of `record` or `live` traces, with a ring of `ring_size` bytes.
    pub fn session_config(&self, ring_size: u32) -> anyhow::Result<SessionConfig> {
        self.selection
            .session_config(self.mode, ring_size, Some(&self.calibration))
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
