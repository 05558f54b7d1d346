//! Guest kernels: stock Debian kernels resolved through each suite's `linux-image-amd64` meta
//! package (never a pinned version the archive will drop), downloaded once and cached as
//! `<cache>/kernels/<release>/vmlinuz`, or any bzImage given by path.
use std::{
    fmt, fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    str::FromStr,
    time::Instant,
};

use anyhow::{Context as _, Result, bail};

use crate::{
    apt::{self, Apt},
    elf,
    util::{self, status},
};

/// Which kernel the guest boots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kernel {
    /// Debian sid's current 7.2.x: all four traced functions, DAMON vaddr+paddr.
    Debian72,
    /// Debian trixie's 6.12.x: the "older kernel" (lacks two of the functions).
    Debian612,
    /// A bzImage on the host.
    Path(PathBuf),
}

impl Kernel {
    /// The Debian suite that ships this kernel.
    pub fn suite(&self) -> Option<&'static str> {
        match self {
            Self::Debian72 => Some("sid"),
            Self::Debian612 => Some("trixie"),
            Self::Path(_) => None,
        }
    }
}

impl FromStr for Kernel {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "7.2" => Ok(Self::Debian72),
            "6.12" => Ok(Self::Debian612),
            _ if Path::new(s).is_file() => Ok(Self::Path(PathBuf::from(s))),
            _ => bail!(
                "unknown kernel `{s}`: use 7.2 (Debian sid), 6.12 (Debian trixie) or a path to a bzImage"
            ),
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Debian72 => f.write_str("7.2 (Debian sid)"),
            Self::Debian612 => f.write_str("6.12 (Debian trixie)"),
            Self::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// A bootable kernel on the host.
#[derive(Debug, Clone)]
pub struct KernelImage {
    pub vmlinuz: PathBuf,
    /// What `uname -r` prints in the guest, read from the bzImage header.
    pub release: String,
}

/// Returns a bootable kernel, downloading it only when the cache lacks the suite's current one.
pub fn fetch(kernel: &Kernel) -> Result<KernelImage> {
    let suite = match kernel {
        Kernel::Path(path) => {
            let vmlinuz = fs::canonicalize(path)
                .with_context(|| format!("kernel {} not found", path.display()))?;
            let release = elf::kernel_release(&vmlinuz)?;
            status("kernel", format!("{release} from {}", vmlinuz.display()));
            return Ok(KernelImage { vmlinuz, release });
        }
        Kernel::Debian72 => "sid",
        Kernel::Debian612 => "trixie",
    };
    let cache = util::cache_dir()?;
    let kernels = cache.join("kernels");
    let _lock = util::lock(&kernels.join(format!("{suite}.lock")))?;
    let marker = kernels.join(format!("{suite}.release"));
    let cached = fs::read_to_string(&marker)
        .ok()
        .map(|r| r.trim().to_owned())
        .map(|release| KernelImage {
            vmlinuz: kernels.join(&release).join("vmlinuz"),
            release,
        })
        .filter(|k| k.vmlinuz.is_file());

    match resolve_and_download(&cache, &kernels, suite) {
        Ok(k) => {
            util::write_atomic(&marker, k.release.as_bytes())?;
            Ok(k)
        }
        Err(e) => match cached {
            Some(k) => {
                status(
                    "kernel",
                    format!("warning: {e:#}; using cached {}", k.release),
                );
                Ok(k)
            }
            None => Err(e.context(format!(
                "no cached {suite} kernel and fetching one failed; check apt's network access, \
                 or pass --kernel PATH to a bzImage"
            ))),
        },
    }
}

fn resolve_and_download(cache: &Path, kernels: &Path, suite: &str) -> Result<KernelImage> {
    let mirror = apt::system_debian_mirror()?;
    let apt = Apt::new(&cache.join(format!("apt-{suite}")), &mirror, suite)?;
    if !apt.lists_fresh() {
        apt.update(&mirror)?;
    }
    // The meta package depends on the versioned image of the current ABI, e.g.
    // linux-image-7.2.13+deb14-amd64, whose name (minus the prefix) is the release.
    let image = apt
        .depends("linux-image-amd64")?
        .into_iter()
        .find(|p| p.starts_with("linux-image-") && p != "linux-image-amd64")
        .with_context(|| {
            format!("linux-image-amd64 in {suite} depends on no versioned linux-image-*")
        })?;
    let abi = image.trim_start_matches("linux-image-").to_owned();
    let cached = kernels.join(&abi).join("vmlinuz");
    if cached.is_file() {
        status(
            "kernel",
            format!("{abi} ({suite}) cached at {}", cached.display()),
        );
        return Ok(KernelImage {
            vmlinuz: cached,
            release: abi,
        });
    }
    // Newer Debian kernels split the image into linux-binary-<abi> (vmlinuz under
    // usr/lib/modules/<abi>/) and leave linux-image-<abi> nearly empty; older ones keep
    // boot/vmlinuz-<abi> in linux-image-<abi>. Try the binary package first, then the image.
    let mut candidates: Vec<String> = apt
        .depends(&image)?
        .into_iter()
        .filter(|p| p.starts_with("linux-binary-"))
        .collect();
    candidates.push(image.clone());
    let work = kernels.join(format!("tmp-{suite}-{}", std::process::id()));
    let result = candidates
        .iter()
        .filter(|p| apt.has_package(p))
        .find_map(|pkg| download_vmlinuz(&apt, pkg, &work).transpose());
    let _ = fs::remove_dir_all(&work);
    let image_bytes =
        result.with_context(|| format!("no vmlinuz in any of {candidates:?} ({suite})"))??;
    let release = elf::kernel_release_of(&image_bytes)
        .with_context(|| format!("the vmlinuz of {suite}'s {abi} is no bzImage"))?;
    if release != abi {
        status(
            "kernel",
            format!("warning: package ABI {abi} but the image says {release}"),
        );
    }
    let dir = kernels.join(&release);
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dest = dir.join("vmlinuz");
    util::write_atomic(&dest, &image_bytes)?;
    fs::write(dir.join("source"), format!("{suite} {mirror}\n"))
        .context("writing the kernel source note")?;
    status(
        "kernel",
        format!("{release} ({suite}) cached at {}", dest.display()),
    );
    Ok(KernelImage {
        vmlinuz: dest,
        release,
    })
}

/// Downloads `pkg` into `work` and returns the bytes of its vmlinuz, or None if it has none.
fn download_vmlinuz(apt: &Apt, pkg: &str, work: &Path) -> Result<Option<Vec<u8>>> {
    let _ = fs::remove_dir_all(work);
    let extract = work.join("x");
    fs::create_dir_all(&extract).with_context(|| format!("creating {}", extract.display()))?;
    let start = Instant::now();
    apt.run("apt-get", &["download", pkg], Some(work))?;
    let deb = fs::read_dir(work)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "deb"))
        .with_context(|| format!("apt-get download {pkg} left no .deb in {}", work.display()))?;
    let size = fs::metadata(&deb)?.len();
    status(
        "kernel",
        format!(
            "downloaded {pkg} ({:.1} MB in {:.1} s)",
            size as f64 / 1e6,
            start.elapsed().as_secs_f64()
        ),
    );
    // Stream the data tarball into tar and keep only vmlinuz files: the modules (~500 MB
    // unpacked) are not needed because virtio console/fs are built into these kernels.
    let mut dpkg = Command::new("dpkg-deb")
        .arg("--fsys-tarfile")
        .arg(&deb)
        .stdout(Stdio::piped())
        .spawn()
        .context("running dpkg-deb")?;
    let data = dpkg.stdout.take().context("dpkg-deb stdout")?;
    let tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(&extract)
        .args(["--wildcards", "*vmlinuz*"])
        .stdin(data)
        .stderr(Stdio::null())
        .status()
        .context("running tar")?;
    let dpkg_status = dpkg.wait().context("waiting for dpkg-deb")?;
    if !tar.success() {
        // tar fails when no member matched: this package carries no kernel image.
        return Ok(None);
    }
    if !dpkg_status.success() {
        bail!(
            "dpkg-deb --fsys-tarfile {} failed ({dpkg_status})",
            deb.display()
        );
    }
    let Some(found) = find_vmlinuz(&extract) else {
        return Ok(None);
    };
    let bytes = fs::read(&found).with_context(|| format!("reading {}", found.display()))?;
    Ok(Some(bytes))
}

