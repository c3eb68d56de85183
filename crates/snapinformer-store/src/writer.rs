//! The single writer, its batches, and the readers it hands out.

use std::{sync::Arc, time::Instant};

use arc_swap::ArcSwap;

use crate::{
    Chunked, Error, Indexers, KeyFn, ObjectAccess, RECLAIM_BACKLOG_MIN, ReclaimPriority, Reclaimer,
    Result, Snapshot, TransformFn,
    backend::{Backend, PersistentMap},
    index::IndexFn,
    index::NAMESPACE_INDEX,
    state::State,
};

/// What the writer and all readers share: the published state.
pub(crate) struct Shared<T: Send + Sync + 'static, B: Backend> {
    pub(crate) current: ArcSwap<State<T, B>>,
    pub(crate) access: ObjectAccess<T>,
    pub(crate) key_fn: KeyFn<T>,
}

/// Builds a store: chooses the backend and the initial index functions.
#[derive(Debug)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct StoreBuilder<T: Send + Sync + 'static, B: Backend = Chunked> {
    access: ObjectAccess<T>,
    indexers: Indexers<T>,
    background_reclaim: bool,
    reclaim_priority: ReclaimPriority,
    label_digests: bool,
    key_fn: KeyFn<T>,
    transform: Option<TransformFn<T>>,
    _backend: std::marker::PhantomData<B>,
}

impl<T: Send + Sync + 'static> StoreBuilder<T, Chunked> {
    /// A builder for objects read through `access`, on the default backend.
    pub fn new(access: ObjectAccess<T>) -> Self {
        StoreBuilder {
            access,
            indexers: Indexers::new(),
            background_reclaim: true,
            reclaim_priority: ReclaimPriority::Normal,
            label_digests: true,
            key_fn: KeyFn::meta_namespace(),
            transform: None,
            _backend: std::marker::PhantomData,
        }
    }
}

