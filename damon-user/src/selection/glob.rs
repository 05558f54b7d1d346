//! `--func` globs: shell-style patterns (`*`, `?`, `[...]`) matched against the functions the
//! kernel can trace, expanded into names before the functions get their ids.
use crate::error::UsageError;

/// How many matching names an error message lists before `…`.
const SHOWN: usize = 8;

/// Whether `name` contains a glob metacharacter (otherwise it is a plain function name).
pub fn is_glob(name: &str) -> bool {
    name.contains(['*', '?', '['])
}

/// One element of a parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Byte(u8),
    Any,
    Star,
    /// `[...]`: byte ranges (a single byte is `(b, b)`), negated by a leading `!` or `^`.
    Class(bool, Vec<(u8, u8)>),
}

/// A parsed glob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Glob {
    tokens: Vec<Token>,
}

impl Glob {
    /// Parses `pattern`; an unterminated `[` is an error that says so.
    pub fn parse(pattern: &str) -> Result<Glob, String> {
        let b = pattern.as_bytes();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'*' => {
                    if tokens.last() != Some(&Token::Star) {
                        tokens.push(Token::Star);
                    }
                }
                b'?' => tokens.push(Token::Any),
                b'[' => {
                    let (token, next) = class(b, i + 1)
                        .ok_or_else(|| format!("`[` at byte {i} of `{pattern}` is never closed"))?;
                    tokens.push(token);
                    i = next;
                    continue;
                }
                c => tokens.push(Token::Byte(c)),
            }
            i += 1;
        }
        Ok(Glob { tokens })
    }

    /// Whether the whole of `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        let (t, n) = (&self.tokens, name.as_bytes());
        let (mut ti, mut ni) = (0, 0);
        // The last `*` seen and the name position it was tried at: on a mismatch it takes
        // one more byte (classic linear backtracking; one star is enough to remember).
        let mut star: Option<(usize, usize)> = None;
        while ni < n.len() {
            let step = match t.get(ti) {
                Some(Token::Star) => {
                    star = Some((ti, ni));
                    ti += 1;
                    continue;
                }
                Some(Token::Any) => true,
                Some(Token::Byte(c)) => *c == n[ni],
                Some(Token::Class(neg, ranges)) => {
                    ranges.iter().any(|&(lo, hi)| lo <= n[ni] && n[ni] <= hi) != *neg
                }
                None => false,
            };
            if step {
                ti += 1;
                ni += 1;
            } else if let Some((st, sn)) = star {
                ti = st + 1;
                ni = sn + 1;
                star = Some((st, sn + 1));
            } else {
                return false;
            }
        }
        t[ti..].iter().all(|tok| *tok == Token::Star)
    }

    /// The bytes before the first metacharacter (for "did you mean").
    fn literal_prefix(&self) -> String {
        self.tokens
            .iter()
            .map_while(|t| match t {
                Token::Byte(c) => Some(*c as char),
                _ => None,
            })
            .collect()
    }
}

/// Parses a class whose body starts at `start` (just after `[`): the token and the index after
/// its `]`, or `None` when there is no `]`.
fn class(b: &[u8], start: usize) -> Option<(Token, usize)> {
    let mut i = start;
    let neg = matches!(b.get(i), Some(b'!' | b'^'));
    if neg {
        i += 1;
    }
    let mut ranges = Vec::new();
    let first = i;
    loop {
        let c = *b.get(i)?;
        if c == b']' && i > first {
            return Some((Token::Class(neg, ranges), i + 1));
        }
        if b.get(i + 1) == Some(&b'-') && b.get(i + 2).is_some_and(|&h| h != b']') {
            ranges.push((c, b[i + 2]));
            i += 3;
        } else {
            ranges.push((c, c));
            i += 1;
        }
    }
}

