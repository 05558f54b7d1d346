//! Kernel addresses to names, for the stacks of slow calls (`record --slow`): `/proc/kallsyms`
//! parsed once into a table sorted by address.
//!
//! A name is `symbol+0xoffset`, with ` [module]` after a module's symbol; an address no symbol
//! covers is [`UNKNOWN`], never the address itself: captures hold no kernel address
//! (docs/guarantees.md), which would give away the kernel's layout (KASLR). `/proc/kallsyms`
//! shows every address as 0 to a reader without the right (`kptr_restrict`, CAP_SYSLOG):
//! [`Symbols::hidden`] says so, and then every frame is unknown.
use std::io;

/// How far past a symbol's start an address may be and still be named by it when no later
/// symbol bounds it (the last symbol of the table).
const LAST_SYMBOL_SPAN: u64 = 1 << 20;

/// The name of a frame no symbol covers.
pub const UNKNOWN: &str = "[unknown]";

/// The module name kallsyms gives BPF programs and trampolines.
const BPF_MODULE: &str = "bpf";

#[derive(Debug, Default)]
pub struct Symbols {
    /// `(address, name, module)`, sorted by address.
    table: Vec<(u64, String, Option<String>)>,
    /// Every address read was 0: kallsyms hides them from this process.
    hidden: bool,
}

impl Symbols {
    /// Parses `/proc/kallsyms`'s text (every symbol kind: text, data, BPF programs).
    pub fn parse(text: &str) -> Symbols {
        let mut table = Vec::new();
        let mut any = false;
        let mut nonzero = false;
        for line in text.lines() {
            let mut parts = line.split_whitespace();
            let (Some(addr), Some(_kind), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            any = true;
            if addr == 0 {
                continue;
            }
            nonzero = true;
            let module = parts
                .next()
                .map(|m| m.trim_start_matches('[').trim_end_matches(']').to_owned());
            table.push((addr, name.to_owned(), module));
        }
        table.sort_by_key(|(a, _, _)| *a);
        Symbols {
            table,
            hidden: any && !nonzero,
        }
    }

    /// Reads `/proc/kallsyms` now (after the probes are loaded, so that their programs and
    /// trampolines are in it).
    pub fn read() -> io::Result<Symbols> {
        Ok(Symbols::parse(&std::fs::read_to_string("/proc/kallsyms")?))
    }

    /// Whether kallsyms hid every address from this process (all zeros).
    pub fn hidden(&self) -> bool {
        self.hidden
    }

    /// The symbol covering `addr`: its index in the table and the offset into it.
    fn lookup(&self, addr: u64) -> Option<(usize, u64)> {
        let i = self.table.partition_point(|(a, _, _)| *a <= addr);
        let i = i.checked_sub(1)?;
        let off = addr - self.table[i].0;
        let last = i + 1 == self.table.len();
        (!last || off < LAST_SYMBOL_SPAN).then_some((i, off))
    }

    /// `symbol+0xoffset`, ` [module]` appended for a module's symbol; [`UNKNOWN`] when no
    /// symbol covers `addr`.
    pub fn name(&self, addr: u64) -> String {
        match self.lookup(addr) {
            Some((i, off)) => {
                let (_, name, module) = &self.table[i];
                match module {
                    Some(m) => format!("{name}+{off:#x} [{m}]"),
                    None => format!("{name}+{off:#x}"),
                }
            }
            None => UNKNOWN.to_owned(),
        }
    }

    /// Whether `addr` is in a BPF program or trampoline (the probe machinery).
    fn in_bpf(&self, addr: u64) -> bool {
        self.lookup(addr)
            .is_some_and(|(i, _)| self.table[i].2.as_deref() == Some(BPF_MODULE))
    }

    /// Whether `addr` is inside the symbol `name`.
    fn in_symbol(&self, addr: u64, name: &str) -> bool {
        self.lookup(addr)
            .is_some_and(|(i, _)| self.table[i].1 == name)
    }

    /// The stack of a call of `traced`, names innermost first, from the function's caller on:
    /// without the leading frames in BPF programs and trampolines (under fexit and fsession
    /// the walk starts in the probe's program, then its trampoline) and then any in `traced`
    /// itself (the trampoline's return address is the patched call at the function's entry).
    pub fn stack(&self, ips: &[u64], traced: &str) -> Vec<String> {
        let start = ips
            .iter()
            .take_while(|&&a| self.in_bpf(a))
            .chain(
                ips.iter()
                    .skip_while(|&&a| self.in_bpf(a))
                    .take_while(|&&a| self.in_symbol(a, traced)),
            )
            .count();
        ips[start..].iter().map(|&a| self.name(a)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KALLSYMS: &str = "\
ffffffff81000000 T _stext
ffffffff81234500 T vfs_read
ffffffff81234900 T ksys_read
ffffffff81234a00 t __pfx_x
ffffffffc0001000 t ext4_read [ext4]
ffffffffc0002000 t bpf_prog_0123456789abcdef_fexit_vfs_read [bpf]
ffffffffc0003000 t bpf_trampoline_6442 [bpf]
";

    #[test]
    fn names_addresses_by_the_symbol_below() {
        let s = Symbols::parse(KALLSYMS);
        assert!(!s.hidden());
        assert_eq!(s.name(0xffffffff81234500), "vfs_read+0x0");
        assert_eq!(s.name(0xffffffff812348ff), "vfs_read+0x3ff");
        assert_eq!(s.name(0xffffffff81234910), "ksys_read+0x10");
        assert_eq!(s.name(0xffffffffc0001010), "ext4_read+0x10 [ext4]");
        // Below the first symbol, or far past the last: the address.
        assert_eq!(s.name(0x1000), UNKNOWN);
        assert_eq!(s.name(0xffffffffd0000000), UNKNOWN);
    }

    #[test]
    fn leading_bpf_frames_are_dropped_others_kept() {
        let s = Symbols::parse(KALLSYMS);
        let ips = [
            0xffffffffc0002010, // the program
            0xffffffffc0003020, // its trampoline
            0xffffffff81234509, // the traced function's patched entry
            0xffffffff81234920, // the caller
            0xffffffffc0002010, // a BPF frame further out stays
            0xffffffff81234509, // and so does the function further out (recursion)
        ];
        let names = s.stack(&ips, "vfs_read");
        assert_eq!(names.len(), 3);
        assert_eq!(names[0], "ksys_read+0x20");
        assert!(names[1].ends_with("[bpf]"), "{names:?}");
        assert_eq!(names[2], "vfs_read+0x9");
        // A kretprobe's walk starts at the caller: nothing dropped.
        assert_eq!(s.stack(&ips[3..4], "vfs_read"), ["ksys_read+0x20"]);
    }

    #[test]
    fn zeroed_addresses_are_detected() {
        let s = Symbols::parse("0000000000000000 T _stext\n0000000000000000 T vfs_read\n");
        assert!(s.hidden());
        assert_eq!(s.name(0xffffffff81234500), UNKNOWN);
        assert!(!Symbols::parse("").hidden());
    }
}
