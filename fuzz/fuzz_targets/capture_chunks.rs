//! Past the checksums: builds a version-2 file with valid CRCs around fuzzer-chosen chunk
//! payloads, so the zstd decoder, the column decoder and the JSON readers see arbitrary data
//! (`capture_reader` mostly stops at the CRC, which is the point of a CRC).
//!
//! Input: flags byte (bit 0: compress payloads, so what is fuzzed is the decoded content;
//! bit 1: start with a valid metadata chunk), then chunks of
//! `kind selector u8 | length u16 LE | raw_len u16 LE (used when not compressing) | payload`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../damon-user/src/capture/mod.rs"]
mod capture;

const META: &str = r#"{"tool_version":"0.1.0","kernel":{"release":"7.2","version":"v","boot_id":"b"},"start_unix_ns":1,"start_monotonic_ns":2,"command_line":[],"mode":"stream","ring_size":4096,"functions":[{"name":"lock_timer_base","id":3,"attach":"fentry"}]}"#;

fn chunk(out: &mut Vec<u8>, kind: u32, raw_len: u32, stored: &[u8]) {
    let mut head = Vec::with_capacity(12);
    head.extend_from_slice(&kind.to_le_bytes());
    head.extend_from_slice(&raw_len.to_le_bytes());
    head.extend_from_slice(&(stored.len() as u32).to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&head);
    crc.update(stored);
    out.extend_from_slice(&head);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(stored);
}

fn compressed(raw: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(raw, ruzstd::encoding::CompressionLevel::Fastest)
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, mut rest)) = data.split_first() else {
        return;
    };
    let compress = flags & 1 != 0;
    let mut file = b"DMNTRCAP".to_vec();
    file.extend_from_slice(&2u32.to_le_bytes());
    file.extend_from_slice(&0u32.to_le_bytes());
    if flags & 2 != 0 {
        chunk(
            &mut file,
            1,
            META.len() as u32,
            &compressed(META.as_bytes()),
        );
    }
    while rest.len() >= 5 {
        let kind = [1, 2, 3, 4, 5, 99][usize::from(rest[0] % 6)];
        let len = usize::from(u16::from_le_bytes([rest[1], rest[2]])).min(rest.len() - 5);
        let raw_len = u32::from(u16::from_le_bytes([rest[3], rest[4]]));
        let payload = &rest[5..5 + len];
        rest = &rest[5 + len..];
        if compress {
            chunk(&mut file, kind, payload.len() as u32, &compressed(payload));
        } else {
            chunk(&mut file, kind, raw_len, payload);
        }
    }
    // To keep an input as a host regression test, replay it with this set: the built capture
    // file lands in that directory (copy it to damon-user/tests/data/fuzz-regressions/).
    if let Some(dir) = std::env::var_os("DAMON_FUZZ_DUMP") {
        let name = format!("chunks-{:08x}.bin", crc32fast::hash(data));
        let _ = std::fs::write(std::path::Path::new(&dir).join(name), &file);
    }
    let strict = capture::format::load(&file, true);
    let tolerant = capture::format::load(&file, false);
    if let Ok(s) = &strict {
        match &tolerant {
            Ok(t) => assert_eq!(s.capture, t.capture),
            Err(e) => panic!("strict read succeeded, tolerant failed: {e}"),
        }
    }
});
