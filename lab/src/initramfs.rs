//! The guest's initramfs: an uncompressed cpio (newc) archive written directly, so that device
//! nodes need no root and no `cpio` tool, holding busybox, damon-trace, the command and /init.
use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result, ensure};

/// Name of the virtio serial port that carries the tarball of /out back to the host.
pub const OUT_PORT: &str = "damon-out";
/// Name of the virtio serial port on which the host sends `ROWS COLS` lines when the user's
/// terminal is resized (interactive runs only).
pub const WINSIZE_PORT: &str = "damon-winsize";

/// What goes into the initramfs.
pub struct InitSpec<'a> {
    pub busybox: &'a Path,
    pub damon_trace: &'a Path,
    /// Shell command run as root in `/` with `sh -c`.
    pub cmd: &'a str,
    pub env: &'a [(String, String)],
    /// Extra host files and their absolute guest paths.
    pub files: &'a [(PathBuf, String)],
    /// Host directories whose contents (files, directories, symlinks, modes kept) are merged
    /// into the guest's `/`, e.g. an unpacked Debian package closure (`cargo xtask bench`).
    pub trees: &'a [PathBuf],
    /// Kernel modules (uncompressed) /init loads with insmod, in this order, before anything
    /// uses the virtio-serial ports: the drivers a kernel does not have built in (Debian 6.1).
    pub modules: &'a [PathBuf],
    /// Makes the marker lines unique to this run, so guest output cannot forge them.
    pub nonce: &'a str,
    /// Run the command on the serial console as its controlling terminal.
    pub tty: Option<GuestTty<'a>>,
}

/// The guest terminal of an interactive command.
pub struct GuestTty<'a> {
    pub rows: u16,
    pub cols: u16,
    pub term: &'a str,
}

/// Marker lines /init prints on the console; the host parses them.
pub fn ready_marker(nonce: &str) -> String {
    format!("DAMON_VM_READY id={nonce}")
}
pub fn out_marker_prefix() -> &'static str {
    "DAMON_VM_OUT_BYTES="
}
pub fn exit_marker_prefix() -> &'static str {
    "DAMON_VM_EXIT="
}

/// `value` quoted for a POSIX shell.
pub fn shell_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `export K='V'` lines for the command's environment.
pub(crate) fn env_exports(env: &[(String, String)]) -> Result<String> {
    let mut exports = String::new();
    for (k, v) in env {
        ensure!(valid_env_name(k), "invalid environment variable name `{k}`");
        exports.push_str(&format!("export {k}={}\n", shell_quote(v)));
    }
    Ok(exports)
}

/// The harness's protocol around the guest command, the same for the busybox /init and the
/// systemd guest's unit: `prelude` (exports and the like), the ready marker, `run`, /out sent
/// as a tar (made under `tmp`) on the virtio port after its size marker, the exit marker with
/// the command's status, then `poweroff`.
pub(crate) fn protocol(nonce: &str, prelude: &str, run: &str, tmp: &str, poweroff: &str) -> String {
    let ready = ready_marker(nonce);
    let (out, exit) = (out_marker_prefix(), exit_marker_prefix());
    format!(
        r#"vport() {{
    for p in /sys/class/virtio-ports/*; do
        [ "$(cat "$p/name" 2>/dev/null)" = "$1" ] && echo "/dev/${{p##*/}}"
    done
}}
{prelude}echo "{ready}"
cd /
{run}
rc=$?
port=$(vport {OUT_PORT})
if [ -n "$port" ] && tar -cf {tmp}/.damon-out.tar -C /out .; then
    echo "{out}$(wc -c <{tmp}/.damon-out.tar | tr -d ' ') id={nonce}"
    cat {tmp}/.damon-out.tar >"$port"
else
    echo "damon-vm: cannot ship /out (port {OUT_PORT}: '$port')"
fi
sync
echo "{exit}$rc id={nonce}"
{poweroff}
"#
    )
}

