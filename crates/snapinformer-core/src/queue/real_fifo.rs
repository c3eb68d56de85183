//! client-go's `RealFIFO`: an ordered log of every delta.

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
use crate::delta::{Delta, DeltaType};

/// client-go's `RealFIFO` (the informers' default since Kubernetes 1.33): every delta is kept,
/// in arrival order, and delivered once.
///
/// Rules (client-go's `RealFIFO` with known objects):
/// - `add`, `update` and `delete` append; nothing is merged or dropped;
/// - `replace` first queues tombstones, then `Replaced` for every listed object, in list order:
///   a tombstone for each key queued but not listed whose newest queued delta is not already a
///   `Deleted` (carrying that newest state), then one for each known key neither listed nor
///   queued (carrying the known object);
/// - `resync` queues `Sync` for known keys with no delta queued;
/// - the first `replace` sets the initial population to the whole queue length.
///
/// [`pop_batch`](crate::Queue::pop_batch) pops from the front up to `max` deltas and stops
/// before the first delta whose key is already in the batch (so a batch never holds two
/// deltas of one key) and at the end of the initial population.
///
/// **Atomic relists** ([`QueueOptions::atomic_relist`], which the informer turns on): the
/// deltas one `replace` queued (its tombstones and its `Replaced` objects, whose keys are
/// distinct) come out as one batch of their own, however many they are and whatever `max`
/// says, so the informer applies and publishes a relist at once: no reader sees a store that
/// is half old list, half new. client-go's informers get the same atomicity since 1.36 by
/// queueing a relist as one `ReplacedAll` delta (`AtomicEvents`); here the relist keeps one
/// delta per object, so handlers and metrics see each object as before.
#[doc(alias = "RealFIFO")]
pub struct RealFifo<T> {
    core: Core<T, RealLogic<T>>,
}

impl<T: Send + Sync + 'static> fmt::Debug for RealFifo<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.core.fmt(f)
    }
}

impl<T: Send + Sync + 'static> RealFifo<T> {
    /// A queue that keys objects with `access` and consults `known` (normally the store's
    /// [`Reader`](snapinformer_store::Reader)) for relists and resyncs.
    pub fn new(
        access: ObjectAccess<T>,
        known: Arc<dyn KnownObjects<T>>,
        config: QueueConfig,
    ) -> Self {
        Self::with_options(access, known, QueueOptions::new().config(config))
    }

    /// A queue built with `options`: key function, transform, depth bound (client-go's
    /// `NewRealFIFOWithOptions`; [`QueueOptions::emit_replaced`] does not apply).
    #[doc(alias = "NewRealFIFOWithOptions")]
    pub fn with_options(
        access: ObjectAccess<T>,
        known: Arc<dyn KnownObjects<T>>,
        options: QueueOptions<T>,
    ) -> Self {
        let logic = RealLogic { atomic: options.atomic_relist, ..RealLogic::default() };
        RealFifo { core: Core::new(logic, access, known, options) }
    }

    /// A queue whose consumer knows nothing (see [`NoKnownObjects`]).
    pub fn without_known_objects(access: ObjectAccess<T>) -> Self {
        Self::new(access, Arc::new(NoKnownObjects), QueueConfig::default())
    }

    /// The key the queue files `obj` under: the key function's for an object, the tombstone's
    /// own key for a tombstone (client-go's `keyOf`).
    pub fn key_of(&self, obj: &crate::DeltaObject<T>) -> Result<Arc<str>> {
        match obj {
            crate::DeltaObject::Object(o) => self.core.key(o),
            crate::DeltaObject::Tombstone(t) => Ok(t.key.clone()),
        }
    }

    /// A copy of every queued delta, in pop order.
    pub fn items(&self) -> Vec<Delta<T>> {
        self.core.inspect(|l| l.items.iter().map(|(_, d)| d.clone()).collect())
    }
}

delegate_queue!(RealFifo);

pub(crate) struct RealLogic<T> {
    items: VecDeque<(u64, Delta<T>)>,
    /// Whether relists pop whole ([`QueueOptions::atomic_relist`]).
    atomic: bool,
    /// With `atomic`: the id ranges (first, last) of the relists still queued, oldest first.
    relists: VecDeque<(u64, u64)>,
}

impl<T> Default for RealLogic<T> {
    fn default() -> Self {
        RealLogic { items: VecDeque::new(), atomic: false, relists: VecDeque::new() }
    }
}

