//! Test counts as cargo test prints them: what the test command's stages and its VM lanes
//! ([`crate::vm_lanes`]) add up.

/// Totals parsed from cargo test's `test result:` lines.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub passed: u64,
    pub failed: u64,
    pub ignored: u64,
}

impl Counts {
    pub fn add(&mut self, o: Counts) {
        self.passed += o.passed;
        self.failed += o.failed;
        self.ignored += o.ignored;
    }
}

/// Parses `test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; ...`.
pub fn parse_result_line(line: &str) -> Option<Counts> {
    let rest = line.trim().strip_prefix("test result:")?;
    let mut c = Counts::default();
    for part in rest.split(';') {
        let words: Vec<&str> = part.split_whitespace().collect();
        let (Some(n), Some(kind)) = (words.iter().rev().nth(1), words.last()) else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        match *kind {
            "passed" => c.passed = n,
            "failed" => c.failed = n,
            "ignored" => c.ignored = n,
            _ => {}
        }
    }
    Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines_are_summed() {
        let l = "test result: ok. 12 passed; 1 failed; 3 ignored; 0 measured; 0 filtered out; finished in 0.01s";
        assert_eq!(
            parse_result_line(l),
            Some(Counts {
                passed: 12,
                failed: 1,
                ignored: 3
            })
        );
        assert_eq!(parse_result_line("running 3 tests"), None);
    }
}
