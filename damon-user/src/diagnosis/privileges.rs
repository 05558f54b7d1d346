//! Whether this process may trace: CAP_BPF to load programs and CAP_PERFMON to attach them
//! (CAP_SYS_ADMIN stands in for either). The capability numbers and the reading of the
//! effective set are in [`crate::probe::facts::kernel`].
use crate::probe::facts::kernel::{self, CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN};

/// The capabilities tracing needs and this process lacks (in its effective set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingCaps(pub Vec<&'static str>);

impl MissingCaps {
    /// "CAP_BPF and CAP_PERFMON".
    pub fn names(&self) -> String {
        self.0.join(" and ")
    }

    /// What the doctor table shows.
    pub fn found(&self) -> String {
        format!("missing {} (CAP_SYS_ADMIN would also do)", self.names())
    }

    pub fn remedy(&self) -> String {
        let caps = self.0.iter().map(|c| c.to_lowercase()).collect::<Vec<_>>();
        format!(
            "run as root (sudo damon-trace ...) or grant {}, e.g. `sudo setcap {}+ep $(command -v damon-trace)`",
            self.names(),
            caps.join(",")
        )
    }
}

/// Which capabilities tracing needs and this process lacks: CAP_BPF to load programs and
/// CAP_PERFMON to attach them; CAP_SYS_ADMIN stands in for either.
pub fn privileges() -> Result<String, MissingCaps> {
    has_caps(kernel::effective_caps().unwrap_or(0))
}

/// The one-line error `record`, `live` and `serve` give before trying to trace without the
/// privileges to (exit status 1: the invocation is right, the process lacks rights).
pub fn require_privileges() -> anyhow::Result<()> {
    privileges().map(drop).map_err(|m| {
        anyhow::anyhow!(
            "tracing needs {}, which this process does not have: {}",
            m.names(),
            m.remedy()
        )
    })
}

fn has_caps(caps: u64) -> Result<String, MissingCaps> {
    let (bpf, perfmon, admin) = (
        kernel::has_cap(caps, CAP_BPF),
        kernel::has_cap(caps, CAP_PERFMON),
        kernel::has_cap(caps, CAP_SYS_ADMIN),
    );
    match (bpf && perfmon, admin) {
        (true, _) => Ok("CAP_BPF and CAP_PERFMON".to_owned()),
        (false, true) => Ok("CAP_SYS_ADMIN".to_owned()),
        _ => {
            let mut missing = Vec::new();
            if !bpf {
                missing.push("CAP_BPF");
            }
            if !perfmon {
                missing.push("CAP_PERFMON");
            }
            Err(MissingCaps(missing))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(list: &[u32]) -> u64 {
        list.iter().fold(0, |acc, &c| acc | 1u64 << c)
    }

    #[test]
    fn names_exactly_the_missing_capabilities() {
        assert!(has_caps(caps(&[CAP_BPF, CAP_PERFMON])).is_ok());
        assert!(has_caps(caps(&[CAP_SYS_ADMIN])).is_ok());
        assert_eq!(
            has_caps(0).expect_err("none"),
            MissingCaps(vec!["CAP_BPF", "CAP_PERFMON"])
        );
        let m = has_caps(caps(&[CAP_PERFMON])).expect_err("no bpf");
        assert_eq!(m, MissingCaps(vec!["CAP_BPF"]));
        assert!(m.remedy().contains("setcap cap_bpf+ep"), "{}", m.remedy());
        assert_eq!(
            has_caps(caps(&[CAP_BPF])).expect_err("no perfmon"),
            MissingCaps(vec!["CAP_PERFMON"])
        );
    }
}
