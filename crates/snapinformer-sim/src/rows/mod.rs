//! The caches under test (the report's *rows*): ours and the baselines, behind one interface.
//!
//! [`CacheKind`] is the one list of caches the scenarios know; add a row there (a variant, its
//! name and [`CacheKind::build`]). Rows that run outside this process (the Go `client-go` and
//! `client-go-indexer` rows, [`client_go`]) are listed by the `store` scenario's row registry,
//! as is the `store` scenario's whole-informer row `snapinformer`.
//!
//! - `snapshot`, `snapshot-hamt`: `snapinformer-store` on its chunked (default) and HAMT
//!   persistent maps. A batch of arrived events is applied and published once; superseded
//!   versions are dropped by the writer (`background_reclaim(false)`), as the locked baselines
//!   drop replaced values.
//! - `snapshot-bg`: the chunked store as it is built by default, with background reclamation:
//!   superseded versions are dropped on a reclaimer thread (as Go's garbage collector does for
//!   client-go).
//! - `snapshot-bg-covering`: `snapshot-bg` whose owner-UID index is covering: its buckets hold
//!   the pods too, so owner lookups read them without resolving keys, and every update writes
//!   its owner's bucket as well (a control; the default until 70aaa9b). Every other row's
//!   indexes hold keys, as client-go's do.
//! - `snapshot-compact`: the chunked store holding compact pods ([`compact`], issue 14): pods as
//!   hash-consed trees sharing what they have in common, generated in that form ([`Objects`]).
//! - `locked`: client-go's `threadSafeMap` in Rust ([`locked`]): one reader/writer lock over the
//!   items and every index, the write lock taken once per event and released with a hand-off to
//!   the readers waiting for it, as Go's `sync.RWMutex` does ([`lock`]).
//! - `locked-std`: the same on std's `RwLock`, which lets the writer take the lock again before
//!   the readers it woke have run.
//! - `locked-bg`: `locked` whose replaced and deleted objects are freed on a reclaimer thread,
//!   off the lock (Go frees them in its garbage collector): the peer of `snapshot-bg`.
//! - `locked-batch`: `locked` with 1.35's batched writes: up to 1000 events under one lock.
//! - `kube-rs`: `kube_runtime::reflector::Store` itself ([`kube_rs`]).
//!
//! # Reads
//!
//! Every read of [`CacheReader`] returns owned `Arc`s, for every row: client-go hands out
//! copied pointers, so owned results are the like-for-like figure. The `store` scenario reads
//! them in the row's own object form (`*_owned`, [`Objects`]): `Arc<Pod>`s, or for
//! `snapshot-compact` `Arc<CompactPod>`s, a compact pod's materialised form. Our store can also lend
//! references that the snapshot keeps alive ([`BorrowedReads`]); those figures are reported
//! beside the owned ones, as an extra. An `Arc` clone is an atomic increment (and its drop a
//! decrement) that Go's pointer copy does not pay; the `store` scenario and the criterion
//! benches measure that cost on its own so that readers can judge it.

pub mod client_go;
pub mod compact;
pub mod kube_rs;
pub mod lock;
pub mod locked;
mod objects;
pub mod snapshot;

pub use objects::{Batches, Objects};

use std::{any::Any, sync::Arc, time::Instant};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_store::{Chunked, Hamt, ReclaimPriority};

use crate::pods::access;

/// Called as prefixes of a batch become visible to readers: `(items now visible, when)`.
pub type OnVisible<'a> = &'a mut dyn FnMut(usize, Instant);

/// One change a cache under test applies.
#[derive(Debug, Clone)]
pub enum SimChange {
    /// Add or replace the pod with this pod's key.
    Upsert(Arc<Pod>),
    /// Delete the pod with this key; the last known state if there is one (kube-rs' store needs
    /// an object to delete).
    Delete(Arc<str>, Option<Arc<Pod>>),
}

