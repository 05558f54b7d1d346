//! `completions` and `man`: the files a package installs beside the binary. Both are generated
//! from the clap command tree that parses the arguments, so they cannot fall behind it.
use std::{io::Write as _, path::Path, process::ExitCode};

use anyhow::Context as _;
use clap::CommandFactory as _;

use crate::cli::{Cli, CompletionsArgs, ManArgs};

/// The command tree as users see it: `damon-trace` with its subcommands, no `help`
/// pseudo-command (every command has `--help`).
fn command() -> clap::Command {
    let mut cmd = Cli::command()
        .bin_name("damon-trace")
        .disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// The command tree without the hidden helper subcommands (`__workload`, `bench-*`), which
/// clap_complete would otherwise offer. clap cannot remove a subcommand, so the top level is
/// rebuilt from its arguments and visible subcommands.
fn visible_command() -> clap::Command {
    let full = Cli::command();
    let visible: Vec<clap::Command> = full
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    clap::Command::new("damon-trace")
        .version(env!("CARGO_PKG_VERSION"))
        .args(full.get_arguments().cloned())
        .subcommands(visible)
        .disable_help_subcommand(true)
}

/// The completion script for `shell`, as bytes.
fn completion_script(shell: clap_complete::Shell) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut visible_command(), "damon-trace", &mut script);
    if shell == clap_complete::Shell::Bash {
        script = fix_bash_states(&script);
    }
    script
}

/// clap_complete's bash script names its states inconsistently when the binary's name has a
/// hyphen (clap-rs/clap#6421, open in clap_complete 4.6.12): the loop over the typed words
/// reaches `damon__trace__subcmd__live`, but the `case` arm is spelled
/// `damon__subcmd__trace__subcmd__live`, so no subcommand's flags or values ever complete.
/// The arms are respelled the way the loop spells them.
fn fix_bash_states(script: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(script)
        .replace("damon__subcmd__trace", "damon__trace")
        .into_bytes()
}

pub fn completions(args: &CompletionsArgs) -> anyhow::Result<ExitCode> {
    // Generated into memory first: clap_complete panics on a write error, and a closed stdout
    // (`| head`) must end quietly instead.
    let script = completion_script(args.shell);
    std::io::stdout()
        .lock()
        .write_all(&script)
        .context("writing the completion script to stdout")?;
    Ok(ExitCode::SUCCESS)
}

pub fn man(args: &ManArgs) -> anyhow::Result<ExitCode> {
    match &args.dir {
        None => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command())
                .render(&mut page)
                .context("rendering the man page")?;
            std::io::stdout()
                .lock()
                .write_all(&page)
                .context("writing the man page to stdout")?;
        }
        Some(dir) => write_pages(dir)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// `damon-trace.1` and one page per visible subcommand (`damon-trace-record.1`,
/// `damon-trace-scenario-migrate-hot.1`, …) into `dir`, created if missing.
fn write_pages(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| {
        format!(
            "creating {}: choose a folder you may write to with --dir",
            dir.display()
        )
    })?;
    clap_mangen::generate_to(command(), dir).with_context(|| {
        format!(
            "writing man pages into {}: check that it is a writable folder",
            dir.display()
        )
    })
}

#[cfg(test)]
mod tests;
