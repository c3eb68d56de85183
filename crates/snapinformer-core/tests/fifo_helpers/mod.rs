//! The helpers of client-go v0.37.2's `tools/cache/fifo_test.go` (and the ones
//! `delta_fifo_test.go` and `the_real_fifo_test.go` add), in our words, for the conformance tests:
//! a test object keyed by its name alone through a custom key function, a fixed set of known
//! objects (client-go's `literalListerGetter`), and a `pop` that pops exactly what client-go's
//! `Pop` pops (one key's deltas for a `DeltaFifo`, one delta for a `RealFifo`) and acknowledges it.
#![allow(dead_code, unreachable_pub)]

use std::{
    sync::Arc,
    task::{Context, Poll, Waker},
    time::Duration,
};

use snapinformer_core::{
    DeltaFifo, DeltaObject, DeltaType, KnownObjects, PoppedBatch, Queue, QueueOptions, RealFifo,
    queue::Error,
};
use snapinformer_store::{KeyFn, Object, ObjectAccess};

/// client-go's `testFifoObject`: a name and a value. The key is the name alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FifoObj {
    pub name: String,
    pub val: i64,
    /// How many times a transform ran on this object (client-go's `rvAndXfrm.xfrm`).
    pub xfrm: u32,
}

impl Object for FifoObj {
    fn name(&self) -> Option<&str> {
        Some(&self.name)
    }
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn resource_version(&self) -> Option<&str> {
        None
    }
}

/// client-go's `mkFifoObj`.
pub fn mk(name: &str, val: i64) -> Arc<FifoObj> {
    Arc::new(FifoObj { name: name.into(), val, xfrm: 0 })
}

pub fn access() -> ObjectAccess<FifoObj> {
    ObjectAccess::of()
}

/// client-go's `testFifoObjectKeyFunc`, as a custom key function.
pub fn key_fn() -> KeyFn<FifoObj> {
    KeyFn::new(|o: &FifoObj| Ok(o.name.clone()))
}

pub fn options() -> QueueOptions<FifoObj> {
    QueueOptions::new().key_fn(key_fn())
}

/// client-go's `literalListerGetter`: the consumer knows exactly these objects.
#[derive(Debug, Clone, Default)]
pub struct Literal(pub Vec<(Arc<str>, Arc<FifoObj>)>);

impl KnownObjects<FifoObj> for Literal {
    fn get(&self, key: &str) -> Option<Arc<FifoObj>> {
        self.0.iter().find(|(k, _)| &**k == key).map(|(_, o)| o.clone())
    }
    fn for_each(&self, f: &mut dyn FnMut(&Arc<str>, &Arc<FifoObj>)) {
        for (k, o) in &self.0 {
            f(k, o);
        }
    }
}

pub fn known(objs: &[Arc<FifoObj>]) -> Arc<Literal> {
    Arc::new(Literal(objs.iter().map(|o| (Arc::from(o.name.as_str()), o.clone())).collect()))
}

/// A `DeltaFifo` keyed by name, knowing `objs` (client-go: `KnownObjects:
/// literalListerGetter(...)`), with client-go's `DeltaFIFOOptions` default of `Sync` deltas for
/// relisted objects (`EmitDeltaTypeReplaced` false).
pub fn delta_fifo(objs: &[Arc<FifoObj>]) -> DeltaFifo<FifoObj> {
    DeltaFifo::with_options(access(), known(objs), options().emit_replaced(false))
}

/// The same with `EmitDeltaTypeReplaced: true` (what client-go's informers ask for).
pub fn delta_fifo_replaced(objs: &[Arc<FifoObj>]) -> DeltaFifo<FifoObj> {
    DeltaFifo::with_options(access(), known(objs), options().emit_replaced(true))
}

/// A `DeltaFifo` keyed by name, with no known objects (client-go: `KnownObjects` nil), `Sync`
/// deltas for relisted objects.
pub fn delta_fifo_no_lister() -> DeltaFifo<FifoObj> {
    DeltaFifo::with_options(
        access(),
        Arc::new(snapinformer_core::NoKnownObjects),
        options().emit_replaced(false),
    )
}