impl<T: Send + Sync + 'static> Logic<T> for RealLogic<T> {
    const KIND: &'static str = "RealFIFO";

    fn depth(&self) -> usize {
        self.items.len()
    }

    fn entries(&self) -> usize {
        self.items.len()
    }

    fn front(&self) -> Option<(u64, Instant)> {
        self.items.front().map(|(id, d)| (*id, d.enqueued_at))
    }

    fn push(&mut self, next_id: &mut u64, delta: Delta<T>) {
        *next_id += 1;
        self.items.push_back((*next_id, delta));
    }

    fn delete(&mut self, next_id: &mut u64, _known: &Known<'_, T>, delta: Delta<T>) {
        self.push(next_id, delta);
    }

    fn replace(
        &mut self,
        next_id: &mut u64,
        known: &Known<'_, T>,
        objs: Vec<(Arc<str>, Arc<T>)>,
        now: Instant,
    ) -> usize {
        let listed: HashSet<&Arc<str>> = objs.iter().map(|(k, _)| k).collect();
        let mut queued_order: Vec<&Arc<str>> = Vec::new();
        let mut newest: HashMap<&Arc<str>, &Delta<T>> = HashMap::new();
        for (_, delta) in &self.items {
            if newest.insert(&delta.key, delta).is_none() {
                queued_order.push(&delta.key);
            }
        }
        let mut tombstones = Vec::new();
        for key in queued_order {
            if listed.contains(key) {
                continue;
            }
            let last = newest[key];
            if last.is_delete() {
                continue;
            }
            tombstones.push((key.clone(), last.object.object().cloned()));
        }
        known.for_each(&mut |key, obj| {
            if !listed.contains(key) && !newest.contains_key(key) {
                tombstones.push((key.clone(), Some(obj.clone())));
            }
        });
        drop(newest);
        drop(listed);
        let first = *next_id + 1;
        for (key, obj) in tombstones {
            self.push(next_id, tombstone(key, obj, now));
        }
        for (key, obj) in objs {
            self.push(next_id, Delta::new(DeltaType::Replaced, key, obj, now));
        }
        if self.atomic && *next_id >= first {
            self.relists.push_back((first, *next_id));
        }
        self.items.len()
    }

    fn resync(&mut self, next_id: &mut u64, known: &Known<'_, T>, now: Instant) {
        let queued: HashSet<&Arc<str>> = self.items.iter().map(|(_, d)| &d.key).collect();
        let mut sync = Vec::new();
        known.for_each(&mut |key, obj| {
            if !queued.contains(key) {
                sync.push(Delta::new(DeltaType::Sync, key.clone(), obj.clone(), now));
            }
        });
        drop(queued);
        for delta in sync {
            self.push(next_id, delta);
        }
    }

    fn pop(&mut self, max: usize, entry_limit: usize) -> (Vec<Delta<T>>, usize) {
        let mut out: Vec<Delta<T>> = Vec::new();
        if let (Some(&(first, last)), Some((front, _))) = (self.relists.front(), self.items.front())
            && *front == first
        {
            // A relist pops whole, as its own batch. Its keys are distinct unless the list
            // itself repeated a key (no API server does): then it splits before the repeat, and
            // the rest pops whole next time.
            let mut keys: HashSet<Arc<str>> = HashSet::new();
            while let Some((id, delta)) = self.items.front() {
                if *id > last {
                    break;
                }
                if !keys.insert(delta.key.clone()) {
                    let rest = *id;
                    self.relists[0].0 = rest;
                    let n = out.len();
                    return (out, n);
                }
                let (_, delta) = self.items.pop_front().expect("front exists");
                out.push(delta);
            }
            self.relists.pop_front();
            crate::spare::shrink_deque(&mut self.items);
            let n = out.len();
            return (out, n);
        }
        let next_relist = self.relists.front().map_or(u64::MAX, |&(first, _)| first);
        let mut keys: HashSet<Arc<str>> = HashSet::new();
        while let Some((id, delta)) = self.items.front() {
            if out.len() >= max || (entry_limit > 0 && out.len() >= entry_limit) {
                break;
            }
            if *id == next_relist {
                break;
            }
            if !keys.insert(delta.key.clone()) {
                break;
            }
            let (_, delta) = self.items.pop_front().expect("front exists");
            out.push(delta);
        }
        crate::spare::shrink_deque(&mut self.items);
        let n = out.len();
        (out, n)
    }
}
