//! The guest side of `cargo xtask bench`'s overhead runs: the shell script one boot runs
//! (`guest.sh`, its `{{NAME}}`s filled in here).
use super::table::Config;

/// Each round's order of the configurations: rotated by one per round, so that none always
/// runs right after the same other one (bpftrace's teardown, say) or at the same point of a
/// round.
pub fn round_order(round: u32, configs: &[Config]) -> Vec<Config> {
    let k = configs.len();
    (0..k).map(|i| configs[(i + round as usize) % k]).collect()
}

/// The guest script of the overhead runs; writes `/out/runs/<round>-<config>.*`. Round 0 is a
/// warm-up (every configuration once, into `/out/warmup`, not collected): the first attach
/// and the first loop of a boot pay for cold caches.
pub fn guest_script(func: &str, calls: u64, rounds: u32, configs: &[Config]) -> String {
    let rounds_lines: String = (0..=rounds)
        .map(|r| {
            let order: Vec<&str> = round_order(r, configs).iter().map(|c| c.name()).collect();
            let dir = if r == 0 { "/out/warmup" } else { "/out/runs" };
            format!("run_round {r} {dir} {}\n", order.join(" "))
        })
        .collect();
    crate::script::fill(
        include_str!("guest.sh"),
        &[
            ("FUNC", func),
            ("CALLS", &calls.to_string()),
            ("RING", &ring_bytes(calls).to_string()),
            ("ROUNDS", &rounds_lines),
        ],
    )
}

/// A ring (power of two) that holds the loop's calls and its warm-up with room to spare, so a
/// paused reader loses nothing.
pub fn ring_bytes(calls: u64) -> u64 {
    let records = calls + calls / 10 + 4096;
    (records * 64 * 5 / 4).next_power_of_two().max(1 << 22)
}
