//! What a controller's workers, handles, event handlers and tracked clients share: the queue,
//! the caches by object type, the writes each key waits for, the expectations, the metrics.

use std::{
    any::TypeId,
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, MutexGuard, RwLock},
};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use snapinformer_core::WorkQueue;
use tokio::{sync::watch, time::Instant};

use crate::{
    Config, ObjectKey, OnTimeout, ReadYourWrites,
    cache::{self, VersionedCache},
    expectations::{Expectations, Pending},
    metrics::Metrics,
};

/// How the controller finds which key an owned object belongs to: its controller owner
/// reference, if that points at the primary kind.
#[derive(Debug, Clone)]
pub(crate) struct OwnerMatch {
    pub(crate) kind: String,
    pub(crate) api_version: String,
    pub(crate) cluster_scoped: bool,
}

impl OwnerMatch {
    /// The key of `meta`'s controller, if it is of the primary kind.
    pub(crate) fn owner(&self, meta: &ObjectMeta) -> Option<ObjectKey> {
        let owner =
            meta.owner_references.as_deref()?.iter().find(|o| o.controller == Some(true))?;
        if owner.kind != self.kind || owner.api_version != self.api_version {
            return None;
        }
        let ns = if self.cluster_scoped { None } else { meta.namespace.as_deref() };
        Some(ObjectKey::new(ns, &owner.name))
    }
}

/// The caches registered for object types (writes of a type wait for its cache) and which
/// types are owned (their events lower expectations).
#[derive(Default)]
pub(crate) struct Caches {
    pub(crate) all: Vec<Arc<dyn VersionedCache>>,
    pub(crate) by_type: HashMap<TypeId, usize>,
    pub(crate) owned: HashSet<TypeId>,
}

