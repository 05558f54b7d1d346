//! A private apt instance for one Debian suite, through the mirror the machine's own apt
//! configuration names: no mirror host is written in this repository, and the system's apt
//! state is left untouched.
use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, SystemTime},
};

use anyhow::{Context as _, Result, bail};

use crate::util::{self, status};

/// Package lists older than this are refreshed before resolving a kernel.
const LISTS_MAX_AGE: Duration = Duration::from_secs(24 * 3600);
const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// One `deb` source from the system configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub uri: String,
    pub suites: Vec<String>,
    pub components: Vec<String>,
}

/// Parses one-line `deb [opts] URI suite comp...` entries (sources.list, *.list).
pub fn parse_one_line(text: &str) -> Vec<Source> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let mut words = line.split_whitespace().peekable();
        if words.next() != Some("deb") {
            continue;
        }
        if words.peek().is_some_and(|w| w.starts_with('[')) {
            // Options may contain spaces: skip through the closing bracket.
            for w in words.by_ref() {
                if w.ends_with(']') {
                    break;
                }
            }
        }
        let (Some(uri), Some(suite)) = (words.next(), words.next()) else {
            continue;
        };
        out.push(Source {
            uri: uri.into(),
            suites: vec![suite.into()],
            components: words.map(Into::into).collect(),
        });
    }
    out
}

/// Parses deb822 stanzas (*.sources), skipping `Enabled: no` ones and non-`deb` types.
pub fn parse_deb822(text: &str) -> Vec<Source> {
    let mut out = Vec::new();
    for stanza in text.split("\n\n") {
        let field = |name: &str| -> Vec<String> {
            stanza
                .lines()
                .filter(|l| !l.starts_with('#'))
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.trim()
                        .eq_ignore_ascii_case(name)
                        .then(|| v.split_whitespace().map(String::from).collect())
                })
                .unwrap_or_default()
        };
        let enabled = field("Enabled").first().is_none_or(|v| v != "no");
        if !enabled || !field("Types").iter().any(|t| t == "deb") {
            continue;
        }
        for uri in field("URIs") {
            out.push(Source {
                uri,
                suites: field("Suites"),
                components: field("Components"),
            });
        }
    }
    out
}

/// The mirror that serves Debian's main archive: a `main` source whose URI path ends in
/// `/debian` (not `-security`, not a third-party repository).
pub fn pick_debian_mirror(sources: &[Source]) -> Option<String> {
    let main = |s: &&Source| s.components.iter().any(|c| c == "main");
    sources
        .iter()
        .filter(main)
        .map(|s| s.uri.trim_end_matches('/'))
        .find(|u| u.ends_with("/debian"))
        .map(String::from)
}

/// The Debian mirror from `$DAMON_TRACE_DEBIAN_MIRROR` or the system's apt sources.
pub fn system_debian_mirror() -> Result<String> {
    if let Ok(m) = std::env::var("DAMON_TRACE_DEBIAN_MIRROR")
        && !m.is_empty()
    {
        return Ok(m);
    }
    let mut sources = Vec::new();
    if let Ok(text) = fs::read_to_string("/etc/apt/sources.list") {
        sources.extend(parse_one_line(&text));
    }
    if let Ok(dir) = fs::read_dir("/etc/apt/sources.list.d") {
        let mut files: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for f in files {
            let Ok(text) = fs::read_to_string(&f) else {
                continue;
            };
            match f.extension().and_then(|e| e.to_str()) {
                Some("sources") => sources.extend(parse_deb822(&text)),
                Some("list") => sources.extend(parse_one_line(&text)),
                _ => {}
            }
        }
    }
    pick_debian_mirror(&sources).context(
        "no Debian `main` mirror (URI ending in /debian) in /etc/apt/sources.list{,.d}; \
         set DAMON_TRACE_DEBIAN_MIRROR to a Debian archive URI",
    )
}

/// apt-get/apt-cache confined to `dir`, tracking one suite of one mirror.
pub struct Apt {
    dir: PathBuf,
    suite: String,
}

impl Apt {
    /// Prepares `dir` (sources.list, state and cache dirs) for `suite` of `mirror`.
    pub fn new(dir: &Path, mirror: &str, suite: &str) -> Result<Self> {
        for sub in ["etc/parts", "state/lists/partial", "cache/archives/partial"] {
            fs::create_dir_all(dir.join(sub))
                .with_context(|| format!("creating {}", dir.join(sub).display()))?;
        }
        let apt = Self {
            dir: dir.to_path_buf(),
            suite: suite.into(),
        };
        let trusted = apt.dir.join("trusted").exists();
        apt.write_sources(mirror, trusted)?;
        Ok(apt)
    }

