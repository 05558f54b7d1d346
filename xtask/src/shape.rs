//! `cargo xtask shape`: the code's shape, checked from its text.
//!
//! - **Layers of `damon-user/src`:** the import graph of its top-level modules (`use
//!   crate::x…` and `crate::x::…` paths outside test code) must have no cycle, and arrows point
//!   one way: the CLI layer (`main`, `cli`) → commands → the domain. A domain module imports
//!   neither a command nor `cli`, and no file of the domain names `clap`.
//! - **Size:** no source file over [`MAX_FILE_LINES`] lines unless [`LONG_FILES`] says why
//!   (unit-test files beside the code are not counted), no function over [`MAX_FN_LINES`]
//!   lines in `src/` folders, unit tests included; functions under `tests/` folders that are
//!   longer are listed, not failed.
//!
//! It reads text, not Rust's syntax tree: strings, chars and comments are skipped when braces
//! are counted, which is enough for this code base (a test in this module says what it sees).
use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};

pub const MAX_FILE_LINES: usize = 600;
pub const MAX_FN_LINES: usize = 100;

/// The CLI layer of `damon-user/src`: it parses arguments and converts them into the domain's
/// vocabulary.
pub const CLI_LAYER: &[&str] = &["main", "cli"];
/// One module per command (or family of commands): each has an entry point `main` calls.
pub const COMMANDS: &[&str] = &[
    "bench",
    "calibrate",
    "compare",
    "doctor",
    "export",
    "manual",
    "record",
    "report",
    "scenario",
    "serve",
    "tui",
];

/// Files allowed over [`MAX_FILE_LINES`], and why.
pub const LONG_FILES: &[(&str, &str)] = &[];

/// Source folders whose files are measured, relative to the workspace root.
const SOURCE_DIRS: &[&str] = &[
    "damon-common/src",
    "damon-ebpf/src",
    "damon-user/src",
    "dtcap/src",
    "lab/src",
    "xtask/src",
];
/// Test folders: their functions are measured, their files' length is not.
const TEST_DIRS: &[&str] = &["damon-common/tests", "damon-user/tests", "lab/tests"];

/// What `shape` found.
#[derive(Debug, Default)]
pub struct Shape {
    /// Top-level module → the top-level modules it imports, with one file that does.
    pub edges: BTreeMap<String, BTreeMap<String, String>>,
    pub cycles: Vec<Vec<String>>,
    /// `from -> to (file)` arrows that point up a layer.
    pub upward: Vec<String>,
    /// Domain files that name clap.
    pub clap_in_domain: Vec<String>,
    /// (file, lines) over the limit without a reason.
    pub long_files: Vec<(String, usize)>,
    /// (file:line function, lines) over the limit.
    pub long_fns: Vec<(String, usize)>,
    /// The same for functions under `tests/` folders: listed, not a failure (a guest test is
    /// one boot's script and the checks on its output, read top to bottom).
    pub long_test_fns: Vec<(String, usize)>,
}

impl Shape {
    pub fn ok(&self) -> bool {
        self.cycles.is_empty()
            && self.upward.is_empty()
            && self.clap_in_domain.is_empty()
            && self.long_files.is_empty()
            && self.long_fns.is_empty()
    }

    pub fn render(&self) -> String {
        let mut out = String::from("damon-user/src, top-level imports (test code left out):\n");
        for (from, to) in &self.edges {
            let names: Vec<&str> = to.keys().map(String::as_str).collect();
            let _ = writeln!(out, "  {from:<12} -> {}", names.join(", "));
        }
        let mut section = |title: &str, rows: Vec<String>| {
            let _ = writeln!(
                out,
                "{title}: {}",
                if rows.is_empty() { "none" } else { "" }
            );
            for r in rows {
                let _ = writeln!(out, "  {r}");
            }
        };
        section(
            "import cycles",
            self.cycles.iter().map(|c| c.join(" -> ")).collect(),
        );
        section("arrows up a layer", self.upward.clone());
        section("domain files naming clap", self.clap_in_domain.clone());
        section(
            &format!("files over {MAX_FILE_LINES} lines without a stated reason"),
            self.long_files
                .iter()
                .map(|(f, n)| format!("{f}: {n}"))
                .collect(),
        );
        let rows = |v: &[(String, usize)]| v.iter().map(|(f, n)| format!("{f}: {n}")).collect();
        section(
            &format!("functions over {MAX_FN_LINES} lines"),
            rows(&self.long_fns),
        );
        section(
            &format!("test functions under tests/ over {MAX_FN_LINES} lines (listed only)"),
            rows(&self.long_test_fns),
        );
        out
    }
}

/// Measures the workspace at `root`.
pub fn check(root: &Path) -> Result<Shape> {
    let mut shape = Shape::default();
    let user = root.join("damon-user/src");
    let tops = top_modules(&user)?;
    for file in rust_files(&user)? {
        let rel = file.strip_prefix(&user).expect("below src").to_path_buf();
        if is_test_file(&rel) {
            continue;
        }
        let top = top_of(&rel);
        let text = std::fs::read_to_string(&file)?;
        let code = without_tests(&text);
        for to in crate_imports(code) {
            if to != top && tops.contains(&to) {
                shape
                    .edges
                    .entry(top.clone())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| rel.display().to_string());
            }
        }
        if layer(&top) == Layer::Domain && code.contains("clap") {
            shape
                .clap_in_domain
                .push(format!("damon-user/src/{}", rel.display()));
        }
    }
    shape.cycles = cycles(&shape.edges);
    // The domain imports neither a command nor the CLI layer; commands may take their
    // arguments from `cli` and use each other (without a cycle, checked above).
    for (from, tos) in &shape.edges {
        for (to, file) in tos {
            if layer(from) == Layer::Domain && layer(to) != Layer::Domain {
                shape.upward.push(format!("{from} -> {to} ({file})"));
            }
        }
    }
    measure_sizes(root, &mut shape)?;
    Ok(shape)
}

