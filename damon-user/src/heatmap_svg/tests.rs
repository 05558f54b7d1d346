//! The pictures checked by parsing them: a tiny reader of the tags [`super::draw`] writes.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use super::*;
use crate::{
    analysis::test_support::opts,
    capture::format::read_file,
    compare::{Inputs, plot},
    stats::intervals::per_interval,
};

/// One tag: its name (`/g` for a closing one) and attributes.
#[derive(Debug)]
struct Tag {
    name: String,
    attrs: BTreeMap<String, String>,
}

impl Tag {
    fn get(&self, k: &str) -> &str {
        self.attrs.get(k).map_or("", String::as_str)
    }
    fn num(&self, k: &str) -> u64 {
        self.get(k)
            .parse()
            .unwrap_or_else(|_| panic!("{k} of {self:?}"))
    }
}

fn tags(svg: &str) -> Vec<Tag> {
    let mut out = Vec::new();
    for piece in svg.split('<').skip(1) {
        let inner = piece.split('>').next().expect("a tag ends");
        let inner = inner.trim_end_matches('/');
        let (name, mut rest) = inner.split_once(' ').unwrap_or((inner, ""));
        let mut attrs = BTreeMap::new();
        while let Some((k, v)) = rest.split_once("=\"") {
            let (value, after) = v.split_once('"').expect("a quoted value ends");
            attrs.insert(k.trim().to_owned(), value.to_owned());
            rest = after;
        }
        out.push(Tag {
            name: name.to_owned(),
            attrs,
        });
    }
    out
}

/// Every `<g class="{class}">` with the tags inside it.
fn groups<'t>(tags: &'t [Tag], class: &str) -> Vec<(&'t Tag, Vec<&'t Tag>)> {
    let mut out = Vec::new();
    for (i, t) in tags.iter().enumerate() {
        if t.name != "g" || t.get("class") != class {
            continue;
        }
        let (mut depth, mut inside) = (1, Vec::new());
        for u in &tags[i + 1..] {
            depth += i32::from(u.name == "g") - i32::from(u.name == "/g");
            if depth == 0 {
                break;
            }
            inside.push(u);
        }
        out.push((t, inside));
    }
    out
}

fn panel<'t>(tags: &'t [Tag], class: &str, function: &str, panel: &str) -> (&'t Tag, Vec<&'t Tag>) {
    let mut found = groups(tags, class)
        .into_iter()
        .filter(|(g, _)| g.get("data-function") == function && g.get("data-panel") == panel);
    let one = found
        .next()
        .unwrap_or_else(|| panic!("no {class} {function}/{panel}"));
    assert!(found.next().is_none(), "two {class} {function}/{panel}");
    one
}

/// The calls a heatmap's cells count.
fn cells_sum(cells: &[&Tag]) -> u64 {
    cells
        .iter()
        .filter(|t| t.name == "rect")
        .map(|t| t.num("data-count"))
        .sum()
}

fn data(f: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(f)
}

/// `report --heatmap` of a fixture: the SVG, and the capture read whole to check it against.
fn report_svg(fixture: &str) -> (String, Capture) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("h.svg");
    write_report(&data(fixture), &out, false, &opts()).expect("heatmap written");
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(&out).expect("svg").permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // Refused without --force, written with it.
    assert!(write_report(&data(fixture), &out, false, &opts()).is_err());
    write_report(&data(fixture), &out, true, &opts()).expect("overwritten");
    let svg = std::fs::read_to_string(&out).expect("svg");
    (svg, read_file(&data(fixture)).expect("fixture"))
}

fn traced(c: &Capture) -> Vec<(String, u32)> {
    let f = c.meta.functions.iter().filter(|f| f.attach.is_traced());
    f.map(|f| (f.name.clone(), f.id)).collect()
}

