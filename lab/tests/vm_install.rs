//! The install story end to end: `cargo xtask dist` (called as a library, so a fresh clone
//! needs nothing built first), its .deb unpacked into a throw-away root the way dpkg lays it
//! out, its control fields and files where Debian expects them, the installed binary run on
//! this host; then `damon-trace doctor` from that tree in the 7.2 guest.
mod common;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
    time::Duration,
};

use damon_lab::{kernel::Kernel, util::output};
use xtask::dist::{self, Artifacts};

/// The packages `cargo xtask dist` makes, of the static binary the suite built
/// (`$DAMON_TRACE_BIN`, else a fresh `build-static`): one for every test of this file.
fn artifacts() -> &'static Artifacts {
    static DIST: OnceLock<Artifacts> = OnceLock::new();
    DIST.get_or_init(|| common::packages("packages-test"))
}

/// The .deb's files under a fresh root (`dpkg-deb -x`), removed on drop.
struct Installed {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn install(deb: &Path) -> Installed {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("root");
    output(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&root)).expect("dpkg-deb -x");
    Installed { _dir: dir, root }
}

/// `dpkg-deb --field`: the control file as a map.
fn control(deb: &Path) -> BTreeMap<String, String> {
    let text = output(Command::new("dpkg-deb").arg("--field").arg(deb)).expect("dpkg-deb --field");
    text.lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[test]
#[ignore = "builds the dist profile (minutes); run by cargo xtask test's VM stage"]
fn vm_dist_deb_installs_where_debian_expects_and_runs() {
    let a = artifacts();
    let fields = control(&a.deb);
    for (key, value) in [
        ("Package", "damon-trace"),
        ("Version", a.version.as_str()),
        ("Architecture", "amd64"),
        ("Section", "utils"),
        ("Priority", "optional"),
    ] {
        assert_eq!(
            fields.get(key).map(String::as_str),
            Some(value),
            "{fields:?}"
        );
    }
    for key in ["Maintainer", "Description", "Installed-Size"] {
        assert!(fields.contains_key(key), "{key} in {fields:?}");
    }
    assert!(
        !fields.contains_key("Depends"),
        "a static binary depends on nothing"
    );

    // Every file root-owned (--root-owner-group), whoever built the package.
    let listing = output(Command::new("dpkg-deb").arg("-c").arg(&a.deb)).expect("dpkg-deb -c");
    for line in listing.lines() {
        assert!(line.contains(" root/root "), "{line}");
    }

    let installed = install(&a.deb);
    let root = &installed.root;
    let bin = root.join("usr/bin/damon-trace");
    let version = output(Command::new(&bin).arg("--version")).expect("installed binary runs");
    assert_eq!(version.trim(), format!("damon-trace {}", a.version));
    damon_lab::elf::ensure_static(&bin).expect("static");

    let man1 = root.join("usr/share/man/man1");
    for page in [
        "damon-trace",
        "damon-trace-serve",
        "damon-trace-record",
        "damon-trace-scenario-migrate-hot",
    ] {
        assert!(man1.join(format!("{page}.1.gz")).is_file(), "{page}.1.gz");
    }
    let rendered = output(
        Command::new("man")
            .args(["-l", "-P", "cat"])
            .arg(man1.join("damon-trace.1.gz"))
            .env("MANWIDTH", "200"),
    )
    .expect("man -l renders the installed page");
    assert!(rendered.contains("damon-trace-serve(1)"), "{rendered}");

    for (shell, _, dest) in dist::COMPLETIONS {
        let packaged = std::fs::read_to_string(root.join(dest)).expect(dest);
        let fresh = output(Command::new(&bin).args(["completions", shell])).expect("completions");
        assert_eq!(
            packaged, fresh,
            "{dest} is what the installed binary generates"
        );
    }

    let unit = root.join(dist::DEB_UNIT_DIR).join(dist::SERVE_UNIT);
    let unit = std::fs::read_to_string(&unit).expect("unit installed");
    check_unit(&unit);
    verify_unit(root, &unit);

    let names = dist::tarball_listing(&a.tarball).expect("tar -tzf");
    let top = format!("damon-trace-{}-x86_64-linux-musl", a.version);
    for file in [
        "damon-trace",
        "man/man1/damon-trace.1",
        "man/man1/damon-trace-serve.1",
        "completions/damon-trace.bash",
        "completions/_damon-trace",
        "completions/damon-trace.fish",
        "damon-trace-serve.service",
        "INSTALL.md",
    ] {
        let name = format!("{top}/{file}");
        assert!(names.contains(&name), "{name} in {names:?}");
    }
}

/// The unit runs `serve` on loopback as an unprivileged user holding CAP_BPF and CAP_PERFMON
/// and nothing more.
fn check_unit(unit: &str) {
    let values = |key: &str| -> Vec<&str> {
        unit.lines()
            .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .collect()
    };
    assert_eq!(
        values("ExecStart"),
        ["/usr/bin/damon-trace serve --listen 127.0.0.1:9464"]
    );
    assert_eq!(values("AmbientCapabilities"), ["CAP_BPF CAP_PERFMON"]);
    assert_eq!(values("CapabilityBoundingSet"), ["CAP_BPF CAP_PERFMON"]);
    for (key, value) in [
        ("DynamicUser", "yes"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
    ] {
        assert_eq!(values(key), [value], "{key}");
    }
}

/// `systemd-analyze verify` finds nothing to say about the unit (an unknown key is only a
/// warning, so stderr must be empty too), when this host has systemd-analyze. It checks that
/// ExecStart's binary exists and that `man:` documentation resolves, so the unit's copy points
/// into the installed tree and MANPATH at its man pages.
fn verify_unit(root: &Path, unit: &str) {
    if damon_lab::util::which("systemd-analyze").is_none() {
        eprintln!("skipping: systemd-analyze not installed, unit not verified");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join(dist::SERVE_UNIT);
    let bin = root.join("usr/bin/damon-trace");
    let unit = unit.replace("=/usr/bin/damon-trace", &format!("={}", bin.display()));
    std::fs::write(&copy, unit).expect("unit copy");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&copy)
        .env("MANPATH", root.join("usr/share/man"))
        .output()
        .expect("systemd-analyze runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("systemd-analyze verify: {} {stderr}", out.status);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify: {stderr}"
    );
}

/// The 7.2 guest with the .deb's tree merged into its `/`: the installed
/// `/usr/bin/damon-trace` diagnoses the kernel as traceable and exits 0.
#[test]
#[ignore = "boots a guest"]
fn vm_7_2_doctor_runs_from_the_installed_deb() {
    let installed = install(&artifacts().deb);
    let bin = installed.root.join("usr/bin/damon-trace");
    let cmd = "/usr/bin/damon-trace doctor --json > /out/doctor.json; echo $? > /out/status
ls /usr/share/man/man1 /usr/share/bash-completion/completions > /out/files.txt";
    let run = common::boot_ok(
        common::guest(Kernel::DEBIAN_7_2, cmd, Duration::from_secs(300))
            .binary(Some(bin))
            .trees(vec![installed.root.clone()]),
    );
    let doctor = common::json(run.dir(), "doctor.json");
    assert_eq!(doctor["can_trace"], true, "{doctor}");
    assert_eq!(run.read("status").trim(), "0", "{doctor}");
    let files = run.read("files.txt");
    assert!(
        files.contains("damon-trace.1.gz") && files.contains("damon-trace\n"),
        "{files}"
    );
}
