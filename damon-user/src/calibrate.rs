//! `damon-trace calibrate`: the probe floor per attach method and trace mode, and the held-out
//! check (the measuring is `probe::calibrate`'s).
use std::process::ExitCode;

use anyhow::bail;

use crate::{
    capture::Clock,
    cli::CalibrateArgs,
    probe::calibrate::{FloorRequest, HELD_OUT_FUNCTION, calibrate, progress_line},
    stats::calibration::CalibrationStatus,
    trace::{Attach, AttachChoice, Mode, ModeConfig},
};

/// `calibrate --format json`: a capture's meta.calibration, and the clock its values count.
#[derive(serde::Serialize)]
struct Document<'a> {
    clock: &'static str,
    unit: &'static str,
    #[serde(flatten)]
    calibration: &'a crate::stats::calibration::Calibration,
}

/// Exit 1 when no floor could be measured.
pub fn run(args: &CalibrateArgs) -> anyhow::Result<ExitCode> {
    let cal = calibrate(&requests(args), args.calls, &mut progress_line);
    let clock = Clock::from(args.clock);
    let text = if args.format.json() {
        crate::output::json_document(&Document {
            clock: clock.as_str(),
            unit: clock.unit(),
            calibration: &cal,
        })?
    } else {
        crate::probe::calibrate::text::render_text(&cal, clock)
    };
    crate::output::write_stdout(&text)?;
    if cal.status != CalibrationStatus::Ok {
        bail!(
            "no probe floor could be measured (each attach method's reason is above); see \
             `damon-trace doctor --func {HELD_OUT_FUNCTION}`"
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// One floor per requested trace mode (each once, in order) and attach method (`auto`: every
/// method the kernel has).
fn requests(args: &CalibrateArgs) -> Vec<FloorRequest> {
    let methods: Vec<Attach> = match AttachChoice::from(args.attach) {
        // Every method this kernel has (the sessions only where it has them).
        AttachChoice::Auto => {
            let kernel = crate::probe::facts::KernelFacts::get();
            let (kprobe_session, fsession) = (kernel.kprobe_session(), kernel.fsession());
            Attach::ALL
                .into_iter()
                .filter(|m| match m {
                    Attach::KprobeSession => kprobe_session,
                    Attach::Fsession => fsession,
                    Attach::Fentry | Attach::Kprobe => true,
                })
                .collect()
        }
        AttachChoice::Only(m) => vec![m],
    };
    let mut modes: Vec<Mode> = Vec::new();
    for m in args.mode.iter().map(|&m| Mode::from(m)) {
        if !modes.contains(&m) {
            modes.push(m);
        }
    }
    modes
        .iter()
        .flat_map(|&mode| {
            methods.iter().map(move |&attach| FloorRequest {
                attach,
                mode: ModeConfig {
                    mode,
                    hist_width_ns: args.hist_width,
                    ..ModeConfig::default()
                },
            })
        })
        .collect()
}
