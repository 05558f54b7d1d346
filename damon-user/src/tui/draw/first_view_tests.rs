//! The first view informs: every real capture in `tests/data`, replayed as `live --replay`
//! opens it at 120x40, shows each panel's calls inside its bins (the automatic binning), and
//! each panel's axis says which bins it drew and that they were chosen automatically.
use std::path::Path;

use crate::{
    capture::format::read_file,
    tui::test_support::{MIGRATE_HOT, fixture, render, replayed},
};

const SECOND: u64 = 1_000_000_000;

/// Every `.dtcap` in `damon-user/tests/data`, with its file name.
fn captures() -> Vec<(String, crate::capture::Capture)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/data")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "dtcap"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 5, "the fixtures: {paths:?}");
    paths
        .into_iter()
        .map(|p| {
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            let capture = read_file(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, capture)
        })
        .collect()
}

/// The count before `word` in `line` ("◂ 12 below", "123.4k above ▸"), 0 when absent.
fn count_before(line: &str, word: &str) -> u64 {
    let Some(at) = line.find(word) else {
        return 0;
    };
    let shown = line[..at].trim_end().rsplit(' ').next().unwrap_or("");
    let (digits, scale) = match shown.strip_suffix('k') {
        Some(d) => (d, 1e3),
        None => (shown, 1.0),
    };
    let v: f64 = digits
        .parse()
        .unwrap_or_else(|_| panic!("a count before {word:?} in {line:?}"));
    (v * scale) as u64
}

#[test]
fn no_panel_hides_its_calls_outside_the_bins_at_first_view() {
    for (name, capture) in captures() {
        for t in [2 * SECOND, 10 * SECOND, u64::MAX] {
            let app = replayed(capture.clone(), &name, t);
            let screen = render(&app, 120, 40);
            let lines: Vec<&str> = screen.lines().collect();
            for panel in app.panels().iter().filter(|p| p.traced()) {
                let calls = app.distribution(panel).count;
                if calls == 0 {
                    continue;
                }
                let header = format!("  {} ", panel.status.name);
                let at = lines
                    .iter()
                    .position(|l| {
                        l.starts_with(&header) || l.starts_with(&format!("▶ {}", &header[2..]))
                    })
                    .unwrap_or_else(|| panic!("{name}: no panel {header:?}\n{screen}"));
                let axis = lines[at..]
                    .iter()
                    .find(|l| l.contains(" bins"))
                    .unwrap_or_else(|| panic!("{name}: no axis for {header:?}\n{screen}"));
                assert!(axis.contains(" bins (auto)"), "{name}: {axis:?}\n{screen}");
                let outside = count_before(axis, "above ▸") + count_before(axis, "below");
                assert!(
                    outside * 10 <= calls,
                    "{name} at {t} ns, {}: {outside} of {calls} calls outside the bins\n{screen}",
                    panel.status.name
                );
            }
        }
    }
}

/// The screen README.md and docs/live.md show: the migrate-hot capture 12 s into its replay.
#[test]
fn first_view_120x40() {
    let app = replayed(fixture(), MIGRATE_HOT, 12 * SECOND);
    insta::assert_snapshot!("first_view_120x40", render(&app, 120, 40));
}
