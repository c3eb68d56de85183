//! A controller runtime on snapinformer's informers, with read-your-writes built in.
//!
//! # What it is
//!
//! A [`Controller`] turns events into keys and keys into calls of your reconcile function, in
//! the spirit of kube-runtime's `Controller`:
//!
//! - **Sources.** A primary informer ([`Controller::for_informer`]) queues the key
//!   (`namespace/name`) of each object that changes. Informers of owned objects
//!   ([`Controller::owns`]) queue the key of the object's controller: the owner reference with
//!   `controller: true` whose kind and API version are the primary's. Any other informer
//!   ([`Controller::watches`]) queues what a mapper function returns. Custom sources feed a
//!   [`Handle`] ([`Handle::enqueue`], [`Handle::owned_added`], ...).
//! - **Workers.** `N` tasks ([`Config::workers`]) take keys from a [`snapinformer_core::WorkQueue`]
//!   and call the reconcile function with a [`Context`] and your shared data. The queue
//!   deduplicates keys and never hands one key to two workers at once: a key that changes
//!   while it is being reconciled is reconciled once more afterwards.
//! - **Outcomes.** A reconcile returns an [`Action`]: [`Action::requeue`] after a delay,
//!   [`Action::await_change`], or [`Action::backoff`]. On an error, the error policy chooses
//!   (usually [`backoff_on_error`]: per-key exponential backoff through the queue's rate
//!   limiter, reset by the key's next success). A panicking reconcile is counted and backed off.
//! - **Shutdown.** [`Handle::shutdown`] (or [`Controller::graceful_shutdown_on`]) stops the
//!   workers from taking keys, lets running reconciles finish within
//!   [`Config::shutdown_timeout`], then cancels what is left, shuts the queue down and removes
//!   the event handlers.
//! - **Writes.** [`Context::track`] wraps the client a reconcile writes through (below); every
//!   write is counted by verb and outcome, so a create answered 409 AlreadyExists (a decision
//!   made on a cache that did not show the object) is visible in [`Stats`] and the metrics.
//!   [`slow_start_batch`] issues many writes as client-go's controllers do: concurrent batches
//!   of 1, 2, 4, ... that stop after the first batch with a failure.
//! - **Metrics** ([`metrics`]): reconciles by result, reconcile duration, read-your-writes
//!   waits and timeouts, writes by outcome, expectations, and the work queue's own.
//!
//! # Read-your-writes, on by default
//!
//! A reconcile writes through [`Context::track`], which wraps a `kube::Api` (or any
//! [`Writes`]) in a [`Tracked`] client. Every successful create, replace, patch or delete
//! records the resource version the server returned, for the key being reconciled and for the
//! cache that shows objects of the written type. Before the key's next reconcile, the runtime
//! waits until each of those caches shows at least that version (the informer's
//! [`wait_for`](snapinformer_core::Informer::wait_for)); [`Context::read_your_writes`] says how
//! the wait went. The wait is bounded ([`Config::ryw_timeout`], 5 s by default): on a timeout
//! the reconcile runs anyway, or is requeued with backoff ([`OnTimeout`]), and the timeout is
//! counted. A delete that returns the object records the deletion's version; one that returns
//! only a `Status` counts as an expected delete.
//!
//! Creates and deletes of owned objects are also counted as **expectations**, as client-go's
//! `ControllerExpectations` count them: raised before the request is sent, lowered when the
//! write fails or the owned informer shows the object added (or deleted, or terminating), and
//! expiring after [`Config::expectations_timeout`]. [`Context::expectations_satisfied`] tells a
//! controller that counts objects (a StatefulSet controller counting pods) whether its own
//! creates have all come back, so that it does not create them again.
//!
//! **Why.** A cache that is fresh in general can still miss the write a controller made a
//! millisecond ago: the watch event of that write has not arrived yet. A controller that
//! reconciles again at that moment sees a pod missing that it just created, creates it again
//! and gets 409 AlreadyExists, or, for generated names, makes a duplicate pod. The field
//! report that started this project saw both at scale (409 storms from the StatefulSet
//! controller, duplicate DaemonSet pods), and the project's reproduction showed that a fresh
//! cache alone does not stop them: only waiting for one's own writes did. Upstream Kubernetes
//! added this for a few controllers behind a feature gate (KEP-5647, "skip a sync until my own
//! writes are visible"); here every controller gets it, for every cache that can tell which
//! version its readers see.
//!
//! # Pluggable caches
//!
//! Read-your-writes needs only a [`VersionedCache`]: a cache that can tell the resource
//! version its readers see and wait for a later one. [`snapinformer_core::Informer`]
//! implements it; any other cache can (a locked map, kube-rs' store, a cache fed by an
//! in-process cluster model) by keeping a [`VisibleVersion`] that its writer advances,
//! registered with [`Controller::for_cache`],
//! [`Controller::owns_cache`] or [`Controller::cache_for`], with its events fed through a
//! [`Handle`]. Writes go through [`Writes`], implemented for `kube::Api` and by anything
//! else that can write (a test's in-memory cluster). The controller logic stays the same.
//!
//! # Guarantees
//!
//! - One key is never reconciled by two workers at once; a key queued during its reconcile is
//!   reconciled again after it, once.
//! - With read-your-writes on, a reconcile of a key starts only once every registered cache
//!   shows the versions of the key's earlier successful writes through [`Tracked`], or once
//!   the timeout passed (then [`Context::read_your_writes`] says so and the timeout is
//!   counted). Writes not made through [`Tracked`], or of a type with no registered cache,
//!   are not waited for (the latter are counted as untracked).
//! - [`Context::object`] is read after that wait.
//! - An expectation is raised before its write is sent, so its event cannot be missed; it is
//!   lowered at most once per observed object (deletes are tracked per object).
//! - Shutdown never waits longer than its timeout (plus the end of a step a cancelled reconcile
//!   is in), and once [`Controller::run`] returns no reconcile code runs: its writes are over.
//!
//! # Costs
//!
//! - Per key: one small entry (cache, version) per cache written while the key has writes not
//!   yet seen, and one expectations entry while creates or deletes are pending. Both go away
//!   once observed.
//! - A reconcile whose writes are already visible pays one version comparison per written
//!   cache; one that must wait holds its worker for up to the timeout (other keys keep
//!   flowing through the other workers). Waits are short when the cache keeps up, which is
//!   what the snapshot store is for; `BENCHMARKS.md` has the measured effect on the seed
//!   reproduction.
//! - Each reconcile runs inside its worker's Tokio task with its panics caught (so a panic is
//!   contained, and a cancelled worker leaves no reconcile running), and each event
//!   costs one work-queue add (a hash-map operation) on the informer's handler thread (or,
//!   with [`Config::handler_execution`] set to `HandlerExecution::Task`, in a task on the
//!   runtime the controller runs on).
//!
//! # Usage
//!
//! ```no_run
//! use std::{sync::Arc, time::Duration};
//! use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Pod};
//! use kube::{Api, api::PostParams};
//! use snapinformer_core::Informer;
//! use snapinformer_runtime::{Action, Context, Controller, backoff_on_error};
//!
//! struct Data { client: kube::Client }
//!
//! async fn reconcile(ctx: Context<StatefulSet>, data: Arc<Data>) -> Result<Action, kube::Error> {
//!     let Some(_set) = ctx.object() else { return Ok(Action::await_change()) };
//!     if !ctx.expectations_satisfied() {
//!         return Ok(Action::await_change()); // our creates have not come back yet
//!     }
//!     let pods = ctx.track(Api::<Pod>::namespaced(data.client.clone(), "default"));
//!     // ... compare the set with its pods in the cache, then write through `pods`:
//!     // pods.create(&PostParams::default(), &pod).await?;
//!     # let _ = (&pods, PostParams::default());
//!     Ok(Action::requeue(Duration::from_secs(300)))
//! }
//!
//! # async fn run(client: kube::Client, sets: Informer<StatefulSet>, pods: Informer<Pod>)
//! #     -> Result<(), snapinformer_runtime::Error> {
//! let controller = Controller::new("statefulset").for_informer(&sets).owns(&pods).workers(4);
//! let handle = controller.handle(); // handle.shutdown() stops it gracefully
//! controller.run(reconcile, backoff_on_error, Arc::new(Data { client })).await?;
//! # Ok(()) }
//! ```
//!
//! The `snapinformer` crate's `examples/statefulset.rs` is a complete controller.

mod batch;
pub mod cache;
mod controller;
mod expectations;
mod key;
pub mod metrics;
mod shared;
mod tracked;
mod writes;

pub use batch::{SLOW_START_INITIAL_BATCH, SlowStart, slow_start_batch};
pub use cache::{VersionedCache, VisibleVersion};
pub use controller::{
    Action, Config, Context, Controller, Error, Handle, OnTimeout, ReadYourWrites, Result, Stats,
    Stopped, backoff_on_error,
};
pub use expectations::Pending;
pub use key::ObjectKey;
pub use tracked::Tracked;
pub use writes::{Deleted, Writes};
