//! Just enough ELF and bzImage parsing to check binaries without binutils (which a fresh
//! machine may lack): static linking, the libraries a binary needs, a kernel's release string
//! and compressed payload, an ELF kernel's notes, the modules a kernel module depends on.
use std::{fs, path::Path};

use anyhow::{Context as _, Result, bail, ensure};

const PT_INTERP: u32 = 3;
const PT_NOTE: u32 = 4;
const SHT_DYNAMIC: u32 = 6;
const DT_NEEDED: u64 = 1;

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}
fn usize_at(b: &[u8], off: usize) -> Option<usize> {
    usize::try_from(u64_at(b, off)?).ok()
}

fn cstr_at(b: &[u8], off: usize) -> Option<&str> {
    let tail = b.get(off..)?;
    let end = tail.iter().position(|&c| c == 0)?;
    std::str::from_utf8(&tail[..end]).ok()
}

/// A parsed 64-bit little-endian ELF file (the only kind x86_64 tools produce).
pub struct Elf {
    bytes: Vec<u8>,
}

impl Elf {
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        ensure!(
            bytes.len() > 64 && bytes[..4] == *b"\x7fELF" && bytes[4] == 2 && bytes[5] == 1,
            "{} is not a 64-bit little-endian ELF file",
            path.display()
        );
        Ok(Self { bytes })
    }

    /// True when the kernel must hand the binary to a dynamic loader (PT_INTERP present).
    pub fn has_interpreter(&self) -> bool {
        let b = &self.bytes;
        program_headers(b).any(|ph| u32_at(b, ph) == Some(PT_INTERP))
    }

    /// The DT_NEEDED entries: the shared libraries the binary loads at startup.
    pub fn needed(&self) -> Result<Vec<String>> {
        let b = &self.bytes;
        let bad = || anyhow::anyhow!("truncated or malformed ELF section headers");
        let shoff = usize_at(b, 0x28).ok_or_else(bad)?;
        let shentsize = usize::from(u16_at(b, 0x3A).ok_or_else(bad)?);
        let shnum = usize::from(u16_at(b, 0x3C).ok_or_else(bad)?);
        let mut libs = Vec::new();
        for i in 0..shnum {
            let sh = shoff + i * shentsize;
            if u32_at(b, sh + 4) != Some(SHT_DYNAMIC) {
                continue;
            }
            let (off, size) = (
                usize_at(b, sh + 24).ok_or_else(bad)?,
                usize_at(b, sh + 32).ok_or_else(bad)?,
            );
            let link = usize::try_from(u32_at(b, sh + 40).ok_or_else(bad)?)?;
            let strtab = usize_at(b, shoff + link * shentsize + 24).ok_or_else(bad)?;
            for entry in (off..off + size).step_by(16) {
                if u64_at(b, entry) == Some(DT_NEEDED) {
                    let name = usize_at(b, entry + 8).ok_or_else(bad)?;
                    libs.push(cstr_at(b, strtab + name).ok_or_else(bad)?.to_owned());
                }
            }
        }
        Ok(libs)
    }

    /// Statically linked: runs in an initramfs that has no libc and no loader.
    pub fn is_static(&self) -> Result<bool> {
        Ok(!self.has_interpreter() && self.needed()?.is_empty())
    }
}

/// Fails unless `path` is a statically linked ELF executable.
pub fn ensure_static(path: &Path) -> Result<()> {
    let elf = Elf::read(path)?;
    if !elf.is_static()? {
        bail!(
            "{} is dynamically linked (needs {:?}); the VM's initramfs has no libc: build it for \
             x86_64-unknown-linux-musl",
            path.display(),
            elf.needed()?
        );
    }
    Ok(())
}

/// The `depends=` entry of a kernel module's `.modinfo` section: the modules that must be
/// loaded before it (what depmod writes into modules.dep), by module name.
pub fn module_depends(ko: &[u8]) -> Result<Vec<String>> {
    let modinfo = section(ko, ".modinfo")?.context("the module has no .modinfo section")?;
    let mut deps = Vec::new();
    for entry in modinfo.split(|&c| c == 0) {
        if let Some(list) = entry.strip_prefix(b"depends=") {
            let list = std::str::from_utf8(list).context("a non-UTF-8 depends= in .modinfo")?;
            deps.extend(list.split(',').filter(|n| !n.is_empty()).map(str::to_owned));
        }
    }
    Ok(deps)
}

