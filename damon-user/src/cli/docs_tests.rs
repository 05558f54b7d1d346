//! Every `damon-trace …` command line in the README's and the guide's fenced code blocks is
//! one the argument parser accepts, so the documentation cannot drift from the flags.
//!
//! What counts as a command line: in a fenced block, a line that starts (after `$ ` and
//! `sudo `) with `damon-trace `, and every further `damon-trace` command of its pipeline or
//! list (`|`, `;`, `&&`, `||`). A trailing `\` joins the next line; an unquoted ` #` starts a
//! comment; redirections (`>`, `2>`) end the words. Lines are parsed with clap only (the same
//! `Cli` the binary uses); nothing is run.
//!
//! Placeholders: a synopsis is not a command, so a command is skipped when an unquoted word
//! contains `[`, `<`, `…` or `...` (optional parts, `<placeholders>`, elisions). A word in
//! capitals such as `FILE` is parsed as it stands, which is right wherever the parser takes
//! any path; where it takes a number or a duration the line is reported, as it should be.
use std::{fs, path::Path};

use clap::{Parser as _, error::ErrorKind};

use super::Cli;

/// One word of a shell line: its text with quotes removed, and whether any of it was unquoted
/// text that looks like a placeholder.
#[derive(Debug, PartialEq)]
struct Word {
    text: String,
    placeholder: bool,
}

/// A separator between commands, or the end of the words of one (redirection, comment).
#[derive(Debug, PartialEq)]
enum Token {
    Word(Word),
    /// `|`, `;`, `&&`, `||`: another command follows.
    Next,
    /// `>`, `<`, `#`: the rest of this command is not its arguments.
    Stop,
}

/// Splits a shell line into words and separators: single and double quotes, backslash
/// escapes outside single quotes; no expansion.
fn shell_tokens(line: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = line.chars().peekable();
    let mut word: Option<Word> = None;
    let finish = |word: &mut Option<Word>, tokens: &mut Vec<Token>| {
        if let Some(w) = word.take() {
            tokens.push(Token::Word(w));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => finish(&mut word, &mut tokens),
            '#' if word.is_none() => {
                finish(&mut word, &mut tokens);
                tokens.push(Token::Stop);
                break;
            }
            '|' | ';' | '&' => {
                finish(&mut word, &mut tokens);
                if chars.peek() == Some(&c) {
                    chars.next();
                }
                tokens.push(Token::Next);
            }
            '>' | '<'
                if word
                    .as_ref()
                    .is_none_or(|w| w.text.chars().all(|d| d.is_ascii_digit())) =>
            {
                // `<placeholder>` and `<(cmd)` are not redirections of a documented command,
                // but either way the rest is not plain arguments.
                let placeholder = c == '<' && chars.peek().is_some_and(|n| n.is_alphanumeric());
                word = None;
                tokens.push(if placeholder {
                    Token::Word(Word {
                        text: "<".into(),
                        placeholder: true,
                    })
                } else {
                    Token::Stop
                });
            }
            '\'' | '"' => {
                let w = word.get_or_insert(Word {
                    text: String::new(),
                    placeholder: false,
                });
                while let Some(q) = chars.next() {
                    match q {
                        _ if q == c => break,
                        '\\' if c == '"' => w.text.extend(chars.next()),
                        _ => w.text.push(q),
                    }
                }
            }
            _ => {
                let w = word.get_or_insert(Word {
                    text: String::new(),
                    placeholder: false,
                });
                let c = if c == '\\' {
                    chars.next().unwrap_or(' ')
                } else {
                    c
                };
                w.placeholder |= matches!(c, '[' | '<' | '…' | '—');
                w.text.push(c);
                w.placeholder |= w.text.contains("...");
            }
        }
    }
    finish(&mut word, &mut tokens);
    tokens
}

/// The `damon-trace` commands of one shell line, each as its argument words (the program's
/// name first); `None` for all of them when a word of the line is a placeholder (a synopsis).
fn damon_trace_commands(line: &str) -> Vec<Option<Vec<String>>> {
    let mut commands: Vec<Vec<String>> = Vec::new();
    let mut command: Vec<String> = Vec::new();
    let mut stopped = false;
    let mut placeholder = false;
    let mut flush = |command: &mut Vec<String>| {
        let words = std::mem::take(command);
        let start = words.iter().position(|w| w != "sudo" && w != "$");
        if let Some(start) = start.filter(|&s| words[s] == "damon-trace") {
            commands.push(words[start..].to_vec());
        }
    };
    for token in shell_tokens(line) {
        match token {
            Token::Word(w) => {
                placeholder |= w.placeholder;
                if !stopped {
                    command.push(w.text);
                }
            }
            Token::Next => {
                flush(&mut command);
                stopped = false;
            }
            Token::Stop => stopped = true,
        }
    }
    flush(&mut command);
    commands
        .into_iter()
        .map(|c| (!placeholder).then_some(c))
        .collect()
}

