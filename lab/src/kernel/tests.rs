use super::*;

#[test]
fn kernel_names_parse() {
    assert_eq!("7.3".parse::<Kernel>().unwrap(), Kernel::DEBIAN_7_3);
    assert_eq!("7.2".parse::<Kernel>().unwrap(), Kernel::DEBIAN_7_2);
    assert_eq!("6.12".parse::<Kernel>().unwrap(), Kernel::DEBIAN_6_12);
    assert_eq!("6.1".parse::<Kernel>().unwrap(), Kernel::DEBIAN_6_1);
    let err = "5.10".parse::<Kernel>().unwrap_err().to_string();
    assert!(err.contains("6.1 (Debian bookworm)"), "{err}");
    for name in ["7.3", "7.2", "6.12", "6.1"] {
        assert_eq!(name.parse::<Kernel>().unwrap().short_name(), name);
    }
    assert_eq!(
        Kernel::Path("/k/bzImage-x".into()).short_name(),
        "bzImage-x"
    );
    assert_eq!(Kernel::DEBIAN_7_2.suite(), Some("sid"));
    assert_eq!(Kernel::DEBIAN_7_3.suite(), Some("trixie-backports"));
    assert_eq!(Kernel::DEBIAN_7_3.userland_suite(), Some("trixie"));
    assert_eq!(Kernel::DEBIAN_6_1.suite(), Some("bookworm"));
    let names = kernel_names();
    for k in Kernel::all_debian() {
        let name = k.to_string();
        let short = name.split_whitespace().next().unwrap();
        assert_eq!(short.parse::<Kernel>().unwrap(), k);
        assert!(names.contains(&name), "{name} missing from {names}");
    }
    assert_eq!(
        names,
        "7.3 (Debian trixie-backports), 7.2 (Debian sid), 6.12 (Debian trixie), 6.1 (Debian \
         bookworm)"
    );
}

#[test]
fn vmlinuz_is_found_in_both_layouts() {
    let vmlinuz = |n: &str| n == "vmlinuz" || n.starts_with("vmlinuz-");
    let t = tempfile::tempdir().unwrap();
    let sid = t.path().join("sid/usr/lib/modules/7.2.13+deb14-amd64");
    fs::create_dir_all(&sid).unwrap();
    fs::write(sid.join("vmlinuz"), b"k").unwrap();
    assert_eq!(
        find_file(&t.path().join("sid"), vmlinuz),
        Some(sid.join("vmlinuz"))
    );
    let trixie = t.path().join("trixie/boot");
    fs::create_dir_all(&trixie).unwrap();
    fs::write(trixie.join("vmlinuz-6.12.117+deb13-amd64"), b"k").unwrap();
    assert!(find_file(&t.path().join("trixie"), vmlinuz).is_some());
    assert_eq!(find_file(&t.path().join("nothing"), vmlinuz), None);
}

#[test]
fn module_names_come_from_paths() {
    let name = |p| module_name(p);
    assert_eq!(
        name("kernel/drivers/char/virtio_console.ko").as_deref(),
        Some("virtio_console")
    );
    assert_eq!(
        name("./usr/lib/modules/7.3/kernel/drivers/virtio/virtio-pci.ko.xz").as_deref(),
        Some("virtio_pci")
    );
    assert_eq!(
        name("virtio_pci_modern_dev.ko").as_deref(),
        Some("virtio_pci_modern_dev")
    );
    assert_eq!(name("modules.builtin"), None);
    assert_eq!(name("kernel/foo.kobj"), None);
}

#[test]
fn modules_load_after_their_dependencies() {
    // 6.1: virtio and virtio_ring are modules too; built-in ones are not in `deps`.
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    let (pci, console, modern, legacy, ring, virtio) = (
        s(&[
            "virtio_pci_modern_dev",
            "virtio_pci_legacy_dev",
            "virtio",
            "virtio_ring",
        ]),
        s(&["virtio", "virtio_ring"]),
        s(&[]),
        s(&[]),
        s(&[]),
        s(&["virtio_ring"]),
    );
    let deps: BTreeMap<&str, &[String]> = [
        ("virtio_pci", pci.as_slice()),
        ("virtio_console", console.as_slice()),
        ("virtio_pci_modern_dev", modern.as_slice()),
        ("virtio_pci_legacy_dev", legacy.as_slice()),
        ("virtio_ring", ring.as_slice()),
        ("virtio", virtio.as_slice()),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        load_order(&GUEST_DRIVERS, &deps),
        [
            "virtio_pci_modern_dev",
            "virtio_pci_legacy_dev",
            "virtio_ring",
            "virtio",
            "virtio_pci",
            "virtio_console"
        ]
    );
    // Built in (not in `deps`): nothing to load.
    assert!(load_order(&GUEST_DRIVERS, &BTreeMap::new()).is_empty());
}

#[test]
fn module_lists_name_files_that_exist() {
    let t = tempfile::tempdir().unwrap();
    assert_eq!(read_module_list(t.path()), None, "no list: not checked yet");
    fs::write(t.path().join(MODULE_LIST), "").unwrap();
    assert_eq!(read_module_list(t.path()), Some(Vec::new()));
    fs::write(t.path().join(MODULE_LIST), "virtio.ko\nvirtio_console.ko\n").unwrap();
    assert_eq!(read_module_list(t.path()), None, "listed files missing");
    fs::create_dir_all(t.path().join("modules")).unwrap();
    for f in ["virtio.ko", "virtio_console.ko"] {
        fs::write(t.path().join("modules").join(f), b"\x7fELF").unwrap();
    }
    assert_eq!(
        read_module_list(t.path()),
        Some(vec![
            t.path().join("modules/virtio.ko"),
            t.path().join("modules/virtio_console.ko")
        ])
    );
}

#[test]
fn xz_modules_are_unpacked_on_the_host() {
    let Some(xz) = util::which("xz") else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let ko = t.path().join("m.ko");
    fs::write(&ko, b"\x7fELF module bytes").unwrap();
    assert_eq!(read_module(&ko).unwrap(), b"\x7fELF module bytes");
    let st = Command::new(xz).arg("-k").arg(&ko).status().unwrap();
    assert!(st.success());
    fs::remove_file(&ko).unwrap();
    assert_eq!(
        read_module(&t.path().join("m.ko.xz")).unwrap(),
        b"\x7fELF module bytes"
    );
    fs::write(t.path().join("m.ko.zst"), b"x").unwrap();
    assert!(read_module(&t.path().join("m.ko.zst")).is_err());
}
