//! `cargo xtask shape`: the code's shape, checked from its text.
//!
//! Hard checks (exit 1):
//! - **Layers of `damon-user/src`:** every top-level module is listed in
//!   [`layers::USER_LAYERS`], and every import of one top-level module by another (`use
//!   crate::x…`, `crate::x::…`, `super::…` paths that reach the crate root; test code left
//!   out) points to the importer's own layer or a lower one.
//! - **No import cycle** among those modules.
//! - **No clap outside the command line:** only the modules of [`layers::CLAP_ALLOWED`] name
//!   clap.
//! - **Layers of the workspace's crates:** every crate is listed in [`layers::CRATE_LAYERS`]
//!   and depends on workspace crates of its own layer or lower ones only.
//!
//! Warnings (printed, not failed): source files over [`MAX_FILE_LINES`] lines (unit-test files
//! beside the code are not counted), functions over [`MAX_FN_LINES`] lines (those under
//! `tests/` folders listed apart).
//!
//! It reads text, not Rust's syntax tree: strings, chars and comments are skipped when braces
//! are counted, which is enough for this code base (a test in this module says what it sees).
use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result};

mod crates;
mod graph;
pub mod layers;
mod text;

pub use text::functions;

use self::layers::{CLAP_ALLOWED, USER_LAYERS, layer_of};

pub const MAX_FILE_LINES: usize = 600;
pub const MAX_FN_LINES: usize = 100;

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
const TEST_DIRS: &[&str] = &[
    "damon-common/tests",
    "damon-user/tests",
    "lab/tests",
    "xtask/tests",
];

/// What `shape` found.
#[derive(Debug, Default)]
pub struct Shape {
    /// Top-level module → the top-level modules it imports, with one file that does.
    pub edges: BTreeMap<String, BTreeMap<String, String>>,
    /// Top-level modules missing from [`USER_LAYERS`].
    pub unknown: Vec<String>,
    pub cycles: Vec<Vec<String>>,
    /// `from (layer) -> to (layer): file` arrows that point up a layer.
    pub upward: Vec<String>,
    /// Files outside [`CLAP_ALLOWED`] that name clap.
    pub clap: Vec<String>,
    /// Crate dependencies that point up a layer, and crates missing from the table.
    pub crates: Vec<String>,
    /// (file, lines) over [`MAX_FILE_LINES`]: a warning.
    pub long_files: Vec<(String, usize)>,
    /// (file:line function, lines) over [`MAX_FN_LINES`] in `src/` folders: a warning.
    pub long_fns: Vec<(String, usize)>,
    /// The same for functions under `tests/` folders (a guest test is one boot's script and
    /// the checks on its output, read top to bottom).
    pub long_test_fns: Vec<(String, usize)>,
}

impl Shape {
    /// No hard check broken (size warnings do not count).
    pub fn ok(&self) -> bool {
        self.unknown.is_empty()
            && self.cycles.is_empty()
            && self.upward.is_empty()
            && self.clap.is_empty()
            && self.crates.is_empty()
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
            "modules missing from the layer table (add them to xtask/src/shape/layers.rs)",
            self.unknown.clone(),
        );
        section(
            "import cycles",
            self.cycles.iter().map(|c| c.join(" -> ")).collect(),
        );
        section(
            "imports up a layer (see xtask/src/shape/layers.rs)",
            self.upward.clone(),
        );
        section(
            "files naming clap outside the command line",
            self.clap.clone(),
        );
        section("crate dependencies up a layer", self.crates.clone());
        let rows = |v: &[(String, usize)]| v.iter().map(|(f, n)| format!("{f}: {n}")).collect();
        section(
            &format!("warning: files over {MAX_FILE_LINES} lines"),
            rows(&self.long_files),
        );
        section(
            &format!("warning: functions over {MAX_FN_LINES} lines"),
            rows(&self.long_fns),
        );
        section(
            &format!("warning: test functions under tests/ over {MAX_FN_LINES} lines"),
            rows(&self.long_test_fns),
        );
        out
    }
}

/// Measures the workspace at `root`.
pub fn check(root: &Path) -> Result<Shape> {
    let mut shape = Shape::default();
    check_user(&root.join("damon-user/src"), &mut shape)?;
    shape.crates = crates::check(root)?;
    measure_sizes(root, &mut shape)?;
    Ok(shape)
}

/// The layers, cycles and clap rules over `damon-user/src`'s top-level modules.
fn check_user(user: &Path, shape: &mut Shape) -> Result<()> {
    let tops = top_modules(user)?;
    shape.unknown = tops
        .iter()
        .filter(|t| layer_of(USER_LAYERS, t).is_none())
        .cloned()
        .collect();
    // Each file's code without its tests, and the test-only module files it declares.
    let mut files = Vec::new();
    let mut test_only = BTreeSet::new();
    for file in rust_files(user)? {
        let rel = file.strip_prefix(user).expect("below src").to_path_buf();
        let text = std::fs::read_to_string(&file)?;
        let (code, test_mods) = text::without_tests(&text::strip(&text));
        let dir = module_dir(&rel);
        test_only.extend(test_mods.into_iter().map(|m| dir.join(m)));
        files.push((rel, code));
    }
    for (rel, code) in files {
        let stem = rel.with_extension("");
        if is_test_file(&rel) || test_only.iter().any(|t| stem.starts_with(t)) {
            continue;
        }
        let top = top_of(&rel);
        for to in text::imports(&code, module_path(&rel).len()) {
            if to != top && tops.contains(&to) {
                shape
                    .edges
                    .entry(top.clone())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| rel.display().to_string());
            }
        }
        if !CLAP_ALLOWED.iter().any(|(m, _)| *m == top) && text::names_clap(&code) {
            shape.clap.push(format!("damon-user/src/{}", rel.display()));
        }
    }
    shape.cycles = graph::cycles(&shape.edges);
    for (from, tos) in &shape.edges {
        for (to, file) in tos {
            if let (Some(a), Some(b)) = (layer_of(USER_LAYERS, from), layer_of(USER_LAYERS, to))
                && b > a
            {
                shape.upward.push(format!(
                    "{from} ({}) -> {to} ({}): {file}",
                    USER_LAYERS[a].name, USER_LAYERS[b].name
                ));
            }
        }
    }
    Ok(())
}

/// The module path of a file below `src`: `main.rs` → [], `a.rs` and `a/mod.rs` → [a],
/// `a/b.rs` → [a, b].
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "main") {
        parts.pop();
    }
    parts
}

/// The folder a file's child modules live in.
fn module_dir(rel: &Path) -> PathBuf {
    module_path(rel).iter().collect()
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
                if files_count && !test_file && lines > MAX_FILE_LINES {
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

#[cfg(test)]
mod tests;
