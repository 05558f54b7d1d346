//! A kernel's ELF image (`vmlinux`) for a direct boot at its PVH entry: QEMU starts an ELF
//! kernel that carries a `XEN_ELFNOTE_PHYS32_ENTRY` note there, without the bzImage's real-mode
//! setup and decompressor. Under TCG the decompressor is the slow part of a boot: measured on
//! the 2-core host, Debian's 7.2 without an initramfs reached its panic for want of a root
//! 1.6 s sooner (4.0–4.5 -> 2.3–2.9 s after QEMU started; docs/development.md has more). The
//! decompressor is also what randomises the kernel's base (KASLR), so a direct boot runs the
//! kernel at its link address.
//!
//! The image is extracted once from the cached bzImage (`vmlinux` beside `vmlinuz`) with the
//! host's `zstd` or `xz`, as the bzImage's setup header locates its payload
//! ([`crate::elf::bzimage_payload`]). A payload in another format, or an image without the note
//! ([`crate::elf::notes`]), is not booted directly: the caller keeps the bzImage.
use std::{
    fs,
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context as _, Result, bail};

use crate::{host, util};

/// XEN_ELFNOTE_PHYS32_ENTRY (include/xen/interface/elfnote.h): the 32-bit PVH entry point.
const PHYS32_ENTRY: u32 = 18;

/// What compressed the kernel in a bzImage's payload (the ones Debian's kernels use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// 7.x, 6.12.
    Zstd,
    /// 6.1.
    Xz,
}

/// The compressed kernel inside `bz` and its format; None when `bz` is no bzImage (boot
/// protocol 2.08+) or the format is another one.
pub fn payload(bz: &[u8]) -> Option<(Compression, &[u8])> {
    let data = crate::elf::bzimage_payload(bz)?;
    let format = if data.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else if data.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Compression::Xz
    } else {
        return None;
    };
    Some((format, data))
}

/// Whether the ELF image `elf` has the PVH entry note (an ELF64 note segment whose owner is
/// "Xen" and whose type is [`PHYS32_ENTRY`]).
pub fn has_pvh_entry(elf: &[u8]) -> bool {
    crate::elf::notes(elf).any(|(owner, kind)| owner == b"Xen" && kind == PHYS32_ENTRY)
}

/// The ELF image of the bzImage `vmlinuz`, `vmlinux` beside it, extracted on first use; None
/// when it cannot be booted directly (see the module docs).
pub fn elf_image(vmlinuz: &Path) -> Result<Option<PathBuf>> {
    let out = vmlinuz.with_file_name("vmlinux");
    let none = vmlinuz.with_file_name("vmlinux.none");
    let _lock = util::lock(&vmlinuz.with_file_name("vmlinux.lock"))?;
    if out.is_file() {
        return Ok(Some(out));
    }
    if none.is_file() {
        return Ok(None);
    }
    let bz = fs::read(vmlinuz).with_context(|| format!("reading {}", vmlinuz.display()))?;
    let Some((format, data)) = payload(&bz) else {
        fs::write(&none, "payload neither zstd nor xz\n")?;
        return Ok(None);
    };
    let elf = decompress(format, data)?;
    if !has_pvh_entry(&elf) {
        fs::write(&none, "no PVH entry note\n")?;
        return Ok(None);
    }
    let tmp = out.with_extension("partial");
    fs::write(&tmp, &elf).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, &out).with_context(|| format!("renaming {}", tmp.display()))?;
    util::status(
        "kernel",
        format!(
            "{} ({} MiB, booted at its PVH entry)",
            out.display(),
            elf.len() >> 20
        ),
    );
    Ok(Some(out))
}

