use super::*;

#[test]
fn boots_interleave_before_after_after_before() {
    let s: Vec<String> = schedule(3)
        .into_iter()
        .map(|(side, i)| format!("{}-{i}", side.name()))
        .collect();
    assert_eq!(
        s.join(" "),
        "before-1 after-1 after-2 before-2 before-3 after-3"
    );
}

#[test]
fn record_args_follow_the_options() {
    let mut o = AbOptions::new(Kernel::DEBIAN_6_12, Kernel::DEBIAN_7_2);
    let stream = record_args(&o); // measures disturbance, for `compare --clean`
    assert_eq!(stream, "--duration 20s --attach fentry --disturbance");
    o.functions = vec!["damon_hot_score".into(), "lock_timer_base".into()];
    o.mode = Some(Mode::Kernel);
    o.attach = Attach::Kprobe;
    o.seconds = 5;
    assert_eq!(
        record_args(&o),
        "--duration 5s --attach kprobe --functions damon_hot_score,lock_timer_base \
         --mode kernel"
    );
    o.scenario_args = "--dest-node same".into();
    let cmd = guest_cmd(&o, "");
    assert!(
        cmd.contains("scenario migrate-hot --duration 95s --dest-node same"),
        "{cmd}"
    );
    assert!(cmd.contains(&format!("record -o /out/{CAPTURE} --duration 5s")));
    assert!(cmd.ends_with(script::STOP_SCENARIO), "{cmd}");
    assert!(
        o.out_dir.ends_with("ab/6.12-vs-7.2"),
        "{}",
        o.out_dir.display()
    );
}

#[test]
fn captures_are_found_by_side_and_numeric_index() {
    let dir = tempfile::tempdir().expect("temp dir");
    let names = "before-10.dtcap before-2.dtcap after-1.dtcap before-1.dtcap other.dtcap \
                 before-0.dtcap after-x.dtcap runs.json";
    for n in names.split_whitespace() {
        fs::write(dir.path().join(n), "").expect("write");
    }
    fs::create_dir(dir.path().join("guest-after-1")).expect("mkdir");
    fs::create_dir(dir.path().join("keep")).expect("mkdir");
    let (b, a) = captures(dir.path()).expect("listing");
    let names = |v: &[PathBuf]| -> Vec<String> {
        v.iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(
        names(&b),
        ["before-1.dtcap", "before-2.dtcap", "before-10.dtcap"]
    );
    assert_eq!(names(&a), ["after-1.dtcap"]);
    clear(dir.path()).expect("clear");
    let mut left: Vec<String> = fs::read_dir(dir.path())
        .expect("read")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["keep"]);
}