/// The write side of a cache under test.
pub trait CacheWriter: Send {
    /// Applies `changes` in order and reports when they become visible to readers.
    fn apply_changes(&mut self, changes: Vec<SimChange>, visible: OnVisible<'_>);
    /// Applies `items` (upserts) in order and reports when they become visible to readers.
    fn apply(&mut self, items: Vec<Arc<Pod>>, visible: OnVisible<'_>) {
        self.apply_changes(items.into_iter().map(SimChange::Upsert).collect(), visible);
    }
    /// Applies `objects` (upserts, in the form [`CacheKind::objects`] generated for this row) in
    /// order and reports when they become visible to readers.
    fn apply_objects(&mut self, objects: Objects, visible: OnVisible<'_>) {
        self.apply(objects.into_pods(), visible);
    }
    /// A read handle, shared by any number of threads.
    fn reader(&self) -> Arc<dyn CacheReader>;
    /// Deep copies this cache made beyond its own design because an object it was handed was
    /// still shared (kube-rs' writer takes events by value: a shared object must be copied
    /// first). Zero for every row when the harness hands objects over as a watch does.
    fn extra_copies(&self) -> u64 {
        0
    }
}

/// The read side of a cache under test: the reads controllers do, with owned results.
pub trait CacheReader: Send + Sync {
    /// Every pod (client-go `List`).
    fn list_all(&self) -> Vec<Arc<Pod>>;
    /// Pods of namespace `ns` whose label `key` equals `value` (client-go `ListAllByNamespace`
    /// with a selector; kube-rs `state_filter`).
    fn list_namespace_selector(&self, ns: &str, key: &str, value: &str) -> Vec<Arc<Pod>>;
    /// Pods owned by `uid` (the owner-UID index; kube-rs filters its full state).
    fn by_owner(&self, uid: &str) -> Vec<Arc<Pod>>;
    /// Pods bound to `node` (the node-name index; kube-rs filters its full state).
    fn by_node(&self, node: &str) -> Vec<Arc<Pod>>;
    /// The pod under `key` (`namespace/name`): what a delta queue asks the store (client-go's
    /// `GetByKey`).
    fn get(&self, key: &str) -> Option<Arc<Pod>>;
    /// Whatever a reader keeps after a full read (a snapshot, or a copied list), for the memory
    /// measurement of "a reader holds an old version".
    fn hold(&self) -> Box<dyn Any + Send>;
    /// Reads that lend references instead of copying `Arc`s, if this cache has them (ours).
    fn borrowed(&self) -> Option<&dyn BorrowedReads> {
        None
    }
    /// [`list_all`](CacheReader::list_all) in the row's own object form (the `store`
    /// scenario's owned read: `Arc` clones of what the row holds).
    fn list_all_owned(&self) -> Objects {
        Objects::Pods(self.list_all())
    }
    /// [`list_namespace_selector`](CacheReader::list_namespace_selector) in the row's own form.
    fn list_namespace_selector_owned(&self, ns: &str, key: &str, value: &str) -> Objects {
        Objects::Pods(self.list_namespace_selector(ns, key, value))
    }
    /// [`by_owner`](CacheReader::by_owner) in the row's own form.
    fn by_owner_owned(&self, uid: &str) -> Objects {
        Objects::Pods(self.by_owner(uid))
    }
}

/// Reads that lend references kept alive by a snapshot: no reference count is touched. Each
/// returns how many objects the borrowed result held (the references cannot outlive the
/// snapshot taken inside).
pub trait BorrowedReads {
    /// Every pod, borrowed.
    fn list_all_refs(&self) -> usize;
    /// The namespace list with a label selector, borrowed.
    fn list_namespace_selector_refs(&self, ns: &str, key: &str, value: &str) -> usize;
    /// The owner-UID lookup, borrowed.
    fn by_owner_refs(&self, uid: &str) -> usize;
    /// A scan of every object reading two hot fields: how many pods bound to `node` are
    /// `Running`.
    fn hot_scan_refs(&self, node: &str) -> usize;
}

/// The caches the simulator knows, by report name: the one place to add an in-process row.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum CacheKind {
    /// Ours, chunked persistent map (the default backend), superseded versions dropped inline
    /// (`background_reclaim(false)`).
    #[value(name = "snapshot")]
    #[serde(rename = "snapshot")]
    Snapshot,
    /// Ours, chunked, with background reclamation (the store's default configuration).
    #[value(name = "snapshot-bg")]
    #[serde(rename = "snapshot-bg")]
    SnapshotBg,
    /// `snapshot-bg` with a covering owner-UID index (a control: faster owner lookups, more
    /// work on writes than the locked rows' index of keys).
    #[value(name = "snapshot-bg-covering")]
    #[serde(rename = "snapshot-bg-covering")]
    SnapshotBgCovering,
    /// Ours, HAMT persistent map.
    #[value(name = "snapshot-hamt")]
    #[serde(rename = "snapshot-hamt")]
    SnapshotHamt,
    /// Ours, chunked, holding compact pods (issue 14).
    #[value(name = "snapshot-compact")]
    #[serde(rename = "snapshot-compact")]
    SnapshotCompact,
    /// client-go-style lock per event, released with a hand-off to waiting readers (Go's).
    #[value(name = "locked")]
    #[serde(rename = "locked")]
    Locked,
    /// The same on std's `RwLock` (no hand-off).
    #[value(name = "locked-std")]
    #[serde(rename = "locked-std")]
    LockedStd,
    /// `locked` with replaced objects freed off the lock by a reclaimer thread.
    #[value(name = "locked-bg")]
    #[serde(rename = "locked-bg")]
    LockedBg,
    /// client-go-style lock per batch of up to 1000 events, with hand-off.
    #[value(name = "locked-batch")]
    #[serde(rename = "locked-batch")]
    LockedBatch,
    /// kube-rs' reflector store.
    #[value(name = "kube-rs")]
    #[serde(rename = "kube-rs")]
    KubeRs,
}

