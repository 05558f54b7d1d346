use std::os::fd::{AsFd as _, AsRawFd as _};

use aya_obj::{Object, generated::bpf_insn};
use damon_common::{KFUNC_SESSION_COOKIE, KFUNC_SESSION_IS_RETURN};

use super::selftest::{PROGRAM, SelfTest};
use super::*;
use crate::probe::loader::programs::EBPF_OBJECT;

fn call(imm: i32, src_reg: u8) -> bpf_insn {
    // SAFETY: a plain C struct of integers.
    let mut ins: bpf_insn = unsafe { std::mem::zeroed() };
    ins.code = CALL;
    ins.set_src_reg(src_reg);
    ins.imm = imm;
    ins
}

fn kfuncs() -> Kfuncs {
    Kfuncs::new(vec![
        (KFUNC_SESSION_COOKIE, 61_234),
        (KFUNC_SESSION_IS_RETURN, 61_240),
    ])
}

fn bytes(attr: &bpf_attr) -> &[u8] {
    // SAFETY: reading a plain C union as bytes.
    unsafe {
        std::slice::from_raw_parts(
            attr as *const bpf_attr as *const u8,
            std::mem::size_of::<bpf_attr>(),
        )
    }
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

#[test]
fn placeholders_become_kfunc_calls_and_nothing_else_changes() {
    let helper = call(5, 0); // bpf_ktime_get_ns
    let subprog = call(KFUNC_SESSION_COOKIE, 1); // a bpf-to-bpf call whose offset looks alike
    let mut insns = vec![
        call(KFUNC_SESSION_COOKIE, 0),
        helper,
        call(KFUNC_SESSION_IS_RETURN, 0),
        subprog,
    ];
    assert_eq!(rewrite_kfunc_calls(&mut insns, &kfuncs()).unwrap(), 2);
    assert_eq!(
        (insns[0].src_reg(), insns[0].imm, insns[0].off),
        (BPF_PSEUDO_KFUNC_CALL as u8, 61_234, 0)
    );
    assert_eq!((insns[2].src_reg(), insns[2].imm), (2, 61_240));
    for (i, before) in [(1, helper), (3, subprog)] {
        assert_eq!(
            (insns[i].src_reg(), insns[i].imm),
            (before.src_reg(), before.imm)
        );
    }
}

#[test]
fn an_unknown_placeholder_is_an_error_not_a_helper_call() {
    let mut insns = vec![call(KFUNC_SESSION_IS_RETURN + 1, 0)];
    assert!(matches!(
        rewrite_kfunc_calls(&mut insns, &kfuncs()),
        Err(SessionError::UnknownPlaceholder(_))
    ));
    // Resolved ids missing one of the kfuncs the code calls.
    let mut insns = vec![call(KFUNC_SESSION_IS_RETURN, 0)];
    let only_cookie = Kfuncs::new(vec![(KFUNC_SESSION_COOKIE, 1)]);
    assert!(rewrite_kfunc_calls(&mut insns, &only_cookie).is_err());
}

/// The self-test program in the embedded object calls both kfuncs through placeholders, and
/// no placeholder survives the rewrite.
#[test]
fn the_embedded_session_program_calls_both_kfuncs_by_placeholder() {
    let obj = Object::parse(EBPF_OBJECT).expect("object");
    let key = obj.programs[PROGRAM].function_key();
    let mut insns = obj.functions[&key].instructions.clone();
    let placeholders = |insns: &[bpf_insn]| {
        insns
            .iter()
            .filter(|i| i.code == CALL && i.src_reg() == 0 && i.imm >= KFUNC_SESSION_COOKIE)
            .count()
    };
    assert_eq!(placeholders(&insns), 2);
    assert_eq!(rewrite_kfunc_calls(&mut insns, &kfuncs()).unwrap(), 2);
    assert_eq!(placeholders(&insns), 0);
}

/// `BPF_PROG_LOAD`'s fields at their UAPI offsets (include/uapi/linux/bpf.h), independent of
/// the generated bindings.
#[test]
fn prog_load_attr_has_the_session_attach_type_at_its_uapi_offset() {
    let insns = vec![call(5, 0); 3];
    let license = CString::new("GPL").unwrap();
    let attr = prog_load_attr(
        Kind::Kprobe,
        "sess_probe_with_a_long_name",
        &insns,
        &license,
        &mut [],
    );
    let b = bytes(&attr);
    assert_eq!(u32_at(b, 0), 2, "prog_type BPF_PROG_TYPE_KPROBE");
    assert_eq!(u32_at(b, 4), 3, "insn_cnt");
    assert_eq!(u64_at(b, 8), insns.as_ptr() as u64, "insns");
    assert_eq!(u64_at(b, 16), license.as_ptr() as u64, "license");
    assert_eq!(u32_at(b, 24), 0, "log_level without a buffer");
    assert_eq!(
        &b[48..64],
        b"sess_probe_with\0",
        "prog_name, 15 bytes and a NUL"
    );
    assert_eq!(
        u32_at(b, 68),
        56,
        "expected_attach_type BPF_TRACE_KPROBE_SESSION"
    );
    let mut log = vec![0u8; 4096];
    let attr = prog_load_attr(Kind::Kprobe, "p", &insns, &license, &mut log);
    let b = bytes(&attr);
    assert_eq!(
        (u32_at(b, 24), u32_at(b, 28)),
        (1, 4096),
        "log_level, log_size"
    );
    assert_eq!(u64_at(b, 32), log.as_ptr() as u64, "log_buf");
}

#[test]
fn link_attr_is_a_kprobe_multi_session_link_at_uapi_offsets() {
    let file = std::fs::File::open("/dev/null").unwrap();
    let name = CString::new("__x64_sys_getppid").unwrap();
    let syms = [name.as_ptr()];
    let attr = link_attr(Kind::Kprobe, file.as_fd(), &syms);
    let b = bytes(&attr);
    assert_eq!(u32_at(b, 0), file.as_raw_fd() as u32, "prog_fd");
    assert_eq!(u32_at(b, 4), 0, "target_fd");
    assert_eq!(u32_at(b, 8), 56, "attach_type");
    assert_eq!(u32_at(b, 12), 0, "flags");
    assert_eq!(u32_at(b, 16), 0, "kprobe_multi.flags (not a return probe)");
    assert_eq!(u32_at(b, 20), 1, "kprobe_multi.cnt");
    assert_eq!(u64_at(b, 24), syms.as_ptr() as u64, "kprobe_multi.syms");
    assert_eq!(u64_at(b, 32), 0, "kprobe_multi.addrs");
}

/// An fsession is a tracing program bound to the function's BTF id at load; its link names
/// only the attach type.
#[test]
fn fsession_attrs_are_a_tracing_program_and_link() {
    let insns = vec![call(5, 0)];
    let license = CString::new("GPL").unwrap();
    let kind = Kind::Fsession {
        btf_id: 4242,
        btf_obj_fd: None,
    };
    let attr = prog_load_attr(kind, "fsess_probe", &insns, &license, &mut []);
    let b = bytes(&attr);
    assert_eq!(u32_at(b, 0), 26, "prog_type BPF_PROG_TYPE_TRACING");
    assert_eq!(u32_at(b, 68), 58, "expected_attach_type BPF_TRACE_FSESSION");
    assert_eq!(u32_at(b, 108), 4242, "attach_btf_id");
    let file = std::fs::File::open("/dev/null").unwrap();
    let attr = link_attr(kind, file.as_fd(), &[]);
    let b = bytes(&attr);
    assert_eq!(u32_at(b, 8), 58, "attach_type");
    assert_eq!(&b[16..48], &[0u8; 32], "no kprobe-multi part");
}

#[test]
fn a_missing_btf_or_kfunc_names_the_kernel_feature() {
    let e = Kfuncs::resolve(None).unwrap_err().to_string();
    assert!(e.contains("/sys/kernel/btf/vmlinux"), "{e}");
    let e = SessionError::NoKfunc("bpf_session_cookie").to_string();
    assert!(e.contains("Linux 6.10 or later"), "{e}");
}

fn good() -> SelfTest {
    SelfTest {
        kind: damon_common::attach::Attach::KprobeSession,
        symbol: "__x64_sys_getppid".into(),
        calls: 1000,
        entries: 1000,
        returns: 1000,
        zero_cookies: 0,
        declined_entries: 1000,
        returns_after_decline: 0,
        zero_cookies_after_decline: 0,
        skipped: Some(0),
    }
}

#[test]
fn the_self_test_holds_only_when_the_kernel_kept_every_promise() {
    assert!(good().holds());
    // A skipped run is counted by the kernel: fewer entries are still accounted for.
    assert!(
        SelfTest {
            entries: 999,
            returns: 999,
            skipped: Some(1),
            ..good()
        }
        .holds()
    );
    let broken = [
        SelfTest {
            entries: 999,
            returns: 999,
            ..good()
        }, // a call lost and not counted
        SelfTest {
            returns: 998,
            ..good()
        }, // an entry without its return
        SelfTest {
            zero_cookies: 1,
            ..good()
        }, // a return that did not see its entry's cookie
        SelfTest {
            returns_after_decline: 3,
            ..good()
        }, // a declined entry still got a return run
    ];
    for b in broken {
        assert!(!b.holds(), "{b:?}");
    }
    // An fsession cannot decline: every entry gets its return run, and one that wrote no
    // cookie must find it zero.
    let fsession = SelfTest {
        kind: damon_common::attach::Attach::Fsession,
        returns_after_decline: 1000,
        zero_cookies_after_decline: 1000,
        ..good()
    };
    assert!(fsession.holds());
    assert!(
        !SelfTest {
            zero_cookies_after_decline: 990,
            ..fsession.clone()
        }
        .holds(),
        "a cookie left over from another invocation"
    );
    assert!(
        !SelfTest {
            returns_after_decline: 0,
            zero_cookies_after_decline: 0,
            ..fsession.clone()
        }
        .holds(),
        "return runs missing"
    );
    let line = good().describe();
    assert!(
        line.contains("1000 calls → 1000 entry and 1000 return runs, 0 cookies lost"),
        "{line}"
    );
}