/// Expands the globs among `names` (in order, each match once) against `traceable`, the
/// functions the kernel can trace, sorted; plain names pass through. Names in `exclude` (the
/// built-in functions) never come from a glob. Gives the names and one line per glob saying
/// what it matched. Usage errors: a malformed pattern, one that matches nothing (with the
/// closest names), or more functions in all than `max`.
pub fn expand(
    names: &[String],
    traceable: &[String],
    exclude: &[&str],
    max: usize,
) -> Result<(Vec<String>, Vec<String>), UsageError> {
    let mut out: Vec<String> = Vec::new();
    let mut lines = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let name = name.trim();
        if !is_glob(name) {
            out.push(name.to_owned());
            continue;
        }
        let glob = Glob::parse(name).map_err(|e| UsageError(format!("--func '{name}': {e}")))?;
        // Names already chosen (or given plainly) are not counted twice.
        let found: Vec<&String> = traceable
            .iter()
            .filter(|f| glob.matches(f) && !exclude.contains(&f.as_str()))
            .filter(|f| !out.contains(f) && !names.iter().any(|n| n.trim() == f.as_str()))
            .collect();
        if found.is_empty() {
            return Err(UsageError(format!(
                "--func '{name}' matches no traceable function{}",
                did_you_mean(&glob, traceable)
            )));
        }
        let later_plain = names[i + 1..].iter().filter(|n| !is_glob(n)).count();
        let room = max.saturating_sub(out.len() + later_plain);
        if found.len() > room {
            return Err(UsageError(format!(
                "--func '{name}' matches {} traceable functions, at most {room} can be traced{}: \
                 {}; narrow the pattern",
                found.len(),
                if room == max {
                    ""
                } else {
                    " with the other --func"
                },
                shown(&found)
            )));
        }
        lines.push(format!(
            "--func '{name}' matches {} traceable function{}: {}",
            found.len(),
            if found.len() == 1 { "" } else { "s" },
            found
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        out.extend(found.into_iter().cloned());
    }
    Ok((out, lines))
}

/// The first [`SHOWN`] names, then `…` when there are more.
fn shown(found: &[&String]) -> String {
    let mut s = found
        .iter()
        .take(SHOWN)
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    if found.len() > SHOWN {
        s.push_str(", …");
    }
    s
}

/// `; did you mean a, b, …?`: traceable functions sharing the longest start (3 bytes at
/// least) with the pattern's literal prefix; empty when none do.
fn did_you_mean(glob: &Glob, traceable: &[String]) -> String {
    let mut prefix = glob.literal_prefix();
    while prefix.len() >= 3 {
        let near: Vec<&String> = traceable
            .iter()
            .filter(|f| f.starts_with(&prefix))
            .collect();
        if !near.is_empty() {
            return format!("; did you mean {}?", shown(&near));
        }
        prefix.pop();
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, n: &str) -> bool {
        Glob::parse(p).expect("pattern").matches(n)
    }

    #[test]
    fn star_question_and_classes() {
        assert!(m("vfs_*", "vfs_read") && m("vfs_*", "vfs_") && !m("vfs_*", "vfsread"));
        assert!(m("vfs_rea?", "vfs_read") && !m("vfs_rea?", "vfs_readv"));
        assert!(m("*read*", "vfs_readv") && m("**x", "x") && !m("*read", "vfs_readv"));
        assert!(m("vfs_[rw]*", "vfs_write") && !m("vfs_[rw]*", "vfs_fsync"));
        assert!(m("a[!b]c", "axc") && !m("a[!b]c", "abc") && m("a[^b]c", "acc"));
        assert!(m("x[a-c0-9]", "x7") && m("x[a-c]", "xb") && !m("x[a-c]", "xd"));
        assert!(m("[]]", "]") && m("[a-]", "-"));
        // Backtracking: the star must give back what the rest needs.
        assert!(m("*_read_*_x", "a_read_b_read_c_x"));
        assert!(!m("*_read_*_x", "a_read_b_read_c_y"));
        assert!(m("plain", "plain") && !m("plain", "plainer"));
        assert!(Glob::parse("vfs_[rw").is_err());
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn expands_in_order_and_states_what_matched() {
        let traceable = names(&["vfs_read", "vfs_readv", "vfs_write", "lock_timer_base"]);
        let (out, lines) = expand(
            &names(&["vfs_write", "vfs_rea*"]),
            &traceable,
            &["lock_timer_base"],
            11,
        )
        .expect("expands");
        assert_eq!(out, names(&["vfs_write", "vfs_read", "vfs_readv"]));
        assert_eq!(
            lines,
            ["--func 'vfs_rea*' matches 2 traceable functions: vfs_read, vfs_readv"]
        );
        // A built-in function never comes from a glob.
        let e = expand(&names(&["lock_*"]), &traceable, &["lock_timer_base"], 11)
            .expect_err("only a built-in");
        assert!(e.0.contains("matches no traceable function"), "{}", e.0);
    }

    #[test]
    fn refuses_too_wide_and_empty_globs_with_the_names() {
        let traceable: Vec<String> = (0..57).map(|i| format!("vfs_f{i:02}")).collect();
        let e = expand(&names(&["vfs_*"]), &traceable, &[], 11).expect_err("too wide");
        assert!(
            e.0.starts_with(
                "--func 'vfs_*' matches 57 traceable functions, at most 11 can be traced: \
                 vfs_f00, vfs_f01,"
            ) && e.0.ends_with(", …; narrow the pattern"),
            "{}",
            e.0
        );
        // The plain names count against the cap.
        let e = expand(&names(&["vfs_f0?", "a", "b"]), &traceable, &[], 11).expect_err("room");
        assert!(
            e.0.contains("at most 9 can be traced with the other --func"),
            "{}",
            e.0
        );
        let e = expand(&names(&["vfs_fx*"]), &traceable, &[], 11).expect_err("none");
        assert!(
            e.0.starts_with("--func 'vfs_fx*' matches no traceable function; did you mean vfs_f00"),
            "{}",
            e.0
        );
        let e = expand(&names(&["zz*"]), &traceable, &[], 11).expect_err("none, no hint");
        assert_eq!(e.0, "--func 'zz*' matches no traceable function");
    }
}
