//! A kernel module's function as the target of a trampoline program (fsession): the module's
//! BTF object, passed at load as `attach_btf_obj_fd`, and the function's id in it. aya resolves
//! targets in vmlinux BTF only (aya-rs/aya#301), so a livepatched function, which lives in its
//! livepatch module, could be timed with kprobes only.
//!
//! A module's BTF (`/sys/kernel/btf/<module>`) is split BTF on top of vmlinux's: its type ids
//! continue after the last vmlinux id, and a name offset below vmlinux's string section's length
//! points into vmlinux's strings. The walk below reads only what it needs: each type's kind and
//! name, stepping over the kind's trailing data (`include/uapi/linux/btf.h`).
use std::{
    ffi::CStr,
    os::fd::{AsRawFd as _, OwnedFd},
    path::Path,
};

use aya_obj::generated::bpf_btf_info;

use crate::probe::loader::skips::{BTF_OBJECTS, kernel_objects, object_info};

const BTF_MAGIC: u16 = 0xeb9f;
/// `BTF_KIND_FUNC`.
const KIND_FUNC: u32 = 12;

/// The parts of one BTF blob the search needs.
#[derive(Debug)]
struct Blob<'a> {
    /// (kind, name offset) of each type, in id order (the first is id 1, or the base's count + 1).
    types: Vec<(u32, u32)>,
    strings: &'a [u8],
}

fn u32_at(raw: &[u8], off: usize) -> Option<u32> {
    raw.get(off..off + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Bytes of data that follow a type of `kind` with `vlen` members.
fn trailing(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        // INT, VAR, DECL_TAG: one u32.
        1 | 14 | 17 => 4,
        // ARRAY: type, index type, count.
        3 => 12,
        // STRUCT, UNION, DATASEC, ENUM64: 12-byte members.
        4 | 5 | 15 | 19 => 12 * vlen,
        // ENUM, FUNC_PROTO: 8-byte members.
        6 | 13 => 8 * vlen,
        // PTR, FWD, TYPEDEF, VOLATILE, CONST, RESTRICT, FUNC, FLOAT, TYPE_TAG: nothing.
        2 | 7..=12 | 16 | 18 => 0,
        _ => return None,
    })
}

fn parse(raw: &[u8]) -> Result<Blob<'_>, String> {
    let magic = raw.get(0..2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    if magic != Some(BTF_MAGIC) {
        return Err("not BTF (bad magic)".to_owned());
    }
    let field = |off| {
        u32_at(raw, off)
            .ok_or("truncated BTF header")
            .map(|v| v as usize)
    };
    let hdr_len = field(4)?;
    let (type_off, type_len) = (field(8)?, field(12)?);
    let (str_off, str_len) = (field(16)?, field(20)?);
    let types_raw = raw
        .get(hdr_len + type_off..hdr_len + type_off + type_len)
        .ok_or("truncated BTF type section")?;
    let strings = raw
        .get(hdr_len + str_off..hdr_len + str_off + str_len)
        .ok_or("truncated BTF string section")?;
    let mut types = Vec::new();
    let mut at = 0;
    while at < types_raw.len() {
        let (Some(name_off), Some(info)) = (u32_at(types_raw, at), u32_at(types_raw, at + 4))
        else {
            return Err("truncated BTF type".to_owned());
        };
        let kind = (info >> 24) & 0x1f;
        let vlen = (info & 0xffff) as usize;
        let extra = trailing(kind, vlen).ok_or(format!("unknown BTF kind {kind}"))?;
        types.push((kind, name_off));
        at += 12 + extra;
    }
    Ok(Blob { types, strings })
}

/// The name at `off` of a blob whose base (if any) has `base_strings`.
fn name<'a>(blob: &Blob<'a>, base_strings: &'a [u8], off: u32) -> Option<&'a [u8]> {
    let off = off as usize;
    let (table, off) = if off < base_strings.len() {
        (base_strings, off)
    } else {
        (blob.strings, off - base_strings.len())
    };
    let s = table.get(off..)?;
    Some(&s[..s.iter().position(|&b| b == 0)?])
}

/// The BTF id of function `symbol` in the module BTF `module` (split on `vmlinux`).
fn function_id(vmlinux: &[u8], module: &[u8], symbol: &str) -> Result<Option<u32>, String> {
    let base = parse(vmlinux)?;
    let split = parse(module)?;
    let first = base.types.len() as u32 + 1;
    Ok(split
        .types
        .iter()
        .position(|&(kind, off)| {
            kind == KIND_FUNC && name(&split, base.strings, off) == Some(symbol.as_bytes())
        })
        .map(|i| first + i as u32))
}