/// The first regular file named `vmlinuz` or `vmlinuz-*` below `dir`.
fn find_vmlinuz(dir: &Path) -> Option<PathBuf> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).ok()?.flatten() {
            let path = entry.path();
            let ft = entry.file_type().ok()?;
            if ft.is_dir() {
                stack.push(path);
            } else if ft.is_file() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name == "vmlinuz" || name.starts_with("vmlinuz-") {
                    return Some(path);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_parse() {
        assert_eq!("7.2".parse::<Kernel>().unwrap(), Kernel::Debian72);
        assert_eq!("6.12".parse::<Kernel>().unwrap(), Kernel::Debian612);
        assert!("5.10".parse::<Kernel>().is_err());
        assert_eq!(Kernel::Debian72.suite(), Some("sid"));
    }

    #[test]
    fn vmlinuz_is_found_in_both_layouts() {
        let t = tempfile::tempdir().unwrap();
        let sid = t.path().join("sid/usr/lib/modules/7.2.13+deb14-amd64");
        fs::create_dir_all(&sid).unwrap();
        fs::write(sid.join("vmlinuz"), b"k").unwrap();
        assert_eq!(
            find_vmlinuz(&t.path().join("sid")),
            Some(sid.join("vmlinuz"))
        );
        let trixie = t.path().join("trixie/boot");
        fs::create_dir_all(&trixie).unwrap();
        fs::write(trixie.join("vmlinuz-6.12.117+deb13-amd64"), b"k").unwrap();
        assert!(find_vmlinuz(&t.path().join("trixie")).is_some());
        assert_eq!(find_vmlinuz(&t.path().join("nothing")), None);
    }
}