impl<T: Send + Sync + 'static, B: Backend> StoreBuilder<T, B> {
    /// Selects another backend (see the crate docs for how they compare).
    pub fn backend<B2: Backend>(self) -> StoreBuilder<T, B2> {
        StoreBuilder {
            access: self.access,
            indexers: self.indexers,
            background_reclaim: self.background_reclaim,
            reclaim_priority: self.reclaim_priority,
            label_digests: self.label_digests,
            key_fn: self.key_fn,
            transform: self.transform,
            _backend: std::marker::PhantomData,
        }
    }

    /// Keys objects with `key_fn` instead of `namespace/name` (client-go's `KeyFunc` passed to
    /// `NewIndexer`). The delta queue feeding this store must use the same function.
    /// [`Snapshot::namespace`] still finds objects by their namespace, without the key-prefix
    /// shortcut the default keys allow.
    pub fn key_fn(mut self, key_fn: KeyFn<T>) -> Self {
        self.key_fn = key_fn;
        self
    }

    /// Applies `transform` to every object `add`, `update`, `replace` or a batch upsert stores
    /// (client-go's `WithTransformer` store option); deletes are not transformed. The key is
    /// computed before the transform, as client-go does. See [`TransformFn`] for where else a
    /// transform can run.
    pub fn transform(mut self, transform: TransformFn<T>) -> Self {
        self.transform = Some(transform);
        self
    }

    /// Registers a key index (more can be added later with [`Writer::add_indexers`]).
    pub fn index(mut self, name: impl Into<Arc<str>>, f: IndexFn<T>) -> Self {
        self.indexers = self.indexers.with(name, f);
        self
    }

    /// Registers a covering index: its buckets hold the objects, so lookups do not go through
    /// the primary map (see [`Indexers`]).
    pub fn covering_index(mut self, name: impl Into<Arc<str>>, f: IndexFn<T>) -> Self {
        self.indexers = self.indexers.with_covering(name, f);
        self
    }

    /// Whether superseded versions are dropped on a dedicated thread (the default) or by the
    /// writer itself (`false`).
    ///
    /// Every publication supersedes the previous version. Dropping it (the copied map nodes, and
    /// the objects whose last owner it was) is about half of a write's cost when objects are
    /// large. By default the writer hands the superseded version to a reclaimer thread (named
    /// `snapinformer-reclaim`, one per store) and goes on, as Go's concurrent garbage collector
    /// frees what client-go's store replaces. The hand-off is bounded as Go's default `GOGC=100`
    /// bounds garbage by the live heap: when the versions waiting for the thread have
    /// superseded as many changes as the store holds objects (at least
    /// [`RECLAIM_BACKLOG_MIN`]), the writer drops the next version itself, so a reclaimer that
    /// cannot keep up slows the writer down instead of letting garbage grow without bound. The
    /// thread ends when the writer is dropped, after dropping what it was handed.
    ///
    /// With `false` the writer frees inline, as a locked map does when it replaces a value: no
    /// extra thread, memory freed at once, and a write about twice as expensive for
    /// `k8s_openapi` pods (the `store` benchmark's `snapshot` and `snapshot-bg` rows). Choose it
    /// for many small stores, where a thread each would cost more than it saves.
    pub fn background_reclaim(mut self, enabled: bool) -> Self {
        self.background_reclaim = enabled;
        self
    }

    /// How the reclaimer thread is scheduled (with [`background_reclaim`](Self::background_reclaim)
    /// on): [`ReclaimPriority::Normal`] by default; [`ReclaimPriority::Idle`] frees memory only
    /// with CPU time nothing else wants. See [`ReclaimPriority`] for what each costs.
    pub fn reclaim_priority(mut self, priority: ReclaimPriority) -> Self {
        self.reclaim_priority = priority;
        self
    }

    /// Whether the writer keeps a digest of each object's labels beside it (the default), so that
    /// lists with a label selector ([`Snapshot::select`](crate::Snapshot::select)) skip unread
    /// the objects that cannot match.
    ///
    /// Keeping it means reading every stored object's labels on the writer: with objects built
    /// on another thread and long out of its cache, several cache misses per write. In the
    /// `store` benchmark at 200,000 realistic pods (five labels each) the informer's writer
    /// spent 8.2-9.5 µs per update with digests against 7.0-8.2 µs without, in alternating runs
    /// (BENCHMARKS.md, "Label digests"). A store that is never listed by label can turn them
    /// off: its selector lists then read every object of the namespace, and return the same.
    pub fn label_digests(mut self, enabled: bool) -> Self {
        self.label_digests = enabled;
        self
    }

    /// Registers several index functions.
    pub fn indexers(mut self, indexers: Indexers<T>) -> Self {
        self.indexers.entries.extend(indexers.entries);
        self
    }

    /// The index functions registered so far (the namespace index is added at `build`).
    pub fn configured_indexers(&self) -> &Indexers<T> {
        &self.indexers
    }

    /// Creates the empty store. Fails with [`Error::IndexExists`] if two index functions share a
    /// name (the namespace index, [`NAMESPACE_INDEX`], is always registered).
    pub fn build(self) -> Result<(Writer<T, B>, Reader<T, B>)> {
        let indexers = Indexers::new()
            .with(NAMESPACE_INDEX, IndexFn::namespace(self.access))
            .indexers_from(self.indexers);
        let state = State::new(indexers, self.label_digests.then_some(self.access.labels))?;
        let shared = Arc::new(Shared {
            current: ArcSwap::from_pointee(state.clone()),
            access: self.access,
            key_fn: self.key_fn,
        });
        let reader = Reader { shared: shared.clone() };
        let reclaimer = if self.background_reclaim {
            Some(Reclaimer::start("snapinformer-reclaim", self.reclaim_priority)?)
        } else {
            None
        };
        let writer = Writer {
            work: state,
            shared,
            keybuf: String::new(),
            pending: 0,
            superseded: 0,
            pending_rv: None,
            reclaimer,
            transform: self.transform,
        };
        Ok((writer, reader))
    }
}

