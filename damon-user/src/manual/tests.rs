//! Completions and man pages against the command tree that parses the arguments: a new
//! subcommand or flag missing from them fails here without any list to update.
use std::process::{Command, Stdio};

use clap::CommandFactory as _;
use clap_complete::Shell;

use super::*;

/// Every visible command below the top level, as its path of names (`["scenario",
/// "migrate-hot"]`), with the command itself.
fn visible_tree() -> Vec<(Vec<String>, clap::Command)> {
    fn walk(cmd: &clap::Command, path: &[String], out: &mut Vec<(Vec<String>, clap::Command)>) {
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let mut p = path.to_vec();
            p.push(sub.get_name().to_owned());
            out.push((p.clone(), sub.clone()));
            walk(sub, &p, out);
        }
    }
    let mut out = Vec::new();
    walk(&Cli::command(), &[], &mut out);
    out
}

fn hidden_names() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .filter(|s| s.is_hide_set())
        .map(|s| s.get_name().to_owned())
        .collect()
}

fn longs(cmd: &clap::Command) -> Vec<String> {
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect()
}

fn script(shell: Shell) -> String {
    String::from_utf8(completion_script(shell)).expect("completion script is UTF-8")
}

#[test]
fn the_tree_has_what_the_tests_rely_on() {
    let tree = visible_tree();
    let names: Vec<String> = tree.iter().map(|(p, _)| p.join(" ")).collect();
    for expected in [
        "record",
        "serve",
        "scenario migrate-hot",
        "completions",
        "man",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    assert!(hidden_names().contains(&"__workload".to_owned()));
}

/// bash completes a command's words from one `opts="…"` line: for every visible command there
/// is a line holding all its long flags and all its visible subcommands.
#[test]
fn bash_completes_every_command_and_flag() {
    let bash = script(Shell::Bash);
    let opts_lines: Vec<Vec<&str>> = bash
        .lines()
        .filter_map(|l| l.trim().strip_prefix("opts=\""))
        .map(|l| l.trim_end_matches('"').split_whitespace().collect())
        .collect();
    let mut commands = vec![(vec![], Cli::command())];
    commands.extend(visible_tree());
    for (path, cmd) in &commands {
        let mut words = longs(cmd);
        words.extend(
            cmd.get_subcommands()
                .filter(|s| !s.is_hide_set())
                .map(|s| s.get_name().to_owned()),
        );
        assert!(
            opts_lines
                .iter()
                .any(|l| words.iter().all(|w| l.contains(&w.as_str()))),
            "no bash opts line completes `damon-trace {}` with {words:?}",
            path.join(" ")
        );
    }
    assert!(
        bash.contains("--func"),
        "--func of record/live/serve/doctor"
    );
    for hidden in hidden_names() {
        assert!(!bash.contains(&hidden), "hidden {hidden} offered");
    }
}

/// Every state the bash script's word loop can reach (`cmd="…"`) has its `case` arm, and
/// bash itself completes a subcommand's flag values: `damon-trace live --attach <TAB>`.
#[test]
fn bash_reaches_every_subcommand_state_and_completes_values() {
    let bash = script(Shell::Bash);
    let states: Vec<&str> = bash
        .lines()
        .filter_map(|l| l.trim().strip_prefix("cmd=\""))
        .map(|l| l.trim_end_matches('"'))
        .filter(|s| !s.is_empty())
        .collect();
    assert!(states.len() > 10, "{states:?}");
    for state in &states {
        assert!(
            bash.lines().any(|l| l.trim() == format!("{state})")),
            "no case arm for state {state}"
        );
    }
    let Ok(out) = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "{bash}\nCOMP_WORDS=(damon-trace live --attach ''); COMP_CWORD=3\n\
             _damon__trace damon-trace '' --attach; printf '%s\\n' \"${{COMPREPLY[@]}}\""
        ))
        .stdin(Stdio::null())
        .output()
    else {
        eprintln!("skipping the run: no bash on this host");
        return;
    };
    let words = String::from_utf8_lossy(&out.stdout);
    let mut words: Vec<&str> = words.lines().collect();
    words.sort_unstable();
    assert_eq!(
        words,
        ["auto", "fentry", "fsession", "kprobe", "kprobe-session"],
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn zsh_and_fish_name_every_command_and_flag() {
    for shell in [Shell::Zsh, Shell::Fish, Shell::Elvish, Shell::PowerShell] {
        let text = script(shell);
        for (path, cmd) in visible_tree() {
            let name = path.last().expect("non-empty path");
            assert!(text.contains(name.as_str()), "{shell}: {name}");
            for long in longs(&cmd) {
                // fish writes `-l func`, the others `--func`.
                let bare = long.trim_start_matches('-');
                assert!(
                    text.contains(&long) || text.contains(&format!("-l {bare}")),
                    "{shell}: {} {long}",
                    path.join(" ")
                );
            }
        }
        for hidden in hidden_names() {
            assert!(!text.contains(&hidden), "{shell}: hidden {hidden} offered");
        }
    }
}

/// roff with `\-` for every hyphen; the names as a reader sees them.
fn unescape(roff: &str) -> String {
    roff.replace("\\-", "-")
}

/// groff's warnings (all of them, `-ww`) about a page, when groff is installed; else the
/// sections every man page needs. `-k` runs preconv first, as man(1) does: the help texts
/// hold UTF-8 (×, …).
fn roff_problems(page: &str) -> String {
    let groff = Command::new("groff")
        .args(["-k", "-man", "-Tutf8", "-ww", "-z"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let Ok(mut child) = groff else {
        eprintln!("groff not installed: structural check only");
        let missing: Vec<&str> = [".TH ", ".SH NAME", ".SH SYNOPSIS"]
            .into_iter()
            .filter(|s| !page.contains(s))
            .collect();
        return missing.join(", ");
    };
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(page.as_bytes())
        .expect("feeding groff");
    let out = child.wait_with_output().expect("groff runs");
    assert!(out.status.success(), "groff failed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn man_page_lists_every_command_and_is_valid_roff() {
    let mut page = Vec::new();
    clap_mangen::Man::new(command())
        .render(&mut page)
        .expect("renders");
    let page = String::from_utf8(page).expect("UTF-8");
    assert!(page.starts_with(".ie") || page.starts_with(".TH"), "{page}");
    let text = unescape(&page);
    for sub in Cli::command().get_subcommands() {
        let name = sub.get_name();
        assert_eq!(
            text.contains(&format!("damon-trace-{name}(1)")),
            !sub.is_hide_set(),
            "{name} (hidden: {})",
            sub.is_hide_set()
        );
    }
    assert_eq!(roff_problems(&page), "", "roff warnings");
}

#[test]
fn man_dir_writes_a_valid_page_per_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let pages = dir.path().join("new/man1");
    write_pages(&pages).expect("writes");
    let mut expected = vec!["damon-trace.1".to_owned()];
    expected.extend(
        visible_tree()
            .iter()
            .map(|(p, _)| format!("damon-trace-{}.1", p.join("-"))),
    );
    let mut found: Vec<String> = std::fs::read_dir(&pages)
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    expected.sort();
    found.sort();
    assert_eq!(found, expected);
    for (path, cmd) in visible_tree() {
        let file = pages.join(format!("damon-trace-{}.1", path.join("-")));
        let page = std::fs::read_to_string(&file).expect("page");
        for long in longs(&cmd) {
            assert!(
                unescape(&page).contains(&long),
                "{} lacks {long}",
                file.display()
            );
        }
        assert_eq!(roff_problems(&page), "", "{}", file.display());
    }
}

#[test]
fn man_dir_names_an_unusable_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").expect("file");
    let err = write_pages(&file.join("man1")).expect_err("under a file");
    assert!(format!("{err:#}").contains("--dir"), "{err:#}");
}
