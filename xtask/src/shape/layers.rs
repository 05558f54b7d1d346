//! The layers `cargo xtask shape` checks, from low to high: a module (or crate) may import
//! from its own layer or a lower one, never from a higher one. A new top-level module of
//! `damon-user/src` (or a new workspace crate) must be added here before `shape` passes: put it
//! in the lowest layer whose modules it needs, and say in the layer's comment what it holds.
//! A name listed here that does not exist (yet) is fine.

/// One layer: its name, what belongs in it, its members.
#[derive(Debug, Clone, Copy)]
pub struct Layer {
    pub name: &'static str,
    pub about: &'static str,
    pub members: &'static [&'static str],
}

/// The top-level modules of `damon-user/src` (`x.rs` or `x/`), low to high.
pub const USER_LAYERS: &[Layer] = &[
    Layer {
        name: "base",
        about: "leaf helpers any layer may use: the error type, what commands write on stdout, \
                clocks, `--listen` addresses",
        members: &["error", "listen", "output", "timing"],
    },
    Layer {
        name: "formats",
        about: "the `.dtcap` capture format, DAMON's sysfs (plans, writes, restore)",
        members: &["capture", "damon"],
    },
    Layer {
        name: "numbers",
        about: "statistics over captures, the traced functions and their events",
        members: &["stats", "trace"],
    },
    Layer {
        name: "render",
        about: "numbers and tables written for people: number formats and the markup layer \
                each text format implements; it knows statistics, not commands",
        members: &["render"],
    },
    Layer {
        name: "probe",
        about: "everything that touches the kernel's BPF side",
        members: &["probe"],
    },
    Layer {
        name: "domain",
        about: "what the commands compute: which functions to trace, accounting of calls, \
                what the kernel allows, a capture's per-function model (`analysis/`) that every \
                command reading captures shares",
        members: &["accounting", "analysis", "diagnosis", "selection"],
    },
    Layer {
        name: "session",
        about: "one tracing session: probes, DAMON and the capture together",
        members: &["session"],
    },
    Layer {
        name: "cli",
        about: "the command line (clap): arguments parsed and converted into the domain's \
                vocabulary; each command's arguments live here",
        members: &["cli"],
    },
    Layer {
        name: "commands",
        about: "one module per command, each with an entry point `main` calls",
        members: &[
            "calibrate",
            "doctor",
            "export",
            "heatmap_svg",
            "manual",
            "record",
            "report",
            "scenario",
            "tui",
        ],
    },
    Layer {
        name: "commands on commands",
        about: "commands built from other commands; `bench` holds the instrument commands \
                of the project's benchmarks and guest tests (feature `instruments`)",
        members: &["bench", "compare", "serve"],
    },
    Layer {
        name: "main",
        about: "the binary's entry: parses, dispatches to a command",
        members: &["main"],
    },
];

/// The top-level modules of `damon-user/src` whose code may name clap (`use clap…`,
/// `clap::…`, `clap_complete`, `clap_mangen`), and why. No other module may: the domain and
/// the commands take the domain's vocabulary, not clap's.
pub const CLAP_ALLOWED: &[(&str, &str)] = &[
    ("cli", "the command line is declared with clap"),
    ("main", "parses the command line"),
    (
        "manual",
        "renders clap's command tree as man pages and shell completions",
    ),
];

/// The workspace's crates (package names), low to high: a crate's dependencies (normal,
/// build and dev) on workspace crates must be in its layer or lower.
pub const CRATE_LAYERS: &[Layer] = &[
    Layer {
        name: "shared",
        about: "the types the kernel side and user space share",
        members: &["damon-common"],
    },
    Layer {
        name: "parts",
        about: "the eBPF programs (built by damon-user's build script); the standalone \
                capture reader",
        members: &["damon-ebpf", "dtcap"],
    },
    Layer {
        name: "product",
        about: "the damon-trace binary",
        members: &["damon-user"],
    },
    Layer {
        name: "tools",
        about: "developer tools: build, dist, checks (xtask); the VM lab, experiments and \
                guest tests (damon-lab)",
        members: &["damon-lab", "xtask"],
    },
];

/// The index of `name`'s layer in `layers`, if it is listed.
pub fn layer_of(layers: &[Layer], name: &str) -> Option<usize> {
    layers.iter().position(|l| l.members.contains(&name))
}
