//! The workspace's crates against [`CRATE_LAYERS`]: each listed, each depending on workspace
//! crates of its own layer or lower ones (normal, build and dev dependencies).
use std::path::Path;

use anyhow::{Context as _, Result};

use super::layers::{CRATE_LAYERS, layer_of};

/// What is wrong, one line each (nothing when the root has no `Cargo.toml`).
pub fn check(root: &Path) -> Result<Vec<String>> {
    let manifest = root.join("Cargo.toml");
    if !manifest.is_file() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(&manifest)?;
    let mut crates = Vec::new();
    for dir in members(&text) {
        let path = root.join(&dir).join("Cargo.toml");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        crates.push((package_name(&text).unwrap_or(dir), dependencies(&text)));
    }
    let names: Vec<String> = crates.iter().map(|(n, _)| n.clone()).collect();
    let mut out = Vec::new();
    for (name, deps) in &crates {
        let Some(from) = layer_of(CRATE_LAYERS, name) else {
            out.push(format!(
                "crate {name} is missing from CRATE_LAYERS (xtask/src/shape/layers.rs)"
            ));
            continue;
        };
        for dep in deps.iter().filter(|d| names.contains(d)) {
            if let Some(to) = layer_of(CRATE_LAYERS, dep)
                && to > from
            {
                out.push(format!(
                    "{name} ({}) -> {dep} ({})",
                    CRATE_LAYERS[from].name, CRATE_LAYERS[to].name
                ));
            }
        }
    }
    Ok(out)
}

/// The `members = [...]` of a workspace manifest.
fn members(text: &str) -> Vec<String> {
    let Some(i) = text.find("members") else {
        return Vec::new();
    };
    let rest = &text[i..];
    let (Some(open), Some(close)) = (rest.find('['), rest.find(']')) else {
        return Vec::new();
    };
    rest[open + 1..close]
        .split(',')
        .map(|s| s.trim().trim_matches('"').to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// `name = "…"` of the `[package]` section.
fn package_name(text: &str) -> Option<String> {
    sections(text)
        .filter(|(s, _)| *s == "package")
        .find_map(|(_, line)| {
            let (k, v) = line.split_once('=')?;
            (k.trim() == "name").then(|| v.trim().trim_matches('"').to_owned())
        })
}

/// The names in every `[*dependencies]` section (`name = …`, `name.workspace = true`).
fn dependencies(text: &str) -> Vec<String> {
    let mut out: Vec<String> = sections(text)
        .filter(|(s, _)| s.ends_with("dependencies"))
        .filter_map(|(_, line)| {
            let key = line.split(['=', '.']).next()?.trim();
            (!key.is_empty()).then(|| key.to_owned())
        })
        .collect();
    // `[dependencies.name]` sections.
    out.extend(text.lines().filter_map(|l| {
        let l = l.trim().strip_prefix('[')?.strip_suffix(']')?;
        let (s, name) = l.rsplit_once('.')?;
        s.ends_with("dependencies").then(|| name.to_owned())
    }));
    out
}

/// (section, line) for each key line of a manifest, comments left out.
fn sections(text: &str) -> impl Iterator<Item = (&str, &str)> {
    let mut section = "";
    text.lines().filter_map(move |line| {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s;
            None
        } else {
            (!line.is_empty() && line.contains('=')).then_some((section, line))
        }
    })
}