impl<T> Indexers<T> {
    fn indexers_from(mut self, other: Indexers<T>) -> Self {
        self.entries.extend(other.entries);
        self
    }
}

enum PendingRv<T> {
    Object(Arc<T>),
    Explicit(Arc<str>),
}

/// The one writer of a store. It owns a private working copy; every publication makes the working
/// copy's current version visible to readers in one atomic pointer swap. It never waits for readers.
///
/// Single-change methods ([`add`](Writer::add), [`update`](Writer::update),
/// [`delete`](Writer::delete), ...) publish at once. [`batch`](Writer::batch) and
/// [`apply`](Writer::apply) publish many changes at once, which is much cheaper per change.
///
/// Outside a batch the working copy always equals the last published version.
#[doc(alias = "Indexer")]
#[doc(alias = "ThreadSafeStore")]
pub struct Writer<T: Send + Sync + 'static, B: Backend = Chunked> {
    work: State<T, B>,
    shared: Arc<Shared<T, B>>,
    keybuf: String,
    pending: usize,
    /// Objects superseded wholesale since the last publication (by `replace`), beyond `pending`.
    superseded: usize,
    pending_rv: Option<PendingRv<T>>,
    reclaimer: Option<Reclaimer<Arc<State<T, B>>>>,
    transform: Option<TransformFn<T>>,
}

impl<T: Send + Sync + 'static, B: Backend> std::fmt::Debug for Writer<T, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("backend", &B::NAME).field("pending", &self.pending).finish()
    }
}

/// A change for [`Writer::apply`].
#[derive(Debug, Clone)]
pub enum Change<T> {
    /// Add the object, or replace the object with the same key.
    Upsert(Arc<T>),
    /// Delete the object with this object's key (its last known state).
    Delete(Arc<T>),
    /// Delete the object with this key.
    DeleteKey(String),
}

/// What [`Writer::apply`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[must_use]
pub struct ApplyOutcome {
    /// Changes applied.
    pub applied: usize,
    /// Changes rejected, by position in the input, with the reason. The others were applied.
    pub rejected: Vec<(usize, Error)>,
}

