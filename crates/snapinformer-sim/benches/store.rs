//! Criterion micro-benchmarks of the caches under test, single-threaded (no contention, the cost
//! of each operation alone):
//!
//! - `apply_1000_updates_at_20k/<row>`: one batch of 1000 updates at 20,000 pods;
//! - `reads_at_200k/<read>/<row>`: the three reads at 200,000 pods (where the by_index target
//!   is set), **owned** for every row (copied `Arc`s of the row's own objects, as client-go
//!   copies pointers; `snapshot-compact`'s pods are generated and read in compact form);
//! - `reads_at_200k/<read>_borrowed/<row>`: the same reads borrowed from a snapshot, our rows
//!   only: an extra, reported beside the owned figures;
//! - `arc_vs_pointer_at_200k`: cloning (and dropping) the `Arc` of each of 200,000 pods against
//!   copying plain pointers to them: the per-object cost an owned Rust read pays and a Go list
//!   does not;
//! - `snapshot_get_by_key_at_200k`, `reader_snapshot`;
//! - `key_bucket_resolution/<way>/<entries>`: the chunked map resolving the 1000 keys of one
//!   owner's bucket of keys (a key index's lookup), one `get` per key against
//!   [`ChunkedMap::resolve`](snapinformer_store::backend::ChunkedMap::resolve), owned (copied
//!   `Arc`s) and borrowed, at 200,000 and 1,000,000 entries; each iteration takes the next
//!   owner's bucket, so that the caches hold little of the tree, as under a running writer.
//!
//! `cargo bench -p snapinformer-sim --bench store`
#![allow(missing_docs)]

use std::{hint::black_box, sync::Arc};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use snapinformer_sim::{
    pods::{self, NAMESPACE, Shape},
    rows::{CacheKind, CacheWriter},
    scenarios::store::{InProcessRow, updates},
};

fn populated(kind: CacheKind, objects: usize) -> (Box<dyn CacheWriter>, Shape) {
    let shape = Shape::for_objects(objects, 1000);
    let mut store = kind.build();
    let mut initial = kind
        .objects(shape.total(), |i| pods::make_pod(&shape, i, i as u64 + 1, i % shape.nodes))
        .into_batches();
    while initial.remaining() > 0 {
        store.apply_objects(initial.take(1000), &mut |_, _| {});
    }
    (store, shape)
}

