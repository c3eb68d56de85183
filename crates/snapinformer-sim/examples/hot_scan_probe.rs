//! Field scans over 200,000 realistic pods, plain `Arc<Pod>`s against `Arc<CompactPod>`s, one
//! field at a time, in a random order (as a hash-ordered map iterates): where a scan's time goes.
//!
//! ```text
//! cargo run --release -p snapinformer-sim --example hot_scan_probe -- 200000
//! ```
//!
//! Each line is the median of 15 scans of every pod, in milliseconds. The last line is what the
//! `BTreeMap` copy of a pod's labels that `CompactPod` keeps for the store's selectors costs, in
//! heap bytes per pod (the tree holds the labels too).

use std::{hint::black_box, sync::Arc, time::Instant};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_compact::CompactPod;
use snapinformer_sim::{
    pods::{self, Shape},
    rows::{CacheKind, Objects},
};

#[global_allocator]
static HEAP: snapinformer_arena::Metered<mimalloc::MiMalloc> =
    snapinformer_arena::Metered::new(mimalloc::MiMalloc);

/// The median of 15 runs of `f`, in milliseconds.
fn median_ms(mut f: impl FnMut() -> usize) -> f64 {
    let mut t: Vec<f64> = (0..15)
        .map(|_| {
            let s = Instant::now();
            black_box(f());
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let shape = Shape::for_objects(n, 1000);
    let node = pods::node_name(500);
    let node = node.as_str();
    let make = |i: usize| pods::make_pod(&shape, i, i as u64 + 1, i % shape.nodes);
    let (Objects::Compact(c), Objects::Pods(p)) =
        (CacheKind::SnapshotCompact.objects(n, make), CacheKind::Snapshot.objects(n, make))
    else {
        unreachable!("each row generates its own form");
    };
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = pods::Rng::new(5);
    for i in (1..n).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let c: Vec<Arc<CompactPod>> = order.iter().map(|&i| c[i].clone()).collect();
    let p: Vec<Arc<Pod>> = order.iter().map(|&i| p[i].clone()).collect();
    let on_node = |x: &Pod| pods::pod_node(x) == Some(node);
    let running = |x: &Pod| x.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    let label = |x: &Pod| {
        x.metadata.labels.as_ref().and_then(|l| l.get("app")).map(String::as_str) == Some("web-7")
    };
    println!("{n} pods; CompactPod is {} bytes", std::mem::size_of::<CompactPod>());
    let lines: [(&str, f64, f64); 4] = [
        (
            "node and phase (the hot-field scan)",
            median_ms(|| p.iter().filter(|x| on_node(x) && running(x)).count()),
            median_ms(|| {
                c.iter()
                    .filter(|x| x.node_name() == Some(node) && x.phase() == Some("Running"))
                    .count()
            }),
        ),
        (
            "phase alone",
            median_ms(|| p.iter().filter(|x| running(x)).count()),
            median_ms(|| c.iter().filter(|x| x.phase() == Some("Running")).count()),
        ),
        (
            "namespace",
            median_ms(|| {
                p.iter().filter(|x| x.metadata.namespace.as_deref() == Some("default")).count()
            }),
            median_ms(|| c.iter().filter(|x| x.namespace() == Some("default")).count()),
        ),
        (
            "label app=web-7",
            median_ms(|| p.iter().filter(|x| label(x)).count()),
            median_ms(|| c.iter().filter(|x| x.label("app") == Some("web-7")).count()),
        ),
    ];
    println!("{:<38} {:>10} {:>10}", "scan", "plain ms", "compact ms");
    for (what, plain, compact) in lines {
        println!("{what:<38} {plain:>10.2} {compact:>10.2}");
    }
    let maps = 10_000.min(n);
    let before = HEAP.allocated();
    let copies: Vec<_> = c[..maps].iter().map(|x| x.labels().cloned()).collect();
    let per_pod = (HEAP.allocated() - before) as f64 / maps as f64;
    drop(black_box(copies));
    println!("label map copy: {per_pod:.0} B per pod (of which the vector 24 B)");
}
