//! Struct member offsets from the running kernel's BTF (`/sys/kernel/btf/vmlinux`).
//!
//! Rust eBPF has no CO-RE relocations, so the programs cannot name struct fields; userspace
//! finds the few offsets they need here and passes them as globals. aya 0.14 parses BTF but
//! keeps member lookup crate-private, so this reads the format directly (kernel
//! Documentation/bpf/btf.rst): a header, a type section and a string section.
//!
//! Why hand-written: the lookup needed is narrow (a struct by name, a direct member's byte
//! offset, its type resolved through typedefs and qualifiers to an integer of the expected size
//! or a pointer, bit-fields refused) and the format it reads is a stable kernel ABI. A general
//! BTF crate would be a second BTF parser beside aya's in the binary, for a handful of offsets
//! read once at start; this one is checked by host tests on a hand-built blob and on the running
//! kernel's BTF where there is one, and runs in the guests on every Debian kernel the VM tests
//! boot, whose value tests read through these offsets.
use std::collections::HashMap;

const BTF_MAGIC: u16 = 0xeb9f;
const KIND_INT: u32 = 1;
const KIND_PTR: u32 = 2;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_TYPE_TAG: u32 = 18;

#[derive(Debug, Clone)]
struct Type {
    kind: u32,
    name_off: u32,
    /// `size` for INT/STRUCT/UNION/ENUM, `type` for modifiers and pointers.
    size_or_type: u32,
    kind_flag: bool,
    /// STRUCT/UNION members: (name offset, type id, offset field).
    members: Vec<(u32, u32, u32)>,
    /// ARRAY: (element type id, number of elements).
    array: Option<(u32, u32)>,
}

/// The parsed type table of one BTF blob.
pub struct Btf {
    types: Vec<Type>,
    strings: Vec<u8>,
    structs: HashMap<String, u32>,
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, String> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or_else(|| format!("BTF ends early at byte {at}"))
}

impl Btf {
    pub fn from_sys_fs() -> Result<Btf, String> {
        let bytes = super::sysfiles::vmlinux_btf()?;
        let _t = crate::timing::phase("btf: vmlinux parsed by our parser (field offsets)");
        Btf::parse(&bytes)
    }

    /// Parses a little-endian BTF blob.
    pub fn parse(b: &[u8]) -> Result<Btf, String> {
        if b.len() < 24 || u16::from_le_bytes([b[0], b[1]]) != BTF_MAGIC {
            return Err("not little-endian BTF (bad magic)".to_owned());
        }
        let hdr_len = u32_at(b, 4)? as usize;
        let type_off = u32_at(b, 8)? as usize;
        let type_len = u32_at(b, 12)? as usize;
        let str_off = u32_at(b, 16)? as usize;
        let str_len = u32_at(b, 20)? as usize;
        let types_at = hdr_len + type_off;
        let strings = b
            .get(hdr_len + str_off..hdr_len + str_off + str_len)
            .ok_or("BTF string section out of bounds")?
            .to_vec();
        let end = types_at + type_len;
        if end > b.len() {
            return Err("BTF type section out of bounds".to_owned());
        }
        // Type id 0 is `void`.
        let mut types = vec![Type {
            kind: 0,
            name_off: 0,
            size_or_type: 0,
            kind_flag: false,
            members: Vec::new(),
            array: None,
        }];
        let mut pos = types_at;
        while pos < end {
            let name_off = u32_at(b, pos)?;
            let info = u32_at(b, pos + 4)?;
            let size_or_type = u32_at(b, pos + 8)?;
            pos += 12;
            let vlen = (info & 0xffff) as usize;
            let kind = (info >> 24) & 0x1f;
            let mut members = Vec::new();
            let mut array = None;
            let extra = match kind {
                KIND_INT => 4,
                KIND_ARRAY => {
                    array = Some((u32_at(b, pos)?, u32_at(b, pos + 8)?));
                    12
                }
                KIND_STRUCT | KIND_UNION => {
                    for i in 0..vlen {
                        let m = pos + i * 12;
                        members.push((u32_at(b, m)?, u32_at(b, m + 4)?, u32_at(b, m + 8)?));
                    }
                    vlen * 12
                }
                6 | 13 => vlen * 8,   // ENUM, FUNC_PROTO
                14 | 17 => 4,         // VAR, DECL_TAG
                15 | 19 => vlen * 12, // DATASEC, ENUM64
                2 | 7 | 8 | 9 | 10 | 11 | 12 | 16 | 18 => 0,
                other => return Err(format!("unknown BTF kind {other}")),
            };
            pos += extra;
            types.push(Type {
                kind,
                name_off,
                size_or_type,
                kind_flag: info >> 31 == 1,
                members,
                array,
            });
        }
        let mut btf = Btf {
            types,
            strings,
            structs: HashMap::new(),
        };
        for (id, t) in btf.types.iter().enumerate() {
            if t.kind == KIND_STRUCT && t.name_off != 0 {
                let name = btf.name(t.name_off).to_owned();
                btf.structs.entry(name).or_insert(id as u32);
            }
        }
        Ok(btf)
    }

