//! Criterion micro-benchmarks of the stores: applying a batch of 1000 updates (at 20,000 pods)
//! and the three reads (at 200,000 pods, where the by_index target is set), for our backends and
//! the baselines. Single-threaded: no contention, just the cost of each operation.
//!
//! `cargo bench -p snapinformer-sim --bench store`
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use snapinformer_sim::{
    backends::{BackendKind, SimStore},
    pods::{self, NAMESPACE, Shape},
};

fn populated(kind: BackendKind, objects: usize) -> (Box<dyn SimStore>, Shape) {
    let shape = Shape::for_objects(objects, 1000);
    let mut store = kind.build();
    for chunk in pods::initial_pods(&shape).chunks(1000) {
        store.apply(chunk.to_vec(), &mut |_, _| {});
    }
    (store, shape)
}

fn apply(c: &mut Criterion) {
    let mut g = c.benchmark_group("apply_1000_updates_at_20k");
    g.sample_size(20);
    for kind in BackendKind::ALL {
        let (mut store, shape) = populated(kind, 20_000);
        let mut rv = 1_000_000u64;
        g.bench_function(BenchmarkId::from_parameter(kind.name()), |b| {
            b.iter_batched(
                || {
                    rv += 1000;
                    pods::updates(&shape, 1000, rv, rv)
                },
                |batch| store.apply(batch, &mut |_, _| {}),
                criterion::BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

fn reads(c: &mut Criterion) {
    let mut g = c.benchmark_group("reads_at_200k");
    g.sample_size(20);
    for kind in BackendKind::ALL {
        if kind == BackendKind::SnapshotBg {
            continue; // reads are those of `snapshot`
        }
        let (store, _shape) = populated(kind, 200_000);
        let reader = store.reader();
        g.bench_function(BenchmarkId::new("by_owner_1000", kind.name()), |b| {
            b.iter(|| black_box(reader.by_owner(&pods::owner_uid(7))))
        });
        g.bench_function(BenchmarkId::new("list_all", kind.name()), |b| {
            b.iter(|| black_box(reader.list_all()))
        });
        g.bench_function(BenchmarkId::new("ns_list_selector", kind.name()), |b| {
            b.iter(|| black_box(reader.list_namespace_selector(NAMESPACE, "app", "web-7")))
        });
    }
    g.finish();
}

fn snapshot_ops(c: &mut Criterion) {
    use snapinformer_store::StoreBuilder;
    let shape = Shape::for_objects(200_000, 1000);
    let (mut w, r) =
        StoreBuilder::new(pods::access()).indexers(pods::pod_indexers()).build().unwrap();
    let outcome =
        w.apply(pods::initial_pods(&shape).into_iter().map(snapinformer_store::Change::Upsert));
    assert!(outcome.rejected.is_empty());
    let snap = r.snapshot();
    c.bench_function("snapshot_get_by_key_at_200k", |b| {
        b.iter(|| black_box(snap.get_by_key("default/web-3-517").is_some()))
    });
    c.bench_function("reader_snapshot", |b| b.iter(|| black_box(r.snapshot().len())));
}

criterion_group!(benches, apply, reads, snapshot_ops);
criterion_main!(benches);