fn apply(c: &mut Criterion) {
    let mut g = c.benchmark_group("apply_1000_updates_at_20k");
    g.sample_size(20);
    for kind in CacheKind::ALL {
        let (mut store, shape) = populated(kind, 20_000);
        let mut rv = 1_000_000u64;
        g.bench_function(BenchmarkId::from_parameter(kind.name()), |b| {
            b.iter_batched(
                || {
                    rv += 1000;
                    updates(InProcessRow::Cache(kind), &shape, 1000, rv, rv)
                },
                |batch| store.apply_objects(batch, &mut |_, _| {}),
                criterion::BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

fn reads(c: &mut Criterion) {
    let mut g = c.benchmark_group("reads_at_200k");
    g.sample_size(20);
    for kind in CacheKind::ALL {
        // Reads of the same structure as another row's: `snapshot`'s, `locked`'s.
        if matches!(
            kind,
            CacheKind::SnapshotBg
                | CacheKind::LockedStd
                | CacheKind::LockedBg
                | CacheKind::LockedBatch
        ) {
            continue;
        }
        let (store, _shape) = populated(kind, 200_000);
        let reader = store.reader();
        let owner = pods::owner_uid(7);
        g.bench_function(BenchmarkId::new("by_owner_1000", kind.name()), |b| {
            b.iter(|| black_box(reader.by_owner_owned(&owner)))
        });
        g.bench_function(BenchmarkId::new("list_all", kind.name()), |b| {
            b.iter(|| black_box(reader.list_all_owned()))
        });
        g.bench_function(BenchmarkId::new("ns_list_selector", kind.name()), |b| {
            b.iter(|| black_box(reader.list_namespace_selector_owned(NAMESPACE, "app", "web-7")))
        });
        if let Some(borrowed) = reader.borrowed() {
            g.bench_function(BenchmarkId::new("by_owner_1000_borrowed", kind.name()), |b| {
                b.iter(|| black_box(borrowed.by_owner_refs(&owner)))
            });
            g.bench_function(BenchmarkId::new("list_all_borrowed", kind.name()), |b| {
                b.iter(|| black_box(borrowed.list_all_refs()))
            });
            g.bench_function(BenchmarkId::new("ns_list_selector_borrowed", kind.name()), |b| {
                b.iter(|| {
                    black_box(borrowed.list_namespace_selector_refs(NAMESPACE, "app", "web-7"))
                })
            });
        }
    }
    g.finish();
}

fn arc_vs_pointer(c: &mut Criterion) {
    let shape = Shape::for_objects(200_000, 1000);
    let all: Vec<Arc<Pod>> = pods::initial_pods(&shape);
    let mut g = c.benchmark_group("arc_vs_pointer_at_200k");
    g.sample_size(20);
    g.bench_function("arc_clone_and_drop", |b| {
        b.iter(|| {
            let copy: Vec<Arc<Pod>> = all.to_vec();
            drop(black_box(copy));
        })
    });
    g.bench_function("pointer_copy", |b| {
        b.iter(|| {
            let copy: Vec<&Pod> = all.iter().map(|p| &**p).collect();
            drop(black_box(copy));
        })
    });
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

fn key_bucket_resolution(c: &mut Criterion) {
    use snapinformer_store::backend::{ChunkedMap, PersistentMap};
    let mut g = c.benchmark_group("key_bucket_resolution");
    g.sample_size(20);
    for entries in [200_000usize, 1_000_000] {
        let owners = entries / 1000;
        let mut map: ChunkedMap<Arc<u64>> = ChunkedMap::default();
        for i in 0..entries {
            map.upsert(&format!("default/web-{}-{}", i % owners, i / owners), Arc::new(i as u64));
        }
        // One bucket of keys per owner, holding the map's own key allocations, as a store's
        // key index does.
        let mut buckets: Vec<ChunkedMap<()>> = vec![ChunkedMap::default(); owners];
        for (key, value) in map.iter() {
            buckets[**value as usize % owners].insert(key.clone(), ());
        }
        let mut next = 0usize;
        g.bench_function(BenchmarkId::new("one_get_per_key", entries), |b| {
            b.iter(|| {
                next = (next + 1) % owners;
                let found: Vec<Arc<u64>> =
                    buckets[next].iter().filter_map(|(k, _)| map.get(k).cloned()).collect();
                black_box(found)
            })
        });
        g.bench_function(BenchmarkId::new("resolve", entries), |b| {
            b.iter(|| {
                next = (next + 1) % owners;
                let found: Vec<Arc<u64>> = map.resolve(&buckets[next]).cloned().collect();
                black_box(found)
            })
        });
        g.bench_function(BenchmarkId::new("one_get_per_key_borrowed", entries), |b| {
            b.iter(|| {
                next = (next + 1) % owners;
                let found: Vec<&Arc<u64>> =
                    buckets[next].iter().filter_map(|(k, _)| map.get(k)).collect();
                black_box(found)
            })
        });
        g.bench_function(BenchmarkId::new("resolve_borrowed", entries), |b| {
            b.iter(|| {
                next = (next + 1) % owners;
                let found: Vec<&Arc<u64>> = map.resolve(&buckets[next]).collect();
                black_box(found)
            })
        });
    }
    g.finish();
}

criterion_group!(benches, apply, reads, arc_vs_pointer, snapshot_ops, key_bucket_resolution);
criterion_main!(benches);
