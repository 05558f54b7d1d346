//! `damon-trace doctor`: can this machine trace the target functions, and if not, why. The
//! checks are in [`crate::diagnosis`]; this is the command: options → diagnosis → report →
//! exit status (1 when nothing selected can be traced).
use std::process::ExitCode;

use crate::{
    cli::DoctorArgs,
    diagnosis::{
        diagnose,
        render::{render_json, render_text},
    },
};

pub fn run(args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    let functions = crate::selection::select_functions(&(&args.selection).into())?;
    let d = {
        let _t = crate::timing::phase("diagnosis");
        diagnose(&functions)
    };
    let text = if args.format.json() {
        render_json(&d)?
    } else {
        render_text(&d)
    };
    crate::output::write_stdout(&text)?;
    Ok(if d.can_trace {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
