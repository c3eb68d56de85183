//! Deltas: the changes the queues hold and hand to the processing loop.

use std::{fmt, sync::Arc, time::Instant};

/// What happened to an object (client-go's `DeltaType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeltaType {
    /// The object was created (a watch `ADDED` event).
    Added,
    /// The object was modified (a watch `MODIFIED` event).
    Updated,
    /// The object was deleted (a watch `DELETED` event, or a tombstone from
    /// [`Queue::replace`](crate::Queue::replace)).
    Deleted,
    /// The object was listed again by a relist ([`Queue::replace`](crate::Queue::replace)).
    Replaced,
    /// A periodic resync re-delivers an object the store already holds
    /// ([`Queue::resync`](crate::Queue::resync)).
    Sync,
}

/// A deletion whose final state is unknown: the relist no longer contains the key, so the delete
/// event was missed (for example while the watch was down). `obj` is the last state the informer
/// knew, if any.
pub struct DeletedFinalStateUnknown<T> {
    /// The key of the deleted object (`namespace/name` or `name`).
    pub key: Arc<str>,
    /// The last known state of the object: the newest queued state, or the store's object.
    pub obj: Option<Arc<T>>,
}

impl<T> Clone for DeletedFinalStateUnknown<T> {
    fn clone(&self) -> Self {
        DeletedFinalStateUnknown { key: self.key.clone(), obj: self.obj.clone() }
    }
}

impl<T> fmt::Debug for DeletedFinalStateUnknown<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeletedFinalStateUnknown")
            .field("key", &self.key)
            .field("has_obj", &self.obj.is_some())
            .finish()
    }
}

/// The payload of a delta: a real object, or a tombstone for a deletion that was not observed.
pub enum DeltaObject<T> {
    /// An object as received from the API server (or as known by the store, for `Sync`).
    Object(Arc<T>),
    /// A deletion detected by a relist (only ever with [`DeltaType::Deleted`]).
    Tombstone(DeletedFinalStateUnknown<T>),
}

impl<T> Clone for DeltaObject<T> {
    fn clone(&self) -> Self {
        match self {
            DeltaObject::Object(o) => DeltaObject::Object(o.clone()),
            DeltaObject::Tombstone(t) => DeltaObject::Tombstone(t.clone()),
        }
    }
}

impl<T> fmt::Debug for DeltaObject<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeltaObject::Object(_) => f.write_str("Object(..)"),
            DeltaObject::Tombstone(t) => t.fmt(f),
        }
    }
}

impl<T> DeltaObject<T> {
    /// The object, or for a tombstone its last known state if there is one.
    pub fn object(&self) -> Option<&Arc<T>> {
        match self {
            DeltaObject::Object(o) => Some(o),
            DeltaObject::Tombstone(t) => t.obj.as_ref(),
        }
    }

    /// Whether this is a [`DeletedFinalStateUnknown`] tombstone.
    pub fn is_tombstone(&self) -> bool {
        matches!(self, DeltaObject::Tombstone(_))
    }
}

/// One change to one object, as queued (client-go's `Delta`).
pub struct Delta<T> {
    /// What happened.
    pub kind: DeltaType,
    /// The object's key, computed once when it was queued.
    pub key: Arc<str>,
    /// The object (or tombstone).
    pub object: DeltaObject<T>,
    /// When the delta entered the queue: the start of its staleness.
    pub enqueued_at: Instant,
}

impl<T> Clone for Delta<T> {
    fn clone(&self) -> Self {
        Delta {
            kind: self.kind,
            key: self.key.clone(),
            object: self.object.clone(),
            enqueued_at: self.enqueued_at,
        }
    }
}

impl<T> fmt::Debug for Delta<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delta")
            .field("kind", &self.kind)
            .field("key", &self.key)
            .field("object", &self.object)
            .finish()
    }
}

impl<T> Delta<T> {
    /// A delta carrying a real object.
    pub fn new(kind: DeltaType, key: Arc<str>, obj: Arc<T>, enqueued_at: Instant) -> Self {
        Delta { kind, key, object: DeltaObject::Object(obj), enqueued_at }
    }

    /// Whether the delta removes the object from the store.
    pub fn is_delete(&self) -> bool {
        self.kind == DeltaType::Deleted
    }
}

/// A group of deltas popped together, to be applied to the store in one publication.
///
/// Built by [`Queue::pop_batch`](crate::Queue::pop_batch); hand it back with
/// [`Queue::done`](crate::Queue::done) once it is applied and published.
pub struct PoppedBatch<T> {
    /// The deltas, in the order they must be applied. No key appears in two different queue
    /// entries of one batch (for a [`DeltaFifo`](crate::DeltaFifo) one key's entry may hold
    /// several deltas, which are consecutive here).
    pub deltas: Vec<Delta<T>>,
    /// Number of queue entries popped (keys for a `DeltaFifo`, deltas for a `RealFifo`).
    pub entries: usize,
    /// Whether these deltas belong to the first relist (client-go's `isInInitialList`).
    pub is_in_initial_list: bool,
    /// The highest resource version the store fully includes once this batch is applied: every
    /// delta queued up to the one carrying it (or up to the relist or bookmark that named it)
    /// is in this batch or an earlier one. Numeric versions are compared as numbers (the
    /// highest wins); opaque ones count in queue order (the last wins). `None` if this batch
    /// completes no version.
    ///
    /// A [`DeltaFifo`](crate::DeltaFifo) appends a key's new delta to that key's older entry, so
    /// the newest object in a batch may be newer than what the batch completes: this field, not
    /// the objects, says what a snapshot includes.
    pub resource_version: Option<Arc<str>>,
    /// Every queue entry with an id up to this one is applied once this batch is. Used by the
    /// freshness policy.
    pub applied_through: u64,
    /// Deltas left in the queue right after this pop.
    pub depth_after: usize,
}

impl<T> fmt::Debug for PoppedBatch<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoppedBatch")
            .field("deltas", &self.deltas.len())
            .field("entries", &self.entries)
            .field("is_in_initial_list", &self.is_in_initial_list)
            .field("resource_version", &self.resource_version)
            .field("applied_through", &self.applied_through)
            .field("depth_after", &self.depth_after)
            .finish()
    }
}

impl<T> PoppedBatch<T> {
    /// Number of deltas.
    pub fn len(&self) -> usize {
        self.deltas.len()
    }

    /// Whether the batch carries no delta (it may still carry a resource version).
    pub fn is_empty(&self) -> bool {
        self.deltas.is_empty()
    }
}
