//! The client a reconcile writes through: every successful write records the resource version
//! it produced, for the key being reconciled, so that the key's next reconcile waits until the
//! cache shows it; creates and deletes of owned objects raise expectations.

use std::{any::TypeId, fmt, marker::PhantomData, sync::Arc};

use kube::{
    Resource,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use serde::Serialize;

use crate::{Deleted, ObjectKey, Writes, metrics::WriteOutcome, shared::Shared};

/// A [`Writes`] (usually a `kube::Api<K>`) wrapped for one reconcile: it forwards every write
/// and records, for the key being reconciled, the resource version each write returned
/// (read-your-writes), in the cache registered for `K`. Creates of objects the key controls
/// (an owner reference with `controller: true` to it) and deletes are counted as
/// expectations when `K`'s events reach the controller (an owned type).
///
/// Every write is counted by verb and outcome (`writes_total`; [`Stats`](crate::Stats)): a
/// create answered 409 AlreadyExists is a decision made on a cache that did not show the
/// object, so those counts show how often a controller acted on stale data.
///
/// Get one from [`Context::track`](crate::Context::track). It can outlive its reconcile: writes
/// made later still count for the key's next reconcile.
pub struct Tracked<K, W> {
    writes: W,
    key: ObjectKey,
    shared: Arc<Shared>,
    cache: Option<usize>,
    owned: bool,
    _kind: PhantomData<fn() -> K>,
}

impl<K, W> fmt::Debug for Tracked<K, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracked")
            .field("key", &self.key)
            .field("cache", &self.cache)
            .field("owned", &self.owned)
            .finish_non_exhaustive()
    }
}

impl<K: Resource + 'static, W: Writes<K>> Tracked<K, W> {
    pub(crate) fn new(writes: W, key: ObjectKey, shared: Arc<Shared>) -> Self {
        let (cache, owned) = shared.cache_of(TypeId::of::<K>());
        Tracked { writes, key, shared, cache, owned, _kind: PhantomData }
    }

    /// The writes this wraps.
    pub fn inner(&self) -> &W {
        &self.writes
    }

    /// Whether a cache for `K` is registered, so that writes are waited for.
    pub fn is_tracked(&self) -> bool {
        self.cache.is_some()
    }

    fn record(&self, obj: &K) {
        self.shared.record_write(&self.key, self.cache, obj.meta().resource_version.as_deref());
    }

    /// Counts a `verb` write that ended as `result` (the `writes_total` metric); records the
    /// version of the object it returned, if it succeeded.
    fn counted(&self, verb: &'static str, result: kube::Result<K>) -> kube::Result<K> {
        self.shared.metrics.wrote(verb, WriteOutcome::of(verb, &result));
        if let Ok(obj) = &result {
            self.record(obj);
        }
        result
    }

    /// Creates `obj`. If `K` is owned and `obj` is controlled by the key being reconciled, one
    /// more add is expected until the owned informer shows it.
    pub async fn create(&self, pp: &PostParams, obj: &K) -> kube::Result<K> {
        let expected =
            self.owned && self.shared.owner.owner(obj.meta()).as_ref() == Some(&self.key);
        if expected {
            self.shared.expectations.expect_add(&self.key);
        }
        let result = self.counted("create", self.writes.create(pp, obj).await);
        if result.is_err() && expected {
            self.shared.expectations.observe_add(&self.key);
        }
        result
    }

    /// Replaces the object `name` with `obj`.
    pub async fn replace(&self, name: &str, pp: &PostParams, obj: &K) -> kube::Result<K> {
        self.counted("replace", self.writes.replace(name, pp, obj).await)
    }

    /// Replaces the status of the object `name`.
    pub async fn replace_status(&self, name: &str, pp: &PostParams, obj: &K) -> kube::Result<K> {
        self.counted("replace_status", self.writes.replace_status(name, pp, obj).await)
    }

    /// Patches the object `name`.
    pub async fn patch<P: Serialize + fmt::Debug + Send + Sync>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> kube::Result<K> {
        self.counted("patch", self.writes.patch(name, pp, patch).await)
    }

    /// Patches the status of the object `name`.
    pub async fn patch_status<P: Serialize + fmt::Debug + Send + Sync>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> kube::Result<K> {
        self.counted("patch_status", self.writes.patch_status(name, pp, patch).await)
    }

    /// Deletes the object `name` (in the wrapped writes' namespace). If `K` is owned, the delete is expected until the owned
    /// informer shows the object gone or terminating. If the server returns the object, its
    /// resource version (the deletion's) is recorded for read-your-writes; a bare `Status`
    /// leaves only the expectation.
    pub async fn delete(&self, name: &str, dp: &DeleteParams) -> kube::Result<Deleted<K>> {
        let obj_key = ObjectKey::new(self.writes.namespace(), name);
        if self.owned {
            self.shared.expectations.expect_delete(&self.key, obj_key.clone());
        }
        let result = self.writes.delete(name, dp).await;
        self.shared.metrics.wrote("delete", WriteOutcome::of("delete", &result));
        match result {
            Ok(deleted) => {
                if let Deleted::Object(obj) = &deleted {
                    self.record(obj);
                }
                Ok(deleted)
            }
            Err(e) => {
                if self.owned {
                    self.shared.expectations.observe_delete(&obj_key);
                }
                Err(e)
            }
        }
    }
}
