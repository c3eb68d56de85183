//! How the reclaimer thread is scheduled. A test binary of its own: it finds the thread by name
//! among this process's threads, so no other store may run beside it.
#![cfg(target_os = "linux")]

mod common;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use common::{TObj, access};
use snapinformer_store::{ReclaimPriority, StoreBuilder};

/// `SCHED_IDLE` in `sched(7)`.
const SCHED_IDLE: u64 = 5;
/// `SCHED_OTHER`.
const SCHED_OTHER: u64 = 0;

/// The scheduling policy of every thread of this process named `snapinformer-reclaim`.
fn reclaimer_policies() -> Vec<u64> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").expect("procfs is mounted") {
        let dir = task.expect("a task entry").path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        // The kernel keeps the first 15 bytes of a thread's name.
        if comm.trim_end() != &"snapinformer-reclaim"[..15] {
            continue;
        }
        // A thread that was joined may still be listed while the kernel finishes its exit, and
        // be gone by the time its `stat` is read: it is no longer a thread of this process.
        let stat = match std::fs::read_to_string(dir.join("stat")) {
            Ok(stat) => stat,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("reading {}: {e}", dir.join("stat").display()),
        };
        // Fields after the command name (which may hold spaces), from field 3 (`state`) on;
        // `policy` is field 41.
        let after = stat.rsplit_once(')').expect("stat has a command name").1;
        let policy = after.split_whitespace().nth(41 - 3).expect("stat has a policy field");
        found.push(policy.parse().expect("a numeric policy"));
    }
    found
}

/// Waits until no thread named `snapinformer-reclaim` is left, for at most five seconds: a
/// joined thread can stay listed under `/proc/self/task` for a moment while the kernel finishes
/// its exit. Fails with `why` if one is still there then.
fn assert_no_reclaimer_soon(why: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = reclaimer_policies();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{why}: reclaimer threads still running after 5 s: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn obj(name: &str, rv: u32) -> Arc<TObj> {
    Arc::new(TObj {
        name: name.into(),
        ns: Some("default".into()),
        rv: rv.to_string(),
        node: "n1".into(),
        owners: vec!["o1".into()],
        labels: Default::default(),
    })
}

#[test]
fn the_reclaimer_runs_at_normal_priority_by_default_and_at_idle_when_asked() {
    {
        let (w, _r) = StoreBuilder::new(access()).build().unwrap();
        assert_eq!(w.reclaim_priority(), Some(ReclaimPriority::Normal));
        assert_eq!(reclaimer_policies(), vec![SCHED_OTHER]);
    }
    assert_no_reclaimer_soon("dropping the writer ends its reclaimer");
    {
        let (mut w, r) =
            StoreBuilder::new(access()).reclaim_priority(ReclaimPriority::Idle).build().unwrap();
        assert_eq!(w.reclaim_priority(), Some(ReclaimPriority::Idle));
        assert_eq!(reclaimer_policies(), vec![SCHED_IDLE]);
        // The idle thread still frees what it is handed, and dropping the writer joins it.
        let first = obj("a", 0);
        let weak = Arc::downgrade(&first);
        w.add(first).unwrap();
        for rv in 1..100 {
            w.update(obj("a", rv)).unwrap();
        }
        assert_eq!(r.snapshot().get_by_key("default/a").unwrap().rv, "99");
        drop(w);
        assert!(weak.upgrade().is_none(), "the first version was freed when the writer dropped");
    }
    assert_no_reclaimer_soon("dropping the writer ends its reclaimer");
    let (w, _r) = StoreBuilder::new(access()).background_reclaim(false).build().unwrap();
    assert_eq!(w.reclaim_priority(), None);
    assert!(reclaimer_policies().is_empty());
}
