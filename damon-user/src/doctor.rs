//! `damon-trace doctor`: can this machine trace the target functions, and if not, why. The
//! checks are in [`crate::diagnosis`]; this is the command: options → diagnosis → report →
//! exit status (1 when nothing selected can be traced). `--leftovers` runs one check alone.
use std::process::ExitCode;

use serde::Serialize;

use crate::{
    cli::DoctorArgs,
    diagnosis::{
        diagnose, leftovers,
        render::{render_json, render_leftovers_text, render_text},
    },
    timing::phase,
};

pub fn run(args: &DoctorArgs) -> anyhow::Result<ExitCode> {
    if args.leftovers {
        // Status 1 unless the kernel holds no object of ours.
        let l = {
            let _t = phase("leftovers: the kernel's BPF objects listed");
            leftovers()
        };
        return print(args, &l, render_leftovers_text, l.clean);
    }
    let functions = crate::selection::select_functions(&(&args.selection).into())?;
    let d = {
        let _t = phase("diagnosis");
        diagnose(&functions)
    };
    print(args, &d, render_text, d.can_trace)
}

/// Prints `report` as JSON or as `text` renders it; the status is success when `ok`.
fn print<T: Serialize>(
    args: &DoctorArgs,
    report: &T,
    text: fn(&T) -> String,
    ok: bool,
) -> anyhow::Result<ExitCode> {
    let out = if args.format.json() {
        render_json(report)?
    } else {
        text(report)
    };
    crate::output::write_stdout(&out)?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
