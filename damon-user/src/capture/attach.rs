//! How a capture names the trace mode and each function's attach method (or why it was not
//! traced): as today's strings, typed everywhere past decoding.
use damon_common::attach::Attach;
use serde::{Deserialize, Serialize};

/// What the kernel does with each timed call, as the capture's `meta.mode` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// One record per call to userspace.
    #[default]
    Stream,
    /// Per-CPU histograms in the kernel, no per-call records.
    Kernel,
    /// Both for every call (tests: the kernel's buckets against the records).
    Both,
}

impl Mode {
    /// The eBPF `TRACE_MODE` bits.
    pub fn bits(self) -> u32 {
        match self {
            Mode::Stream => damon_common::MODE_STREAM,
            Mode::Kernel => damon_common::MODE_KERNEL,
            Mode::Both => damon_common::MODE_STREAM | damon_common::MODE_KERNEL,
        }
    }

    /// As the capture's `meta.mode` says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Stream => "stream",
            Mode::Kernel => "kernel",
            Mode::Both => "both",
        }
    }

    /// Whether each call goes to userspace as a record.
    pub fn streams(self) -> bool {
        self.bits() & damon_common::MODE_STREAM != 0
    }

    /// Whether the kernel buckets each call.
    pub fn buckets_in_kernel(self) -> bool {
        self.bits() & damon_common::MODE_KERNEL != 0
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// How a function was traced (its attach method), or why it was not. Written and read as the
/// method's name (`fentry`, `kprobe`, `kprobe-session`, `fsession`) or `missing`, `inlined`,
/// `failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachState {
    Traced(Attach),
    /// The kernel does not have the function.
    Missing,
    /// Only compiler clones of the function exist.
    Inlined,
    /// It exists but neither attach method worked.
    Failed,
}

impl AttachState {
    /// Every state, in the order a bad name's error lists them.
    const ALL: [AttachState; 7] = [
        AttachState::Traced(Attach::Fentry),
        AttachState::Traced(Attach::Kprobe),
        AttachState::Traced(Attach::KprobeSession),
        AttachState::Traced(Attach::Fsession),
        AttachState::Missing,
        AttachState::Inlined,
        AttachState::Failed,
    ];

    /// Every state's name (serde's list of variants).
    const NAMES: [&'static str; 7] = [
        Attach::Fentry.as_str(),
        Attach::Kprobe.as_str(),
        Attach::KprobeSession.as_str(),
        Attach::Fsession.as_str(),
        "missing",
        "inlined",
        "failed",
    ];

    /// The state `name` says (as a capture or report says it).
    pub fn from_name(name: &str) -> Option<AttachState> {
        AttachState::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether the function was traced (attached one way or another).
    pub fn is_traced(self) -> bool {
        self.attach().is_some()
    }

    /// The method the function was attached with, if it was attached.
    pub fn attach(self) -> Option<Attach> {
        match self {
            AttachState::Traced(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AttachState::Traced(a) => a.as_str(),
            AttachState::Missing => "missing",
            AttachState::Inlined => "inlined",
            AttachState::Failed => "failed",
        }
    }
}

impl std::fmt::Display for AttachState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl From<Attach> for AttachState {
    fn from(a: Attach) -> AttachState {
        AttachState::Traced(a)
    }
}

impl Serialize for AttachState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for AttachState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<AttachState, D::Error> {
        let name = String::deserialize(d)?;
        AttachState::from_name(&name)
            .ok_or_else(|| serde::de::Error::unknown_variant(&name, &AttachState::NAMES))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_todays_strings_both_ways() {
        for a in Attach::ALL {
            let json = serde_json::to_value(a).expect("json");
            assert_eq!(json, a.as_str());
            assert_eq!(
                serde_json::to_value(AttachState::from(a)).expect("json"),
                json
            );
            let back: AttachState = serde_json::from_value(json).expect("reads");
            assert_eq!(back, AttachState::Traced(a));
        }
        for (m, name) in [
            (Mode::Stream, "stream"),
            (Mode::Kernel, "kernel"),
            (Mode::Both, "both"),
        ] {
            assert_eq!(serde_json::to_value(m).expect("json"), name);
            assert_eq!(m.as_str(), name);
        }
        let bad = serde_json::from_value::<AttachState>("ksession".into()).unwrap_err();
        assert_eq!(
            bad.to_string(),
            "unknown variant `ksession`, expected one of `fentry`, `kprobe`, `kprobe-session`, \
             `fsession`, `missing`, `inlined`, `failed`"
        );
    }
}