/// A command line of a fenced block.
struct CommandLine {
    /// Where it starts, from 1.
    line: usize,
    /// The line with its `\` continuations joined.
    text: String,
    /// The block shows it failing: the next line starts with `damon-trace: error:`.
    refused: bool,
}

/// The command lines of a page's fenced blocks.
fn fenced_command_lines(text: &str) -> Vec<CommandLine> {
    let mut out = Vec::new();
    let mut in_fence = false;
    let mut lines = text.lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        let bare = t.trim_start_matches("$ ").trim_start_matches("sudo ");
        if !in_fence || !bare.starts_with("damon-trace ") {
            continue;
        }
        let mut joined = t.to_string();
        while joined.ends_with('\\') {
            joined.pop();
            match lines.next() {
                Some((_, next)) => joined.push_str(next),
                None => break,
            }
        }
        let refused = lines
            .peek()
            .is_some_and(|(_, next)| next.trim_start().starts_with("damon-trace: error:"));
        out.push(CommandLine {
            line: i + 1,
            text: joined,
            refused,
        });
    }
    out
}

/// Every documented command line the parser answers otherwise than the page shows, as
/// `file:line: command: why`; and how many commands were parsed and skipped.
fn refused(display: &str, text: &str) -> (Vec<String>, usize, usize) {
    let (mut bad, mut parsed, mut skipped) = (Vec::new(), 0, 0);
    for cl in fenced_command_lines(text) {
        let (mut errors, mut tried) = (Vec::new(), 0);
        for command in damon_trace_commands(&cl.text) {
            let Some(args) = command else {
                skipped += 1;
                continue;
            };
            parsed += 1;
            tried += 1;
            // `--help` and `--version` stop clap with an "error" that is a success.
            if let Err(e) = Cli::try_parse_from(&args)
                && !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
            {
                let first = e.to_string().lines().next().unwrap_or("").to_string();
                let n = cl.line;
                errors.push(format!("{display}:{n}: `{}`: {first}", args.join(" ")));
            }
        }
        if cl.refused && errors.is_empty() && tried > 0 {
            let n = cl.line;
            bad.push(format!(
                "{display}:{n}: `{}`: accepted, but the page shows an error",
                cl.text
            ));
        } else if !cl.refused {
            bad.extend(errors);
        }
    }
    (bad, parsed, skipped)
}

#[test]
fn documented_command_lines_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<_> = fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let (mut bad, mut parsed, mut skipped) = (Vec::new(), 0, 0);
    for page in pages {
        let text = fs::read_to_string(&page).expect("page");
        let display = page
            .strip_prefix(root)
            .expect("in the workspace")
            .display()
            .to_string();
        let (b, p, s) = refused(&display, &text);
        bad.extend(b);
        parsed += p;
        skipped += s;
    }
    println!("{parsed} documented commands parsed, {skipped} skipped as synopses");
    assert!(
        bad.is_empty(),
        "command lines the parser refuses:\n{}",
        bad.join("\n")
    );
    // The README alone shows a dozen; a splitter that found none would pass vacuously.
    assert!(parsed >= 20, "only {parsed} command lines found");
}

#[test]
fn splits_like_a_shell() {
    let cmds = damon_trace_commands(
        r#"$ sudo damon-trace record --func 'vfs_read*' -o "a b.dtcap" | damon-trace report - # x"#,
    );
    let words = |s: &[&str]| Some(s.iter().map(|w| w.to_string()).collect::<Vec<_>>());
    assert_eq!(
        cmds,
        [
            words(&[
                "damon-trace",
                "record",
                "--func",
                "vfs_read*",
                "-o",
                "a b.dtcap"
            ]),
            words(&["damon-trace", "report", "-"]),
        ]
    );
    assert_eq!(
        damon_trace_commands("damon-trace report FILE|- [--format table]"),
        [None]
    );
    assert_eq!(
        damon_trace_commands("damon-trace export x --format json > out.json"),
        [words(&["damon-trace", "export", "x", "--format", "json"])]
    );
    assert_eq!(
        damon_trace_commands("damon-trace record --func 'vfs_*' …"),
        [None]
    );
    assert!(damon_trace_commands("echo damon-trace").is_empty());
}

#[test]
fn reports_file_and_line_of_a_refused_command() {
    let text = "# Page\n\n```sh\ndamon-trace report run.dtcap\n\
        sudo damon-trace record --no-such-flag \\\n  -o x.dtcap\n\
        damon-trace live --replay <FILE>\n\
        damon-trace record --ring-size 3M -o x\ndamon-trace: error: invalid value\n\
        damon-trace report x\ndamon-trace: error: no such file\n```\n\
        damon-trace nonsense outside a fence\n";
    let (bad, parsed, skipped) = refused("page.md", text);
    assert_eq!((parsed, skipped), (4, 1));
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(
        bad[1].starts_with("page.md:10: `damon-trace report x`: accepted"),
        "{}",
        bad[1]
    );
    assert!(
        bad[0].starts_with("page.md:5: `damon-trace record --no-such-flag -o x.dtcap`"),
        "{}",
        bad[0]
    );
}