/// Layers from the top: the CLI layer, commands, the domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    Cli,
    Command,
    Domain,
}

fn layer(module: &str) -> Layer {
    if CLI_LAYER.contains(&module) {
        Layer::Cli
    } else if COMMANDS.contains(&module) {
        Layer::Command
    } else {
        Layer::Domain
    }
}

fn measure_sizes(root: &Path, shape: &mut Shape) -> Result<()> {
    for (dirs, files_count) in [(SOURCE_DIRS, true), (TEST_DIRS, false)] {
        for dir in dirs {
            let dir = root.join(dir);
            if !dir.is_dir() {
                continue;
            }
            for file in rust_files(&dir)? {
                let rel = file
                    .strip_prefix(root)
                    .expect("below the root")
                    .display()
                    .to_string();
                let text = std::fs::read_to_string(&file)?;
                let lines = text.lines().count();
                let test_file = is_test_file(Path::new(&rel));
                if files_count
                    && !test_file
                    && lines > MAX_FILE_LINES
                    && !LONG_FILES.iter().any(|(f, _)| *f == rel)
                {
                    shape.long_files.push((rel.clone(), lines));
                }
                for (line, name, n) in functions(&text) {
                    if n > MAX_FN_LINES {
                        let list = if files_count {
                            &mut shape.long_fns
                        } else {
                            &mut shape.long_test_fns
                        };
                        list.push((format!("{rel}:{line} {name}"), n));
                    }
                }
            }
        }
    }
    Ok(())
}

fn top_modules(src: &Path) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    for e in std::fs::read_dir(src).with_context(|| format!("reading {}", src.display()))? {
        let path = e?.path();
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        if path.is_dir() || path.extension().is_some_and(|x| x == "rs") {
            out.insert(name);
        }
    }
    Ok(out)
}

fn top_of(rel: &Path) -> String {
    let first = rel.components().next().expect("a path below src");
    Path::new(first.as_os_str())
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn rust_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let path = e?.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Unit-test files beside the code (`tests.rs`, `proptests.rs`, `*_tests.rs`, test support,
/// anything in a `tests/` folder).
fn is_test_file(rel: &Path) -> bool {
    let name = rel
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let in_tests = rel
        .parent()
        .is_some_and(|d| d.components().any(|c| c.as_os_str() == "tests"));
    in_tests
        || name == "tests.rs"
        || name == "proptests.rs"
        || name == "test_support.rs"
        || name.ends_with("_tests.rs")
}

/// The file up to its `#[cfg(test)]` test module, if it has one.
fn without_tests(text: &str) -> &str {
    let mut at = 0;
    while let Some(i) = text[at..].find("#[cfg(test)]") {
        let after = text[at + i + "#[cfg(test)]".len()..].trim_start();
        if after.starts_with("mod ") {
            return &text[..at + i];
        }
        at += i + 1;
    }
    text
}

/// The top-level modules a text names through `crate::` (`crate::a::b`, `crate::{a::x, b}`).
fn crate_imports(code: &str) -> BTreeSet<String> {
    let code = strip(code);
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level entries of the group: split at commas outside nested braces.
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
        } else {
            out.extend(head(rest));
        }
    }
    out
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
fn strip(code: &str) -> String {
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

/// Strongly connected components with more than one module (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        for w in t.edges.get(v).into_iter().flat_map(|m| m.keys()) {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.stack.contains(&w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                comp.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_are_read_from_paths_and_groups() {
        let code = "use crate::{a::x, b::{c, d::e}, f};\nfn g() { crate::h::i(); }\n\
                    // crate::comment\nlet s = \"crate::string\";";
        let got: Vec<String> = crate_imports(code).into_iter().collect();
        assert_eq!(got, ["a", "b", "f", "h"]);
    }

    #[test]
    fn functions_are_measured_from_fn_to_closing_brace() {
        let text = "pub fn a() {\n    let s = \"}\";\n    let c = '}';\n}\n\
                    fn decl();\n\
                    pub(crate) fn b<T>(x: T)\nwhere T: Copy,\n{\n    /* } */\n    r#\"}\"#;\n}\n";
        let f = functions(text);
        assert_eq!(
            f,
            [(1, "a".to_owned(), 4), (6, "b".to_owned(), 6)],
            "{text}"
        );
    }

    #[test]
    fn a_cycle_is_found_and_a_chain_is_not() {
        fn add(edges: &mut BTreeMap<String, BTreeMap<String, String>>, a: &str, b: &str) {
            edges
                .entry(a.to_owned())
                .or_default()
                .insert(b.to_owned(), String::new());
        }
        let mut edges = BTreeMap::new();
        add(&mut edges, "a", "b");
        add(&mut edges, "b", "c");
        assert!(cycles(&edges).is_empty());
        add(&mut edges, "c", "a");
        add(&mut edges, "c", "d");
        assert_eq!(cycles(&edges), [["a", "b", "c"]]);
    }

    #[test]
    fn test_modules_are_cut() {
        let text = "use crate::a;\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\n";
        assert_eq!(
            crate_imports(without_tests(text))
                .into_iter()
                .collect::<Vec<_>>(),
            ["a"]
        );
    }
}