/// Where each program header of the ELF64 image `b` starts (none when `b` is not one).
fn program_headers(b: &[u8]) -> impl Iterator<Item = usize> {
    let elf64 = b.starts_with(b"\x7fELF\x02\x01");
    let (off, size, num) = match (usize_at(b, 0x20), u16_at(b, 0x36), u16_at(b, 0x38)) {
        (Some(o), Some(s), Some(n)) if elf64 => (o, usize::from(s), usize::from(n)),
        _ => (0, 0, 0),
    };
    (0..num).map(move |i| off + i * size)
}

/// (owner, type) of every note in the PT_NOTE segments of the ELF64 image `b`.
pub fn notes(b: &[u8]) -> impl Iterator<Item = (&[u8], u32)> {
    program_headers(b)
        .filter_map(|ph| {
            (u32_at(b, ph)? == PT_NOTE).then_some((usize_at(b, ph + 8)?, usize_at(b, ph + 32)?))
        })
        .flat_map(|(off, size)| {
            let seg = b.get(off..off.saturating_add(size)).unwrap_or_default();
            let mut at = 0;
            std::iter::from_fn(move || {
                let len = |o: usize| usize::try_from(u32_at(seg, o)?).ok();
                let (namesz, descsz, kind) = (len(at)?, len(at + 4)?, u32_at(seg, at + 8)?);
                let name = seg.get(at + 12..at + 12 + namesz)?;
                let owner = name.strip_suffix(&[0]).unwrap_or(name);
                at += 12 + namesz.next_multiple_of(4) + descsz.next_multiple_of(4);
                Some((owner, kind))
            })
        })
}

/// The compressed kernel (payload) of an x86 bzImage, where its setup header says it is
/// (Documentation/arch/x86/boot.rst, protocol 2.08+: `setup_sects` at 0x1f1, `payload_offset`
/// and `payload_length` at 0x248 and 0x24c, relative to the protected-mode code); None when `bz`
/// has no such header.
pub fn bzimage_payload(bz: &[u8]) -> Option<&[u8]> {
    let setup_sects = match *bz.get(0x1f1)? {
        0 => 4,
        n => usize::from(n),
    };
    if bz.get(0x202..0x206)? != b"HdrS" {
        return None;
    }
    let word = |at: usize| usize::try_from(u32_at(bz, at)?).ok();
    let start = (setup_sects + 1) * 512 + word(0x248)?;
    bz.get(start..start.checked_add(word(0x24c)?)?)
}

/// The contents of the ELF section called `name`, if the file has one.
fn section<'a>(b: &'a [u8], name: &str) -> Result<Option<&'a [u8]>> {
    ensure!(
        b.len() > 64 && b[..4] == *b"\x7fELF" && b[4] == 2 && b[5] == 1,
        "not a 64-bit little-endian ELF file"
    );
    let bad = || anyhow::anyhow!("truncated or malformed ELF section headers");
    let shoff = usize_at(b, 0x28).ok_or_else(bad)?;
    let shentsize = usize::from(u16_at(b, 0x3A).ok_or_else(bad)?);
    let shnum = usize::from(u16_at(b, 0x3C).ok_or_else(bad)?);
    let shstrndx = usize::from(u16_at(b, 0x3E).ok_or_else(bad)?);
    let names = usize_at(b, shoff + shstrndx * shentsize + 24).ok_or_else(bad)?;
    for i in 0..shnum {
        let sh = shoff + i * shentsize;
        let sh_name = usize::try_from(u32_at(b, sh).ok_or_else(bad)?)?;
        if cstr_at(b, names + sh_name) != Some(name) {
            continue;
        }
        let (off, size) = (
            usize_at(b, sh + 24).ok_or_else(bad)?,
            usize_at(b, sh + 32).ok_or_else(bad)?,
        );
        return Ok(Some(b.get(off..off + size).ok_or_else(bad)?));
    }
    Ok(None)
}

/// The release string (what `uname -r` prints) from an x86 bzImage's setup header.
pub fn kernel_release(vmlinuz: &Path) -> Result<String> {
    let b = fs::read(vmlinuz).with_context(|| format!("reading {}", vmlinuz.display()))?;
    kernel_release_of(&b).with_context(|| {
        format!(
            "{} is not a usable kernel image; pass a vmlinuz/bzImage",
            vmlinuz.display()
        )
    })
}

