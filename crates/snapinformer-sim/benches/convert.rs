//! Criterion benchmarks of what the `store` scenario's sources pay per update, and what a
//! reflector pays to decode one, for a realistic pod at 200,000 pods (one thread, the
//! process-wide interner warm with the other pods of the same sets, as in a run):
//!
//! - `pod_update/build_typed`: building the `k8s_openapi` pod (what the typed rows' source does
//!   at each slot);
//! - `pod_update/compact_direct`: building it, then encoding it straight into compact form
//!   ([`CompactPod::from_pod`], what the compact row's source does at each slot);
//! - `pod_update/compact_via_json`: building it, writing its JSON and decoding that through the
//!   interner (the compact row's source before the direct encoder);
//! - `pod_update/decode_typed_json` and `pod_update/decode_compact_json`: decoding the pod's
//!   JSON into a `k8s_openapi` pod and into compact form: what a typed and a compact reflector
//!   pay per watch event, without building anything.
//!
//! The group `pod_update_all_held` repeats the two compact figures with the interner holding
//! every one of the 200,000 pods, as it does in a run: its tables are then the run's size
//! (801,000 long strings and 1.06 million objects over 256 shards: 3,000-4,000 entries a
//! shard), where a slow lookup shows.
//!
//! `cargo bench -p snapinformer-sim --bench convert`
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{
    BenchmarkGroup, Criterion, criterion_group, criterion_main, measurement::WallTime,
};
use k8s_openapi::api::core::v1::Pod;
use snapinformer_compact::{CompactPod, Interner};
use snapinformer_sim::pods::{self, Shape};

const PODS: usize = 200_000;

/// What a group works on: an interner holding the pods of `held` (with the pods themselves), a
/// maker of updated typed pods, and the JSON of 1,000 of them.
struct Setup {
    interner: Interner,
    /// Kept (never read) so that the held pods' nodes stay live while the group runs.
    _held: Vec<CompactPod>,
    make: Box<dyn FnMut() -> Pod>,
    json: Vec<Vec<u8>>,
}

fn setup(held: impl Iterator<Item = usize>) -> Setup {
    let shape = Shape::for_objects(PODS, 1000);
    let mut interner = Interner::new();
    let held: Vec<CompactPod> = held
        .map(|i| {
            let pod = pods::make_pod(&shape, i, 1, i % shape.nodes);
            CompactPod::from_pod(&pod, &mut interner).expect("pods encode")
        })
        .collect();
    let mut next = 0usize;
    let mut make = move || {
        next = (next + 7919) % PODS;
        pods::make_pod(&shape, next, 2_000_000 + next as u64, (next + 1) % shape.nodes)
    };
    let json =
        (0..1000).map(|_| serde_json::to_vec(&make()).expect("pods encode as JSON")).collect();
    Setup { interner, _held: held, make: Box::new(make), json }
}

/// The two figures both groups take: building and encoding a pod, and decoding its JSON, into
/// compact form through the setup's interner.
fn compact_figures(g: &mut BenchmarkGroup<'_, WallTime>, s: &mut Setup) {
    let Setup { interner, make, json, .. } = s;
    g.bench_function("compact_direct", |b| {
        b.iter(|| black_box(CompactPod::from_pod(&make(), interner).expect("pods encode")))
    });
    let mut at = 0usize;
    g.bench_function("decode_compact_json", |b| {
        b.iter(|| {
            at = (at + 1) % json.len();
            black_box(CompactPod::decode(interner, &json[at]).expect("pods decode"))
        })
    });
}

fn pod_update(c: &mut Criterion) {
    // The pods the interner holds in a run: one per set, so that every shared node is there.
    let per_owner = Shape::for_objects(PODS, 1000).per_owner.max(1);
    let mut s = setup((0..PODS).step_by(per_owner));

    let mut g = c.benchmark_group("pod_update");
    g.bench_function("build_typed", |b| b.iter(|| black_box((s.make)())));
    g.bench_function("compact_via_json", |b| {
        b.iter(|| {
            let text = serde_json::to_vec(&(s.make)()).expect("pods encode as JSON");
            black_box(CompactPod::decode(&mut s.interner, &text).expect("their JSON decodes"))
        })
    });
    let mut at = 0usize;
    g.bench_function("decode_typed_json", |b| {
        b.iter(|| {
            at = (at + 1) % s.json.len();
            black_box(serde_json::from_slice::<Pod>(&s.json[at]).expect("pods decode"))
        })
    });
    compact_figures(&mut g, &mut s);
    g.finish();
}

fn pod_update_all_held(c: &mut Criterion) {
    let mut s = setup(0..PODS);
    eprintln!("interner holding all {PODS} pods: {:?}", s.interner.stats());
    let mut g = c.benchmark_group("pod_update_all_held");
    compact_figures(&mut g, &mut s);
    g.finish();
}

criterion_group!(benches, pod_update, pod_update_all_held);
criterion_main!(benches);
