//! The stores under test, behind one interface: ours (both backends) and the baselines.
//!
//! - `snapshot`, `snapshot-hamt`: `snapinformer-store` on its chunked (default) and HAMT
//!   backends. A batch of arrived events is applied and published once; superseded versions are
//!   dropped by the writer, as the locked baselines drop replaced values.
//! - `snapshot-bg`: the chunked store with background reclamation: superseded versions are
//!   dropped on a reclaimer thread (as Go's garbage collector does for client-go).
//! - `locked`: a faithful analogue of client-go's `threadSafeMap` up to 1.34: one `RwLock` over
//!   the items map and every index; the writer takes the write lock once per event; `List` copies
//!   the pointers under the read lock; `ByIndex` and namespace lists walk an index bucket and look
//!   each key up under the read lock (client-go's `ListAllByNamespace` then filters by selector
//!   outside the lock, and so does this).
//! - `locked-batch`: the same store with 1.35's batched writes: up to 1000 events under one lock.
//! - `kube-rs`: `kube_runtime::reflector::Store` itself, fed through its `Writer` with
//!   `apply_watcher_event` (which clones each object and write-locks per event) and read with
//!   `state()` and `state_filter` (it has no index, so index lookups filter the full list).

use std::{
    any::Any,
    collections::{HashMap, HashSet},
    sync::{Arc, RwLock},
    time::Instant,
};

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{reflector, watcher};
use snapinformer_store::{
    Backend, Chunked, Hamt, IndexFn, ObjectAccess, Reader, StoreBuilder, Writer, backend::KeyHasher,
};

use crate::pods::{NODE_INDEX, OWNER_INDEX, access, pod_indexers};

/// Called as prefixes of a batch become visible to readers: `(items now visible, when)`.
pub type Visible<'a> = &'a mut dyn FnMut(usize, Instant);

/// One change a store under test applies.
#[derive(Debug, Clone)]
pub enum SimChange {
    /// Add or replace the pod with this pod's key.
    Upsert(Arc<Pod>),
    /// Delete the pod with this key; the last known state if there is one (kube-rs' store needs
    /// an object to delete).
    Delete(Arc<str>, Option<Arc<Pod>>),
}

/// The write side of a store under test.
pub trait SimStore: Send {
    /// Applies `changes` in order and reports when they become visible to readers.
    fn apply_changes(&mut self, changes: Vec<SimChange>, visible: Visible<'_>);
    /// Applies `items` (upserts) in order and reports when they become visible to readers.
    fn apply(&mut self, items: Vec<Arc<Pod>>, visible: Visible<'_>) {
        self.apply_changes(items.into_iter().map(SimChange::Upsert).collect(), visible);
    }
    /// A read handle for another thread.
    fn reader(&self) -> Box<dyn SimReader>;
}

/// The read side of a store under test: the reads a controller does in the scenarios.
///
/// Each method materialises its result the way that store's API hands results out, then returns
/// the count: the baselines copy `Arc`s under their lock (they cannot lend references past it);
/// a snapshot lends references that the snapshot keeps alive, so no reference count is touched.
pub trait SimReader: Send {
    /// Every pod (client-go `List`).
    fn list_all(&self) -> usize;
    /// Pods of a namespace whose label `key` equals `value` (client-go `ListAllByNamespace` with a
    /// selector; kube-rs `state_filter`).
    fn list_namespace_selector(&self, ns: &str, key: &str, value: &str) -> usize;
    /// Pods owned by `uid` (an owner-UID index lookup; kube-rs filters the full list).
    fn by_owner(&self, uid: &str) -> usize;
    /// Pods on `node` (a node index lookup; kube-rs filters the full list).
    fn by_node(&self, node: &str) -> usize;
    /// Whatever a reader keeps after a full read (a snapshot, or a copied list), for the memory
    /// measurement of "a reader holds an old version".
    fn hold(&self) -> Box<dyn Any + Send>;
    /// Another handle.
    fn boxed_clone(&self) -> Box<dyn SimReader>;

    // What a controller reads and keeps: the pods themselves.