    /// The type `tid` with typedefs and qualifiers peeled off.
    fn resolved(&self, mut tid: u32) -> Option<&Type> {
        for _ in 0..16 {
            let t = self.types.get(tid as usize)?;
            match t.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    tid = t.size_or_type
                }
                _ => return Some(t),
            }
        }
        None
    }

    /// How many `size`-byte integers the type `tid` is: 1 for such an integer, n for an array
    /// of n of them; `None` for anything else.
    fn int_count(&self, tid: u32, size: u32) -> Option<u32> {
        let t = self.resolved(tid)?;
        match (t.kind, t.array) {
            (KIND_INT, _) if t.size_or_type == size => Some(1),
            (KIND_ARRAY, Some((elem, n))) if n > 0 && self.int_count(elem, size) == Some(1) => {
                Some(n)
            }
            _ => None,
        }
    }

    /// `struct strukt` and its `member`'s type id and offset field.
    fn struct_member(&self, strukt: &str, member: &str) -> Result<(&Type, u32, u32), String> {
        let &id = self
            .structs
            .get(strukt)
            .ok_or_else(|| format!("struct {strukt} is not in the kernel's BTF"))?;
        let t = &self.types[id as usize];
        let &(_, mtype, off) = t
            .members
            .iter()
            .find(|(n, _, _)| self.name(*n) == member)
            .ok_or_else(|| format!("struct {strukt} has no member {member}"))?;
        Ok((t, mtype, off))
    }

    /// The byte offset of `member` of `struct strukt` and how many `size`-byte integers it is
    /// (an integer, or an array of them).
    pub fn int_array_member(
        &self,
        strukt: &str,
        member: &str,
        size: u32,
    ) -> Result<(u32, u32), String> {
        let (t, mtype, off) = self.struct_member(strukt, member)?;
        let bits = if t.kind_flag { off & 0x00ff_ffff } else { off };
        let n = self
            .int_count(mtype, size)
            .filter(|_| bits % 8 == 0 && (!t.kind_flag || off >> 24 == 0))
            .ok_or_else(|| format!("{strukt}.{member} is not {size}-byte integers"))?;
        Ok((bits / 8, n))
    }

    /// The `size`-byte integers of the struct a typedef names (`irq_cpustat_t`): the byte offset
    /// of the first and how many follow without a gap. Members before the first that are
    /// smaller (a flag byte) are allowed; anything else among them is refused.
    pub fn typedef_int_run(&self, typedef: &str, size: u32) -> Result<(u32, u32), String> {
        let t = self
            .types
            .iter()
            .find(|t| t.kind == KIND_TYPEDEF && self.name(t.name_off) == typedef)
            .and_then(|t| self.resolved(t.size_or_type))
            .filter(|t| t.kind == KIND_STRUCT)
            .ok_or_else(|| format!("no typedef {typedef} of a struct in the kernel's BTF"))?;
        let mut run: Option<(u32, u32)> = None;
        for &(name, mtype, off) in &t.members {
            let bits = if t.kind_flag { off & 0x00ff_ffff } else { off };
            let at = bits / 8;
            match (self.int_count(mtype, size), run) {
                (Some(n), None) if bits % 8 == 0 => run = Some((at, n)),
                (Some(n), Some((start, len))) if at == start + len * size => {
                    run = Some((start, len + n))
                }
                (None, None) => {}
                _ => {
                    return Err(format!(
                        "{typedef}.{} breaks the run of {size}-byte counts",
                        self.name(name)
                    ));
                }
            }
        }
        run.ok_or_else(|| format!("{typedef} has no {size}-byte counts"))
    }

    fn name(&self, off: u32) -> &str {
        let rest = self.strings.get(off as usize..).unwrap_or_default();
        let len = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
        std::str::from_utf8(&rest[..len]).unwrap_or("")
    }

    /// `sizeof(struct strukt)`.
    pub fn struct_size(&self, strukt: &str) -> Result<u32, String> {
        let &id = self
            .structs
            .get(strukt)
            .ok_or_else(|| format!("struct {strukt} is not in the kernel's BTF"))?;
        Ok(self.types[id as usize].size_or_type)
    }

    /// Byte offset of `member` in `struct strukt`, checked to be a pointer (8 bytes).
    pub fn ptr_member_offset(&self, strukt: &str, member: &str) -> Result<u32, String> {
        self.member_offset(strukt, member, None)
    }

    /// Byte offset of `member` in `struct strukt`, checked to be a whole (not bit-field)
    /// integer of `size` bytes, as the eBPF program reads it.
    pub fn int_member_offset(&self, strukt: &str, member: &str, size: u32) -> Result<u32, String> {
        self.member_offset(strukt, member, Some(size))
    }

    /// `int_size`: `Some(n)` for an n-byte integer, `None` for a pointer.
    fn member_offset(
        &self,
        strukt: &str,
        member: &str,
        int_size: Option<u32>,
    ) -> Result<u32, String> {
        let size = int_size.unwrap_or(8);
        let (t, mtype, off) = self.struct_member(strukt, member)?;
        let (bits, bitfield) = if t.kind_flag {
            (off & 0x00ff_ffff, off >> 24)
        } else {
            (off, 0)
        };
        if bitfield != 0 || bits % 8 != 0 {
            return Err(format!("{strukt}.{member} is a bit-field"));
        }
        // Resolve typedefs and qualifiers down to the integer.
        let mut tid = mtype;
        for _ in 0..16 {
            let mt = self
                .types
                .get(tid as usize)
                .ok_or_else(|| format!("{strukt}.{member}: bad type id {tid}"))?;
            match mt.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    tid = mt.size_or_type
                }
                KIND_INT if int_size == Some(mt.size_or_type) => return Ok(bits / 8),
                KIND_PTR if int_size.is_none() => return Ok(bits / 8),
                _ => {
                    return Err(format!(
                        "{strukt}.{member} is not a {} in this kernel",
                        if int_size.is_some() {
                            format!("{size}-byte integer")
                        } else {
                            "pointer".to_owned()
                        }
                    ));
                }
            }
        }
        Err(format!("{strukt}.{member}: type chain too deep"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a BTF blob: `unsigned int`, a typedef of it, and
    /// `struct damon_region { unsigned long ar[2]; u32 nr_accesses @16; int flags:3 @20; u32 age @40 }`.
    fn blob() -> Vec<u8> {
        let mut strings = b"\0unsigned int\0u32\0damon_region\0nr_accesses\0age\0flags\0".to_vec();
        let s = |name: &str, strings: &[u8]| {
            strings
                .windows(name.len() + 1)
                .position(|w| &w[..name.len()] == name.as_bytes() && w[name.len()] == 0)
                .unwrap() as u32
        };
        let mut types = Vec::new();
        let mut push = |v: &[u32]| v.iter().for_each(|x| types.extend(x.to_le_bytes()));
        // 1: INT "unsigned int" size 4, 32 bits
        push(&[s("unsigned int", &strings), KIND_INT << 24, 4, 32]);
        // 2: TYPEDEF u32 -> 1
        push(&[s("u32", &strings), KIND_TYPEDEF << 24, 1]);
        // 3: STRUCT damon_region, kind_flag set (bit-field encoding), 3 members, size 48
        push(&[
            s("damon_region", &strings),
            (1 << 31) | (KIND_STRUCT << 24) | 3,
            48,
        ]);
        push(&[s("nr_accesses", &strings), 2, 16 * 8]);
        push(&[s("flags", &strings), 1, (3 << 24) | (20 * 8)]);
        push(&[s("age", &strings), 1, 40 * 8]);
        let mut b = Vec::new();
        b.extend(BTF_MAGIC.to_le_bytes());
        b.extend([1u8, 0]);
        for v in [24u32, 0, types.len() as u32, types.len() as u32] {
            b.extend(v.to_le_bytes());
        }
        b.extend((strings.len() as u32).to_le_bytes());
        b.extend(&types);
        b.append(&mut strings);
        b
    }

    #[test]
    fn finds_offsets_through_typedefs_and_rejects_bitfields() {
        let btf = Btf::parse(&blob()).expect("parses");
        assert_eq!(
            btf.int_member_offset("damon_region", "nr_accesses", 4),
            Ok(16)
        );
        assert_eq!(btf.int_member_offset("damon_region", "age", 4), Ok(40));
        assert!(btf.int_member_offset("damon_region", "age", 8).is_err());
        assert!(btf.int_member_offset("damon_region", "flags", 4).is_err());
        assert!(btf.int_member_offset("damon_region", "nope", 4).is_err());
        assert!(btf.int_member_offset("damon_ctx", "age", 4).is_err());
        assert!(btf.ptr_member_offset("damon_region", "age").is_err());
        assert_eq!(btf.struct_size("damon_region"), Ok(48));
        assert!(Btf::parse(&blob()[..10]).is_err());
    }

    /// On a host with BTF, the real `struct damon_region` (when DAMON is built in).
    #[test]
    fn parses_the_running_kernels_btf() {
        let Ok(btf) = Btf::from_sys_fs() else {
            return; // no BTF on this host: nothing to check
        };
        assert!(btf.structs.contains_key("task_struct"));
        if btf.structs.contains_key("damon_region") {
            let n = btf
                .int_member_offset("damon_region", "nr_accesses", 4)
                .unwrap();
            let a = btf.int_member_offset("damon_region", "age", 4).unwrap();
            assert!(n >= 24 && a > n, "nr_accesses {n} age {a}");
        }
    }
}