impl<T: Send + Sync + 'static, B: Backend> Writer<T, B> {
    /// A new reader of this store.
    pub fn reader(&self) -> Reader<T, B> {
        Reader { shared: self.shared.clone() }
    }

    /// The priority the reclaimer thread runs at, or `None` when the writer frees inline
    /// (`background_reclaim(false)`). It can differ from what the builder asked for:
    /// [`ReclaimPriority::Idle`] falls back to `Normal` where the system refuses it.
    pub fn reclaim_priority(&self) -> Option<ReclaimPriority> {
        self.reclaimer.as_ref().map(Reclaimer::priority)
    }

    /// The latest published snapshot (what readers see now).
    pub fn snapshot(&self) -> Snapshot<T, B> {
        Snapshot {
            state: self.shared.current.load_full(),
            access: self.shared.access,
            key_fn: self.shared.key_fn.clone(),
        }
    }

    /// The object accessors this store was built with.
    pub fn access(&self) -> ObjectAccess<T> {
        self.shared.access
    }

    /// The key function this store was built with (see [`StoreBuilder::key_fn`]).
    pub fn key_fn(&self) -> &KeyFn<T> {
        &self.shared.key_fn
    }

    /// The transform this store applies, if it was built with one.
    pub fn transform(&self) -> Option<&TransformFn<T>> {
        self.transform.as_ref()
    }

    /// Adds an object, replacing any object with the same key, and publishes.
    pub fn add(&mut self, obj: Arc<T>) -> Result<()> {
        self.stage_upsert(obj)?;
        self.publish();
        Ok(())
    }

    /// Same as [`add`](Writer::add) (client-go's `Update` is an upsert too).
    pub fn update(&mut self, obj: Arc<T>) -> Result<()> {
        self.add(obj)
    }

    /// Deletes the object with `obj`'s key, if present, and publishes. Deleting a missing key is
    /// not an error. Returns the object that was removed. `obj` is the object's final state: its
    /// resource version, if it has one, becomes the snapshot's (client-go's `DeleteWithObject`).
    pub fn delete(&mut self, obj: &T) -> Result<Option<Arc<T>>> {
        self.shared.key_fn.write_key(&self.shared.access, obj, &mut self.keybuf)?;
        let old = self.stage_delete_key_buf();
        self.note_delete_rv(obj);
        self.publish();
        Ok(old)
    }

    /// Deletes the object under `key`, if present, and publishes. The snapshot's resource
    /// version is unchanged (client-go's `Delete` by key).
    pub fn delete_key(&mut self, key: &str) -> Option<Arc<T>> {
        let old = self.work.remove(key);
        self.pending += 1;
        self.publish();
        old
    }

    /// Replaces the whole content with `objs` and publishes once, as client-go's `Replace` does
    /// after a list: objects not in `objs` are gone, indexes are rebuilt. `resource_version` is the
    /// list's version and becomes the snapshot's. The store's transform, if any, is applied to
    /// each object. An object without a key (or one the transform refuses) fails the whole call
    /// before anything changes.
    pub fn replace(
        &mut self,
        objs: impl IntoIterator<Item = Arc<T>>,
        resource_version: impl Into<Arc<str>>,
    ) -> Result<()> {
        let (access, key_fn) = (&self.shared.access, &self.shared.key_fn);
        let transform = self.transform.as_ref();
        let keyed = objs
            .into_iter()
            .map(|o| {
                let key = key_fn.key(access, &o)?;
                let o = match transform {
                    Some(t) => t.apply(o)?,
                    None => o,
                };
                Ok((key, o))
            })
            .collect::<Result<Vec<_>>>()?;
        self.superseded += self.work.items.len();
        self.work.replace(keyed);
        self.pending += 1;
        self.pending_rv = Some(PendingRv::Explicit(resource_version.into()));
        self.publish();
        Ok(())
    }

    /// client-go's `Resync`: meaningless for the store itself (there is nothing to re-read), so
    /// it changes nothing; the informer's delta queue is where a resync emits `Sync` deltas.
    pub fn resync(&mut self) -> Result<()> {
        Ok(())
    }

    /// Registers more index functions and indexes every existing object with them, then
    /// publishes. Fails with [`Error::IndexExists`] (and changes nothing) on a duplicate name.
    pub fn add_indexers(&mut self, indexers: Indexers<T>) -> Result<()> {
        self.work.add_indexers(indexers)?;
        self.pending += 1;
        self.publish();
        Ok(())
    }

    /// Starts a batch: its changes become visible together, in one publication, when it is
    /// [committed](Batch::commit). A batch dropped without a commit (an early return on an
    /// error, a panic) is discarded: none of its changes is published or kept.
    pub fn batch(&mut self) -> Batch<'_, T, B> {
        Batch { writer: self, committed: false }
    }

    /// Applies all `changes` and publishes once (client-go's `Transaction`). Changes that cannot
    /// be applied (an object without a key, or one the transform refuses) are reported in the
    /// outcome; the others are applied.
    pub fn apply(&mut self, changes: impl IntoIterator<Item = Change<T>>) -> ApplyOutcome {
        let mut outcome = ApplyOutcome::default();
        let mut batch = self.batch();
        for (i, change) in changes.into_iter().enumerate() {
            let res = match change {
                Change::Upsert(obj) => batch.upsert(obj).map(drop),
                Change::Delete(obj) => batch.delete(&obj).map(drop),
                Change::DeleteKey(key) => {
                    batch.delete_key(&key);
                    Ok(())
                }
            };
            match res {
                Ok(()) => outcome.applied += 1,
                Err(e) => outcome.rejected.push((i, e)),
            }
        }
        batch.commit();
        outcome
    }

    /// Stages an upsert; returns the object it replaced.
    fn stage_upsert(&mut self, obj: Arc<T>) -> Result<Option<Arc<T>>> {
        self.shared.key_fn.write_key(&self.shared.access, &obj, &mut self.keybuf)?;
        let obj = match &self.transform {
            Some(t) => t.apply(obj)?,
            None => obj,
        };
        let old = self.work.upsert(&self.keybuf, obj.clone());
        self.pending += 1;
        self.pending_rv = Some(PendingRv::Object(obj));
        Ok(old)
    }

    /// A delete with the object's final state reports that state's resource version, as an
    /// upsert does (a state without one leaves the version unchanged).
    fn note_delete_rv(&mut self, obj: &T) {
        let rv = (self.shared.access.resource_version)(obj).filter(|rv| !rv.is_empty());
        self.pending_rv = rv.map(|rv| PendingRv::Explicit(rv.into()));
    }

    fn stage_delete_key_buf(&mut self) -> Option<Arc<T>> {
        let old = self.work.remove(&self.keybuf);
        self.pending += 1;
        old
    }

    /// Throws away what is staged: the working copy returns to the last published version, by
    /// cloning its roots (one per index, as a publication does).
    fn discard(&mut self) {
        if self.pending == 0 {
            return;
        }
        self.work = State::clone(&self.shared.current.load());
        self.pending = 0;
        self.superseded = 0;
        self.pending_rv = None;
    }

    fn publish(&mut self) {
        if self.pending == 0 {
            return;
        }
        match self.pending_rv.take() {
            Some(PendingRv::Object(obj)) => {
                let rv = (self.shared.access.resource_version)(&obj).filter(|rv| !rv.is_empty());
                if let Some(rv) = rv
                    && self.work.resource_version.as_deref() != Some(rv)
                {
                    self.work.resource_version = Some(rv.into());
                }
            }
            Some(PendingRv::Explicit(rv)) => self.work.resource_version = Some(rv),
            None => {}
        }
        self.work.publication += 1;
        self.work.published_at = Instant::now();
        let weight = self.pending + self.superseded;
        self.pending = 0;
        self.superseded = 0;
        let old = self.shared.current.swap(Arc::new(self.work.clone()));
        match &mut self.reclaimer {
            Some(reclaimer) => {
                let limit = self.work.items.len().max(RECLAIM_BACKLOG_MIN);
                reclaimer.hand_over(old, weight, limit);
            }
            None => drop(old),
        }
    }
}

