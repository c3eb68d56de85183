//! client-go's `DeltaFIFO`: one entry per key, in first-arrival order, holding that key's deltas.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    fmt,
    sync::Arc,
    time::Instant,
};

use snapinformer_store::ObjectAccess;

use super::{
    Core, Known, KnownObjects, Logic, NoKnownObjects, QueueConfig, QueueOptions, Result,
    delegate_queue, tombstone,
};
use crate::delta::{Delta, DeltaObject, DeltaType};

/// client-go's `DeltaFIFO`: a keyed queue with one entry per key, in the order keys first
/// arrived, each holding the list of that key's deltas.
///
/// Rules (client-go's):
/// - a delta for a key already queued is appended to its entry; the entry keeps its place;
/// - only two consecutive `Deleted` deltas collapse into one: the older one stays, unless it is
///   a [`DeletedFinalStateUnknown`](crate::DeletedFinalStateUnknown) tombstone, which the newer
///   one replaces;
/// - `delete` of a key that is neither queued nor known is dropped;
/// - `replace` queues `Replaced` (or `Sync`, see [`QueueOptions::emit_replaced`]) for every
///   listed object, then a tombstone for every key that is queued (with its newest queued
///   state) or known (with the known object) but not listed;
/// - `resync` queues `Sync` only for known keys that have nothing queued;
/// - the first `replace` sets the initial population: `has_synced` turns true once that many
///   entries are popped and done.
///
/// [`pop_batch`](crate::Queue::pop_batch) pops whole entries from the front, as many as fit in
/// `max` deltas (always at least one), never crossing the end of the initial population, so the
/// batch that completes the first list is exactly the one after which the queue has synced.
#[doc(alias = "DeltaFIFO")]
pub struct DeltaFifo<T> {
    core: Core<T, DeltaLogic<T>>,
}

impl<T: Send + Sync + 'static> fmt::Debug for DeltaFifo<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.core.fmt(f)
    }
}

impl<T: Send + Sync + 'static> DeltaFifo<T> {
    /// A queue that keys objects with `access` and consults `known` (normally the store's
    /// [`Reader`](snapinformer_store::Reader)) for relists, resyncs and deletes.
    pub fn new(
        access: ObjectAccess<T>,
        known: Arc<dyn KnownObjects<T>>,
        config: QueueConfig,
    ) -> Self {
        Self::with_options(access, known, QueueOptions::new().config(config))
    }

    /// A queue built with `options`: key function, transform, `Replaced` or `Sync` for relisted
    /// objects, depth bound (client-go's `NewDeltaFIFOWithOptions`).
    #[doc(alias = "NewDeltaFIFOWithOptions")]
    pub fn with_options(
        access: ObjectAccess<T>,
        known: Arc<dyn KnownObjects<T>>,
        options: QueueOptions<T>,
    ) -> Self {
        let emit = if options.emit_replaced { DeltaType::Replaced } else { DeltaType::Sync };
        let logic = DeltaLogic { emit, ..DeltaLogic::default() };
        DeltaFifo { core: Core::new(logic, access, known, options) }
    }

    /// A queue whose consumer knows nothing (see [`NoKnownObjects`]).
    pub fn without_known_objects(access: ObjectAccess<T>) -> Self {
        Self::new(access, Arc::new(NoKnownObjects), QueueConfig::default())
    }

    /// The key the queue files `obj` under: the key function's for an object, the tombstone's
    /// own key for a tombstone (client-go's `KeyOf`).
    #[doc(alias = "KeyOf")]
    pub fn key_of(&self, obj: &DeltaObject<T>) -> Result<Arc<str>> {
        match obj {
            DeltaObject::Object(o) => self.core.key(o),
            DeltaObject::Tombstone(t) => Ok(t.key.clone()),
        }
    }

    /// The queued keys, in the order they will be popped (client-go's `ListKeys`).
    #[doc(alias = "ListKeys")]
    pub fn list_keys(&self) -> Vec<Arc<str>> {
        self.core.inspect(|l| l.order.iter().cloned().collect())
    }

    /// The newest queued state of every queued key, in pop order (client-go's `List`): the
    /// object of each key's newest delta, or its tombstone.
    pub fn list(&self) -> Vec<DeltaObject<T>> {
        self.core.inspect(|l| {
            l.order
                .iter()
                .filter_map(|k| l.items.get(k)?.deltas.last().map(|d| d.object.clone()))
                .collect()
        })
    }

    /// A copy of the deltas queued for `key`, oldest first; `None` if nothing is queued for it
    /// (client-go's `GetByKey`).
    #[doc(alias = "GetByKey")]
    pub fn get_by_key(&self, key: &str) -> Option<Vec<Delta<T>>> {
        self.core.inspect(|l| l.items.get(key).map(|e| e.deltas.clone()))
    }

    /// The deltas queued for `obj`'s key (client-go's `Get`); fails if `obj` has no key.
    pub fn get(&self, obj: &T) -> Result<Option<Vec<Delta<T>>>> {
        let key = self.core.key(obj)?;
        Ok(self.get_by_key(&key))
    }
}

