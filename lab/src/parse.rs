//! Parsers of damon-trace's outputs shared by `seed` and the VM tests (`lab/tests/`): JSON
//! fields, the scenario's summary line, the per-call CSV export. Errors, not panics: the tests
//! unwrap them.
use std::collections::BTreeMap;

use anyhow::{Context as _, Result, ensure};
use serde_json::Value;

/// `v[key]` as a u64.
pub fn num(v: &Value, key: &str) -> Result<u64> {
    v[key]
        .as_u64()
        .with_context(|| format!("`{key}` is not a number in {v}"))
}

/// `v[key]` for each of `keys`, as u64s.
pub fn nums<const N: usize>(v: &Value, keys: [&str; N]) -> Result<[u64; N]> {
    let mut out = [0; N];
    for (o, k) in out.iter_mut().zip(keys) {
        *o = num(v, k)?;
    }
    Ok(out)
}

/// `v[key]` as an f64.
pub fn float(v: &Value, key: &str) -> Result<f64> {
    v[key]
        .as_f64()
        .with_context(|| format!("`{key}` is not a number in {v}"))
}

/// The entry of function `name` in a report's, compare's or export's `functions` array.
pub fn function<'a>(report: &'a Value, name: &str) -> Result<&'a Value> {
    report["functions"]
        .as_array()
        .context("no functions array")?
        .iter()
        .find(|f| f["name"] == name)
        .with_context(|| format!("{name} is not in the output"))
}

/// The element of the array `list` whose `key` is `value` (a doctor check by `name`, an
/// export's accounting by `function`, …).
pub fn entry<'a>(list: &'a Value, key: &str, value: &str) -> Result<&'a Value> {
    list.as_array()
        .with_context(|| format!("not an array: {list}"))?
        .iter()
        .find(|e| e[key] == value)
        .with_context(|| format!("no {key} = {value:?} in {list}"))
}

/// The value of `key` among the `key=value` fields of a line (a scenario's summary line).
pub fn summary_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .filter_map(|f| f.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// Pages on `node` in `N0:12,N1:3`.
pub fn node_pages(list: &str, node: u32) -> Option<u64> {
    list.split(',')
        .filter_map(|p| p.split_once(':'))
        .find(|(n, _)| *n == format!("N{node}"))
        .and_then(|(_, v)| v.parse().ok())
}

/// (calls, summed duration) per function and per (function, tid) in the per-call CSV export.
pub type CsvSums = (
    BTreeMap<String, (u64, u64)>,
    BTreeMap<(String, u64), (u64, u64)>,
);

pub fn csv_sums(csv: &str) -> Result<CsvSums> {
    let mut lines = csv.lines();
    // A capture that measured disturbance has its four columns after these, and the time
    // breakdown's two after them.
    let header = lines.next().unwrap_or_default();
    let columns = match header {
        "function,cpu,pid,tid,entry_ns,duration_ns,value" => 7,
        "function,cpu,pid,tid,entry_ns,duration_ns,value,slept,preempted,hardirqs,softirqs" => 11,
        "function,cpu,pid,tid,entry_ns,duration_ns,value,slept,preempted,hardirqs,softirqs,\
         off_cpu_ns,irq_ns" => 13,
        _ => anyhow::bail!("unexpected CSV header {header:?}"),
    };
    let (mut all, mut by_tid) = CsvSums::default();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        ensure!(f.len() == columns, "CSV line {line:?}");
        let tid: u64 = f[3].parse().context("tid")?;
        let ns: u64 = f[5].parse().context("duration")?;
        for e in [
            all.entry(f[0].to_owned()).or_default(),
            by_tid.entry((f[0].to_owned(), tid)).or_default(),
        ] {
            e.0 += 1;
            e.1 += ns;
        }
    }
    Ok((all, by_tid))
}

pub fn u64s(v: &Value) -> Result<Vec<u64>> {
    v.as_array()
        .with_context(|| format!("{v} is not an array"))?
        .iter()
        .map(|x| x.as_u64().with_context(|| format!("{x} is not a u64")))
        .collect()
}

/// Every `key=value` field of a line (a scenario's summary line).
pub fn summary_fields(line: &str) -> BTreeMap<String, String> {
    line.split_whitespace()
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_summary_fields_and_node_pages() {
        let line = "migrate-hot: ops=vaddr target_nid=0 workload_pages_before=N0:65596,N1:529";
        assert_eq!(summary_field(line, "target_nid"), Some("0"));
        assert_eq!(summary_fields(line)["ops"], "vaddr");
        let before = summary_field(line, "workload_pages_before").expect("field");
        assert_eq!(node_pages(before, 1), Some(529));
        assert_eq!(node_pages(before, 2), None);
    }

    #[test]
    fn csv_sums_per_function_and_thread() {
        let csv =
            "function,cpu,pid,tid,entry_ns,duration_ns,value\nf,0,1,2,10,5,0\nf,1,1,3,20,7,0\n";
        let (all, by_tid) = csv_sums(csv).expect("csv");
        assert_eq!(all["f"], (2, 12));
        assert_eq!(by_tid[&("f".to_owned(), 3)], (1, 7));
        assert!(csv_sums("nope\n").is_err());
        // With the disturbance columns: the same sums; a short line is refused.
        let csv = "function,cpu,pid,tid,entry_ns,duration_ns,value,slept,preempted,hardirqs,\
                   softirqs\nf,0,1,2,10,5,0,0,0,0,0\nf,1,1,3,20,7,0,1,0,,\n";
        assert_eq!(csv_sums(csv).expect("csv").0["f"], (2, 12));
        assert!(csv_sums(&csv.replace(",1,0,,\n", "\n")).is_err());
        // And with the time breakdown's: the same sums.
        let csv = "function,cpu,pid,tid,entry_ns,duration_ns,value,slept,preempted,hardirqs,\
                   softirqs,off_cpu_ns,irq_ns\nf,0,1,2,10,5,0,0,0,0,0,0,0\nf,1,1,3,20,7,0,1,0,,,3,\n";
        assert_eq!(csv_sums(csv).expect("csv").0["f"], (2, 12));
    }
}
