//! Our store holding compact pods: the `snapshot-compact` row (issue 14).
//!
//! The chunked store (superseded versions dropped inline, as `snapshot`) over
//! [`snapinformer_compact::CompactPod`]s: pods as hash-consed JSON trees that share what they
//! have in common, with the owner-UID and node-name indexes (both of keys), as the compact pod
//! informer builds them.
//!
//! - **Generation**: the `store` scenario hands this row pods already in compact form. The
//!   initial list ([`generate`]) is encoded to JSON and decoded through the process-wide
//!   interner, as the compact reflector decodes a list; an update built at its slot
//!   ([`to_compact`]) is a typed pod, built as the typed rows build theirs, then encoded
//!   straight into compact form through the same interner (the same tree, without the JSON
//!   text). Apply figures therefore compare stores, as the other rows' do.
//! - **Owned reads** are `Arc<CompactPod>` clones ([`Objects::Compact`]): a compact pod's
//!   materialised form is the shared object itself.
//! - **`k8s_openapi` reads** (the [`CacheReader`] methods returning `Arc<Pod>`, which the `seed`
//!   scenario's controllers use) decode every pod they return: correct, and costly.

use std::{any::Any, sync::Arc, time::Instant};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_compact::{CompactPod, Interner};
use snapinformer_store::{Chunked, Reader, Snapshot, StoreBuilder, Writer};

use super::{BorrowedReads, CacheReader, CacheWriter, Objects, OnVisible, SimChange};
use crate::pods::{NODE_NAME_INDEX, OWNER_UID_INDEX};

/// Pods encoded per chunk by [`generate`] before they are decoded (bounds the full pods and
/// their JSON alive at once).
const CHUNK: usize = 8192;

/// `pod` in compact form, encoded straight through the process-wide interner
/// ([`CompactPod::from_pod`]).
pub fn to_compact(pod: &Pod) -> CompactPod {
    let mut interner = Interner::global().lock().unwrap_or_else(|e| e.into_inner());
    CompactPod::from_pod(pod, &mut interner).expect("typed pods encode as objects")
}

/// `pod` as a `k8s_openapi` pod (a full decode).
pub fn to_pod(pod: &CompactPod) -> Pod {
    pod.to_pod().expect("compact pods decode as pods")
}