/// A module function's BTF object and id, found by searching every module's BTF.
pub struct ModuleFunction {
    pub btf_id: u32,
    /// The module's BTF object (`attach_btf_obj_fd`).
    pub btf: OwnedFd,
}

/// Finds `symbol` among the functions of the modules' BTF under `/sys/kernel/btf`; `Ok(None)`
/// when no module has it.
pub fn find(symbol: &str) -> Result<Option<ModuleFunction>, String> {
    let dir = Path::new("/sys/kernel/btf");
    let vmlinux =
        crate::probe::facts::sysfiles::vmlinux_btf().map_err(|e| format!("vmlinux BTF: {e}"))?;
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let module = entry.file_name().to_string_lossy().into_owned();
        if module == "vmlinux" {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path()) else {
            continue;
        };
        if let Some(btf_id) = function_id(&vmlinux, &raw, symbol)? {
            let btf = btf_object(&module)?;
            return Ok(Some(ModuleFunction { btf_id, btf }));
        }
    }
    Ok(None)
}

/// An fd of the kernel's BTF object named `module` (one per loaded module with BTF).
fn btf_object(module: &str) -> Result<OwnedFd, String> {
    kernel_objects(BTF_OBJECTS)
        .find(|fd| {
            let mut name = [0u8; 64];
            // SAFETY: a C struct of integers, for which all zeroes is valid.
            let mut info: bpf_btf_info = unsafe { std::mem::zeroed() };
            info.name = name.as_mut_ptr() as u64;
            info.name_len = name.len() as u32;
            object_info(fd.as_raw_fd(), &mut info).is_ok()
                && info.kernel_btf != 0
                && CStr::from_bytes_until_nul(&name).map(CStr::to_bytes) == Ok(module.as_bytes())
        })
        .ok_or_else(|| format!("no BTF object of module {module} is loaded"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BTF blob of `types` (each `(kind, name offset, vlen)`, with zeroed trailing data)
    /// and `strings`.
    fn blob(types: &[(u32, u32, u32)], strings: &[u8]) -> Vec<u8> {
        let mut t = Vec::new();
        for &(kind, name_off, vlen) in types {
            t.extend(name_off.to_le_bytes());
            t.extend(((kind << 24) | vlen).to_le_bytes());
            t.extend(0u32.to_le_bytes());
            t.resize(t.len() + trailing(kind, vlen as usize).unwrap(), 0);
        }
        let mut raw = Vec::new();
        raw.extend(BTF_MAGIC.to_le_bytes());
        raw.extend([1u8, 0]);
        for v in [
            24u32,
            0,
            t.len() as u32,
            t.len() as u32,
            strings.len() as u32,
        ] {
            raw.extend(v.to_le_bytes());
        }
        raw.extend(t);
        raw.extend(strings);
        raw
    }

    #[test]
    fn a_module_function_s_id_follows_the_base_ids_and_its_name_the_base_strings() {
        // Base: INT "int", STRUCT "s" with 2 members, FUNC_PROTO with 1 param, FUNC "f".
        let base = blob(
            &[(1, 1, 0), (4, 5, 2), (13, 0, 1), (12, 7, 0)],
            b"\0int\0s\0f\0",
        );
        // Module: PTR, FUNC "lp_f" (own string), FUNC "f" (base string).
        let base_str_len = 9;
        let module = blob(
            &[(2, 0, 0), (12, base_str_len + 1, 0), (12, 7, 0)],
            b"\0lp_f\0",
        );
        assert_eq!(function_id(&base, &module, "lp_f"), Ok(Some(6)));
        assert_eq!(function_id(&base, &module, "f"), Ok(Some(7)));
        assert_eq!(function_id(&base, &module, "g"), Ok(None));
        // A struct is not a function.
        assert_eq!(function_id(&base, &module, "s"), Ok(None));
        assert!(
            function_id(b"nope", &module, "f")
                .unwrap_err()
                .contains("bad magic")
        );
    }

    /// The running kernel's vmlinux BTF (where this host has one) walks to its end.
    #[test]
    fn the_host_s_vmlinux_btf_walks_to_its_end() {
        let Ok(raw) = std::fs::read("/sys/kernel/btf/vmlinux") else {
            return;
        };
        let b = parse(&raw).expect("vmlinux BTF parses");
        assert!(b.types.len() > 10_000, "{} types", b.types.len());
        let funcs = b.types.iter().filter(|t| t.0 == KIND_FUNC).count();
        assert!(funcs > 1000, "{funcs} functions");
    }
}