impl CacheKind {
    /// Every in-process cache, in report order.
    pub const ALL: [CacheKind; 10] = [
        CacheKind::Snapshot,
        CacheKind::SnapshotBg,
        CacheKind::SnapshotBgCovering,
        CacheKind::SnapshotHamt,
        CacheKind::SnapshotCompact,
        CacheKind::Locked,
        CacheKind::LockedStd,
        CacheKind::LockedBg,
        CacheKind::LockedBatch,
        CacheKind::KubeRs,
    ];

    /// Report name.
    pub fn name(self) -> &'static str {
        match self {
            CacheKind::Snapshot => "snapshot",
            CacheKind::SnapshotBg => "snapshot-bg",
            CacheKind::SnapshotBgCovering => "snapshot-bg-covering",
            CacheKind::SnapshotHamt => "snapshot-hamt",
            CacheKind::SnapshotCompact => "snapshot-compact",
            CacheKind::Locked => "locked",
            CacheKind::LockedStd => "locked-std",
            CacheKind::LockedBg => "locked-bg",
            CacheKind::LockedBatch => "locked-batch",
            CacheKind::KubeRs => "kube-rs",
        }
    }

    /// The cache named `name` (its report name).
    pub fn parse(name: &str) -> Option<CacheKind> {
        CacheKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether this is our store (the rows the targets are about).
    pub fn is_ours(self) -> bool {
        matches!(
            self,
            CacheKind::Snapshot
                | CacheKind::SnapshotBg
                | CacheKind::SnapshotBgCovering
                | CacheKind::SnapshotHamt
                | CacheKind::SnapshotCompact
        )
    }

    /// Whether reads through indexes are available (kube-rs filters instead).
    pub fn has_indexes(self) -> bool {
        self != CacheKind::KubeRs
    }

    /// Whether the cache takes each event's object by value, so that a harness must hand over
    /// a unique object to spare it a copy (kube-rs' `apply_watcher_event` copies what it is
    /// given; it has no delta queue between the watch and the store).
    pub fn takes_events_by_value(self) -> bool {
        self == CacheKind::KubeRs
    }

    /// An empty cache of this kind, its reclaimer thread (if it has one) at normal priority.
    pub fn build(self) -> Box<dyn CacheWriter> {
        self.build_with(ReclaimPriority::Normal)
    }

    /// An empty cache of this kind; the rows with a reclaimer thread (`snapshot-bg`,
    /// `locked-bg`) run it at `reclaim`.
    pub fn build_with(self, reclaim: ReclaimPriority) -> Box<dyn CacheWriter> {
        use lock::LockFlavor;
        use locked::{LockedConfig, LockedStore};
        match self {
            CacheKind::Snapshot => Box::new(snapshot::SnapshotStore::<Chunked>::new(false)),
            CacheKind::SnapshotBg => {
                Box::new(snapshot::SnapshotStore::<Chunked>::with_reclaimer(reclaim))
            }
            CacheKind::SnapshotBgCovering => {
                Box::new(snapshot::SnapshotStore::<Chunked>::with_covering_owner_index(reclaim))
            }
            CacheKind::SnapshotHamt => Box::new(snapshot::SnapshotStore::<Hamt>::new(false)),
            CacheKind::SnapshotCompact => Box::new(compact::CompactStore::new()),
            CacheKind::Locked => Box::new(LockedStore::new(LockedConfig::per_event())),
            CacheKind::LockedStd => Box::new(LockedStore::new(LockedConfig {
                flavor: LockFlavor::Std,
                ..LockedConfig::per_event()
            })),
            CacheKind::LockedBg => Box::new(LockedStore::new(LockedConfig {
                background_free: true,
                reclaim_idle: reclaim == ReclaimPriority::Idle,
                ..LockedConfig::per_event()
            })),
            CacheKind::LockedBatch => Box::new(LockedStore::new(LockedConfig {
                per_lock: 1000,
                ..LockedConfig::per_event()
            })),
            CacheKind::KubeRs => Box::new(kube_rs::KubeRsStore::new()),
        }
    }

    /// `count` pods `make(i)` in the form this row holds them (built in parallel; compact pods
    /// decoded from JSON as the compact reflector decodes them): generation is not measured.
    pub fn objects(self, count: usize, make: impl Fn(usize) -> Pod + Sync) -> Objects {
        match self {
            CacheKind::SnapshotCompact => Objects::Compact(compact::generate(count, &make)),
            _ => Objects::Pods(crate::pods::generate(count, make)),
        }
    }
}