/// [`kernel_release`] of an image already in memory.
pub fn kernel_release_of(b: &[u8]) -> Result<String> {
    // Boot protocol: "HdrS" at 0x202; at 0x20E a pointer (relative to 0x200) to a
    // NUL-terminated "<release> (<builder>) #<n> ..." string.
    ensure!(
        b.get(0x202..0x206) == Some(b"HdrS"),
        "no x86 bzImage setup header (HdrS)"
    );
    let ptr = usize::from(u16_at(b, 0x20E).context("truncated bzImage header")?);
    let text = cstr_at(b, 0x200 + ptr).context("bzImage kernel_version string is missing")?;
    let release = text.split_whitespace().next().unwrap_or_default();
    ensure!(!release.is_empty(), "empty kernel version string");
    Ok(release.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cargo_itself_is_dynamic_and_needs_libc() {
        let cargo = crate::util::which("cargo").expect("cargo on PATH");
        let cargo = fs::canonicalize(cargo).unwrap();
        let elf = Elf::read(&cargo).unwrap();
        if elf.has_interpreter() {
            assert!(
                elf.needed()
                    .unwrap()
                    .iter()
                    .any(|l| l.starts_with("libc.so"))
            );
            assert!(!elf.is_static().unwrap());
        }
    }

    #[test]
    fn non_elf_is_rejected() {
        let dir = std::env::temp_dir().join(format!("xtask-elf-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("not-elf");
        fs::write(&f, vec![b'x'; 200]).unwrap();
        assert!(Elf::read(&f).is_err());
        assert!(kernel_release(&f).is_err());
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A minimal relocatable ELF with a section header string table and a .modinfo section.
    fn module_with_modinfo(modinfo: &[u8]) -> Vec<u8> {
        let shstrtab = b"\0.shstrtab\0.modinfo\0";
        let mut b = vec![0u8; 64];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        let strtab_off = b.len();
        b.extend_from_slice(shstrtab);
        let modinfo_off = b.len();
        b.extend_from_slice(modinfo);
        while !b.len().is_multiple_of(8) {
            b.push(0);
        }
        let shoff = b.len();
        // Section 0 (null), 1 (.shstrtab), 2 (.modinfo).
        for (name, off, size) in [
            (0u32, 0usize, 0usize),
            (1, strtab_off, shstrtab.len()),
            (11, modinfo_off, modinfo.len()),
        ] {
            let mut sh = [0u8; 64];
            sh[..4].copy_from_slice(&name.to_le_bytes());
            sh[24..32].copy_from_slice(&(off as u64).to_le_bytes());
            sh[32..40].copy_from_slice(&(size as u64).to_le_bytes());
            b.extend_from_slice(&sh);
        }
        b[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        b[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        b[0x3C..0x3E].copy_from_slice(&3u16.to_le_bytes());
        b[0x3E..0x40].copy_from_slice(&1u16.to_le_bytes());
        b
    }

    #[test]
    fn module_depends_come_from_modinfo() {
        let ko = module_with_modinfo(b"license=GPL\0depends=virtio,virtio_ring\0retpoline=Y\0");
        assert_eq!(module_depends(&ko).unwrap(), ["virtio", "virtio_ring"]);
        let none = module_with_modinfo(b"license=GPL\0depends=\0");
        assert!(module_depends(&none).unwrap().is_empty());
        assert!(
            module_depends(b"not an elf file at all, just some bytes long enough to pass").is_err()
        );
    }

    #[test]
    fn bzimage_release_is_parsed() {
        let mut img = vec![0u8; 0x600];
        img[0x202..0x206].copy_from_slice(b"HdrS");
        img[0x20E..0x210].copy_from_slice(&0x100u16.to_le_bytes());
        let s = b"7.2.13+deb14-amd64 (debian-kernel@lists.debian.org) #1 SMP\0";
        img[0x300..0x300 + s.len()].copy_from_slice(s);
        let dir = std::env::temp_dir().join(format!("xtask-bz-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let f = dir.join("vmlinuz");
        fs::write(&f, img).unwrap();
        assert_eq!(kernel_release(&f).unwrap(), "7.2.13+deb14-amd64");
        fs::remove_dir_all(&dir).unwrap();
    }
}
