//! Hints speak to a user on a production machine: no string the binary can print (help,
//! errors, warnings, remedies) names a development command such as `cargo xtask`, which
//! exists only in this source tree. The binary itself is searched, so every message is
//! covered however it is built, and test code (not in the binary) is not.
mod common;

/// The binary's bytes as text (non-UTF-8 bytes replaced): its string literals stay intact.
fn binary() -> String {
    let bytes = std::fs::read(common::BIN).expect("the damon-trace binary");
    String::from_utf8_lossy(&bytes).into_owned()
}

#[test]
fn no_message_names_a_development_command() {
    let bin = binary();
    // The search sees the messages: one remedy that must be there is found.
    assert!(bin.contains("Remedy: boot a kernel with lockdown=none"));
    for dev in ["cargo xtask", "xtask vm", "xtask ab"] {
        assert!(!bin.contains(dev), "the binary's strings mention `{dev}`");
    }
}