/// The /init script (busybox ash as PID 1).
pub fn init_script(spec: &InitSpec<'_>) -> Result<String> {
    let env = env_exports(spec.env)?;
    let modules = if spec.modules.is_empty() {
        String::new()
    } else {
        let names = spec
            .modules
            .iter()
            .map(|m| module_file_name(m).map(|n| shell_quote(&n)))
            .collect::<Result<Vec<_>>>()?;
        // virtio_console announces the host's ports (and their names) from a work queue after
        // insmod returns: wait for ours before anything looks for it.
        format!(
            "# This kernel's virtio drivers are modules: load them, dependencies first.\n\
             for m in {}; do\n    \
             insmod \"/lib/modules/$m\" || echo \"damon-vm: insmod $m failed\"\n\
             done\n\
             i=0\n\
             while [ -z \"$(vport {OUT_PORT})\" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done\n",
            names.join(" ")
        )
    };
    let run = match &spec.tty {
        None => r#"sh -c "$(cat /etc/damon-vm/cmd)" </dev/null"#.to_owned(),
        Some(tty) => {
            let term_char = |b: u8| b.is_ascii_alphanumeric() || b"-._+".contains(&b);
            ensure!(
                !tty.term.is_empty() && tty.term.bytes().all(term_char),
                "invalid TERM `{}`: a terminal type is letters, digits and -._+ \
                 (e.g. xterm-256color); pass --term",
                tty.term
            );
            // setsid -c: a new session whose controlling terminal is stdin, so the command
            // gets job control, SIGWINCH and a terminal it may put in raw mode. busybox's
            // setsid execs without forking here (we are not a process group leader), so the
            // command's status is setsid's.
            // A resize on the host arrives as a line on the winsize port; stty applies it and
            // the kernel sends SIGWINCH to the app.
            format!(
                "stty -F /dev/ttyS0 sane rows {rows} cols {cols}\n\
                 winsize=$(vport {WINSIZE_PORT})\n\
                 [ -n \"$winsize\" ] && while read -r r c; do stty -F /dev/ttyS0 rows \"$r\" \
                 cols \"$c\"; done <\"$winsize\" &\n\
                 TERM={term} setsid -c sh -c \"$(cat /etc/damon-vm/cmd)\" \
                 </dev/ttyS0 >/dev/ttyS0 2>&1",
                rows = tty.rows,
                cols = tty.cols,
                term = shell_quote(tty.term),
            )
        }
    };
    Ok(format!(
        r#"#!/bin/sh
# Generated by `cargo xtask vm`: mount what tracing needs, run the command, ship /out, power off.
/bin/busybox --install -s
export PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/root TERM=vt100
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t debugfs debugfs /sys/kernel/debug
mount -t tracefs tracefs /sys/kernel/tracing
mount -t securityfs securityfs /sys/kernel/security
mount -t bpf bpf /sys/fs/bpf
mount -t tmpfs tmpfs /tmp
mount -t tmpfs -o mode=0755 tmpfs /out
ip link set lo up 2>/dev/null
ulimit -l unlimited
hostname damon-vm
{protocol}"#,
        protocol = protocol(
            spec.nonce,
            &format!("{modules}{env}"),
            &run,
            "/tmp",
            "poweroff -f"
        ),
    ))
}

