//! client-go's `threadSafeMap` in Rust: the `locked`, `locked-std`, `locked-bg` and
//! `locked-batch` rows.
//!
//! One reader/writer lock ([`RwCell`]) over the items map and every index. The writer takes the
//! write lock once per event (client-go up to 1.34) or once per batch of up to 1000 events
//! (1.35's batched writes). `List` copies the pointers under the read lock; `ByIndex` and
//! namespace lists walk an index bucket and look each key up under the read lock
//! (client-go's `ListAllByNamespace` then filters by selector outside the lock, and so does
//! this). Indexes are client-go's key indexes: buckets of keys, updated with client-go's
//! `updateIndices` rules.
//!
//! Replaced and deleted objects are dropped inside the write lock, as a map drops what it
//! replaces; Go leaves them to its garbage collector. With `background_free` (`locked-bg`) they
//! are collected during the write and handed to a reclaimer thread after the lock is released.

use std::{
    any::Any,
    collections::{HashMap, HashSet},
    sync::Arc,
    time::Instant,
};

use k8s_openapi::api::core::v1::Pod;
use snapinformer_store::{IndexFn, ObjectAccess, ReclaimPriority, Reclaimer, backend::KeyHasher};

use super::{
    CacheReader, CacheWriter, OnVisible, SimChange, label_is,
    lock::{LockFlavor, RwCell},
};
use crate::pods::{NODE_NAME_INDEX, OWNER_UID_INDEX, access, pod_node};

/// Name of the namespace index (client-go's `cache.NamespaceIndex`).
const NAMESPACE_INDEX: &str = "namespace";

type Bucket = HashSet<Arc<str>, KeyHasher>;

struct LockedIndex {
    name: &'static str,
    f: IndexFn<Pod>,
    buckets: HashMap<String, Bucket, KeyHasher>,
}

/// The map and its indexes, as client-go's `threadSafeMap` holds them.
pub(crate) struct LockedInner {
    items: HashMap<Arc<str>, Arc<Pod>, KeyHasher>,
    indices: Vec<LockedIndex>,
}

impl LockedInner {
    /// Objects in the map.
    fn len(&self) -> usize {
        self.items.len()
    }

    fn new() -> Self {
        let indices = [
            (NAMESPACE_INDEX, IndexFn::namespace(access::<Pod>())),
            (OWNER_UID_INDEX, IndexFn::owner_uid(access::<Pod>())),
            (NODE_NAME_INDEX, IndexFn::field(pod_node)),
        ]
        .into_iter()
        .map(|(name, f)| LockedIndex { name, f, buckets: HashMap::default() })
        .collect();
        LockedInner { items: HashMap::default(), indices }
    }

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

    /// Removes `key`; returns the object it held.
    fn delete(&mut self, key: &str) -> Option<Arc<Pod>> {
        let (key, old) = self.items.remove_entry(key)?;
        self.update_indices(Some(&old), None, &key);
        Some(old)
    }

    /// Stores `obj` under `key`; returns the object it replaced.
    fn upsert(&mut self, key: &str, obj: Arc<Pod>) -> Option<Arc<Pod>> {
        let key: Arc<str> = match self.items.get_key_value(key) {
            Some((k, _)) => k.clone(),
            None => Arc::from(key),
        };
        let old = self.items.insert(key.clone(), obj.clone());
        self.update_indices(old.as_deref(), Some(&obj), &key);
        old
    }

    /// client-go's `ByIndex`: the bucket's keys looked up in the items map, pointers copied.
    fn by_index(&self, index: &str, value: &str) -> Vec<Arc<Pod>> {
        let index = self.indices.iter().find(|i| i.name == index).expect("index exists");
        match index.buckets.get(value) {
            Some(set) => set.iter().filter_map(|k| self.items.get(k).cloned()).collect(),
            None => Vec::new(),
        }
    }
}

/// How a [`LockedStore`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockedConfig {
    /// Events applied under one write lock (1: client-go up to 1.34; 1000: 1.35's batches).
    pub per_lock: usize,
    /// How the write lock is released.
    pub flavor: LockFlavor,
    /// Free replaced and deleted objects on a reclaimer thread, after the lock is released.
    pub background_free: bool,
    /// Run that reclaimer at `SCHED_IDLE`, as our store's `ReclaimPriority::Idle` does.
    pub reclaim_idle: bool,
}