/// A group of changes published together, by [`commit`](Batch::commit).
///
/// Until the commit, nothing of the batch is visible to readers; the batch itself sees its
/// changes ([`get_by_key`](Batch::get_by_key)). Dropping a batch without committing it
/// discards it, as left-right's write handles do: its changes are neither published nor kept
/// in the writer's working copy, which returns to the last published version. So
/// `batch.upsert(obj)?` can return early without publishing half a batch.
///
/// ```
/// # use std::sync::Arc;
/// # use snapinformer_store::{Object, ObjectAccess, StoreBuilder};
/// # struct Pod { name: String }
/// # impl Object for Pod {
/// #     fn name(&self) -> Option<&str> { Some(&self.name) }
/// #     fn namespace(&self) -> Option<&str> { Some("default") }
/// #     fn resource_version(&self) -> Option<&str> { None }
/// # }
/// let (mut writer, reader) = StoreBuilder::new(ObjectAccess::<Pod>::of()).build()?;
/// let mut batch = writer.batch();
/// batch.upsert(Arc::new(Pod { name: "a".into() }))?;
/// drop(batch); // discarded
/// assert!(reader.snapshot().is_empty());
/// let mut batch = writer.batch();
/// assert!(batch.get_by_key("default/a").is_none(), "not kept for the next batch either");
/// batch.upsert(Arc::new(Pod { name: "b".into() }))?;
/// batch.commit(); // one publication
/// assert_eq!(reader.snapshot().len(), 1);
/// # Ok::<(), snapinformer_store::Error>(())
/// ```
#[must_use = "a batch publishes only when committed; dropping it discards it"]
pub struct Batch<'w, T: Send + Sync + 'static, B: Backend> {
    writer: &'w mut Writer<T, B>,
    committed: bool,
}

