//! One floor measured: a calibration tracer loaded for the request, the empty functions
//! called through `BPF_PROG_TEST_RUN`, their durations (stream) or the kernel's buckets
//! (kernel mode) summarised into the floor, the floor functions' medians and the held-out check.
use std::{
    collections::BTreeMap,
    os::fd::{AsRawFd as _, RawFd},
};

use anyhow::{Context as _, bail};
use damon_common::{FIRST_USER_FUNC, HistStats, hist_bucket_bounds};

use super::{BATCH, FLOOR_FUNCTIONS, FloorRequest, HELD_OUT_FUNCTION, RING_BYTES, WARM_UP, ids};
use crate::{
    capture::{AttachState, FunctionCounters},
    probe::tracer::{LoadOptions, Tracer, ring::decode},
    stats::calibration::{Floor, FloorBucket, FloorDistribution, FunctionMedian, HeldOut},
    trace::TracedFunction,
};

const HELD_OUT_ID: u32 = FIRST_USER_FUNC + FLOOR_FUNCTIONS.len() as u32;

/// One function's calls as the kernel histogram saw them between two readings.
type HistDelta = (Vec<FloorBucket>, u128, u64, u64);

/// Loads a calibration tracer for one request, calls the empty functions, and summarises.
pub(super) fn measure(
    r: &FloorRequest,
    calls: u64,
    progress: &mut dyn FnMut(u64),
) -> anyhow::Result<Floor> {
    let mut tracer = {
        let _t = crate::timing::phase("calibration probes: Tracer::load");
        load_tracer(r)?
    };
    let run = {
        let _t = crate::timing::phase("test runs, drains, detach");
        run_calls(&mut tracer, r, calls, progress)?
    };
    let (per_function, pooled) = match &run.hists_before {
        None => stream_distributions(&run.timed),
        Some(before) => kernel_distributions(before, &tracer.kernel_histograms()?, r),
    };
    let floor = pooled.context("the probes timed no call of the empty functions")?;
    let untimed = ids()
        .filter(|&(id, _)| id != HELD_OUT_ID)
        .map(|(id, _)| run.seen(id))
        .sum::<u64>()
        .saturating_sub(floor.count);
    Ok(summarise(r, &per_function, floor, untimed))
}

/// The calibration tracer of one request, every calibration function attached its way.
fn load_tracer(r: &FloorRequest) -> anyhow::Result<Tracer> {
    let tracer = Tracer::load(&LoadOptions {
        functions: ids()
            .map(|(id, symbol)| TracedFunction {
                id,
                symbol: symbol.to_owned(),
            })
            .collect(),
        attach: r.attach.into(),
        ring_size: RING_BYTES,
        mode: r.mode,
        filter: Default::default(),
        debug_probes: Default::default(),
        slow_ns: 0,
    })
    .context("loading the calibration probes")?;
    let want = AttachState::Traced(r.attach);
    for s in tracer.statuses() {
        if s.attach != want {
            let why = s.detail.as_deref().unwrap_or("not attached");
            match s.attach {
                AttachState::Missing => bail!(
                    "{} is not in this kernel ({why}); it comes with the BPF test-run code \
                     (CONFIG_BPF_SYSCALL and CONFIG_NET)",
                    s.name
                ),
                _ => bail!("{} could not be traced with {}: {why}", s.name, r.attach),
            }
        }
    }
    Ok(tracer)
}

/// What the timed test runs left: stream mode's durations per function id, kernel mode's
/// histograms before them, and the call counters around them.
struct Run {
    timed: BTreeMap<u32, Vec<u64>>,
    hists_before: Option<KernelHistograms>,
    counters_before: BTreeMap<u32, FunctionCounters>,
    counters_after: BTreeMap<u32, FunctionCounters>,
}

type KernelHistograms = BTreeMap<u32, (HistStats, Vec<u64>)>;

impl Run {
    /// Calls of function `id` the probes saw during the timed runs.
    fn seen(&self, id: u32) -> u64 {
        let calls = |m: &BTreeMap<u32, FunctionCounters>| m.get(&id).map_or(0, |c| c.calls);
        calls(&self.counters_after) - calls(&self.counters_before)
    }
}

/// Warm-up runs (not timed), then `calls` test runs in batches with the ring drained in
/// between; the probes are detached at the end.
fn run_calls(
    tracer: &mut Tracer,
    r: &FloorRequest,
    calls: u64,
    progress: &mut dyn FnMut(u64),
) -> anyhow::Result<Run> {
    let trigger: RawFd = tracer
        .calibration_trigger()
        .context("loading the calibration trigger")?
        .as_raw_fd();
    let stream = r.mode.mode.streams();
    let mut ring = if stream {
        Some(tracer.take_ring()?)
    } else {
        None
    };
    // Stream mode: every duration, per function id.
    let mut timed: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    let mut drain = |timed: Option<&mut BTreeMap<u32, Vec<u64>>>| {
        let Some(ring) = ring.as_mut() else { return };
        let mut timed = timed;
        while let Some(item) = ring.next() {
            if let (Some(rec), Some(t)) = (decode(&item), timed.as_deref_mut())
                && rec.func >= FIRST_USER_FUNC
                && rec.func <= HELD_OUT_ID
            {
                t.entry(rec.func).or_default().push(rec.duration_ns);
            }
        }
    };
    for _ in 0..WARM_UP {
        test_run(trigger)?;
    }
    drain(None);
    let hists_before = if stream {
        None
    } else {
        Some(tracer.kernel_histograms()?)
    };
    let counters_before = tracer.counters()?;
    let mut done = 0;
    while done < calls {
        let n = BATCH.min(calls - done);
        for _ in 0..n {
            test_run(trigger)?;
        }
        done += n;
        drain(Some(&mut timed));
        progress(done);
    }
    tracer.detach();
    drain(Some(&mut timed));
    Ok(Run {
        timed,
        hists_before,
        counters_before,
        counters_after: tracer.counters()?,
    })
}