#[test]
fn report_heatmap_counts_every_call_and_every_interval_boundary() {
    let (svg, c) = report_svg("intervals-7.2.dtcap");
    let tags = tags(&svg);
    assert_eq!(c.marks.len(), 130);
    let functions = traced(&c);
    assert_eq!(
        groups(&tags, "heatmap").len(),
        functions.len(),
        "one heatmap a function"
    );
    assert!(
        groups(&tags, "heatmap")
            .iter()
            .all(|g| g.0.get("data-panel") == "all")
    );
    let bounds = Boundaries::from_marks(&c.marks);
    for (name, id) in &functions {
        let calls: Vec<CallRecord> = c
            .records
            .iter()
            .filter(|r| r.func == *id)
            .copied()
            .collect();
        let (g, cells) = panel(&tags, "heatmap", name, "all");
        assert!(!calls.is_empty(), "{name}");
        assert_eq!(cells_sum(&cells), calls.len() as u64, "{name}: cells");
        assert_eq!(g.num("data-calls"), calls.len() as u64, "{name}");
        // Every latency lies inside the rows.
        let rows: Vec<u64> = g
            .get("data-rows")
            .split(' ')
            .map(|e| e.parse().unwrap())
            .collect();
        assert!(
            calls
                .iter()
                .all(|r| rows[0] <= r.duration_ns && r.duration_ns < rows[rows.len() - 1])
        );
        let (m, ticks) = panel(&tags, "marks", name, "all");
        let ticked: u64 = ticks
            .iter()
            .filter(|t| t.name == "line")
            .map(|t| t.num("data-marks"))
            .sum();
        assert_eq!((m.num("data-marks"), ticked), (130, 130), "{name}: marks");
        let (_, lines) = panel(&tags, "percentiles", name, "all");
        let classes: Vec<&str> = lines
            .iter()
            .filter(|t| t.name == "path")
            .map(|t| t.get("class"))
            .collect();
        assert_eq!(classes, ["p50", "p99"], "{name}");
        // The per-interval series: stats::intervals' attribution, kdamond by kdamond.
        let series: Vec<_> = groups(&tags, "per-interval")
            .into_iter()
            .filter(|g| g.0.get("data-function") == name)
            .collect();
        let want = per_interval(&calls, &bounds).expect("boundaries");
        if name == "lock_timer_base" {
            assert!(series.is_empty(), "not a DAMON function");
            continue;
        }
        let kdamonds: Vec<u32> = series
            .iter()
            .map(|g| g.0.num("data-kdamond") as u32)
            .collect();
        assert_eq!(kdamonds, want.kdamonds, "{name}");
        let sum = |k: &str| series.iter().map(|g| g.0.num(k)).sum::<u64>();
        assert_eq!(sum("data-intervals"), want.intervals, "{name}");
        assert_eq!(sum("data-total-ns"), want.total_ns_in_intervals, "{name}");
        assert!(want.total_ns_in_intervals > 0, "{name}");
    }
    assert!(groups(&tags, "legend").len() == functions.len());
    assert!(
        !svg.contains("data-panel=\"clean\""),
        "disturbance was not measured"
    );
}

#[test]
fn clean_panel_when_disturbance_was_measured() {
    let (svg, c) = report_svg("seed-000-before-instructions-7.2.dtcap");
    assert!(DisturbanceStatus::measured(&c.meta));
    let tags = tags(&svg);
    for (name, id) in traced(&c) {
        let calls = c.records.iter().filter(|r| r.func == id);
        let clean = calls.clone().filter(|r| r.is_clean()).count() as u64;
        let (all, all_cells) = panel(&tags, "heatmap", &name, "all");
        let (cl, clean_cells) = panel(&tags, "heatmap", &name, "clean");
        assert_eq!(cells_sum(&all_cells), calls.count() as u64);
        assert_eq!(cells_sum(&clean_cells), clean);
        // One grid and one colour scale for both panels of a function.
        assert_eq!(all.get("data-rows"), cl.get("data-rows"));
        assert_eq!(all.get("data-scale-max"), cl.get("data-scale-max"));
        let marks = panel(&tags, "marks", &name, "clean").0.num("data-marks");
        assert_eq!(marks, c.marks.len() as u64);
    }
    assert!(svg.contains("insn"), "the instruction clock's unit");
}

#[test]
fn a_kernel_mode_capture_says_why_it_has_no_heatmap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("k.svg");
    let err =
        write_report(&data("kernel-mode-7.2.dtcap"), &out, false, &opts()).expect_err("refused");
    assert!(format!("{err:#}").contains("--mode kernel"), "{err:#}");
    assert!(err.downcast_ref::<crate::error::UsageError>().is_some());
    assert!(!out.exists());
}

