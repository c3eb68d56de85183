//! What one arena per pod changes for one thread that replaces pods: building a realistic pod,
//! rebuilding it in an arena (`snapinformer_kube::transform::into_arena`), and freeing the pod
//! it replaces, at random over a population, pass after pass as the heap churns.
//!
//! ```text
//! cargo run --release -p snapinformer-sim --example arena_probe -- 200000 plain
//! cargo run --release -p snapinformer-sim --example arena_probe -- 200000 arena
//! ```
//!
//! Arguments: pods (default 200,000), and `plain` (pods on mimalloc as decoded) or `arena`
//! (each rebuilt in an arena of its own; its `Arc` on mimalloc, as the reflector transform
//! leaves it). Prints, per pass over as many random replacements as there are pods, the
//! nanoseconds per replacement spent building the new pod, rebuilding it in its arena (arena
//! only: two clones and the decoded copy freed) and freeing the pod it replaced. One thread,
//! no store: the allocator's side of an informer's write, alone.

use std::{sync::Arc, time::Instant};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_sim::pods::{PodProfile, Rng, Shape, make_pod};

#[global_allocator]
static ALLOC: snapinformer_arena::ArenaAlloc<mimalloc::MiMalloc> =
    snapinformer_arena::ArenaAlloc::new(mimalloc::MiMalloc);

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(200_000, |s| s.parse().expect("a pod count"));
    let arena = match args.next().as_deref() {
        None | Some("plain") => false,
        Some("arena") => true,
        Some(other) => panic!("unknown mode {other:?}: plain or arena"),
    };
    assert!(snapinformer_arena::available(), "the arena allocator is installed");
    let shape = Shape::for_objects(n, 1000).with_profile(PodProfile::Realistic);
    let store = |mut pod: Pod| {
        if arena {
            snapinformer_kube::transform::into_arena(&mut pod);
        }
        Arc::new(pod)
    };
    let mut pods: Vec<Arc<Pod>> = (0..n).map(|i| store(make_pod(&shape, i, 1, i % 1000))).collect();
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    println!("{} pods, {}", n, if arena { "arena" } else { "plain" });
    for pass in 0..6 {
        let (mut build, mut rebuild, mut free) = (0u128, 0u128, 0u128);
        for u in 0..n {
            let i = rng.below(n);
            let t0 = Instant::now();
            let pod = make_pod(&shape, i, (2 + pass * n + u) as u64, i % 1000);
            let t1 = Instant::now();
            let pod = store(pod);
            let t2 = Instant::now();
            drop(std::mem::replace(&mut pods[i], pod));
            let t3 = Instant::now();
            build += (t1 - t0).as_nanos();
            rebuild += (t2 - t1).as_nanos();
            free += (t3 - t2).as_nanos();
        }
        let per = |t: u128| t / n as u128;
        println!(
            "pass {pass}: build {} ns, into arena {} ns, free the replaced pod {} ns, total {} ns",
            per(build),
            per(rebuild),
            per(free),
            per(build + rebuild + free)
        );
    }
    let s = snapinformer_arena::stats();
    println!(
        "arena: {} objects built, {} slots live ({} B each on average), {} built plainly",
        s.built,
        s.slots,
        s.slot_bytes.checked_div(s.slots).unwrap_or(0),
        s.plain
    );
}
