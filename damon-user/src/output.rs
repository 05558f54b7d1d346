//! What the commands write on stdout: JSON documents carry one schema version, and every
//! document goes out through one `write_all` whose broken pipe `main` treats as a normal end.
use serde::Serialize;

/// The `schema_version` at the top of every JSON document damon-trace writes (report, compare,
/// export, doctor, calibrate, record, scenario list). Raised when a field changes meaning or
/// disappears; new fields do not raise it.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
struct Document<'a, T: Serialize> {
    schema_version: u32,
    #[serde(flatten)]
    body: &'a T,
}

/// `body` (an object) as one pretty JSON document led by `schema_version`, with a final
/// newline.
pub fn json_document<T: Serialize>(body: &T) -> serde_json::Result<String> {
    let doc = Document {
        schema_version: SCHEMA_VERSION,
        body,
    };
    Ok(serde_json::to_string_pretty(&doc)? + "\n")
}

/// Writes `text` to stdout. Not `print!`: it panics when stdout is a closed pipe.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_lead_with_their_schema_version() {
        #[derive(Serialize)]
        struct Body {
            name: &'static str,
            calls: u64,
        }
        let text = json_document(&Body {
            name: "damon_hot_score",
            calls: 3,
        })
        .expect("json");
        assert!(text.starts_with("{\n  \"schema_version\": 1,\n"), "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).expect("parses");
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["calls"], 3);
        assert!(text.ends_with("}\n"));
    }
}