    fn write_sources(&self, mirror: &str, trusted: bool) -> Result<()> {
        let opts = if trusted || !Path::new(KEYRING).exists() {
            "trusted=yes".to_owned()
        } else {
            format!("signed-by={KEYRING}")
        };
        let line = format!("deb [{opts}] {mirror} {} main\n", self.suite);
        let path = self.dir.join("etc/sources.list");
        if fs::read_to_string(&path).ok().as_deref() != Some(line.as_str()) {
            fs::write(&path, line).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }

    /// An apt command that sees only this instance's sources and state.
    fn cmd(&self, program: &str) -> Command {
        let d = &self.dir;
        let mut c = Command::new(program);
        for (k, v) in [
            ("Dir::Etc::SourceList", d.join("etc/sources.list")),
            ("Dir::Etc::SourceParts", d.join("etc/parts")),
            ("Dir::Etc::Preferences", d.join("etc/preferences")),
            ("Dir::Etc::PreferencesParts", d.join("etc/parts")),
            ("Dir::State", d.join("state")),
            ("Dir::Cache", d.join("cache")),
        ] {
            c.arg("-o").arg(format!("{k}={}", v.display()));
        }
        // Only the Packages index is needed; AppStream metadata would double the download.
        c.args([
            "-o",
            "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
        ]);
        c.args(["-o", "Acquire::Languages=none", "-q"]);
        if util::is_root() {
            // Downloads land in our cache dirs, which the sandbox user `_apt` may not write.
            c.args(["-o", "APT::Sandbox::User=root"]);
        }
        c.env("LC_ALL", "C");
        c
    }

    /// Runs `program args` confined to this instance and returns stdout; errors quote apt's
    /// own message rather than the long confining command line.
    pub fn run(&self, program: &str, args: &[&str], cwd: Option<&Path>) -> Result<String> {
        let mut cmd = self.cmd(program);
        cmd.args(args).stdin(Stdio::null());
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        let what = format!(
            "{program} {} (suite {}, state in {})",
            args.join(" "),
            self.suite,
            self.dir.display()
        );
        let out = cmd
            .output()
            .with_context(|| format!("cannot start {what}"))?;
        if !out.status.success() {
            let msg = String::from_utf8_lossy(&out.stderr);
            let msg = msg
                .lines()
                .filter(|l| !l.starts_with("W: "))
                .collect::<Vec<_>>()
                .join("\n");
            bail!("{what} failed ({}): {}", out.status, msg.trim());
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn stamp(&self) -> PathBuf {
        self.dir.join("updated")
    }

    /// True when the lists were refreshed within the last day.
    pub fn lists_fresh(&self) -> bool {
        let age = fs::metadata(self.stamp())
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok());
        age.is_some_and(|a| a < LISTS_MAX_AGE)
    }

    /// `apt-get update` for this suite. If the installed keyring predates the suite's signing
    /// key, falls back to an unauthenticated source (with a warning): the package only becomes a
    /// throw-away test VM's kernel.
    pub fn update(&self, mirror: &str) -> Result<()> {
        status(
            "apt",
            format!("updating package lists of {} ({mirror})", self.suite),
        );
        // --error-on=any: otherwise apt-get update exits 0 when the mirror is unreachable.
        let update = || self.run("apt-get", &["update", "--error-on=any"], None);
        let result = update();
        let err = match result {
            Ok(out) if !out.contains("NO_PUBKEY") && !out.contains("is not signed") => {
                fs::write(self.stamp(), b"").context("writing the apt stamp")?;
                return Ok(());
            }
            Ok(out) => out,
            Err(e) => format!("{e:#}"),
        };
        if !(err.contains("NO_PUBKEY") || err.contains("is not signed"))
            || self.dir.join("trusted").exists()
        {
            bail!("{err}");
        }
        status(
            "apt",
            format!(
                "warning: {KEYRING} cannot verify {}; retrying unauthenticated \
                 (upgrade debian-archive-keyring to fix)",
                self.suite
            ),
        );
        fs::write(self.dir.join("trusted"), b"").context("marking the source trusted")?;
        self.write_sources(mirror, true)?;
        update()?;
        fs::write(self.stamp(), b"").context("writing the apt stamp")?;
        Ok(())
    }

    /// The packages `pkg` directly depends on (`apt-cache depends`), alternatives included.
    pub fn depends(&self, pkg: &str) -> Result<Vec<String>> {
        let out = self.run("apt-cache", &["depends", pkg], None)?;
        Ok(parse_depends(&out))
    }

    /// True when the suite has a package called `pkg`.
    pub fn has_package(&self, pkg: &str) -> bool {
        self.run("apt-cache", &["show", "--no-all-versions", pkg], None)
            .is_ok_and(|o| !o.trim().is_empty())
    }
}

impl Apt {
    /// This instance for `suite` under `<cache>/apt-<suite>` (the directory the kernel fetch
    /// uses too), its lists refreshed if older than a day; also returns the mirror.
    pub fn for_suite(cache: &Path, suite: &str) -> Result<(Self, String)> {
        let mirror = system_debian_mirror()?;
        let apt = Self::new(&cache.join(format!("apt-{suite}")), &mirror, suite)?;
        if !apt.lists_fresh() {
            apt.update(&mirror)?;
        }
        Ok((apt, mirror))
    }

    /// The candidate version of `pkg` in this suite.
    pub fn version(&self, pkg: &str) -> Result<String> {
        let out = self.run("apt-cache", &["show", "--no-all-versions", pkg], None)?;
        out.lines()
            .find_map(|l| l.strip_prefix("Version:").map(|v| v.trim().to_owned()))
            .with_context(|| format!("no Version of {pkg} in this suite"))
    }

    /// `pkg` and everything it needs to run: its `Depends`/`PreDepends`, recursively
    /// (recommends and suggests left out), real packages only, sorted.
    pub fn closure(&self, pkg: &str) -> Result<Vec<String>> {
        let out = self.run(
            "apt-cache",
            &[
                "depends",
                "--recurse",
                "--no-recommends",
                "--no-suggests",
                "--no-conflicts",
                "--no-breaks",
                "--no-replaces",
                "--no-enhances",
                pkg,
            ],
            None,
        )?;
        Ok(parse_closure(&out))
    }
}

/// The package names `apt-cache depends --recurse` lists (its unindented lines), virtual
/// packages (`<name>`) left out, sorted and unique.
pub fn parse_closure(out: &str) -> Vec<String> {
    let names: BTreeSet<String> = out
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with(char::is_whitespace) && !l.starts_with('<'))
        .map(|l| l.trim().to_owned())
        .collect();
    names.into_iter().collect()
}

/// The package names on `Depends:`/`PreDepends:` lines of `apt-cache depends` output.
pub fn parse_depends(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| {
            let l = l.trim_start().trim_start_matches('|');
            let (kind, name) = l.split_once(':')?;
            let name = name.trim();
            (matches!(kind, "Depends" | "PreDepends") && !name.starts_with('<'))
                .then(|| name.to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_the_main_debian_mirror_not_security_nor_third_party() {
        let deb822 = "Types: deb\n# comment\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n\
                      Components: main\n\nTypes: deb\nURIs: http://mirror.example/debian-security\n\
                      Suites: bookworm-security\nComponents: main\n\nTypes: deb\nEnabled: no\n\
                      URIs: http://other.example/debian\nSuites: x\nComponents: main\n";
        let mut sources = parse_one_line(
            "deb [arch=amd64 signed-by=/k.gpg] https://vendor.example/apt stable main\n",
        );
        sources.extend(parse_deb822(deb822));
        assert_eq!(sources.len(), 3, "{sources:?}");
        assert_eq!(
            pick_debian_mirror(&sources).as_deref(),
            Some("http://mirror.example/debian")
        );
    }

    #[test]
    fn one_line_sources_skip_comments_and_deb_src() {
        let s = parse_one_line(
            "# deb http://a/debian sid main\ndeb-src http://b/debian sid main\ndeb http://c/debian/ sid main contrib\n",
        );
        assert_eq!(
            s,
            vec![Source {
                uri: "http://c/debian/".into(),
                suites: vec!["sid".into()],
                components: vec!["main".into(), "contrib".into()]
            }]
        );
        assert_eq!(pick_debian_mirror(&s).as_deref(), Some("http://c/debian"));
    }

    #[test]
    fn closure_lists_each_real_package_once() {
        let out = "bpftrace\n  Depends: libc6\n |Depends: libz3-4\n  Depends: <virt>\nlibc6\n  Depends: libgcc-s1\n<virt>\nlibgcc-s1\nlibc6\n";
        assert_eq!(parse_closure(out), ["bpftrace", "libc6", "libgcc-s1"]);
    }

    #[test]
    fn depends_are_parsed_without_virtual_packages() {
        let out = "linux-image-7.2.13+deb14-amd64\n  PreDepends: linux-base\n |Depends: dracut\n  Depends: <linux-initramfs-tool>\n    dracut\n  Depends: linux-binary-7.2.13+deb14-amd64\n  Breaks: <fwupdate>\n  Suggests: extlinux\n";
        assert_eq!(
            parse_depends(out),
            ["linux-base", "dracut", "linux-binary-7.2.13+deb14-amd64"]
        );
    }
}
