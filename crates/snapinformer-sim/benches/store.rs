//! Criterion micro-benchmarks of the store: apply, get, list and by_index on both backends and the
//! locked baseline, at 20,000 pods (small enough to run in a few minutes on two cores).
#![allow(missing_docs)]

use std::{hint::black_box, sync::Arc};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use snapinformer_sim::{
    backends::BackendKind,
    pods::{self, NAMESPACE, Shape},
};

const OBJECTS: usize = 20_000;

fn populated(kind: BackendKind) -> (Box<dyn snapinformer_sim::backends::SimStore>, Shape) {
    let shape = Shape::for_objects(OBJECTS, 100);
    let mut store = kind.build();
    for chunk in pods::initial_pods(&shape).chunks(1000) {
        store.apply(chunk.to_vec(), &mut |_, _| {});
    }
    (store, shape)
}

fn apply(c: &mut Criterion) {
    let mut g = c.benchmark_group("apply_batch_of_1000");
    g.sample_size(20);
    for kind in BackendKind::ALL {
        let (mut store, shape) = populated(kind);
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
    let mut g = c.benchmark_group("reads");
    g.sample_size(30);
    for kind in BackendKind::ALL {
        let (store, _shape) = populated(kind);
        let reader = store.reader();
        g.bench_function(BenchmarkId::new("list", kind.name()), |b| {
            b.iter(|| black_box(reader.list_all()))
        });
        g.bench_function(BenchmarkId::new("by_owner_1000", kind.name()), |b| {
            b.iter(|| black_box(reader.by_owner(&pods::owner_uid(7))))
        });
        g.bench_function(BenchmarkId::new("ns_list_selector", kind.name()), |b| {
            b.iter(|| black_box(reader.list_namespace_selector(NAMESPACE, "app", "web-7")))
        });
    }
    g.finish();
}

fn get(c: &mut Criterion) {
    use snapinformer_store::{Hamt, StoreBuilder};
    let shape = Shape::for_objects(OBJECTS, 100);
    let (mut w, r) = StoreBuilder::new(pods::access())
        .backend::<Hamt>()
        .indexers(pods::pod_indexers())
        .build()
        .unwrap();
    w.apply(pods::initial_pods(&shape).into_iter().map(snapinformer_store::Change::Upsert))
        .rejected
        .is_empty()
        .then_some(())
        .unwrap();
    let snap = r.snapshot();
    c.bench_function("snapshot_get_by_key", |b| {
        b.iter(|| black_box(snap.get_by_key("default/web-3-517").is_some()))
    });
    c.bench_function("reader_snapshot", |b| b.iter(|| black_box(r.snapshot().len())));
    let _ = Arc::new(());
}

criterion_group!(benches, apply, reads, get);
criterion_main!(benches);
