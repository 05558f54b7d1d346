use super::*;

fn func(symbol: &str) -> TracedFunction {
    TracedFunction {
        id: 9,
        symbol: symbol.to_owned(),
    }
}

#[test]
fn functions_take_their_trial_or_say_why_there_was_none() {
    let kallsyms = Kallsyms::parse("ffff0001 T a_fn\nffff0002 t b_fn.isra.0\n");
    let ftrace: HashSet<String> = ["a_fn".to_owned()].into();
    let trials = [ProbeTrial {
        func: func("a_fn"),
        in_btf: true,
        fentry: "EPERM".to_owned(),
        kprobe: "ok".to_owned(),
    }];
    let fs = function_diagnoses(
        &[func("a_fn"), func("b_fn")],
        &trials,
        &kallsyms,
        Some(&ftrace),
        None,
    );
    let (a, b) = (&fs[0], &fs[1]);
    assert!(a.traceable && a.btf && a.ftrace == Some(true), "{a:?}");
    assert_eq!((a.fentry.as_str(), a.kprobe.as_str()), ("EPERM", "ok"));
    assert_eq!(a.kallsyms, SymbolPresence::Present);
    assert!(!b.traceable && !b.btf && b.ftrace == Some(false), "{b:?}");
    assert_eq!(b.fentry, "not tried (no privileges)");
    assert_eq!(b.kprobe, "not tried (no privileges)");
    assert!(matches!(b.kallsyms, SymbolPresence::ClonesOnly(_)));
    let none = function_diagnoses(&[func("a_fn")], &[], &kallsyms, None, None);
    assert_eq!(none[0].ftrace, None);
}

#[test]
fn pure_checks_pick_their_level() {
    let missing = MissingCaps(vec!["CAP_BPF"]);
    let c = privileges_check(&Err(missing));
    assert_eq!(c.level, Level::Fail);
    assert!(c.remedy.as_deref().is_some_and(|r| r.contains("setcap")));
    assert_eq!(
        privileges_check(&Ok("CAP_SYS_ADMIN".into())).level,
        Level::Ok
    );
    assert_eq!(
        lockdown_check(Some(Lockdown::Confidentiality)).level,
        Level::Fail
    );
    assert_eq!(lockdown_check(Some(Lockdown::Integrity)).level, Level::Ok);
    assert_eq!(lockdown_check(None).level, Level::Ok);
    assert_eq!(scenario_check(None).level, Level::Ok);
    let left = scenario_check(Some(ScenarioLeftover::Left {
        found: "kdamond 0".into(),
        remedy: "echo 0".into(),
    }));
    assert_eq!(
        (left.level, left.remedy.as_deref()),
        (Level::Warn, Some("echo 0"))
    );
    let ok = tracefs_check(&Ok(["x".to_owned()].into()));
    assert_eq!(
        (ok.level, ok.found.as_str()),
        (Level::Ok, "1 functions available to ftrace")
    );
    assert_eq!(tracefs_check(&Err("EPERM".into())).level, Level::Warn);
    let root_only = tracefs_check(&Err("cannot read …: Permission denied (os error 13)".into()));
    assert_eq!(root_only.level, Level::Warn);
    assert!(
        root_only
            .remedy
            .unwrap()
            .starts_with("tracefs is readable by root only")
    );
}

#[test]
fn verdict_puts_this_process_first_then_the_kernel() {
    let fail = |name, found: &str| check(name, Level::Fail, found, Some("fix it"));
    let funcs = function_diagnoses(&[func("a_fn")], &[], &Kallsyms::default(), None, None);
    let both = [
        fail("memlock", "low memlock"),
        fail("privileges", "no caps"),
    ];
    let v = verdict(&both, &funcs, None, true, false);
    assert_eq!(v, "cannot trace: no caps; fix it");
    let v = verdict(&both[..1], &funcs, None, true, false);
    assert_eq!(v, "cannot trace: low memlock; fix it");
    let v = verdict(&[], &funcs, Some(Lockdown::Confidentiality), false, false);
    assert!(
        v.starts_with("cannot trace here: kernel lockdown=confidentiality")
            && v.contains("no kprobes")
            && v.contains("none of the selected functions exists"),
        "{v}"
    );
    let traced = FunctionDiagnosis {
        traceable: true,
        ..function_diagnoses(&[func("a_fn")], &[], &Kallsyms::default(), None, None).remove(0)
    };
    let v = verdict(&[], &[traced], None, true, true);
    assert_eq!(v, "tracing works: 1 of 1 functions can be traced");
}

/// `doctor --leftovers`: clean only when the kernel listed its objects and none is ours; the
/// text shows the one check as the full report does.
#[test]
fn leftovers_alone_are_clean_only_when_listed_and_none_is_ours() {
    use crate::probe::loader::inventory::{BpfObject, BpfObjects};
    let object = |id, name: &str, ours| BpfObject {
        id,
        kind: "tracing".to_owned(),
        name: Some(name.to_owned()),
        program_id: None,
        ours,
    };
    let theirs = BpfObjects {
        programs: vec![object(3, "sd_fw_ingress", false)],
        ..BpfObjects::default()
    };
    let l = leftovers_of(theirs.clone(), "7.2.0-test".to_owned());
    assert!(l.clean, "{l:?}");
    let text = render::render_leftovers_text(&l);
    assert!(
        text.starts_with("damon-trace doctor --leftovers — kernel 7.2.0-test\n"),
        "{text}"
    );
    assert!(
        text.contains("ok    leftovers   no damon-trace program"),
        "{text}"
    );

    let mut ours = theirs.clone();
    ours.programs.push(object(7, "fexit_lock_time", true));
    let l = leftovers_of(ours, "7.2.0-test".to_owned());
    assert!(!l.clean);
    let text = render::render_leftovers_text(&l);
    assert!(
        text.contains("warn  leftovers   1 damon-trace objects are loaded now"),
        "{text}"
    );
    let json = render::render_json(&l).expect("json");
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(v["clean"], false);
    assert_eq!(v["bpf_objects"]["programs"][1]["ours"], true, "{v}");
    assert!(v["schema_version"].is_u64(), "{v}");

    let unlisted = BpfObjects {
        error: Some("BPF_PROG_GET_NEXT_ID: Operation not permitted".to_owned()),
        ..BpfObjects::default()
    };
    let l = leftovers_of(unlisted, "7.2.0-test".to_owned());
    assert!(!l.clean, "nothing listed is not clean: {l:?}");
}
