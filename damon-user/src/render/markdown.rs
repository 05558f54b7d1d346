//! Markdown pieces.

/// `report --format markdown --heatmap F.svg`: the picture, linked as the path was given (so
/// it shows where the Markdown sits beside it; `<…>` when the path has spaces or brackets).
pub fn heatmap_link(path: &std::path::Path) -> String {
    let p = path.display().to_string();
    let target = if p.contains(|c: char| c.is_whitespace() || "()<>".contains(c)) {
        format!("<{}>", p.replace('<', "%3C").replace('>', "%3E"))
    } else {
        p
    };
    format!(
        "\n![Latency over time per function: heatmaps, p50/p99, DAMON interval ends]({target})\n"
    )
}
