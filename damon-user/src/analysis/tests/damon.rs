use serde_json::json;

use crate::analysis::damon::diff;

#[test]
fn diff_lists_changed_leaves() {
    let a = json!({"kdamonds": [{"state": "on", "pid": 5, "x": [1, 2]}], "s": true});
    let b = json!({"kdamonds": [{"state": "off", "pid": null, "x": [1, 2]}], "s": true});
    let mut out = Vec::new();
    diff("", &a, &b, &mut out);
    assert_eq!(
        out,
        vec![
            "kdamonds[0].pid: 5 -> null".to_owned(),
            "kdamonds[0].state: \"on\" -> \"off\"".to_owned()
        ]
    );
    let mut none = Vec::new();
    diff("", &a, &a, &mut none);
    assert!(none.is_empty());
}
