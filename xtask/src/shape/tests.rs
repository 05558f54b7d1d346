use super::{text::*, *};

#[test]
fn imports_are_read_from_paths_and_groups() {
    let code = "use crate::{a::x, b::{c, d::e}, f};\nfn g() { crate::h::i(); }\n\
                // crate::comment\nlet s = \"crate::string\";";
    let got: Vec<String> = imports(&strip(code), 1).into_iter().collect();
    assert_eq!(got, ["a", "b", "f", "h"]);
}

#[test]
fn super_paths_count_when_they_reach_the_crate_root() {
    let code =
        "use super::a::x;\nuse super::super::{b, c::d};\nfn f() { super::super::super::e(); }";
    // In `x/y.rs` (two deep) one `super` stays in `x`; two reach the root.
    let got: Vec<String> = imports(code, 2).into_iter().collect();
    assert_eq!(got, ["b", "c", "e"]);
    // In `x.rs` every `super` reaches the root.
    let got: Vec<String> = imports(code, 1).into_iter().collect();
    assert_eq!(got, ["a", "b", "c", "e"]);
}

#[test]
fn clap_is_seen_in_paths_not_in_words() {
    assert!(names_clap("use clap::Args;"));
    assert!(names_clap("#[derive(clap::ValueEnum)]"));
    assert!(names_clap("let s = clap_complete::Shell::Bash;"));
    assert!(!names_clap("fn clap_free() {}\nlet clapped = 1;"));
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
    assert!(graph::cycles(&edges).is_empty());
    add(&mut edges, "c", "a");
    add(&mut edges, "c", "d");
    assert_eq!(graph::cycles(&edges), [["a", "b", "c"]]);
}

#[test]
fn test_items_are_cut_wherever_they_are() {
    let text = "#[cfg(test)]\nmod tests;\nuse crate::a;\n#[cfg(test)]\nuse crate::c;\n\
                #[cfg(test)]\n#[allow(x)]\nmod inner {\n    use crate::b;\n}\nfn f() { crate::d::g(); }\n";
    let (code, test_mods) = without_tests(text);
    assert_eq!(test_mods, ["tests"]);
    assert_eq!(code.lines().count(), text.lines().count());
    assert_eq!(
        imports(&code, 1).into_iter().collect::<Vec<_>>(),
        ["a", "d"]
    );
}

/// A workspace with the given `damon-user/src` files.
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let path = dir.path().join("damon-user/src").join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    dir
}

fn shape_of(files: &[(&str, &str)]) -> Shape {
    check(tree(files).path()).expect("checks")
}

#[test]
fn a_tree_that_follows_the_layers_passes() {
    let s = shape_of(&[
        ("main.rs", "mod cli;\nmod report;\nuse clap::Parser;\n"),
        ("cli/mod.rs", "use clap::Args;\nuse crate::stats::X;\n"),
        ("report/mod.rs", "use crate::{cli::ReportArgs, stats};\n"),
        (
            "report/table.rs",
            "use super::super::capture::Y;\nuse super::Z;\n",
        ),
        (
            "stats/mod.rs",
            "use crate::capture::Y;\n#[cfg(test)]\nmod tests { use crate::report::R; }\n",
        ),
        ("capture.rs", ""),
        ("analysis/mod.rs", "use crate::stats::X;\n"),
    ]);
    assert!(s.ok(), "{}", s.render());
    assert_eq!(
        s.edges["report"].keys().collect::<Vec<_>>(),
        ["capture", "cli", "stats"]
    );
}

#[test]
fn an_import_up_a_layer_fails() {
    let s = shape_of(&[
        ("stats/mod.rs", "pub fn f() { crate::report::g(); }\n"),
        ("report.rs", ""),
    ]);
    assert!(!s.ok());
    assert_eq!(
        s.upward,
        ["stats (numbers) -> report (commands): stats/mod.rs"]
    );
    assert!(s.cycles.is_empty());
}

#[test]
fn a_cycle_in_one_layer_fails() {
    let s = shape_of(&[
        ("stats.rs", "use crate::trace::T;\n"),
        ("trace.rs", "use crate::stats::S;\n"),
    ]);
    assert!(!s.ok());
    assert!(s.upward.is_empty());
    assert_eq!(s.cycles, [["stats", "trace"]]);
}

#[test]
fn clap_in_the_domain_fails_and_in_cli_passes() {
    let s = shape_of(&[
        ("cli.rs", "use clap::Parser;\n"),
        (
            "session.rs",
            "#[derive(clap::ValueEnum)]\npub enum Mode { A }\n",
        ),
        (
            "report/mod.rs",
            "// clap is not named here\n#[cfg(test)]\nmod tests { use clap::Parser; }\n",
        ),
    ]);
    assert!(!s.ok());
    assert_eq!(s.clap, ["damon-user/src/session.rs"]);
}

#[test]
fn an_unknown_module_fails_and_says_where_to_list_it() {
    let s = shape_of(&[("gadgets.rs", ""), ("stats.rs", "")]);
    assert!(!s.ok());
    assert_eq!(s.unknown, ["gadgets"]);
    assert!(
        s.render().contains("xtask/src/shape/layers.rs"),
        "{}",
        s.render()
    );
}

#[test]
fn long_files_and_functions_only_warn() {
    let long_fn = format!(
        "fn long() {{\n{}}}\n",
        "    let _ = 1;\n".repeat(MAX_FN_LINES)
    );
    let filler = "// line\n".repeat(MAX_FILE_LINES);
    let s = shape_of(&[("stats.rs", &format!("{long_fn}{filler}"))]);
    assert!(s.ok(), "{}", s.render());
    assert_eq!(s.long_files.len(), 1);
    assert_eq!(s.long_fns.len(), 1);
    assert!(s.render().contains("warning: files over"));
}

#[test]
fn crates_follow_their_layers() {
    let dir = tree(&[("main.rs", "")]);
    let root = dir.path();
    let write = |path: &str, text: &str| {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write(
        "Cargo.toml",
        "[workspace]\nmembers = [\"damon-common\", \"damon-user\", \"odd\"]\n",
    );
    write(
        "damon-common/Cargo.toml",
        "[package]\nname = \"damon-common\"\n[dev-dependencies]\ndamon-user = { path = \"../damon-user\" }\n",
    );
    write(
        "damon-user/Cargo.toml",
        "[package]\nname = \"damon-user\"\n[dependencies]\ndamon-common.workspace = true\nclap = \"4\"\n",
    );
    write("odd/Cargo.toml", "[package]\nname = \"odd\"\n");
    let s = check(root).expect("checks");
    assert_eq!(
        s.crates,
        [
            "damon-common (shared) -> damon-user (product)",
            "crate odd is missing from CRATE_LAYERS (xtask/src/shape/layers.rs)"
        ]
    );
    assert!(!s.ok());
}

#[test]
fn every_table_entry_is_listed_once() {
    for table in [layers::USER_LAYERS, layers::CRATE_LAYERS] {
        let mut all: Vec<&str> = table
            .iter()
            .flat_map(|l| l.members.iter().copied())
            .collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "a name is in two layers");
    }
    for (m, _) in layers::CLAP_ALLOWED {
        assert!(layer_of(USER_LAYERS, m).is_some(), "{m}");
    }
}