/// The payload decompressed by the host's `zstd` or `xz`. The kernel's build appends the
/// uncompressed size (4 bytes) to the stream: zstd is given the frame without it, xz reads one
/// stream and ignores what follows.
fn decompress(format: Compression, data: &[u8]) -> Result<Vec<u8>> {
    let mut cmd = match format {
        Compression::Zstd => {
            let mut c = Command::new(host::ensure_zstd()?);
            // The kernel compresses with a 2^27+ window (zstd -22 --ultra).
            c.args(["-d", "-q", "-c", "--memory=2048MB"]);
            c
        }
        Compression::Xz => {
            let mut c = Command::new(host::ensure_xz()?);
            c.args(["-d", "-q", "-c", "--single-stream"]);
            c
        }
    };
    let input = match format {
        Compression::Zstd => &data[..data.len().saturating_sub(4)],
        Compression::Xz => data,
    };
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {format:?} to unpack the kernel"))?;
    let mut stdin = child.stdin.take().context("decompressor stdin")?;
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().context("unpacking the kernel")?;
    let _ = writer.join();
    if !out.status.success() {
        bail!(
            "unpacking the kernel with {format:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bzImage's header with its payload where the boot protocol says.
    fn bzimage(payload: &[u8]) -> Vec<u8> {
        let mut bz = vec![0u8; 5 * 512];
        bz[0x1f1] = 4;
        bz[0x202..0x206].copy_from_slice(b"HdrS");
        bz[0x248..0x24c].copy_from_slice(&100u32.to_le_bytes());
        let len = u32::try_from(payload.len()).unwrap();
        bz[0x24c..0x250].copy_from_slice(&len.to_le_bytes());
        bz.extend(vec![0u8; 100]);
        bz.extend_from_slice(payload);
        bz.extend_from_slice(b"trailer");
        bz
    }

    #[test]
    fn payload_is_found_by_the_setup_header_and_its_magic() {
        let zst = [0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3];
        assert_eq!(payload(&bzimage(&zst)), Some((Compression::Zstd, &zst[..])));
        let xz = [0xfd, b'7', b'z', b'X', b'Z', 0, 9];
        assert_eq!(payload(&bzimage(&xz)), Some((Compression::Xz, &xz[..])));
        // gzip, or no boot header: not booted directly.
        assert_eq!(payload(&bzimage(&[0x1f, 0x8b, 8, 0])), None);
        let mut no_header = bzimage(&zst);
        no_header[0x202] = b'X';
        assert_eq!(payload(&no_header), None);
        assert_eq!(payload(&[0u8; 16]), None);
    }

    /// An ELF64 image with one PT_NOTE segment holding `notes` (owner, type).
    fn elf_with_notes(notes: &[(&str, u32)]) -> Vec<u8> {
        let mut seg = Vec::new();
        for (owner, kind) in notes {
            let name = format!("{owner}\0");
            seg.extend(u32::try_from(name.len()).unwrap().to_le_bytes());
            seg.extend(4u32.to_le_bytes());
            seg.extend(kind.to_le_bytes());
            seg.extend(name.as_bytes());
            seg.resize(seg.len().next_multiple_of(4), 0);
            seg.extend([0xaa; 4]);
        }
        let mut elf = vec![0u8; 64 + 56];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        elf[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        elf[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        elf[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        elf[64..68].copy_from_slice(&4u32.to_le_bytes());
        elf[64 + 8..64 + 16].copy_from_slice(&120u64.to_le_bytes());
        elf[64 + 32..64 + 40].copy_from_slice(&(seg.len() as u64).to_le_bytes());
        elf.extend(seg);
        elf
    }

    #[test]
    fn the_pvh_entry_is_the_xen_phys32_entry_note() {
        assert!(has_pvh_entry(&elf_with_notes(&[("GNU", 3), ("Xen", 18)])));
        assert!(!has_pvh_entry(&elf_with_notes(&[("Xen", 6), ("GNU", 18)])));
        assert!(!has_pvh_entry(&elf_with_notes(&[])));
        assert!(!has_pvh_entry(b"MZ not an elf"));
    }
}
