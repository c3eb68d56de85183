//! Why a Rust pod takes more memory than a Go one with the same content: the struct bodies of
//! one generated pod in `k8s_openapi` and in `k8s.io/api`, side by side, and the heap a pod takes
//! in each.
//!
//! ```text
//! cargo run --release -p snapinformer-sim --example pod_layout               # realistic pods
//! cargo run --release -p snapinformer-sim --example pod_layout -- small 100000
//! ```
//!
//! Arguments: the pod profile (`realistic`, the default, or `small`) and how many pods to build
//! for the heap measurement (10,000 by default). The Go side comes from the client-go worker's
//! `layout` subcommand (built with `go build` like the `client-go` rows; without Go the table has
//! the Rust side only).
//!
//! A struct body is what the type's size says: every field inline, an absent optional struct
//! included (`Option<Probe>` is a whole `Probe` wide in Rust; Go's `*Probe` is one pointer). The
//! heap per pod is measured over the pods built: the bytes the Rust program asked its allocator for
//! (no size-class rounding), and Go's live heap after a full collection (each object at its size
//! class), so the Rust/Go ratio of the heap is a lower bound. What the heap holds beyond the struct
//! bodies is strings, maps, and Rust's reference count (16 B per `Arc`).

use std::sync::Arc;

use clap::ValueEnum;
use k8s_openapi::api::core::v1::Pod;
use snapinformer_sim::{
    layout::{self, StructBodies},
    pods::{self, PodProfile, Shape},
    rows::client_go,
};

#[global_allocator]
static HEAP: snapinformer_arena::Metered<mimalloc::MiMalloc> =
    snapinformer_arena::Metered::new(mimalloc::MiMalloc);

/// Bytes asked of the allocator per pod, over `count` pods built and kept (the vector holding
/// them left out).
fn rust_heap_per_pod(shape: &Shape, count: usize) -> f64 {
    let mut kept: Vec<Arc<Pod>> = Vec::with_capacity(count);
    let before = HEAP.allocated();
    for i in 0..count {
        kept.push(Arc::new(pods::make_pod(shape, i, i as u64 + 1, i % shape.nodes)));
    }
    let after = HEAP.allocated();
    let per = (after as f64 - before as f64) / count as f64;
    drop(kept);
    per
}

fn go_layout(profile: PodProfile, count: usize) -> Result<layout::GoLayout, String> {
    let binary = client_go::worker_binary(&|m| eprintln!("{m}")).map_err(|e| e.to_string())?;
    layout::go_layout(&binary, profile, count)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let profile_name = args.next().unwrap_or_else(|| "realistic".into());
    let profile = PodProfile::from_str(&profile_name, false).unwrap_or_else(|e| {
        eprintln!("{profile_name}: not a pod profile ({e})");
        std::process::exit(2);
    });
    let count: usize = match args.next().map(|a| a.parse()) {
        None => 10_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("the pod count must be a positive number");
            std::process::exit(2);
        }
    };
    let shape = Shape::for_objects(count, 50).with_profile(profile);
    let pod = pods::make_pod(&shape, 0, 1, 0);
    let rust = layout::rust_layout(&pod);
    let rust_heap = rust_heap_per_pod(&shape, count);
    let go = go_layout(profile, count).map_err(|e| eprintln!("no Go side: {e}")).ok();

    println!("{profile_name} pod, struct bodies (bytes):\n");
    println!("| struct | count | Rust, one | Go, one | Rust, all | Go, all |");
    println!("|---|---:|---:|---:|---:|---:|");
    let (mut rust_total, mut go_total) = (0, 0);
    for r in &rust {
        let g = go.as_ref().and_then(|g| g.structs.iter().find(|e| e.ty == r.ty));
        if let Some(g) = g
            && g.count != r.count
        {
            eprintln!("warning: {} count differs: Rust {}, Go {}", r.ty, r.count, g.count);
        }
        rust_total += r.total();
        go_total += g.map_or(0, StructBodies::total);
        let cell =
            |f: &dyn Fn(&StructBodies) -> usize| g.map_or("-".to_string(), |g| f(g).to_string());
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.ty,
            r.count,
            r.bytes,
            cell(&|g| g.bytes),
            r.total(),
            cell(&StructBodies::total)
        );
    }
    let go_cell = |v: String| if go.is_some() { v } else { "-".into() };
    println!(
        "| **all struct bodies** | | | | **{rust_total}** | **{}** |",
        go_cell(go_total.to_string())
    );
    let go_heap = go.as_ref().map(|g| g.heap_per_pod);
    println!(
        "| heap per pod (over {count}{}) | | | | {rust_heap:.0} | {} |",
        go.as_ref().map_or(String::new(), |g| format!("; Go over {}", g.pods)),
        go_cell(go_heap.map_or(String::new(), |h| format!("{h:.0}")))
    );
    println!(
        "| the rest: strings, maps, reference counts | | | | {:.0} | {} |",
        rust_heap - rust_total as f64,
        go_cell(go_heap.map_or(String::new(), |h| format!("{:.0}", h - go_total as f64)))
    );
    if let Some(h) = go_heap {
        println!(
            "\nRust/Go: struct bodies {:.2}x, heap {:.2}x, the rest {:.2}x",
            rust_total as f64 / go_total as f64,
            rust_heap / h,
            (rust_heap - rust_total as f64) / (h - go_total as f64)
        );
    }
}
