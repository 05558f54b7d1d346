//! The one-line verdict of a comparison: what may honestly be said about one function.
use super::{ALPHA, FEW, PercentileDelta};
use crate::stats::ranktest::{self, MannWhitney};

/// Formats ns with a sign, for deltas.
pub fn signed(v: f64) -> String {
    format!("{}{:.0}", if v > 0.0 { "+" } else { "" }, v)
}

pub fn p_text(p: f64) -> String {
    if p < 1e-4 {
        format!("p={p:.1e}")
    } else {
        format!("p={p:.4}")
    }
}

/// The one-line verdict, and whether the difference is significant.
pub fn verdict(
    before: &[u64],
    after: &[u64],
    percentiles: &[PercentileDelta],
    mw: Option<MannWhitney>,
) -> (bool, String) {
    let Some(mw) = mw else {
        return (
            false,
            format!(
                "cannot compare: {} calls before, {} after",
                before.len(),
                after.len()
            ),
        );
    };
    let few = if before.len() < FEW || after.len() < FEW {
        format!(
            " (only {} and {} calls: a weak test)",
            before.len(),
            after.len()
        )
    } else {
        String::new()
    };
    let median = percentiles.iter().find(|d| d.label == "p50");
    let median_text = median.map_or_else(String::new, |d| match d.interval {
        Some(i) => format!(
            "median {} ns [95% CI {}, {}]",
            signed(i.estimate),
            signed(i.lo),
            signed(i.hi)
        ),
        None => format!(
            "median {} ns",
            signed(d.after_ns as f64 - d.before_ns as f64)
        ),
    });
    let effect = format!(
        "Cliff's δ={:+.2} ({})",
        mw.cliffs_delta,
        ranktest::magnitude(mw.cliffs_delta)
    );
    if mw.p_value >= ALPHA {
        return (
            false,
            format!(
                "no significant difference: {median_text}, {}, {effect}{few}",
                p_text(mw.p_value)
            ),
        );
    }
    let faster = mw.cliffs_delta < 0.0;
    let word = if faster { "faster" } else { "slower" };
    let resolved = median
        .and_then(|d| d.interval)
        .filter(|i| i.excludes_zero() && (i.estimate < 0.0) == faster);
    let text = match resolved {
        Some(i) => format!(
            "after is {word} by {:.0} ns at the median [95% CI {:.0}, {:.0}], {}, {effect}{few}",
            i.estimate.abs(),
            i.lo.abs().min(i.hi.abs()),
            i.lo.abs().max(i.hi.abs()),
            p_text(mw.p_value)
        ),
        None => format!(
            "after tends to be {word} ({effect}, {}), but the median shift is not resolved: \
             {median_text}{few}",
            p_text(mw.p_value)
        ),
    };
    (true, text)
}