/// `count` pods `make(i)` in compact form: built and encoded as JSON on every core, a chunk at a
/// time, then decoded through the process-wide interner in order on this thread (as one
/// reflector decodes what it receives).
pub fn generate(count: usize, make: &(dyn Fn(usize) -> Pod + Sync)) -> Vec<Arc<CompactPod>> {
    let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).clamp(1, 8);
    let mut out = Vec::with_capacity(count);
    for start in (0..count).step_by(CHUNK) {
        let end = (start + CHUNK).min(count);
        let per = (end - start).div_ceil(threads).max(1);
        let json: Vec<Vec<u8>> = std::thread::scope(|s| {
            let parts: Vec<_> = (start..end)
                .step_by(per)
                .map(|from| {
                    s.spawn(move || {
                        (from..(from + per).min(end))
                            .map(|i| serde_json::to_vec(&make(i)).expect("pods encode as JSON"))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            parts.into_iter().flat_map(|h| h.join().expect("generator thread panicked")).collect()
        });
        let mut interner = Interner::global().lock().unwrap_or_else(|e| e.into_inner());
        out.extend(json.iter().map(|j| {
            Arc::new(CompactPod::decode(&mut interner, j).expect("generated pods decode"))
        }));
    }
    out
}

/// The compact store's writer; a batch of changes is one publication.
pub struct CompactStore {
    writer: Writer<CompactPod, Chunked>,
}

impl CompactStore {
    /// An empty store with the compact pod indexes.
    pub fn new() -> Self {
        let (writer, _reader) = StoreBuilder::new(snapinformer_compact::access())
            .index(OWNER_UID_INDEX, snapinformer_compact::owner_uid_index())
            .index(NODE_NAME_INDEX, snapinformer_compact::node_name_index())
            // The row's figures were measured with the writer freeing inline; kept so.
            .background_reclaim(false)
            .build()
            .expect("static index names are distinct");
        CompactStore { writer }
    }
}

impl Default for CompactStore {
    fn default() -> Self {
        CompactStore::new()
    }
}

impl CacheWriter for CompactStore {
    /// Upserts of `k8s_openapi` pods are converted first (through the process-wide interner):
    /// for the `seed` scenario; the `store` scenario hands over compact pods.
    fn apply_changes(&mut self, changes: Vec<SimChange>, visible: OnVisible<'_>) {
        let n = changes.len();
        let mut batch = self.writer.batch();
        for change in changes {
            match change {
                SimChange::Upsert(pod) => drop(
                    batch.upsert(Arc::new(to_compact(&pod))).expect("scenario pods have names"),
                ),
                SimChange::Delete(key, _) => drop(batch.delete_key(&key)),
            }
        }
        batch.commit();
        visible(n, Instant::now());
    }

    fn apply_objects(&mut self, objects: Objects, visible: OnVisible<'_>) {
        let pods = match objects {
            Objects::Compact(pods) => pods,
            Objects::Pods(pods) => pods.iter().map(|p| Arc::new(to_compact(p))).collect(),
        };
        let n = pods.len();
        let mut batch = self.writer.batch();
        for pod in pods {
            batch.upsert(pod).expect("scenario pods have names");
        }
        batch.commit();
        visible(n, Instant::now());
    }

    fn reader(&self) -> Arc<dyn CacheReader> {
        Arc::new(CompactReader(self.writer.reader()))
    }
}

/// The cache reads over a reader of the compact store.
pub struct CompactReader(pub Reader<CompactPod, Chunked>);

/// The pods of `ns` whose label `key` is `value`, through the store's label digests (the
/// compact store keeps them, as every store does by default), as the typed rows' readers.
fn selected<'s>(
    snap: &'s Snapshot<CompactPod, Chunked>,
    ns: &str,
    key: &str,
    value: &str,
) -> impl Iterator<Item = &'s Arc<CompactPod>> + 's {
    snap.select(ns, &[(key, value)])
}

fn decoded<'a>(pods: impl IntoIterator<Item = &'a Arc<CompactPod>>) -> Vec<Arc<Pod>> {
    pods.into_iter().map(|c| Arc::new(to_pod(c))).collect()
}

impl CacheReader for CompactReader {
    fn list_all(&self) -> Vec<Arc<Pod>> {
        decoded(self.0.snapshot().iter())
    }
    fn list_namespace_selector(&self, ns: &str, key: &str, value: &str) -> Vec<Arc<Pod>> {
        let snap = self.0.snapshot();
        decoded(selected(&snap, ns, key, value))
    }
    fn by_owner(&self, uid: &str) -> Vec<Arc<Pod>> {
        let snap = self.0.snapshot();
        decoded(snap.by_index_iter(OWNER_UID_INDEX, uid).expect("owner index exists"))
    }
    fn by_node(&self, node: &str) -> Vec<Arc<Pod>> {
        let snap = self.0.snapshot();
        decoded(snap.by_index_iter(NODE_NAME_INDEX, node).expect("node index exists"))
    }
    fn get(&self, key: &str) -> Option<Arc<Pod>> {
        self.0.snapshot().get_by_key(key).map(|c| Arc::new(to_pod(c)))
    }
    fn hold(&self) -> Box<dyn Any + Send> {
        Box::new(self.0.snapshot())
    }
    fn borrowed(&self) -> Option<&dyn BorrowedReads> {
        Some(self)
    }
    fn list_all_owned(&self) -> Objects {
        Objects::Compact(self.0.snapshot().list())
    }
    fn list_namespace_selector_owned(&self, ns: &str, key: &str, value: &str) -> Objects {
        let snap = self.0.snapshot();
        Objects::Compact(selected(&snap, ns, key, value).cloned().collect())
    }
    fn by_owner_owned(&self, uid: &str) -> Objects {
        Objects::Compact(
            self.0.snapshot().by_index(OWNER_UID_INDEX, uid).expect("owner index exists"),
        )
    }
}

impl BorrowedReads for CompactReader {
    fn list_all_refs(&self) -> usize {
        let snap = self.0.snapshot();
        std::hint::black_box(snap.list_refs()).len()
    }
    fn list_namespace_selector_refs(&self, ns: &str, key: &str, value: &str) -> usize {
        let snap = self.0.snapshot();
        let found: Vec<&Arc<CompactPod>> = selected(&snap, ns, key, value).collect();
        std::hint::black_box(found).len()
    }
    fn by_owner_refs(&self, uid: &str) -> usize {
        let snap = self.0.snapshot();
        std::hint::black_box(snap.by_index_refs(OWNER_UID_INDEX, uid).expect("owner index exists"))
            .len()
    }
    fn hot_scan_refs(&self, node: &str) -> usize {
        let snap = self.0.snapshot();
        snap.iter().filter(|p| p.node_name() == Some(node) && p.phase() == Some("Running")).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        pods::{self, NAMESPACE, Shape},
        rows::CacheKind,
    };

    fn built(kind: CacheKind, shape: &Shape) -> Box<dyn CacheWriter> {
        let mut store = kind.build();
        let objects = kind
            .objects(shape.total(), |i| pods::make_pod(shape, i, i as u64 + 1, i % shape.nodes));
        store.apply_objects(objects, &mut |_, _| {});
        store
    }

    #[test]
    fn the_compact_row_reads_back_the_pods_the_plain_row_holds_field_for_field() {
        let shape = Shape::for_objects(60, 4);
        let plain = built(CacheKind::Snapshot, &shape);
        let compact = built(CacheKind::SnapshotCompact, &shape);
        let (p, c) = (plain.reader(), compact.reader());
        let owner = pods::owner_uid(0);
        let (Objects::Pods(mut want), Objects::Compact(mut got)) =
            (p.by_owner_owned(&owner), c.by_owner_owned(&owner))
        else {
            panic!("each row reads in its own form");
        };
        assert_eq!(got.len(), 60);
        want.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        got.sort_by(|a, b| a.name().cmp(&b.name()));
        for (w, g) in want.iter().zip(&got) {
            assert_eq!(g.to_json(), serde_json::to_value(&**w).unwrap());
        }
        assert_eq!(c.list_all_owned().len(), 60);
        assert_eq!(c.list_namespace_selector_owned(NAMESPACE, "app", "web-0").len(), 60);
        let (pb, cb) = (p.borrowed().unwrap(), c.borrowed().unwrap());
        let node = pods::node_name(1);
        assert_eq!(cb.hot_scan_refs(&node), 15);
        assert_eq!(cb.hot_scan_refs(&node), pb.hot_scan_refs(&node));
        assert_eq!(cb.by_owner_refs(&owner), 60);
        assert_eq!(*c.get("default/web-0-3").unwrap(), *p.get("default/web-0-3").unwrap());
    }

    #[test]
    fn an_update_replaces_the_compact_pod_and_shares_what_did_not_change() {
        let shape = Shape::for_objects(10, 2);
        let mut store = built(CacheKind::SnapshotCompact, &shape);
        let reader = store.reader();
        let Objects::Compact(before) = reader.by_owner_owned(&pods::owner_uid(0)) else {
            panic!("compact reads");
        };
        let update = CacheKind::SnapshotCompact.objects(1, |_| pods::make_pod(&shape, 3, 99, 1));
        store.apply_objects(update, &mut |_, _| {});
        let after = reader.list_all_owned();
        let Objects::Compact(after) = after else { panic!("compact reads") };
        let new = after.iter().find(|p| p.name() == Some("web-0-3")).unwrap();
        let old = before.iter().find(|p| p.name() == Some("web-0-3")).unwrap();
        assert_eq!(new.resource_version(), Some("99"));
        assert_eq!(old.resource_version(), Some("4"));
        assert!(new.containers().unwrap().ptr_eq(old.containers().unwrap()));
    }
}
