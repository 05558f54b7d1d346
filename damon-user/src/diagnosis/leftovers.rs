//! Programs, maps and links of damon-trace that are loaded already (another damon-trace, or
//! pins), and who holds them.
use std::time::{Duration, Instant};

use super::{Check, Level, check};
use crate::probe::loader::inventory::{BpfObject, BpfObjects, list_bpf_objects};

/// Programs, maps or links of ours loaded now: another damon-trace is running (named, with its
/// pid, from /proc/*/fdinfo), or something pinned them.
pub(super) fn leftovers_check(objects: &BpfObjects) -> Check {
    if let Some(e) = &objects.error
        && e.contains("Operation not permitted")
    {
        // BPF_*_GET_NEXT_ID needs CAP_SYS_ADMIN even where CAP_BPF suffices to trace.
        return check(
            "leftovers",
            Level::Ok,
            "not checked: listing the kernel's BPF objects needs CAP_SYS_ADMIN",
            None,
        );
    }
    if let Some(e) = &objects.error {
        return check(
            "leftovers",
            Level::Warn,
            format!("cannot list the kernel's BPF objects: {e}"),
            Some("run as root to list them"),
        );
    }
    let ours = objects.ours();
    if ours.is_empty() {
        return check(
            "leftovers",
            Level::Ok,
            format!(
                "no damon-trace program, map or link loaded (kernel holds {} programs, {} maps, {} links)",
                objects.programs.len(),
                objects.maps.len(),
                objects.links.len()
            ),
            None,
        );
    }
    let holders = holders(objects);
    let who = if holders.is_empty() {
        "held by no process (pinned in bpffs?)".to_owned()
    } else {
        format!("held by {}", holders.join(", "))
    };
    check(
        "leftovers",
        Level::Warn,
        format!(
            "{} damon-trace objects are loaded now, {who}: {}",
            ours.len(),
            ours.join(", ")
        ),
        Some(if holders.is_empty() {
            "look for pins: `grep -rl . /sys/fs/bpf`, and remove them"
        } else {
            "another damon-trace is running: its probes add to the same functions; stop it first"
        }),
    )
}

/// How long doctor waits for objects of ours that nobody holds to go away.
const FREEING_GRACE: Duration = Duration::from_secs(3);

/// The kernel's BPF objects, once those of ours that no process holds are gone: the kernel
/// frees the maps of a closed program only after an RCU grace period, so right after a
/// damon-trace exits its maps are still listed for a moment (seen in the 7.2 guest).
pub(super) fn settled_bpf_objects() -> BpfObjects {
    let deadline = Instant::now() + FREEING_GRACE;
    loop {
        let objects = list_bpf_objects();
        let unheld = !objects.ours().is_empty() && holders(&objects).is_empty();
        if !unheld || Instant::now() >= deadline {
            return objects;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Processes holding a file descriptor of one of our objects: `pid N (comm)`.
fn holders(objects: &BpfObjects) -> Vec<String> {
    let ids = |v: &[BpfObject]| -> Vec<u32> { v.iter().filter(|o| o.ours).map(|o| o.id).collect() };
    let (progs, maps, links) = (
        ids(&objects.programs),
        ids(&objects.maps),
        ids(&objects.links),
    );
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.filter_map(Result::ok) {
        let pid = p.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fdinfo")) else {
            continue;
        };
        let holds = fds.filter_map(Result::ok).any(|fd| {
            let info = std::fs::read_to_string(fd.path()).unwrap_or_default();
            info.lines().any(|l| {
                let mut kv = l.splitn(2, ':');
                let (k, v) = (kv.next().unwrap_or(""), kv.next().unwrap_or("").trim());
                let Ok(id) = v.parse::<u32>() else {
                    return false;
                };
                match k {
                    "prog_id" => progs.contains(&id),
                    "map_id" => maps.contains(&id),
                    "link_id" => links.contains(&id),
                    _ => false,
                }
            })
        });
        if holds {
            let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
            out.push(format!("pid {pid} ({})", comm.trim()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_name_our_objects_and_stay_ok_without_them() {
        let obj = |id, kind: &str, name: Option<&str>, ours| BpfObject {
            id,
            kind: kind.to_owned(),
            name: name.map(str::to_owned),
            program_id: None,
            ours,
        };
        let mut objects = BpfObjects {
            programs: vec![obj(3, "tracing", Some("iter_prog"), false)],
            ..BpfObjects::default()
        };
        let c = leftovers_check(&objects);
        assert_eq!(c.level, Level::Ok, "{c:?}");
        assert!(c.found.contains("1 programs, 0 maps, 0 links"), "{c:?}");
        objects
            .programs
            .push(obj(9, "tracing", Some("fentry_lock_tim"), true));
        objects.maps.push(obj(4, "ringbuf", Some("EVENTS"), true));
        let c = leftovers_check(&objects);
        assert_eq!(c.level, Level::Warn, "{c:?}");
        assert!(
            c.found.contains("program fentry_lock_tim (id 9, tracing)")
                && c.found.contains("map EVENTS (id 4, ringbuf)"),
            "{c:?}"
        );
        objects.error = Some("listing maps: Operation not permitted (os error 1)".to_owned());
        let c = leftovers_check(&objects);
        assert!(
            c.level == Level::Ok && c.found.contains("CAP_SYS_ADMIN"),
            "{c:?}"
        );
        objects.error = Some("listing maps: Bad address".to_owned());
        let c = leftovers_check(&objects);
        assert!(
            c.level == Level::Warn && c.found.contains("cannot list"),
            "{c:?}"
        );
    }
}