/// Per function, its own distribution; and the pool of the floor functions (the held-out one
/// left out).
type Distributions = (
    Vec<(u32, Option<FloorDistribution>)>,
    Option<FloorDistribution>,
);

/// Stream mode: from every timed duration.
fn stream_distributions(timed: &BTreeMap<u32, Vec<u64>>) -> Distributions {
    let per: Vec<(u32, Option<FloorDistribution>)> = ids()
        .map(|(id, _)| {
            let d = timed.get(&id).map(Vec::as_slice).unwrap_or_default();
            (id, FloorDistribution::from_durations(d))
        })
        .collect();
    let pool: Vec<u64> = ids()
        .filter(|&(id, _)| id != HELD_OUT_ID)
        .flat_map(|(id, _)| timed.get(&id).cloned().unwrap_or_default())
        .collect();
    (per, FloorDistribution::from_durations(&pool))
}

/// Kernel mode: from what the kernel's histograms gained during the timed runs.
fn kernel_distributions(
    before: &KernelHistograms,
    after: &KernelHistograms,
    r: &FloorRequest,
) -> Distributions {
    let delta = |id: u32| -> Option<HistDelta> {
        let (s1, b1) = after.get(&id)?;
        let (s0, b0) = before.get(&id)?;
        let buckets = b1
            .iter()
            .zip(b0)
            .enumerate()
            .map(|(i, (n1, n0))| {
                let (lo, hi) = hist_bucket_bounds(i as u32, r.mode.hist_width_ns);
                FloorBucket {
                    lo_ns: lo,
                    hi_ns: hi,
                    count: n1 - n0,
                }
            })
            .collect();
        // The kernel's min and max are since load (warm-up included): bounds, not
        // exact for the counted calls; the sum is exact.
        Some((
            buckets,
            u128::from(s1.sum_ns - s0.sum_ns),
            s1.min_ns,
            s1.max_ns,
        ))
    };
    let per = ids()
        .map(|(id, _)| {
            let d = delta(id).and_then(|(b, sum, min, max)| {
                FloorDistribution::from_buckets(b, Some(sum), min, max)
            });
            (id, d)
        })
        .collect();
    let mut pool: Option<HistDelta> = None;
    for (id, _) in ids().filter(|&(id, _)| id != HELD_OUT_ID) {
        let Some((b, sum, min, max)) = delta(id) else {
            continue;
        };
        pool = Some(match pool {
            None => (b, sum, min, max),
            Some((mut pb, ps, pmin, pmax)) => {
                for (p, x) in pb.iter_mut().zip(&b) {
                    p.count += x.count;
                }
                (pb, ps + sum, pmin.min(min), pmax.max(max))
            }
        });
    }
    let pooled =
        pool.and_then(|(b, sum, min, max)| FloorDistribution::from_buckets(b, Some(sum), min, max));
    (per, pooled)
}

/// The floor, the floor functions' own medians, and the held-out function corrected by it.
fn summarise(
    r: &FloorRequest,
    per_function: &[(u32, Option<FloorDistribution>)],
    floor: FloorDistribution,
    untimed: u64,
) -> Floor {
    let name = |id: u32| ids().find(|&(i, _)| i == id).map_or("", |(_, f)| f);
    let held_out = per_function
        .iter()
        .find(|(id, _)| *id == HELD_OUT_ID)
        .and_then(|(_, d)| d.as_ref())
        .map(|h| HeldOut {
            function: HELD_OUT_FUNCTION.to_owned(),
            count: h.count,
            median_ns: h.median_ns,
            corrected_median_ns: floor.correct(h.median_ns),
            uncertainty_ns: 0.0,
        });
    let functions = per_function
        .iter()
        .filter(|(id, _)| *id != HELD_OUT_ID)
        .filter_map(|(id, d)| {
            d.as_ref().map(|d| FunctionMedian {
                function: name(*id).to_owned(),
                count: d.count,
                median_ns: d.median_ns,
            })
        })
        .collect();
    let mut out = Floor {
        floor: Some(floor),
        functions,
        held_out,
        untimed,
        ..Floor::empty(r.attach, r.mode.mode)
    };
    out.settle_uncertainty();
    out
}

/// `BPF_PROG_TEST_RUN` of the trigger: the kernel calls `bpf_fentry_test1..N` once each.
///
/// A raw bpf(2) call: aya 0.14 offers test runs for fexit programs only, and the tracing
/// handler needs nothing but the program fd (it rejects any flag, CPU or batch size).
fn test_run(prog_fd: RawFd) -> anyhow::Result<()> {
    /// `union bpf_attr`, zeroed but for `test.prog_fd` (its first field); larger than the
    /// kernel's `test` member, and the kernel requires the tail beyond what it knows be zero.
    #[repr(C, align(8))]
    struct Attr([u32; 32]);
    const BPF_PROG_TEST_RUN: libc::c_long = 10;
    let mut attr = Attr([0; 32]);
    attr.0[0] = prog_fd as u32;
    // SAFETY: `attr` is a valid, writable bpf_attr-sized buffer for the duration of the call;
    // the kernel reads and writes only within the size passed.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_TEST_RUN,
            &mut attr as *mut Attr,
            std::mem::size_of::<Attr>(),
        )
    };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        bail!("BPF_PROG_TEST_RUN of the calibration trigger failed: {e}");
    }
    Ok(())
}