impl LockedConfig {
    /// One event per write lock, Go's hand-off, objects freed inside the lock: `locked`.
    pub fn per_event() -> Self {
        LockedConfig {
            per_lock: 1,
            flavor: LockFlavor::HandOff,
            background_free: false,
            reclaim_idle: false,
        }
    }
}

/// The locked baseline's writer.
pub struct LockedStore {
    inner: Arc<RwCell<LockedInner>>,
    access: ObjectAccess<Pod>,
    per_lock: usize,
    keybuf: String,
    /// Where replaced objects go with `background_free` (the reclaimer drops them).
    reclaim: Option<Reclaim>,
}

/// The reclaimer thread of `locked-bg`: the store's own [`Reclaimer`], so bounded, scheduled and
/// woken as our store's is (like for like). When the objects waiting for it reach the map's
/// size (at least `RECLAIM_BACKLOG_MIN`), the writer frees the next ones itself, after the
/// lock; with `reclaim_idle` it runs at `SCHED_IDLE`.
type Reclaim = Reclaimer<Vec<Arc<Pod>>>;

impl LockedStore {
    /// An empty store written as `config` says.
    pub fn new(config: LockedConfig) -> Self {
        let priority =
            if config.reclaim_idle { ReclaimPriority::Idle } else { ReclaimPriority::Normal };
        let reclaim = config.background_free.then(|| {
            Reclaimer::start("locked-reclaim", priority).expect("spawn the reclaimer thread")
        });
        LockedStore {
            inner: Arc::new(RwCell::new(config.flavor, LockedInner::new())),
            access: access::<Pod>(),
            per_lock: config.per_lock.max(1),
            keybuf: String::new(),
            reclaim,
        }
    }
}

impl CacheWriter for LockedStore {
    fn apply_changes(&mut self, changes: Vec<SimChange>, visible: OnVisible<'_>) {
        let mut done = 0;
        let mut items = changes.into_iter().peekable();
        let keep_garbage = self.reclaim.is_some();
        while items.peek().is_some() {
            let (access, keybuf, per_lock) = (self.access, &mut self.keybuf, self.per_lock);
            let (applied, garbage, len) = self.inner.write(|inner| {
                let mut garbage = Vec::new();
                let mut applied = 0;
                for change in items.by_ref().take(per_lock) {
                    let old = match change {
                        SimChange::Upsert(pod) => {
                            access.write_key(&pod, keybuf).expect("scenario pods have names");
                            inner.upsert(keybuf, pod)
                        }
                        SimChange::Delete(key, _) => inner.delete(&key),
                    };
                    if keep_garbage {
                        garbage.extend(old);
                    }
                    // Without a reclaimer, `old` is dropped here, inside the lock.
                    applied += 1;
                }
                (applied, garbage, inner.len())
            });
            done += applied;
            visible(done, Instant::now());
            if let Some(reclaim) = &mut self.reclaim
                && !garbage.is_empty()
            {
                let (n, limit) = (garbage.len(), len.max(snapinformer_store::RECLAIM_BACKLOG_MIN));
                // Above the bound the writer frees them here, after the lock, as ours does.
                reclaim.hand_over(garbage, n, limit);
            }
        }
    }

    fn reader(&self) -> Arc<dyn CacheReader> {
        Arc::new(LockedReader(self.inner.clone()))
    }
}

struct LockedReader(Arc<RwCell<LockedInner>>);

impl CacheReader for LockedReader {
    fn list_all(&self) -> Vec<Arc<Pod>> {
        self.0.read(|g| g.items.values().cloned().collect())
    }
    fn list_namespace_selector(&self, ns: &str, key: &str, value: &str) -> Vec<Arc<Pod>> {
        // client-go ListAllByNamespace: Index(namespace) under the read lock, then filter outside.
        let items = self.0.read(|g| g.by_index(NAMESPACE_INDEX, ns));
        items.into_iter().filter(|p| label_is(p, key, value)).collect()
    }
    fn by_owner(&self, uid: &str) -> Vec<Arc<Pod>> {
        self.0.read(|g| g.by_index(OWNER_UID_INDEX, uid))
    }
    fn by_node(&self, node: &str) -> Vec<Arc<Pod>> {
        self.0.read(|g| g.by_index(NODE_NAME_INDEX, node))
    }
    fn get(&self, key: &str) -> Option<Arc<Pod>> {
        self.0.read(|g| g.items.get(key).cloned())
    }
    fn hold(&self) -> Box<dyn Any + Send> {
        Box::new(self.list_all())
    }
}
