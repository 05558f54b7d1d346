//! The capture reader on arbitrary bytes: it must never panic, never allocate without bound,
//! and the strict and tolerant readers must agree wherever the strict one succeeds.
//!
//! The capture module is compiled from its source (it depends on nothing else in damon-user
//! for exactly this reason), so what is fuzzed is what ships.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../damon-user/src/capture/mod.rs"]
mod capture;

fuzz_target!(|data: &[u8]| {
    let strict = capture::format::load(data, true);
    let tolerant = capture::format::load(data, false);
    if let Ok(s) = &strict {
        match &tolerant {
            Ok(t) => assert_eq!(s.capture, t.capture),
            Err(e) => panic!("strict read succeeded, tolerant failed: {e}"),
        }
    }
});