/// A `RealFifo` keyed by name, knowing `objs`.
pub fn real_fifo(objs: &[Arc<FifoObj>]) -> RealFifo<FifoObj> {
    RealFifo::with_options(access(), known(objs), options())
}

/// What a test compares a delta by: its type and object, or a tombstone's key and last state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Obj(DeltaType, FifoObj),
    Tombstone(String, Option<FifoObj>),
}

pub fn d(kind: DeltaType, o: &Arc<FifoObj>) -> Seen {
    Seen::Obj(kind, (**o).clone())
}

pub fn tomb(key: &str, o: Option<&Arc<FifoObj>>) -> Seen {
    Seen::Tombstone(key.into(), o.map(|o| (**o).clone()))
}

pub fn seen(delta: &snapinformer_core::Delta<FifoObj>) -> Seen {
    match &delta.object {
        DeltaObject::Object(o) => Seen::Obj(delta.kind, (**o).clone()),
        DeltaObject::Tombstone(t) => {
            assert_eq!(delta.kind, DeltaType::Deleted, "a tombstone is always a deletion");
            assert_eq!(t.key, delta.key, "a tombstone keeps its key");
            Seen::Tombstone(t.key.to_string(), t.obj.as_ref().map(|o| (**o).clone()))
        }
    }
}

pub fn seen_all(deltas: &[snapinformer_core::Delta<FifoObj>]) -> Vec<Seen> {
    deltas.iter().map(seen).collect()
}

/// Pops a batch of at most `max` deltas (waiting at most 5 s) and acknowledges it.
pub async fn pop_max(q: &dyn Queue<FifoObj>, max: usize) -> Result<PoppedBatch<FifoObj>, Error> {
    let b = tokio::time::timeout(Duration::from_secs(5), q.pop_batch(max))
        .await
        .expect("pop timed out")?;
    q.done(&b);
    Ok(b)
}

/// client-go's `Pop`: one key's deltas from a `DeltaFifo`, one delta from a `RealFifo`.
pub async fn pop(q: &dyn Queue<FifoObj>) -> PoppedBatch<FifoObj> {
    pop_max(q, 1).await.expect("queue closed")
}

/// client-go's `testPop`: the newest object popped.
pub async fn pop_newest(q: &dyn Queue<FifoObj>) -> FifoObj {
    let b = pop(q).await;
    let last = b.deltas.last().expect("a popped batch holds a delta");
    (**last.object.object().expect("an object")).clone()
}

/// Pops until the queue is empty and returns every delta popped, in order (client-go's
/// `popN(f, len(items))` followed by `collapseDeltas`).
pub async fn drain(q: &dyn Queue<FifoObj>) -> Vec<Seen> {
    let mut out = Vec::new();
    while !q.is_empty() {
        out.extend(seen_all(&pop(q).await.deltas));
    }
    out
}

/// Whether a pop would wait now (nothing to pop): one poll with a waker that does nothing.
pub fn pop_would_wait(q: &dyn Queue<FifoObj>) -> bool {
    let mut fut = q.pop_batch(usize::MAX);
    let mut cx = Context::from_waker(Waker::noop());
    matches!(fut.as_mut().poll(&mut cx), Poll::Pending)
}

/// Pops at most `max` deltas if a pop is ready now (a delta, or a resource version that has
/// become due), acknowledging it; `None` if a pop would wait.
pub fn try_pop_now(q: &dyn Queue<FifoObj>, max: usize) -> Option<PoppedBatch<FifoObj>> {
    let mut fut = q.pop_batch(max);
    let mut cx = Context::from_waker(Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        Poll::Ready(Ok(b)) => {
            drop(fut);
            q.done(&b);
            Some(b)
        }
        Poll::Ready(Err(e)) => panic!("pop failed: {e}"),
        Poll::Pending => None,
    }
}