impl<T: Send + Sync + 'static, B: Backend> std::fmt::Debug for Batch<'_, T, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch").field("pending", &self.writer.pending).finish()
    }
}

impl<T: Send + Sync + 'static, B: Backend> Batch<'_, T, B> {
    /// Adds or replaces an object (transformed first if the store has a transform); returns
    /// the object it replaced in the working copy, if any (an informer's update notification
    /// carries it as the old object, without a second lookup).
    pub fn upsert(&mut self, obj: Arc<T>) -> Result<Option<Arc<T>>> {
        self.writer.stage_upsert(obj)
    }

    /// Deletes the object with `obj`'s key, if present; returns it. `obj`'s resource version,
    /// if it has one, becomes the snapshot's (see [`Writer::delete`]).
    pub fn delete(&mut self, obj: &T) -> Result<Option<Arc<T>>> {
        let w = &mut *self.writer;
        w.shared.key_fn.write_key(&w.shared.access, obj, &mut w.keybuf)?;
        let old = w.stage_delete_key_buf();
        w.note_delete_rv(obj);
        Ok(old)
    }

    /// Deletes the object under `key`, if present; returns it.
    pub fn delete_key(&mut self, key: &str) -> Option<Arc<T>> {
        self.writer.pending += 1;
        self.writer.work.remove(key)
    }

    /// Sets the resource version the published snapshot will report (for example from a watch
    /// bookmark). Without it, the snapshot reports the version of the last object written.
    pub fn set_resource_version(&mut self, rv: impl Into<Arc<str>>) {
        self.writer.pending += 1;
        self.writer.pending_rv = Some(PendingRv::Explicit(rv.into()));
    }

    /// The object currently under `key` in the working copy, including this batch's changes.
    pub fn get_by_key(&self, key: &str) -> Option<&Arc<T>> {
        use crate::backend::PersistentMap;
        self.writer.work.items.get(key).map(|e| &e.obj)
    }

    /// Number of changes staged since the last publication.
    pub fn len(&self) -> usize {
        self.writer.pending
    }

    /// Whether nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.writer.pending == 0
    }

    /// Publishes the batch: readers see all of its changes at once, in one publication (none
    /// if it is empty).
    pub fn commit(mut self) {
        self.writer.publish();
        self.committed = true;
    }
}

impl<T: Send + Sync + 'static, B: Backend> Drop for Batch<'_, T, B> {
    fn drop(&mut self) {
        if !self.committed {
            self.writer.discard();
        }
    }
}

/// A cheap, cloneable handle for taking snapshots. Taking one never waits and never delays the
/// writer.
pub struct Reader<T: Send + Sync + 'static, B: Backend = Chunked> {
    pub(crate) shared: Arc<Shared<T, B>>,
}

impl<T: Send + Sync + 'static, B: Backend> Clone for Reader<T, B> {
    fn clone(&self) -> Self {
        Reader { shared: self.shared.clone() }
    }
}

impl<T: Send + Sync + 'static, B: Backend> std::fmt::Debug for Reader<T, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("backend", &B::NAME).finish()
    }
}

impl<T: Send + Sync + 'static, B: Backend> Reader<T, B> {
    /// The latest published snapshot, in O(1). Hold it as long as you like: the writer goes on.
    pub fn snapshot(&self) -> Snapshot<T, B> {
        Snapshot {
            state: self.shared.current.load_full(),
            access: self.shared.access,
            key_fn: self.shared.key_fn.clone(),
        }
    }
}