pub(crate) struct Shared {
    pub(crate) name: String,
    pub(crate) queue: WorkQueue<ObjectKey>,
    pub(crate) config: RwLock<Config>,
    pub(crate) caches: RwLock<Caches>,
    pub(crate) owner: OwnerMatch,
    /// Per key: the versions its last writes produced, per cache (index into `caches.all`).
    pub(crate) written: Mutex<HashMap<ObjectKey, Vec<(usize, u64)>>>,
    pub(crate) expectations: Expectations,
    pub(crate) metrics: Metrics,
    /// Set once shutdown begins.
    pub(crate) stop: watch::Sender<bool>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    pub(crate) fn config(&self) -> Config {
        self.config.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn caches(&self) -> std::sync::RwLockReadGuard<'_, Caches> {
        self.caches.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `cache` as the one showing objects of type `C` (replacing an earlier one).
    pub(crate) fn register_cache(&self, ty: TypeId, cache: Arc<dyn VersionedCache>, owned: bool) {
        let mut c = self.caches.write().unwrap_or_else(|e| e.into_inner());
        let idx = c.all.len();
        c.all.push(cache);
        c.by_type.insert(ty, idx);
        if owned {
            c.owned.insert(ty);
        }
    }

    /// The cache index for type `ty`, and whether the type is owned.
    pub(crate) fn cache_of(&self, ty: TypeId) -> (Option<usize>, bool) {
        let c = self.caches();
        (c.by_type.get(&ty).copied(), c.owned.contains(&ty))
    }

    /// Records that a write for `key` produced `version`, visible in cache `cache`.
    pub(crate) fn record_write(
        &self,
        key: &ObjectKey,
        cache: Option<usize>,
        version: Option<&str>,
    ) {
        let Some(cache) = cache else {
            self.metrics.ryw_untracked_writes.inc();
            return;
        };
        let Some(version) = version.and_then(snapinformer_core::parse_resource_version) else {
            return;
        };
        let mut written = lock(&self.written);
        let slots = written.entry(key.clone()).or_default();
        match slots.iter_mut().find(|(c, _)| *c == cache) {
            Some((_, v)) => *v = (*v).max(version),
            None => slots.push((cache, version)),
        }
    }

    /// The versions `key`'s last writes produced, per cache.
    pub(crate) fn written_by(&self, key: &ObjectKey) -> Vec<(usize, u64)> {
        lock(&self.written).get(key).cloned().unwrap_or_default()
    }

    /// Read-your-writes: waits (bounded by the configured timeout) until every cache shows the
    /// versions `key`'s last writes produced.
    pub(crate) async fn await_writes(&self, key: &ObjectKey) -> ReadYourWrites {
        let config = self.config();
        if !config.read_your_writes {
            return ReadYourWrites::Off;
        }
        let pending = self.written_by(key);
        if pending.is_empty() {
            return ReadYourWrites::NothingWritten;
        }
        let caches: Vec<Arc<dyn VersionedCache>> = {
            let c = self.caches();
            pending.iter().map(|(i, _)| c.all[*i].clone()).collect()
        };
        let start = Instant::now();
        let deadline = start + config.ryw_timeout;
        let mut waited = false;
        let mut failure = None;
        for ((_, version), cache) in pending.iter().zip(&caches) {
            if cache.includes(*version) {
                continue;
            }
            waited = true;
            let left = deadline.saturating_duration_since(Instant::now());
            if let Err(e) = cache.wait_for_version(*version, left).await {
                failure = Some((cache.name().to_owned(), *version, e));
                break;
            }
        }
        let elapsed = start.elapsed();
        if waited {
            self.metrics.ryw_waits.inc();
            self.metrics.ryw_wait_duration.observe(elapsed.as_secs_f64());
        }
        let forget = |written: &mut HashMap<ObjectKey, Vec<(usize, u64)>>| {
            if let Some(slots) = written.get_mut(key) {
                // Keep versions written meanwhile (a tracked client used after its reconcile).
                slots.retain(|s| !pending.contains(s));
                if slots.is_empty() {
                    written.remove(key);
                }
            }
        };
        match failure {
            None => {
                forget(&mut lock(&self.written));
                if waited {
                    ReadYourWrites::CaughtUp { waited: elapsed }
                } else {
                    ReadYourWrites::AlreadyVisible
                }
            }
            Some((cache, version, e)) => {
                self.metrics.ryw_timeouts.inc();
                tracing::debug!(controller = %self.name, %key, %cache, version, error = %e,
                    "read-your-writes wait gave up");
                if config.ryw_timeout_policy == OnTimeout::Reconcile {
                    forget(&mut lock(&self.written));
                }
                ReadYourWrites::TimedOut {
                    waited: elapsed,
                    cache,
                    version,
                    stopped: matches!(e, cache::Error::Stopped(_)),
                }
            }
        }
    }

    pub(crate) fn pending(&self, key: &ObjectKey) -> Pending {
        self.expectations.pending(key, self.config().expectations_timeout)
    }

    /// An owned object appeared: its owner's expected creates go down by one, and the owner is
    /// queued.
    pub(crate) fn owned_added<C: Resource>(&self, obj: &C) {
        if let Some(owner) = self.owner.owner(obj.meta()) {
            self.expectations.observe_add(&owner);
            self.queue.add(owner);
        }
    }

    /// An owned object changed: its owners (before and after) are queued; one that became
    /// terminating counts as an observed delete (as client-go's controllers count it).
    pub(crate) fn owned_updated<C: Resource>(&self, old: &C, new: &C) {
        let terminating = new.meta().deletion_timestamp.is_some();
        if terminating
            && old.meta().deletion_timestamp.is_none()
            && let Some(key) = ObjectKey::of(new)
        {
            self.expectations.observe_delete(&key);
        }
        let new_owner = self.owner.owner(new.meta());
        let old_owner = self.owner.owner(old.meta());
        if old_owner != new_owner
            && let Some(o) = old_owner
        {
            self.queue.add(o);
        }
        if let Some(o) = new_owner {
            self.queue.add(o);
        }
    }

    /// An owned object was added or changed and its previous state is unknown: its owner is
    /// queued; if it is terminating, an expected delete of it is observed (a second sighting
    /// finds nothing left to lower).
    pub(crate) fn owned_changed<C: Resource>(&self, obj: &C) {
        if obj.meta().deletion_timestamp.is_some()
            && let Some(key) = ObjectKey::of(obj)
        {
            self.expectations.observe_delete(&key);
        }
        if let Some(owner) = self.owner.owner(obj.meta()) {
            self.queue.add(owner);
        }
    }

    /// An owned object is gone (`obj` is its last known state, if known; `key` its store key):
    /// an expected delete of it is observed and its owner is queued.
    pub(crate) fn owned_deleted<C: Resource>(&self, obj: Option<&C>, key: Option<ObjectKey>) {
        if let Some(key) = key.or_else(|| obj.and_then(ObjectKey::of)) {
            self.expectations.observe_delete(&key);
        }
        if let Some(owner) = obj.and_then(|o| self.owner.owner(o.meta())) {
            self.queue.add(owner);
        }
    }

    pub(crate) fn shutdown(&self) {
        self.stop.send_replace(true);
    }

    pub(crate) fn is_stopping(&self) -> bool {
        *self.stop.borrow()
    }
}