delegate_queue!(DeltaFifo);

struct Entry<T> {
    id: u64,
    first_at: Instant,
    deltas: Vec<Delta<T>>,
}

pub(crate) struct DeltaLogic<T> {
    items: HashMap<Arc<str>, Entry<T>>,
    order: VecDeque<Arc<str>>,
    depth: usize,
    /// What `replace` queues for listed objects: `Replaced` or `Sync`.
    emit: DeltaType,
}

impl<T> Default for DeltaLogic<T> {
    fn default() -> Self {
        DeltaLogic {
            items: HashMap::new(),
            order: VecDeque::new(),
            depth: 0,
            emit: DeltaType::Replaced,
        }
    }
}

/// client-go's `isDeletionDup` applied to the last two deltas: of two consecutive deletes the
/// older one stays, unless it is a tombstone, in which case the newer one replaces it. Returns
/// whether a delta was removed.
fn dedup_deletions<T>(deltas: &mut Vec<Delta<T>>) -> bool {
    let n = deltas.len();
    if n < 2 || !deltas[n - 1].is_delete() || !deltas[n - 2].is_delete() {
        return false;
    }
    if deltas[n - 2].object.is_tombstone() {
        deltas.remove(n - 2);
    } else {
        deltas.pop();
    }
    true
}

impl<T: Send + Sync + 'static> Logic<T> for DeltaLogic<T> {
    const KIND: &'static str = "DeltaFIFO";

    fn depth(&self) -> usize {
        self.depth
    }

    fn entries(&self) -> usize {
        self.order.len()
    }

    fn front(&self) -> Option<(u64, Instant)> {
        let key = self.order.front()?;
        self.items.get(key).map(|e| (e.id, e.first_at))
    }

    fn push(&mut self, next_id: &mut u64, delta: Delta<T>) {
        self.depth += 1;
        match self.items.get_mut(&delta.key) {
            Some(entry) => {
                entry.deltas.push(delta);
                if dedup_deletions(&mut entry.deltas) {
                    self.depth -= 1;
                }
            }
            None => {
                *next_id += 1;
                let key = delta.key.clone();
                self.order.push_back(key.clone());
                self.items.insert(
                    key,
                    Entry { id: *next_id, first_at: delta.enqueued_at, deltas: vec![delta] },
                );
            }
        }
    }

    fn delete(&mut self, next_id: &mut u64, known: &Known<'_, T>, delta: Delta<T>) {
        if !self.items.contains_key(&delta.key) && known.get(&delta.key).is_none() {
            return;
        }
        self.push(next_id, delta);
    }

    fn replace(
        &mut self,
        next_id: &mut u64,
        known: &Known<'_, T>,
        objs: Vec<(Arc<str>, Arc<T>)>,
        now: Instant,
    ) -> usize {
        let mut listed: HashSet<Arc<str>> = HashSet::with_capacity(objs.len());
        for (key, obj) in objs {
            listed.insert(key.clone());
            self.push(next_id, Delta::new(self.emit, key, obj, now));
        }
        let mut tombstones = Vec::new();
        for key in &self.order {
            if listed.contains(key) {
                continue;
            }
            let last = self.items.get(key).and_then(|e| e.deltas.last());
            tombstones.push((key.clone(), last.and_then(|d| d.object.object().cloned())));
        }
        known.for_each(&mut |key, obj| {
            if !listed.contains(key) && !self.items.contains_key(key) {
                tombstones.push((key.clone(), Some(obj.clone())));
            }
        });
        let deletions = tombstones.len();
        for (key, obj) in tombstones {
            self.push(next_id, tombstone(key, obj, now));
        }
        listed.len() + deletions
    }

    fn resync(&mut self, next_id: &mut u64, known: &Known<'_, T>, now: Instant) {
        let mut sync = Vec::new();
        known.for_each(&mut |key, obj| {
            if !self.items.contains_key(key) {
                sync.push(Delta::new(DeltaType::Sync, key.clone(), obj.clone(), now));
            }
        });
        for delta in sync {
            self.push(next_id, delta);
        }
    }

    fn pop(&mut self, max: usize, entry_limit: usize) -> (Vec<Delta<T>>, usize) {
        let mut out = Vec::new();
        let mut entries = 0;
        while let Some(key) = self.order.front() {
            if entry_limit > 0 && entries >= entry_limit {
                break;
            }
            let n = self.items.get(key).map_or(0, |e| e.deltas.len());
            if entries > 0 && out.len() + n > max {
                break;
            }
            let key = self.order.pop_front().expect("front exists");
            if let Some(entry) = self.items.remove(&key) {
                self.depth -= entry.deltas.len();
                out.extend(entry.deltas);
            }
            entries += 1;
        }
        crate::spare::shrink_deque(&mut self.order);
        crate::spare::shrink_map(&mut self.items);
        (out, entries)
    }
}
