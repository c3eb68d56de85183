//! Where a store write's time goes: 200,000 realistic pods, batches of 1000 updates applied by
//! one thread with no readers, for our store in several configurations and the `locked`
//! baselines.
//!
//! ```text
//! cargo run --release -p snapinformer-sim --example apply_probe -- 200000 100000
//! cargo run --release -p snapinformer-sim --example apply_probe -- 1000000 200000 "(freed)" small
//! ```
//!
//! Arguments: pods, updates, a filter on the line names (empty for all), and the pod profile
//! (`realistic`, the default, or `small`). With `PROBE_LIVE_GENERATORS` set, pods are built on
//! threads that stay alive (parked) instead of threads that exit, so that the allocator's pages
//! holding them are never abandoned (`PROBE_LIVE_GENERATORS=1 cargo run ... -- 200000 100000 "(freed)"`).
//!
//! `PROBE_BATCH=<n>` sets the batch size (1000 by default; the open loop at 20,000/s publishes
//! batches of about 4, where each update copies the path of inner nodes above its chunk).
//!
//! Each line is the median of 5 passes over the same updates (in nanoseconds per update) and the
//! pass's spread. Standard error has each pass, with the CPU every thread group used per update
//! from the pass's start to half a second after its end (a reclaimer thread's share included).
//! `held` keeps the pass's own updates and the initial pods alive outside the store (an extra
//! `Arc` per pod), so that the first pass frees no pod and measures the store's
//! structure alone (later passes still free the pods earlier passes left in the store). `freed`
//! lets the store hold the last reference, as a real informer's store does, so superseded pods
//! are freed by whoever drops the superseded version (the writer inline, or the reclaimer
//! thread).

use std::{sync::Arc, time::Instant};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_sim::{
    harness::sched,
    pods::{self, PodProfile, Shape, access},
    rows::{CacheKind, SimChange},
};
use snapinformer_store::StoreBuilder;

#[global_allocator]
static HEAP: snapinformer_arena::Metered<mimalloc::MiMalloc> =
    snapinformer_arena::Metered::new(mimalloc::MiMalloc);

/// Updates per batch unless `PROBE_BATCH` says otherwise.
const BATCH: usize = 1000;

/// The batch size: `PROBE_BATCH`, or [`BATCH`].
fn batch_size() -> usize {
    match std::env::var("PROBE_BATCH") {
        Err(_) => BATCH,
        Ok(v) => v.parse().ok().filter(|&b| b > 0).unwrap_or_else(|| {
            eprintln!("PROBE_BATCH={v:?} is not a batch size (a whole number, at least 1)");
            std::process::exit(2);
        }),
    }
}

/// Runs `passes` of `apply` over fresh copies of the updates; returns ns per update per pass.
fn passes(
    n_updates: usize,
    make_updates: &dyn Fn(u64) -> Vec<Arc<Pod>>,
    hold: bool,
    apply: &mut dyn FnMut(Vec<Arc<Pod>>),
) -> Vec<f64> {
    (0..5u64)
        .map(|pass| {
            let ups = make_updates(pass);
            let held: Vec<Arc<Pod>> = if hold { ups.clone() } else { Vec::new() };
            let (u0, s0) = thread_times();
            let batch = batch_size(); // read before the clock starts
            let threads0 = sched::ThreadsCpu::now();
            let start = Instant::now();
            for chunk in ups.chunks(batch) {
                apply(chunk.to_vec());
            }
            let ns = start.elapsed().as_nanos() as f64 / n_updates as f64;
            let (u1, s1) = thread_times();
            // A reclaimer thread may still be freeing the pass's garbage: give it time to finish
            // before reading every thread's CPU.
            std::thread::sleep(std::time::Duration::from_millis(500));
            let threads = threads0
                .zip(sched::ThreadsCpu::now())
                .map(|(before, after)| after.since(&before))
                .unwrap_or_default();
            let split: Vec<String> = threads
                .iter()
                .filter(|(_, cpu)| !cpu.is_zero())
                .map(|(name, cpu)| {
                    format!("{name} {:.0}", cpu.as_nanos() as f64 / n_updates as f64)
                })
                .collect();
            eprintln!(
                "  pass {pass}: {ns:.0} ns/update, this thread user {} ms sys {} ms; CPU ns/update by thread (to 0.5 s after the pass): {}",
                (u1 - u0) * 10,
                (s1 - s0) * 10,
                split.join(", ")
            );
            drop(held);
            ns
        })
        .collect()
}