    /// The pods of namespace `ns` whose label `key` equals `value`, as a controller that lists
    /// its namespace gets them (client-go `ListAllByNamespace`; kube-rs `state_filter`).
    fn pods_in_namespace(&self, ns: &str, key: &str, value: &str) -> Vec<Arc<Pod>>;
    /// The pods owned by `uid` (owner index; kube-rs filters the full list).
    fn pods_by_owner(&self, uid: &str) -> Vec<Arc<Pod>>;
    /// The pods bound to `node` (node index; kube-rs filters the full list).
    fn pods_by_node(&self, node: &str) -> Vec<Arc<Pod>>;
    /// The pod under `key` (`namespace/name`): what a delta queue asks the store (client-go's
    /// `GetByKey`).
    fn get(&self, key: &str) -> Option<Arc<Pod>>;
    /// Every pod.
    fn all(&self) -> Vec<Arc<Pod>>;
}

/// The backends the simulator knows, by report name.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum BackendKind {
    /// Ours, chunked backend (the store's default), superseded versions dropped inline.
    #[value(name = "snapshot")]
    Snapshot,
    /// Ours, HAMT backend.
    #[value(name = "snapshot-hamt")]
    SnapshotHamt,
    /// Ours, chunked backend with background reclamation.
    #[value(name = "snapshot-bg")]
    SnapshotBg,
    /// client-go-style lock per event.
    #[value(name = "locked")]
    Locked,
    /// client-go-style lock per batch of up to 1000 events.
    #[value(name = "locked-batch")]
    LockedBatch,
    /// kube-rs' reflector store.
    #[value(name = "kube-rs")]
    KubeRs,
}

impl BackendKind {
    /// All backends, in report order.
    pub const ALL: [BackendKind; 6] = [
        BackendKind::Snapshot,
        BackendKind::SnapshotBg,
        BackendKind::SnapshotHamt,
        BackendKind::Locked,
        BackendKind::LockedBatch,
        BackendKind::KubeRs,
    ];