/// Writes the initramfs described by `spec` to `path`.
pub fn write(path: &Path, spec: &InitSpec<'_>) -> Result<()> {
    let read = |p: &Path| {
        fs::read(p).with_context(|| format!("reading {} for the initramfs", p.display()))
    };
    let mut c = Cpio::default();
    for d in [
        "bin",
        "sbin",
        "usr",
        "usr/bin",
        "usr/sbin",
        "usr/local",
        "usr/local/bin",
        "etc",
        "etc/damon-vm",
    ]
    .into_iter()
    .chain([
        "dev", "proc", "sys", "tmp", "out", "root", "run", "mnt", "var",
    ]) {
        c.dir(d);
    }
    // The kernel opens /dev/console for init's stdio before devtmpfs is mounted.
    c.node("dev/console", 0o020600, 5, 1);
    c.file("bin/busybox", 0o755, &read(spec.busybox)?);
    c.symlink("bin/sh", "busybox");
    c.file("bin/damon-trace", 0o755, &read(spec.damon_trace)?);
    c.file("etc/damon-vm/cmd", 0o644, spec.cmd.as_bytes());
    c.file("init", 0o755, init_script(spec)?.as_bytes());
    for m in spec.modules {
        let name = module_file_name(m)?;
        c.parents(&format!("lib/modules/{name}"));
        c.file(&format!("lib/modules/{name}"), 0o644, &read(m)?);
    }
    for (host, guest) in spec.files {
        let rel = guest.strip_prefix('/').filter(|r| !r.is_empty());
        let rel = rel.with_context(|| format!("guest path `{guest}` must be absolute"))?;
        let mode = if is_executable(host) { 0o755 } else { 0o644 };
        c.parents(rel);
        c.file(rel, mode, &read(host)?);
    }
    for tree in spec.trees {
        add_tree(&mut c, tree, tree)?;
    }
    fs::write(path, c.finish()).with_context(|| format!("writing {}", path.display()))
}

