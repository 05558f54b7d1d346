//! Reading Rust source as text: comments and literals blanked, test code cut, the top-level
//! modules a file imports, the functions it defines and their length.
use std::collections::BTreeSet;

/// The code without test items: every item under `#[cfg(test)]` (a `mod tests { … }`, a
/// `mod tests;` declaration, a test-only `use` or `fn`) is blanked, lines kept. Also returns
/// the names of the test-only module files it declares (`#[cfg(test)] mod name;`).
pub fn without_tests(code: &str) -> (String, Vec<String>) {
    const ATTR: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut test_mods = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find(ATTR) {
        out.push_str(&rest[..i]);
        let item = &rest[i..];
        let end = item_end(item, ATTR.len());
        let cut = &item[..end];
        let decl = cut[ATTR.len()..].trim_start();
        if cut.ends_with(';')
            && let Some(name) = decl.split_whitespace().skip_while(|w| *w != "mod").nth(1)
        {
            test_mods.push(name.trim_end_matches(';').to_owned());
        }
        out.extend(cut.chars().filter(|c| *c == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    (out, test_mods)
}

/// Where the item starting after `skip` bytes ends: after its `;` when no brace comes first,
/// else after the brace that closes its first one.
fn item_end(item: &str, skip: usize) -> usize {
    let mut depth = 0usize;
    let mut bracket = 0usize;
    for (j, c) in item.char_indices().skip_while(|(j, _)| *j < skip) {
        match c {
            '[' => bracket += 1,
            ']' => bracket = bracket.saturating_sub(1),
            ';' if depth == 0 && bracket == 0 => return j + 1,
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
    }
    item.len()
}

/// The top-level modules a file's (stripped) code imports: `crate::a…`, `crate::{a::x, b}`,
/// and `super::…` paths that climb to the crate root from `depth` (how many modules deep the
/// file's module is: 0 for `main.rs`, 1 for `x.rs` or `x/mod.rs`, 2 for `x/y.rs`).
pub fn imports(code: &str, depth: usize) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = code.as_bytes();
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let boundary = at == 0 || !(ident_byte(b[at - 1]) || b[at - 1] == b':');
        let path = if boundary && rest.starts_with("crate::") {
            Some(&rest["crate::".len()..])
        } else if boundary && rest.starts_with("super::") {
            let mut p = rest;
            let mut ups = 0;
            while let Some(r) = p.strip_prefix("super::") {
                ups += 1;
                p = r;
            }
            (ups >= depth).then_some(p)
        } else {
            None
        };
        match path {
            Some(p) => {
                out.extend(heads(p));
                at = code.len() - p.len();
            }
            None => at += rest.chars().next().map_or(1, char::len_utf8),
        }
    }
    out
}

/// The first segments a path after `crate::` names: `a::b` → a; `{a::x, b::{c}}` → a, b.
fn heads(rest: &str) -> Vec<String> {
    let Some(group) = rest.strip_prefix('{') else {
        return head(rest).into_iter().collect();
    };
    // Top-level entries of the group: split at commas outside nested braces.
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (j, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                out.extend(head(&group[start..j]));
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.extend(head(&group[start..j]));
                start = j + 1;
            }
            _ => {}
        }
    }
    out
}

/// Whether the (stripped) code names clap: `clap::…`, `clap_complete::…`, `clap_mangen::…`,
/// or a `use` of them.
pub fn names_clap(code: &str) -> bool {
    let b = code.as_bytes();
    code.match_indices("clap").any(|(i, _)| {
        let after = &code[i + 4..];
        let after = ["_complete", "_mangen"]
            .iter()
            .find_map(|s| after.strip_prefix(s))
            .unwrap_or(after);
        (i == 0 || !(ident_byte(b[i - 1]) || b[i - 1] == b':'))
            && (after.starts_with("::") || after.starts_with(';') || after.starts_with(" as "))
    })
}

fn ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The first path segment of `a::b…` (or of a lone `a`).
fn head(path: &str) -> Option<String> {
    let path = path.trim_start();
    let end = path
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(path.len());
    (end > 0).then(|| path[..end].to_owned())
}

/// The code with comments, string and char literals blanked (braces inside them ignored).
pub fn strip(code: &str) -> String {
    let b = code.as_bytes();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                if b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 2;
        } else if c == b'r' && matches!(b.get(i + 1), Some(b'"' | b'#')) && !ident_before(b, i) {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            j += 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                if b[j] == b'\n' {
                    out.push('\n');
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j + close.len();
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                if b.get(i) == Some(&b'\n') {
                    out.push('\n');
                }
                i += 1;
            }
            out.push_str("\"\"");
            i += 1;
        } else if c == b'\'' && is_char_literal(b, i) {
            let mut j = i + 1;
            if b.get(j) == Some(&b'\\') {
                j += 1;
            }
            while j < b.len() && b[j] != b'\'' {
                j += 1;
            }
            out.push_str("' '");
            i = j + 1;
        } else {
            // Multi-byte UTF-8 stays whole: copy the character.
            let ch = code[i..].chars().next().expect("in bounds");
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn ident_before(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// `'x'`, `'\n'`, `'\''` — not a lifetime (`'a`).
fn is_char_literal(b: &[u8], i: usize) -> bool {
    match (b.get(i + 1), b.get(i + 2)) {
        (Some(b'\\'), _) => true,
        (Some(_), Some(b'\'')) => true,
        // A multi-byte character: its closing quote comes within 5 bytes.
        (Some(c), _) if *c >= 0x80 => b[i + 1..b.len().min(i + 6)].contains(&b'\''),
        _ => false,
    }
}

/// Each function with a body: (line of its `fn`, name, lines from `fn` to its closing brace).
pub fn functions(text: &str) -> Vec<(usize, String, usize)> {
    let code = strip(text);
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let Some(name) = fn_name(line) else { continue };
        let mut depth = 0i64;
        let mut opened = false;
        let mut end = None;
        'scan: for (m, l) in lines.iter().enumerate().skip(n) {
            let from = if m == n {
                line.find("fn ").unwrap_or(0)
            } else {
                0
            };
            for c in l[from..].chars() {
                match c {
                    ';' if !opened && depth == 0 => break 'scan,
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => {
                        depth -= 1;
                        if opened && depth == 0 {
                            end = Some(m);
                            break 'scan;
                        }
                    }
                    _ => {}
                }
            }
        }
        if let Some(end) = end {
            out.push((n + 1, name, end - n + 1));
        }
    }
    out
}

/// The name of the function a line declares, if it does.
fn fn_name(line: &str) -> Option<String> {
    let mut words = line.split_whitespace().peekable();
    while let Some(w) = words.next() {
        let w = w.split('(').next().unwrap_or(w);
        match w {
            "pub" | "const" | "async" | "unsafe" | "extern" | "\"\"" | "default" => continue,
            _ if w.starts_with("pub") => continue,
            "fn" => return words.next().map(|n| head(n).unwrap_or_default()),
            _ => return None,
        }
    }
    None
}
