//! The informer runtime: client-go's delta queues, a processing loop that applies batches to a
//! snapshot store and publishes each once, a shared informer whose handlers are isolated from
//! each other and from the store, and waitable, bounded freshness.
//!
//! # What it is
//!
//! In client-go, a controller listing 200,000 pods holds the informer cache's read lock for up
//! to a second; the informer's delta processor waits for the write lock, its `DeltaFIFO` grows
//! to hundreds of thousands of entries, and controllers act on stale data. Here:
//!
//! - producers (a reflector, a simulator) feed a [`Queue`]: [`RealFifo`] (every delta in order,
//!   client-go's default since 1.33) or [`DeltaFifo`] (one entry per key), both with client-go's
//!   rules;
//! - one processing loop pops batches of up to `max_batch` deltas, applies each batch to the
//!   [`snapinformer_store`] writer and publishes it once (one atomic pointer swap), then pushes
//!   add/update/delete notifications into every handler's own buffer;
//! - readers take immutable [`Snapshot`](snapinformer_store::Snapshot)s: no lock, no wait, for
//!   as long as they like.
//!
//! **A batch is applied and published without any lock that a reader can hold.** The queue's
//! own mutex is held only for queue operations, never while a batch is applied or handlers run.
//!
//! # Consistency and freshness guarantees
//!
//! - Everything read from one snapshot is consistent: the primary map and every index at the
//!   same point of the delta history, at a batch boundary.
//! - Snapshots are published in delta order. Each batch is visible all at once or not at all.
//! - [`Progress`] (via [`Informer::subscribe`]) reports, after every publication, the resource
//!   version the published snapshot includes (numerically monotonic), its publication number,
//!   and how far into the queue it has applied.
//! - [`Informer::wait_for`] resolves once the published snapshot includes a resource version
//!   (read-your-writes); it compares etcd's decimal versions numerically and rejects versions
//!   that do not parse ([`freshness::Error::Unordered`]).
//! - [`Informer::read`] with [`Freshness::Fresh`] waits, when the writer's lag in deltas or
//!   time passes the [`FreshnessPolicy`] bound, until everything queued at the time of the read
//!   is published; [`Freshness::AcceptStale`] never waits.
//! - A handler receives its notifications in publication order, after the store already shows
//!   them. A late handler first gets the current snapshot as adds, then every later change:
//!   no gap, no duplicate.
//! - Staleness is measured: every delta records when it was queued; the
//!   `snapinformer_staleness_seconds` histogram, the lag gauges (see [`metrics`]) and the
//!   [`InformerBuilder::on_publish`] hook report it per event.
//!
//! # Costs
//!
//! - One queue lock acquisition per queued delta, and one per popped batch. `replace` and
//!   `resync` walk the store's snapshot under the queue lock (client-go does the same under
//!   its lock); they do not block the writer or readers.
//! - One store publication per batch: copy-on-write of the touched map nodes (see
//!   [`snapinformer_store`]). Larger batches amortise it; `max_batch` bounds the latency one
//!   batch adds.
//! - Per publication, besides its deltas: the loop's wake-up, one wake-up of each handler's
//!   thread that waits, and one hand-over to the store's reclaimer. A free loop under a
//!   steady stream would publish batches of one to three deltas and pay these each time, so
//!   by default, when deltas arrived while a batch that was not full was applied, it waits
//!   until 250 µs of real time has passed since that batch began
//!   ([`InformerBuilder::batch_window`]), trading up to that much latency for fewer, larger
//!   batches (measured with a 1 ms window: about 30% less CPU per delta at 20,000 deltas a
//!   second on the project's 2-core machine, BENCHMARKS.md, "The batch window"; 250 µs, the
//!   default since 2026-12-07, halves 1 ms's median staleness for a third more of the
//!   pipeline's CPU under bursts). Under a paused Tokio clock the window is off.
//! - Per handler: one OS thread and one unbounded buffer of notifications (each holds `Arc`s:
//!   no object is copied). A slow handler grows only its own buffer; watch
//!   `snapinformer_handler_buffer_depth`. A late handler's replay is one message holding a
//!   snapshot, whatever the store's size. A handler that never blocks may instead run as a
//!   task on the Tokio runtime ([`HandlerExecution::Task`], as client-go runs each handler on
//!   a goroutine): no thread of its own, and a publication wakes a task instead of a thread.
//! - Handlers free nothing when the store reclaims in the background (its default): each
//!   handler thread hands the notifications it has handled, in batches, to one reclaimer
//!   thread per informer (`snapinformer-handler-reclaim`), so the last reference to a
//!   superseded object is never dropped on a handler's thread (freeing a `k8s_openapi` pod
//!   takes about 20 µs; in the `store` benchmark, runs in which the handler's thread paid it
//!   applied a third to a half fewer updates a second than runs in which the store's
//!   reclaimer did, BENCHMARKS.md).
//! - Queues are unbounded unless [`QueueConfig::max_depth`] is set; then producers block
//!   (counted in the metrics) until the processing loop catches up.
//! - The processing loop is a task on the runtime that starts the informer, by default; with
//!   [`Processing::DedicatedThread`] it is one OS thread of its own, which does not queue for a
//!   runtime worker behind the reflector and other tasks (see [`Processing`] for when that pays).
//!
//! # Usage
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use snapinformer_core::{Informer, Notification, QueueKind};
//! use snapinformer_store::{Object, ObjectAccess};
//!
//! struct Pod { name: String, rv: String }
//! impl Object for Pod {
//!     fn name(&self) -> Option<&str> { Some(&self.name) }
//!     fn namespace(&self) -> Option<&str> { Some("default") }
//!     fn resource_version(&self) -> Option<&str> { Some(&self.rv) }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let informer = Informer::<Pod>::builder(ObjectAccess::of())
//!     .name("pods")
//!     .queue(QueueKind::Real)
//!     .build()?;
//! informer.add_event_handler(|n: &Notification<Pod>| {
//!     if let Notification::Add { obj, .. } = n { println!("added {}", obj.name) }
//! })?;
//! informer.start()?;
//!
//! // A reflector (or a simulator) feeds the queue.
//! informer.queue().replace(vec![Arc::new(Pod { name: "a".into(), rv: "10".into() })], "10")?;
//! informer.queue().add(Arc::new(Pod { name: "b".into(), rv: "11".into() }))?;
//!
//! // Read-your-writes: wait until the published snapshot includes version 11.
//! let snap = informer.wait_for("11", Duration::from_secs(5)).await?;
//! assert_eq!(snap.len(), 2);
//! assert!(informer.wait_for_sync(Duration::from_secs(5)).await);
//! informer.shutdown().await;
//! # Ok(()) }
//! ```

mod delta;
pub mod factory;
pub mod freshness;
mod handler;
pub mod informer;
mod lister;
pub mod metrics;
pub mod queue;
mod spare;
pub mod workqueue;

pub use delta::{DeletedFinalStateUnknown, Delta, DeltaObject, DeltaType, PoppedBatch};
pub use factory::InformerFactory;
pub use freshness::{Freshness, FreshnessPolicy, Progress, parse_resource_version};
pub use handler::{
    EventHandler, FilteringHandler, HandlerExecution, HandlerOptions, HandlerRegistration,
    Notification,
};
pub use informer::{
    DEFAULT_BATCH_WINDOW, Informer, InformerBuilder, MIN_RESYNC_PERIOD, Processing, Published,
    QueueKind,
};
pub use lister::{Lister, NamespaceLister};
pub use metrics::InformerMetrics;
pub use queue::{
    DeltaFifo, KnownObjects, NoKnownObjects, Queue, QueueConfig, QueueOptions, QueueStats, RealFifo,
};
pub use workqueue::{WorkQueue, WorkQueueConfig, WorkQueueStats};