/// A cache under test as the objects its delta queue knows (client-go's `KnownObjects`): the
/// queue asks it about keys on relists and resyncs.
pub struct KnownPods(Arc<dyn CacheReader>);

impl KnownPods {
    /// The pods `reader` sees.
    pub fn new(reader: Arc<dyn CacheReader>) -> Self {
        KnownPods(reader)
    }
}

impl snapinformer_core::KnownObjects<Pod> for KnownPods {
    fn get(&self, key: &str) -> Option<Arc<Pod>> {
        self.0.get(key)
    }
    fn for_each(&self, f: &mut dyn FnMut(&Arc<str>, &Arc<Pod>)) {
        let all = self.0.list_all();
        let access = access::<Pod>();
        let mut key = String::new();
        for pod in &all {
            if access.write_key(pod, &mut key).is_ok() {
                f(&Arc::from(key.as_str()), pod);
            }
        }
    }
}

/// Whether `p`'s label `key` equals `value`.
pub(crate) fn label_is(p: &Pod, key: &str, value: &str) -> bool {
    p.metadata.labels.as_ref().and_then(|l| l.get(key)).is_some_and(|v| v == value)
}

/// Whether `p` has an owner reference to `uid`.
pub(crate) fn owned_by(p: &Pod, uid: &str) -> bool {
    p.metadata.owner_references.iter().flatten().any(|o| o.uid == uid)
}
