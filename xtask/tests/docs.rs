//! The README and the guide (`docs/*.md`) link only to files that exist and to headings that
//! exist: every relative link's file, and every `#anchor` a GitHub-style heading slug of its
//! target. A host test: nothing is built, only the text is read.
//!
//! Links in fenced code blocks and in inline code are not links and are skipped; `http:`,
//! `https:` and `mailto:` links are not followed. (The command lines in fenced blocks are
//! checked against the argument parser by damon-user's `cli::docs_tests`.)
use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

/// The workspace's Markdown pages a reader browses: the README and the guide.
fn pages(root: &Path) -> Vec<PathBuf> {
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The lines of `text` outside fenced code blocks, numbered from 1.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| t.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(f), Some(m)) if f == m => fence = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation other than `-` and `_` dropped,
/// spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every anchor a page's headings give, with GitHub's `-1`, `-2` suffixes for repeats.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let mut s = base.clone();
        let mut n = 0;
        while out.contains(&s) {
            n += 1;
            s = format!("{base}-{n}");
        }
        out.insert(s);
    }
    out
}

/// `line` without its inline code spans (a link in code is text, not a link).
fn without_code(line: &str) -> String {
    let mut out = String::new();
    for (i, part) in line.split('`').enumerate() {
        if i % 2 == 0 {
            out.push_str(part);
        }
    }
    out
}

/// The targets of the `[text](target)` and `![alt](target)` links on one line.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code(line);
    let mut out = Vec::new();
    let mut rest = line.as_str();
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else { break };
        // `[text](target "title")`: the target is the first word.
        let target = after[..end].split_whitespace().next().unwrap_or("");
        out.push(target.trim_matches(['<', '>']).to_string());
        rest = &after[end..];
    }
    out
}

/// Every broken link of one page, as `file:line: what`.
fn broken_links(page: &Path, text: &str, display: &str) -> Vec<String> {
    let dir = page.parent().expect("a page has a folder");
    let mut broken = Vec::new();
    for (n, line) in prose_lines(text) {
        for target in link_targets(line) {
            if target.is_empty()
                || ["http:", "https:", "mailto:"]
                    .iter()
                    .any(|s| target.starts_with(s))
            {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let target_text = if path.is_empty() {
                text.to_string()
            } else {
                let file = dir.join(path);
                if !file.exists() {
                    broken.push(format!("{display}:{n}: ({target}): no file {path}"));
                    continue;
                }
                if anchor.is_empty() || file.extension().is_none_or(|e| e != "md") {
                    continue;
                }
                fs::read_to_string(&file).expect("a linked page is readable")
            };
            if !anchor.is_empty() && !anchors(&target_text).contains(anchor) {
                broken.push(format!(
                    "{display}:{n}: ({target}): no heading #{anchor} in {}",
                    if path.is_empty() { display } else { path }
                ));
            }
        }
    }
    broken
}

#[test]
fn readme_and_guide_links_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let mut broken = Vec::new();
    for page in pages(root) {
        let text = fs::read_to_string(&page).expect("page");
        let display = page
            .strip_prefix(root)
            .expect("in the workspace")
            .display()
            .to_string();
        broken.extend(broken_links(&page, &text, &display));
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn slugs_follow_github() {
    assert_eq!(
        slug(" Kernel mode (`--mode kernel`)"),
        "kernel-mode---mode-kernel"
    );
    assert_eq!(
        slug(" Before and after: runs, not calls"),
        "before-and-after-runs-not-calls"
    );
    assert_eq!(slug(" The demo's report"), "the-demos-report");
    assert_eq!(slug(" Limits (today)"), "limits-today");
    let a = anchors("# A\n\n```\n# not a heading\n```\n## A\n#no\n");
    assert_eq!(a, BTreeSet::from(["a".to_string(), "a-1".to_string()]));
}

#[test]
fn finds_broken_files_and_anchors_but_not_code() {
    let dir = tempfile_dir();
    fs::write(dir.join("other.md"), "# Other\n\n## Some part\n").expect("write");
    let page = dir.join("page.md");
    let text = "# Page\n\
        [ok](other.md#some-part) [self](#page) [web](https://example.com/#x)\n\
        [gone](missing.md)\n\
        [bad anchor](other.md#no-such-part) `[code](missing.md)`\n\
        ```\n[fenced](missing.md)\n```\n\
        ![image](missing.svg)\n";
    let broken = broken_links(&page, text, "page.md");
    assert_eq!(broken.len(), 3, "{broken:#?}");
    assert!(
        broken[0].starts_with("page.md:3: (missing.md)"),
        "{}",
        broken[0]
    );
    assert!(
        broken[1].starts_with("page.md:4: (other.md#no-such-part): no heading"),
        "{}",
        broken[1]
    );
    assert!(
        broken[2].starts_with("page.md:8: (missing.svg)"),
        "{}",
        broken[2]
    );
}

/// A fresh folder under the target directory (no tempfile dependency in xtask).
fn tempfile_dir() -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("docs-links-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("temp dir");
    dir
}