/// This thread's user and system CPU time so far, in clock ticks (10 ms).
fn thread_times() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    sched::stat_ticks(&stat).unwrap_or((0, 0))
}

fn line(name: &str, v: Vec<f64>) {
    let passes: Vec<String> = v.iter().map(|x| format!("{x:.0}")).collect();
    let mut v = v;
    v.sort_by(f64::total_cmp);
    println!(
        "{name:<44} {:>8.0} ns/update  [{:.0}-{:.0}]  passes {}",
        v[v.len() / 2],
        v[0],
        v[v.len() - 1],
        passes.join(" ")
    );
}

/// Builds `count` pods on two threads that never exit (they park once done), so that the
/// allocator's pages holding them stay owned by a live thread, as a reflector's decoding thread
/// does in a cluster, instead of being abandoned when a generator thread exits.
fn on_live_threads(count: usize, make: Arc<dyn Fn(usize) -> Pod + Send + Sync>) -> Vec<Arc<Pod>> {
    let per = count.div_ceil(2).max(1);
    let parts: Vec<_> = (0..count)
        .step_by(per)
        .map(|start| {
            let (tx, rx) = std::sync::mpsc::channel();
            let make = make.clone();
            std::thread::spawn(move || {
                let part: Vec<Arc<Pod>> =
                    (start..(start + per).min(count)).map(|i| Arc::new(make(i))).collect();
                tx.send(part).expect("the probe waits");
                loop {
                    std::thread::park();
                }
            });
            rx
        })
        .collect();
    parts.into_iter().flat_map(|rx| rx.recv().expect("a generator thread panicked")).collect()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let u: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let only: Option<String> = args.next().filter(|o| !o.is_empty());
    let profile = match args.next().as_deref() {
        None | Some("realistic") => PodProfile::Realistic,
        Some("small") => PodProfile::Small,
        Some(other) => {
            eprintln!("unknown pod profile {other:?}: expected `realistic` or `small`");
            std::process::exit(2);
        }
    };
    let shape = Shape::for_objects(n, 1000).with_profile(profile);
    let live = std::env::var_os("PROBE_LIVE_GENERATORS").is_some();
    let initial = if live {
        on_live_threads(
            shape.total(),
            Arc::new(move |i| pods::make_pod(&shape, i, i as u64 + 1, i % shape.nodes)),
        )
    } else {
        pods::initial_pods(&shape)
    };
    let make_updates = |pass: u64| {
        let (first_rv, seed) = (10_000_000 * (pass + 1), 11 + pass);
        if live {
            let plan = pods::update_plan(&shape, u, seed);
            on_live_threads(
                u,
                Arc::new(move |i| {
                    pods::make_pod(&shape, plan[i].0, first_rv + i as u64, plan[i].1)
                }),
            )
        } else {
            pods::updates(&shape, u, first_rv, seed)
        }
    };
    println!(
        "{n} {profile:?} pods, {u} updates in batches of {}, one thread, no readers",
        batch_size()
    );
    let wanted = |name: &str| only.as_deref().is_none_or(|o| name.contains(o));
    for hold in [true, false] {
        let mode = if hold { "held" } else { "freed" };
        for (covering, bg) in [(true, false), (false, false), (true, true), (false, true)] {
            let name = format!(
                "snapshot {} owner, {} ({mode})",
                if covering { "covering" } else { "key" },
                if bg { "bg" } else { "inline" }
            );
            if !wanted(&name) {
                continue;
            }
            let (mut writer, _reader) = StoreBuilder::new(access::<Pod>())
                .indexers(pods::pod_indexers_with(covering))
                .background_reclaim(bg)
                .build()
                .expect("distinct names");
            writer.replace(initial.iter().cloned(), "1").expect("named pods");
            let v = passes(u, &make_updates, hold, &mut |chunk| {
                let mut b = writer.batch();
                for p in chunk {
                    b.upsert(p).expect("named");
                }
                b.commit();
            });
            line(&name, v);
        }
        for kind in [CacheKind::Locked, CacheKind::LockedBatch, CacheKind::LockedBg] {
            let name = format!("{} ({mode})", kind.name());
            if !wanted(&name) {
                continue;
            }
            let mut w = kind.build();
            w.apply(initial.clone(), &mut |_, _| {});
            let v = passes(u, &make_updates, hold, &mut |chunk| {
                w.apply_changes(chunk.into_iter().map(SimChange::Upsert).collect(), &mut |_, _| {})
            });
            line(&name, v);
        }
    }
}