    /// Report name.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Snapshot => "snapshot",
            BackendKind::SnapshotBg => "snapshot-bg",
            BackendKind::SnapshotHamt => "snapshot-hamt",
            BackendKind::Locked => "locked",
            BackendKind::LockedBatch => "locked-batch",
            BackendKind::KubeRs => "kube-rs",
        }
    }

    /// Whether reads through indexes are available (kube-rs filters instead).
    pub fn has_indexes(self) -> bool {
        self != BackendKind::KubeRs
    }

    /// An empty store of this kind.
    pub fn build(self) -> Box<dyn SimStore> {
        match self {
            BackendKind::Snapshot => Box::new(SnapshotStore::<Chunked>::new(false)),
            BackendKind::SnapshotBg => Box::new(SnapshotStore::<Chunked>::new(true)),
            BackendKind::SnapshotHamt => Box::new(SnapshotStore::<Hamt>::new(false)),
            BackendKind::Locked => Box::new(LockedStore::new(1)),
            BackendKind::LockedBatch => Box::new(LockedStore::new(1000)),
            BackendKind::KubeRs => Box::new(KubeRsStore::new()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Ours

struct SnapshotStore<B: Backend> {
    writer: Writer<Pod, B>,
}

impl<B: Backend> SnapshotStore<B> {
    fn new(background_reclaim: bool) -> Self {
        let (writer, _reader) = StoreBuilder::new(access::<Pod>())
            .backend::<B>()
            .indexers(pod_indexers())
            .background_reclaim(background_reclaim)
            .build()
            .expect("static index names are distinct");
        SnapshotStore { writer }
    }
}

impl<B: Backend> SimStore for SnapshotStore<B> {
    fn apply_changes(&mut self, changes: Vec<SimChange>, visible: Visible<'_>) {
        let n = changes.len();
        let mut batch = self.writer.batch();
        for change in changes {
            match change {
                SimChange::Upsert(pod) => batch.upsert(pod).expect("scenario pods have names"),
                SimChange::Delete(key, _) => drop(batch.delete_key(&key)),
            }
        }
        batch.commit();
        visible(n, Instant::now());
    }

    fn reader(&self) -> Box<dyn SimReader> {
        Box::new(SnapshotReader(self.writer.reader()))
    }
}

struct SnapshotReader<B: Backend>(Reader<Pod, B>);

/// A store under test as the objects its delta queue knows (client-go's `KnownObjects`): a
/// `DeltaFifo` asks it whether a deleted key is in the store, and lists it for relists.
pub struct KnownPods(std::sync::Mutex<Box<dyn SimReader>>);

impl KnownPods {
    /// The pods `reader` sees.
    pub fn new(reader: Box<dyn SimReader>) -> Self {
        KnownPods(std::sync::Mutex::new(reader))
    }
}

impl snapinformer_core::KnownObjects<Pod> for KnownPods {
    fn get(&self, key: &str) -> Option<Arc<Pod>> {
        self.0.lock().expect("known pods lock").get(key)
    }
    fn for_each(&self, f: &mut dyn FnMut(&Arc<str>, &Arc<Pod>)) {
        let all = self.0.lock().expect("known pods lock").all();
        let access = access::<Pod>();
        let mut key = String::new();
        for pod in &all {
            if access.write_key(pod, &mut key).is_ok() {
                f(&Arc::from(key.as_str()), pod);
            }
        }
    }
}

/// The simulator's read operations over any reader of our store (for example an informer's).
pub fn snapshot_reader<B: Backend>(reader: Reader<Pod, B>) -> Box<dyn SimReader> {
    Box::new(SnapshotReader(reader))
}

fn label_is(p: &Pod, key: &str, value: &str) -> bool {
    p.metadata.labels.as_ref().and_then(|l| l.get(key)).is_some_and(|v| v == value)
}

impl<B: Backend> SimReader for SnapshotReader<B> {
    fn list_all(&self) -> usize {
        let snap = self.0.snapshot();
        std::hint::black_box(snap.list_refs()).len()
    }
    fn list_namespace_selector(&self, ns: &str, key: &str, value: &str) -> usize {
        let snap = self.0.snapshot();
        let found: Vec<&Arc<Pod>> =
            snap.namespace(ns).filter(|p| label_is(p, key, value)).collect();
        std::hint::black_box(found).len()
    }
    fn by_owner(&self, uid: &str) -> usize {
        let snap = self.0.snapshot();
        std::hint::black_box(snap.by_index_refs(OWNER_INDEX, uid).expect("owner index exists"))
            .len()
    }
    fn by_node(&self, node: &str) -> usize {
        let snap = self.0.snapshot();
        std::hint::black_box(snap.by_index_refs(NODE_INDEX, node).expect("node index exists")).len()
    }
    fn hold(&self) -> Box<dyn Any + Send> {
        Box::new(self.0.snapshot())
    }
    fn boxed_clone(&self) -> Box<dyn SimReader> {
        Box::new(SnapshotReader(self.0.clone()))
    }
    fn pods_in_namespace(&self, ns: &str, key: &str, value: &str) -> Vec<Arc<Pod>> {
        let snap = self.0.snapshot();
        snap.namespace(ns).filter(|p| label_is(p, key, value)).cloned().collect()
    }
    fn pods_by_owner(&self, uid: &str) -> Vec<Arc<Pod>> {
        let snap = self.0.snapshot();
        snap.by_index_refs(OWNER_INDEX, uid)
            .expect("owner index exists")
            .into_iter()
            .cloned()
            .collect()
    }
    fn get(&self, key: &str) -> Option<Arc<Pod>> {
        self.0.snapshot().get_by_key(key).cloned()
    }
    fn all(&self) -> Vec<Arc<Pod>> {
        self.0.snapshot().list_refs().into_iter().cloned().collect()
    }
    fn pods_by_node(&self, node: &str) -> Vec<Arc<Pod>> {
        let snap = self.0.snapshot();
        snap.by_index_refs(NODE_INDEX, node)
            .expect("node index exists")
            .into_iter()
            .cloned()
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// client-go analogue

type Bucket = HashSet<Arc<str>, KeyHasher>;

struct LockedIndex {
    name: &'static str,
    f: IndexFn<Pod>,
    buckets: HashMap<String, Bucket, KeyHasher>,
}

struct LockedInner {
    items: HashMap<Arc<str>, Arc<Pod>, KeyHasher>,
    indices: Vec<LockedIndex>,
}

impl LockedInner {
    /// client-go's `updateIndices`: skip an index whose single value did not change; otherwise
    /// remove the key from the old buckets (dropping empty ones) and add it to the new ones.
    fn update_indices(&mut self, old: Option<&Pod>, new: Option<&Pod>, key: &Arc<str>) {
        for index in &mut self.indices {
            let old_values = old.map(|o| index.f.values(o)).unwrap_or_default();
            let new_values = new.map(|n| index.f.values(n)).unwrap_or_default();
            if old_values.len() == 1 && new_values.len() == 1 && old_values[0] == new_values[0] {
                continue;
            }
            for v in &old_values {
                if let Some(set) = index.buckets.get_mut(v.as_ref()) {
                    set.remove(key);
                    if set.is_empty() {
                        index.buckets.remove(v.as_ref());
                    }
                }
            }
            for v in &new_values {
                index.buckets.entry(v.to_string()).or_default().insert(key.clone());
            }
        }
    }

    fn delete(&mut self, key: &str) {
        if let Some((key, old)) = self.items.remove_entry(key) {
            self.update_indices(Some(&old), None, &key);
        }
    }

    fn upsert(&mut self, key: &str, obj: Arc<Pod>) {
        let key: Arc<str> = match self.items.get_key_value(key) {
            Some((k, _)) => k.clone(),
            None => Arc::from(key),
        };
        let old = self.items.insert(key.clone(), obj.clone());
        self.update_indices(old.as_deref(), Some(&obj), &key);
    }

    fn by_index(&self, index: &str, value: &str) -> Vec<Arc<Pod>> {
        let index = self.indices.iter().find(|i| i.name == index).expect("index exists");
        match index.buckets.get(value) {
            Some(set) => set.iter().filter_map(|k| self.items.get(k).cloned()).collect(),
            None => Vec::new(),
        }
    }
}

struct LockedStore {
    inner: Arc<RwLock<LockedInner>>,
    access: ObjectAccess<Pod>,
    per_lock: usize,
    keybuf: String,
}

impl LockedStore {
    fn new(per_lock: usize) -> Self {
        let indices = [("namespace", IndexFn::namespace(access::<Pod>()))]
            .into_iter()
            .chain([OWNER_INDEX, NODE_INDEX].into_iter().zip(pod_indexers_fns()))
            .map(|(name, f)| LockedIndex { name, f, buckets: HashMap::default() })
            .collect();
        LockedStore {
            inner: Arc::new(RwLock::new(LockedInner { items: HashMap::default(), indices })),
            access: access::<Pod>(),
            per_lock,
            keybuf: String::new(),
        }
    }
}

fn pod_indexers_fns() -> [IndexFn<Pod>; 2] {
    [IndexFn::owner_uid(access::<Pod>()), IndexFn::field(crate::pods::pod_node)]
}

impl SimStore for LockedStore {
    fn apply_changes(&mut self, changes: Vec<SimChange>, visible: Visible<'_>) {
        let mut done = 0;
        let mut items = changes.into_iter().peekable();
        while items.peek().is_some() {
            let mut guard = self.inner.write().expect("lock not poisoned");
            for change in items.by_ref().take(self.per_lock) {
                match change {
                    SimChange::Upsert(pod) => {
                        self.access
                            .write_key(&pod, &mut self.keybuf)
                            .expect("scenario pods have names");
                        guard.upsert(&self.keybuf, pod);
                    }
                    SimChange::Delete(key, _) => guard.delete(&key),
                }
                done += 1;
            }
            drop(guard);
            visible(done, Instant::now());
        }
    }

    fn reader(&self) -> Box<dyn SimReader> {
        Box::new(LockedReader(self.inner.clone()))
    }
}

struct LockedReader(Arc<RwLock<LockedInner>>);

impl LockedReader {
    fn list(&self) -> Vec<Arc<Pod>> {
        let g = self.0.read().expect("lock not poisoned");
        g.items.values().cloned().collect()
    }
}

impl SimReader for LockedReader {
    fn list_all(&self) -> usize {
        std::hint::black_box(self.list()).len()
    }
    fn list_namespace_selector(&self, ns: &str, key: &str, value: &str) -> usize {
        // client-go ListAllByNamespace: Index(namespace) under the read lock, then filter outside.
        let items = self.0.read().expect("lock not poisoned").by_index("namespace", ns);
        let found: Vec<Arc<Pod>> = items.into_iter().filter(|p| label_is(p, key, value)).collect();
        std::hint::black_box(found).len()
    }
    fn by_owner(&self, uid: &str) -> usize {
        std::hint::black_box(self.0.read().expect("lock not poisoned").by_index(OWNER_INDEX, uid))
            .len()
    }
    fn by_node(&self, node: &str) -> usize {
        std::hint::black_box(self.0.read().expect("lock not poisoned").by_index(NODE_INDEX, node))
            .len()
    }
    fn hold(&self) -> Box<dyn Any + Send> {
        Box::new(self.list())
    }
    fn boxed_clone(&self) -> Box<dyn SimReader> {
        Box::new(LockedReader(self.0.clone()))
    }
    fn pods_in_namespace(&self, ns: &str, key: &str, value: &str) -> Vec<Arc<Pod>> {
        let items = self.0.read().expect("lock not poisoned").by_index("namespace", ns);
        items.into_iter().filter(|p| label_is(p, key, value)).collect()
    }
    fn pods_by_owner(&self, uid: &str) -> Vec<Arc<Pod>> {
        self.0.read().expect("lock not poisoned").by_index(OWNER_INDEX, uid)
    }
    fn pods_by_node(&self, node: &str) -> Vec<Arc<Pod>> {
        self.0.read().expect("lock not poisoned").by_index(NODE_INDEX, node)
    }
    fn get(&self, key: &str) -> Option<Arc<Pod>> {
        self.0.read().expect("lock not poisoned").items.get(key).cloned()
    }
    fn all(&self) -> Vec<Arc<Pod>> {
        self.list()
    }
}

// ---------------------------------------------------------------------------------------------
// kube-rs

struct KubeRsStore {
    writer: reflector::store::Writer<Pod>,
}

impl KubeRsStore {
    fn new() -> Self {
        KubeRsStore { writer: reflector::store::Writer::default() }
    }
}

impl SimStore for KubeRsStore {
    fn apply_changes(&mut self, changes: Vec<SimChange>, visible: Visible<'_>) {
        let mut done = 0;
        for change in changes {
            // The writer takes events by reference and clones the object into its own Arc; we
            // hand it the object without an extra copy when we hold the only reference.
            let event = match change {
                SimChange::Upsert(pod) => watcher::Event::Apply(Arc::unwrap_or_clone(pod)),
                SimChange::Delete(key, last) => watcher::Event::Delete(match last {
                    Some(pod) => Arc::unwrap_or_clone(pod),
                    None => pod_for_key(&key),
                }),
            };
            self.writer.apply_watcher_event(&event);
            done += 1;
            visible(done, Instant::now());
        }
    }

    fn reader(&self) -> Box<dyn SimReader> {
        Box::new(KubeRsReader(self.writer.as_reader()))
    }
}

/// A pod that carries only the name and namespace of `key` (`namespace/name`): what kube-rs'
/// store needs to delete an object whose last state is unknown.
fn pod_for_key(key: &str) -> Pod {
    let (ns, name) = key.split_once('/').map_or((None, key), |(ns, n)| (Some(ns), n));
    let mut pod = Pod::default();
    pod.metadata.name = Some(name.to_owned());
    pod.metadata.namespace = ns.map(str::to_owned);
    pod
}

struct KubeRsReader(reflector::Store<Pod>);

fn owned_by(p: &Pod, uid: &str) -> bool {
    p.metadata.owner_references.iter().flatten().any(|o| o.uid == uid)
}

impl SimReader for KubeRsReader {
    fn list_all(&self) -> usize {
        std::hint::black_box(self.0.state()).len()
    }
    fn list_namespace_selector(&self, ns: &str, key: &str, value: &str) -> usize {
        let found = self.0.state_filter(|p| {
            p.metadata.namespace.as_deref() == Some(ns) && label_is(p, key, value)
        });
        std::hint::black_box(found).len()
    }
    fn by_owner(&self, uid: &str) -> usize {
        std::hint::black_box(self.0.state_filter(|p| owned_by(p, uid))).len()
    }
    fn by_node(&self, node: &str) -> usize {
        std::hint::black_box(self.0.state_filter(|p| crate::pods::pod_node(p) == Some(node))).len()
    }
    fn hold(&self) -> Box<dyn Any + Send> {
        Box::new(self.0.state())
    }
    fn boxed_clone(&self) -> Box<dyn SimReader> {
        Box::new(KubeRsReader(self.0.clone()))
    }
    fn pods_in_namespace(&self, ns: &str, key: &str, value: &str) -> Vec<Arc<Pod>> {
        self.0.state_filter(|p| {
            p.metadata.namespace.as_deref() == Some(ns) && label_is(p, key, value)
        })
    }
    fn pods_by_owner(&self, uid: &str) -> Vec<Arc<Pod>> {
        self.0.state_filter(|p| owned_by(p, uid))
    }
    fn pods_by_node(&self, node: &str) -> Vec<Arc<Pod>> {
        self.0.state_filter(|p| crate::pods::pod_node(p) == Some(node))
    }
    fn get(&self, key: &str) -> Option<Arc<Pod>> {
        let (ns, name) = key.split_once('/').map_or((None, key), |(ns, n)| (Some(ns), n));
        let mut object_ref = reflector::ObjectRef::<Pod>::new(name);
        if let Some(ns) = ns {
            object_ref = object_ref.within(ns);
        }
        self.0.get(&object_ref)
    }
    fn all(&self) -> Vec<Arc<Pod>> {
        self.0.state()
    }
}
