//! DAMON's own numbers as metrics: the time each DAMON function takes per aggregation
//! interval, the pages `damon_migrate_pages` moved, the scores `damon_hot_score` returned —
//! the same numbers `report` states (per-interval cost, `pages_migrated`, `hotness_score`).
use std::fmt::Write as _;

use damon_common::FunctionId;

use super::{DurationHistogram, Kind, Text, duration_samples, escape, histogram_samples};

/// Upper bounds (inclusive) of the hot-score buckets: DAMOS scores run 0 to 99
/// (`DAMOS_MAX_SCORE`), so ten of width 10, 0 (cold) alone, 99 the top.
pub const SCORE_BOUNDS: [i64; 11] = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 99];

/// A histogram of hotness scores over [`SCORE_BOUNDS`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScoreHistogram {
    /// Scores per bucket (not cumulative); the last is `+Inf` only.
    pub buckets: [u64; SCORE_BOUNDS.len() + 1],
    pub sum: i64,
    pub count: u64,
}

impl ScoreHistogram {
    pub fn observe(&mut self, score: i64) {
        let i = SCORE_BOUNDS.partition_point(|&b| b < score);
        self.buckets[i] += 1;
        self.sum = self.sum.saturating_add(score);
        self.count += 1;
    }
}

/// DAMON's cost and values; each family is rendered when its function was traced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DamonMetrics {
    /// Per DAMON function (by name): the time spent in it in each complete aggregation
    /// interval of the kdamonds that called it (summed call durations; an interval without a
    /// call counts as 0).
    pub interval_cost: Vec<(String, DurationHistogram)>,
    /// Pages `damon_migrate_pages` moved (the sum of its return values).
    pub migrated_pages: Option<u64>,
    /// Scores `damon_hot_score` returned.
    pub hot_scores: Option<ScoreHistogram>,
}

impl DamonMetrics {
    /// The value a traced call returned, for the functions whose value means something.
    pub fn observe_value(&mut self, func: u32, value: i64) {
        match FunctionId::try_from(func) {
            Ok(FunctionId::DamonHotScore) => {
                self.hot_scores.get_or_insert_default().observe(value);
            }
            Ok(FunctionId::DamonMigratePages) => {
                let pages = self.migrated_pages.get_or_insert(0);
                *pages = pages.saturating_add(u64::try_from(value).unwrap_or(0));
            }
            _ => {}
        }
    }

    /// The interval-cost histogram of `function`, added empty if new (a function traced
    /// through no complete interval still shows, with `_count` 0).
    pub fn interval_cost_of(&mut self, function: &str) -> &mut DurationHistogram {
        let i = match self.interval_cost.iter().position(|(f, _)| f == function) {
            Some(i) => i,
            None => {
                self.interval_cost
                    .push((function.to_owned(), DurationHistogram::default()));
                self.interval_cost.len() - 1
            }
        };
        &mut self.interval_cost[i].1
    }
}

const INTERVAL_COST_HELP: &str = "Time a DAMON function took per complete aggregation interval \
                                  of the kdamonds that called it (its calls' durations summed; \
                                  intervals without a call count 0); _count is the intervals.";

pub(super) fn render(t: &mut Text, d: &DamonMetrics) {
    if !d.interval_cost.is_empty() {
        let (name, unit, what) = t.timed("damon_trace_interval_cost");
        let help = format!("{INTERVAL_COST_HELP} In {what}.");
        t.family(&name, Kind::Histogram, Some(unit), &help);
        for (f, h) in &d.interval_cost {
            duration_samples(t, &name, &format!("function=\"{}\"", escape(f)), h);
        }
    }
    if let Some(pages) = d.migrated_pages {
        let name = "damon_trace_migrated_pages";
        t.family(
            name,
            Kind::Counter,
            None,
            "Pages damon_migrate_pages moved (the sum of its return values).",
        );
        let _ = writeln!(t.out, "{name}_total {pages}");
    }
    if let Some(h) = &d.hot_scores {
        let name = "damon_trace_hot_score";
        t.family(
            name,
            Kind::Histogram,
            None,
            "Hotness scores damon_hot_score returned (0 to 99, higher is hotter).",
        );
        let buckets: Vec<(String, u64)> = SCORE_BOUNDS
            .iter()
            .map(|b| format!("{b}.0"))
            .chain(std::iter::once("+Inf".to_owned()))
            .zip(h.buckets.iter().copied())
            .collect();
        histogram_samples(t, name, "", &buckets, &h.sum.to_string(), h.count);
    }
}
