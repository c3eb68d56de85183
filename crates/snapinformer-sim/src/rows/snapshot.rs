//! Our store as a cache under test: the `snapshot`, `snapshot-bg` and `snapshot-hamt` rows.

use std::{any::Any, sync::Arc, time::Instant};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_store::{Backend, Indexers, Reader, ReclaimPriority, StoreBuilder, Writer};

use super::{BorrowedReads, CacheReader, CacheWriter, OnVisible, SimChange};
use crate::pods::{
    NODE_NAME_INDEX, OWNER_UID_INDEX, access, covering_pod_indexers, pod_indexers, pod_node,
};

/// Our store's writer; a batch of changes is one publication.
pub struct SnapshotStore<B: Backend> {
    writer: Writer<Pod, B>,
}

impl<B: Backend> SnapshotStore<B> {
    /// An empty store with the pod indexes, reclaiming in the background (at normal
    /// priority) if asked.
    pub fn new(background_reclaim: bool) -> Self {
        Self::build(StoreBuilder::new(access::<Pod>()).background_reclaim(background_reclaim))
    }

    /// An empty store with the pod indexes, reclaiming in the background at `priority`.
    pub fn with_reclaimer(priority: ReclaimPriority) -> Self {
        Self::build(StoreBuilder::new(access::<Pod>()).reclaim_priority(priority))
    }

    /// An empty store reclaiming in the background at `priority`, whose owner-UID index is
    /// covering: its buckets hold the pods as well as their keys (the `snapshot-bg-covering`
    /// control, the default until 70aaa9b: faster owner lookups, a second copy-on-write path
    /// on every update).
    pub fn with_covering_owner_index(priority: ReclaimPriority) -> Self {
        Self::build_with(
            StoreBuilder::new(access::<Pod>()).reclaim_priority(priority),
            covering_pod_indexers(),
        )
    }

    fn build(builder: StoreBuilder<Pod>) -> Self {
        Self::build_with(builder, pod_indexers())
    }

    fn build_with(builder: StoreBuilder<Pod>, indexers: Indexers<Pod>) -> Self {
        let (writer, _reader) = builder
            .backend::<B>()
            .indexers(indexers)
            .build()
            .expect("static index names are distinct");
        SnapshotStore { writer }
    }
}

impl<B: Backend> CacheWriter for SnapshotStore<B> {
    fn apply_changes(&mut self, changes: Vec<SimChange>, visible: OnVisible<'_>) {
        let n = changes.len();
        let mut batch = self.writer.batch();
        for change in changes {
            match change {
                SimChange::Upsert(pod) => {
                    drop(batch.upsert(pod).expect("scenario pods have names"))
                }
                SimChange::Delete(key, _) => drop(batch.delete_key(&key)),
            }
        }
        batch.commit();
        visible(n, Instant::now());
    }

    fn reader(&self) -> Arc<dyn CacheReader> {
        Arc::new(SnapshotReader(self.writer.reader()))
    }
}

/// The cache reads over any reader of our store (the store's own, or an informer's).
pub struct SnapshotReader<B: Backend>(pub Reader<Pod, B>);

impl<B: Backend> CacheReader for SnapshotReader<B> {
    fn list_all(&self) -> Vec<Arc<Pod>> {
        self.0.snapshot().list()
    }
    fn list_namespace_selector(&self, ns: &str, key: &str, value: &str) -> Vec<Arc<Pod>> {
        self.0.snapshot().list_selected(ns, &[(key, value)])
    }
    fn by_owner(&self, uid: &str) -> Vec<Arc<Pod>> {
        self.0.snapshot().by_index(OWNER_UID_INDEX, uid).expect("owner index exists")
    }
    fn by_node(&self, node: &str) -> Vec<Arc<Pod>> {
        self.0.snapshot().by_index(NODE_NAME_INDEX, node).expect("node index exists")
    }
    fn get(&self, key: &str) -> Option<Arc<Pod>> {
        self.0.snapshot().get_by_key(key).cloned()
    }
    fn hold(&self) -> Box<dyn Any + Send> {
        Box::new(self.0.snapshot())
    }
    fn borrowed(&self) -> Option<&dyn BorrowedReads> {
        Some(self)
    }
}

impl<B: Backend> BorrowedReads for SnapshotReader<B> {
    fn list_all_refs(&self) -> usize {
        let snap = self.0.snapshot();
        std::hint::black_box(snap.list_refs()).len()
    }
    fn list_namespace_selector_refs(&self, ns: &str, key: &str, value: &str) -> usize {
        let snap = self.0.snapshot();
        let found: Vec<&Arc<Pod>> = snap.select(ns, &[(key, value)]).collect();
        std::hint::black_box(found).len()
    }
    fn by_owner_refs(&self, uid: &str) -> usize {
        let snap = self.0.snapshot();
        std::hint::black_box(snap.by_index_refs(OWNER_UID_INDEX, uid).expect("owner index exists"))
            .len()
    }
    fn hot_scan_refs(&self, node: &str) -> usize {
        let snap = self.0.snapshot();
        snap.iter()
            .filter(|p| {
                pod_node(p) == Some(node)
                    && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
            })
            .count()
    }
}