/// Adds everything below `dir` (a directory inside `root`) under its path relative to `root`,
/// parents first, in name order.
fn add_tree(c: &mut Cpio, root: &Path, dir: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let mut entries: Vec<_> = fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<Result<_, _>>()
        .with_context(|| format!("reading {}", dir.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        let rel = path
            .strip_prefix(root)
            .context("tree entry outside its root")?
            .to_str()
            .with_context(|| format!("{} is not UTF-8", path.display()))?
            .to_owned();
        let meta =
            fs::symlink_metadata(&path).with_context(|| format!("reading {}", path.display()))?;
        let ft = meta.file_type();
        if ft.is_symlink() {
            let target = fs::read_link(&path)?;
            let target = target
                .to_str()
                .with_context(|| format!("link {} is not UTF-8", path.display()))?;
            c.symlink(&rel, target);
        } else if ft.is_dir() {
            c.dir(&rel);
            add_tree(c, root, &path)?;
        } else if ft.is_file() {
            let data = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            c.file(&rel, meta.permissions().mode() & 0o7777, &data);
        }
    }
    Ok(())
}

/// The file name a module gets under the guest's /lib/modules.
fn module_file_name(m: &Path) -> Result<String> {
    m.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .with_context(|| format!("module path {} has no UTF-8 file name", m.display()))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

/// A newc ("070701") cpio writer.
#[derive(Default)]
pub(crate) struct Cpio {
    buf: Vec<u8>,
    ino: u32,
    dirs: BTreeSet<String>,
}

impl Cpio {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8], rdev: (u32, u32)) {
        self.ino += 1;
        let namesize = name.len() + 1;
        let fields = [
            self.ino,
            mode,
            0,
            0,
            1,
            0,
            u32::try_from(data.len()).unwrap_or(u32::MAX),
            0,
            0,
            rdev.0,
            rdev.1,
            u32::try_from(namesize).unwrap_or(u32::MAX),
            0,
        ];
        self.buf.extend_from_slice(b"070701");
        for f in fields {
            self.buf.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.push(0);
        self.pad();
        self.buf.extend_from_slice(data);
        self.pad();
    }
    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }
    fn dir(&mut self, name: &str) {
        if self.dirs.insert(name.to_owned()) {
            self.entry(name, 0o040755, &[], (0, 0));
        }
    }
    pub(crate) fn parents(&mut self, rel: &str) {
        let mut acc = String::new();
        let comps: Vec<&str> = rel.split('/').collect();
        for comp in &comps[..comps.len().saturating_sub(1)] {
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(comp);
            self.dir(&acc.clone());
        }
    }
    pub(crate) fn file(&mut self, name: &str, perm: u32, data: &[u8]) {
        self.entry(name, 0o100000 | perm, data, (0, 0));
    }
    pub(crate) fn symlink(&mut self, name: &str, target: &str) {
        self.entry(name, 0o120777, target.as_bytes(), (0, 0));
    }
    fn node(&mut self, name: &str, mode: u32, major: u32, minor: u32) {
        self.entry(name, mode, &[], (major, minor));
    }
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[], (0, 0));
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spec running `true` with nothing else in the guest.
    fn bare() -> InitSpec<'static> {
        InitSpec {
            busybox: Path::new("/x"),
            damon_trace: Path::new("/y"),
            cmd: "true",
            env: &[],
            files: &[],
            trees: &[],
            modules: &[],
            nonce: "n",
            tty: None,
        }
    }

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(shell_quote("a'b c"), r"'a'\''b c'");
    }

    #[test]
    fn bad_env_names_are_rejected() {
        let env = [("1X".to_owned(), "v".to_owned())];
        let spec = InitSpec {
            env: &env,
            ..bare()
        };
        assert!(init_script(&spec).is_err());
    }

    #[test]
    fn modules_load_in_order_before_the_ports_are_used() {
        let spec = |modules| InitSpec { modules, ..bare() };
        let init = init_script(&spec(&[])).unwrap();
        assert!(!init.contains("insmod"), "{init}");
        let mods = [
            PathBuf::from("/cache/modules/virtio.ko"),
            PathBuf::from("/cache/modules/virtio_console.ko"),
        ];
        let init = init_script(&spec(&mods)).unwrap();
        let insmod = init
            .find("for m in 'virtio.ko' 'virtio_console.ko'; do")
            .expect(&init);
        assert!(init.contains("insmod \"/lib/modules/$m\""), "{init}");
        let wait = init
            .find("while [ -z \"$(vport damon-out)\" ]")
            .expect(&init);
        let vport_defined = init.find("vport() {").unwrap();
        let ready = init.find("DAMON_VM_READY").unwrap();
        assert!(
            vport_defined < insmod && insmod < wait && wait < ready,
            "{init}"
        );
    }

    #[test]
    fn tty_commands_own_the_serial_console_and_odd_terms_are_rejected() {
        let spec = |term| InitSpec {
            tty: Some(GuestTty {
                rows: 24,
                cols: 80,
                term,
            }),
            ..bare()
        };
        let init = init_script(&spec("xterm-256color")).unwrap();
        assert!(init.contains("stty -F /dev/ttyS0 sane rows 24 cols 80\n"));
        assert!(init.contains("TERM='xterm-256color' setsid -c sh -c"));
        assert!(init.contains("</dev/ttyS0 >/dev/ttyS0 2>&1\nrc=$?"));
        assert!(init.contains("done <\"$winsize\" &"));
        for bad in ["", "x y", "a'b;reboot"] {
            assert!(init_script(&spec(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn cpio_is_readable_by_gnu_cpio() {
        // Uses the host's cpio when present to check the format; the writer itself needs none.
        let Some(cpio) = crate::util::which("cpio") else {
            return;
        };
        let mut c = Cpio::default();
        c.dir("etc");
        c.parents("a/b/c.txt");
        c.file("a/b/c.txt", 0o644, b"hello");
        c.symlink("a/link", "b/c.txt");
        let t = tempfile::tempdir().unwrap();
        let tree = t.path().join("tree");
        fs::create_dir_all(tree.join("usr/lib")).unwrap();
        fs::write(tree.join("usr/lib/libx.so.1.2"), b"elf").unwrap();
        std::os::unix::fs::symlink("libx.so.1.2", tree.join("usr/lib/libx.so.1")).unwrap();
        std::os::unix::fs::symlink("usr/lib", tree.join("lib")).unwrap();
        add_tree(&mut c, &tree, &tree).unwrap();
        let img = t.path().join("i.cpio");
        fs::write(&img, c.finish()).unwrap();
        let out = std::process::Command::new(cpio)
            .args(["-t", "-F"])
            .arg(&img)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let names = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            names.lines().collect::<Vec<_>>(),
            [
                "etc",
                "a",
                "a/b",
                "a/b/c.txt",
                "a/link",
                "lib",
                "usr",
                "usr/lib",
                "usr/lib/libx.so.1",
                "usr/lib/libx.so.1.2"
            ]
        );
    }
}