#[test]
fn markdown_links_the_picture() {
    let link = crate::render::markdown::heatmap_link(Path::new("out/run heat.svg"));
    assert!(
        link.contains("![") && link.ends_with("](<out/run heat.svg>)\n"),
        "{link}"
    );
    let plain = crate::render::markdown::heatmap_link(Path::new("h.svg"));
    assert!(plain.ends_with("](h.svg)\n"), "{plain}");
}

#[test]
fn compare_draws_both_sides_on_one_colour_scale() {
    let read = |f: &str| read_file(&data(f)).expect("fixture");
    let before = [read("aa-7.2/before-1.dtcap"), read("aa-7.2/before-2.dtcap")];
    let after = [read("aa-7.2/after-1.dtcap")];
    let inputs = Inputs {
        before: before.iter().map(|c| ("b", c)).collect(),
        after: after.iter().map(|c| ("a", c)).collect(),
    };
    let cmp = crate::compare::build(&inputs, &opts()).expect("comparison");
    let svg = plot::render_svg(&cmp, &inputs, &opts()).expect("svg");
    let tags = tags(&svg);
    assert_eq!(groups(&tags, "heatmap").len(), 2 * cmp.functions.len());
    for f in &cmp.functions {
        let (b, b_cells) = panel(&tags, "heatmap", &f.name, "before");
        let (a, a_cells) = panel(&tags, "heatmap", &f.name, "after");
        let id = |c: &Capture| {
            traced(c)
                .into_iter()
                .find(|t| t.0 == f.name)
                .expect("traced")
                .1
        };
        let count = |cs: &[Capture]| -> u64 {
            cs.iter()
                .map(|c| c.records.iter().filter(|r| r.func == id(c)).count() as u64)
                .sum()
        };
        assert_eq!(
            cells_sum(&b_cells),
            count(&before),
            "{}: before, runs summed",
            f.name
        );
        assert_eq!(cells_sum(&a_cells), count(&after), "{}", f.name);
        for k in ["data-scale-max", "data-rows", "data-width-ns"] {
            assert_eq!(b.get(k), a.get(k), "{}: {k}", f.name);
        }
        // The scale's top is the fullest cell of either side, and a count has one colour.
        let cells: Vec<&&Tag> = b_cells
            .iter()
            .chain(&a_cells)
            .filter(|t| t.name == "rect")
            .collect();
        let top = cells
            .iter()
            .map(|t| t.num("data-count"))
            .max()
            .expect("cells");
        assert_eq!(b.num("data-scale-max"), top, "{}", f.name);
        let mut colour: BTreeMap<u64, &str> = BTreeMap::new();
        for t in &cells {
            let fill = *colour.entry(t.num("data-count")).or_insert(t.get("fill"));
            assert_eq!(
                fill,
                t.get("fill"),
                "{}: count {}",
                f.name,
                t.num("data-count")
            );
        }
        let marks = |side| panel(&tags, "marks", &f.name, side).0.num("data-marks");
        let n = |cs: &[Capture]| cs.iter().map(|c| c.marks.len() as u64).sum::<u64>();
        assert_eq!((marks("before"), marks("after")), (n(&before), n(&after)));
    }
    let legends = groups(&tags, "legend");
    assert_eq!(legends.len(), cmp.functions.len(), "one legend a pair");
}

#[test]
fn on_cpu_time_draws_the_on_cpu_durations_and_leaves_unknown_calls_out() {
    let c = crate::analysis::test_support::breakdown_capture();
    let o = crate::analysis::ReportOptions {
        time: crate::analysis::TimeBasis::OnCpu,
        ..opts()
    };
    let maps = collect_captures([&c], &o).expect("maps");
    let all = &maps.functions[0].all;
    // Nine calls with a breakdown, every one 100 ns on the CPU (wall: up to 1000 ns).
    assert_eq!(all.calls(), 9);
    let max = all
        .columns()
        .filter_map(|(_, col)| col.percentiles(&[100.0]))
        .map(|p| p[0])
        .max();
    assert_eq!(max, Some(100));
    let wall = collect_captures([&c], &opts()).expect("maps");
    assert_eq!(wall.functions[0].all.calls(), 10);
}
