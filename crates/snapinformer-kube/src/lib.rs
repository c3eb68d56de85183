//! The Kubernetes layer of snapinformer: the reflector, typed informers and their factory.
//! The reflector lists and watches the Kubernetes API through the `kube` crate's client and
//! feeds a [`snapinformer_core`] delta queue, so the informer's snapshot store converges to the
//! server's state and stays there, through cut watches, expired versions, throttling, server
//! errors and restarts.
//!
//! # What it is
//!
//! - [`Reflector`] (client-go's `Reflector`) is an explicit state machine over a [`ListWatch`]
//!   (implemented for `kube::Api<K>`, so kubeconfig, TLS and auth are kube's).
//!   [`Reflector::step`] performs one transition (one request, one event, or one backoff wait)
//!   and returns a [`Step`] saying what it did: tests drive it event by event;
//!   [`Reflector::run`] / [`Reflector::spawn`] step it forever.
//! - [`KubeInformer`] puts a reflector in front of a [`snapinformer_core::Informer`]; [`pods`],
//!   [`nodes`], [`statefulsets`], [`daemonsets`] and [`informer_for`] build typed ones;
//!   [`KubeInformerFactory`] shares one informer and reflector per resource among controllers.
//! - [`access`] is the store's [`ObjectAccess`](snapinformer_store::ObjectAccess) for any
//!   `kube::Resource`; [`transform`] holds ready-made transforms (dropping `managedFields`).
//! - [`feed_watcher`] feeds a kube-rs `watcher` stream into the same queue instead, for kube-rs
//!   controllers that only want the store.
//! - Objects need not be `kube::Resource`s: [`Reflector::with_access`] and
//!   [`KubeInformerBuilder::with_access`] take the store's accessors instead, and
//!   [`list_request`] and [`watch_request`] list and watch a collection's path for a
//!   [`ListWatch`] whose objects decode themselves (the `snapinformer-compact` crate's compact
//!   pods do).
//!
//! # Guarantees
//!
//! **Convergence.** After any sequence of faults followed by a quiet period in which the server
//! answers, the informer's published snapshot holds exactly the server's objects at their
//! resource versions; every object that disappeared reached the handlers as a delete event or,
//! if the delete was missed, as a `DeletedFinalStateUnknown` tombstone from the relist (the
//! queue's `replace`); and no handler sees an object's changes out of order. The integration
//! tests (`tests/convergence.rs`) check exactly this against the test API server with faults
//! injected.
//!
//! **resourceVersion rules** (client-go's):
//! - the first list asks for `resourceVersion=0` (any version, served from the API server's
//!   watch cache); later relists ask for the last synced version (not older than it);
//! - a list answered 410 Gone/Expired or "Too large resource version" is retried at once as a
//!   consistent list (`resourceVersion` unset); an expired continue token restarts the list
//!   without paging at the version first requested;
//! - the watch opens from the list's version; every event and bookmark advances the last synced
//!   version; a bookmark reaches the queue as a version marker, never as an object change;
//! - a watch that ends normally (timeout, cut connection) is re-opened from the last synced
//!   version without a relist; a watch answered or ended with 410 relists (at once if the
//!   watch delivered events for at least [`ReflectorConfig::short_watch`], else after a
//!   backoff, so that a server answering 410 to every watch is not relisted in a loop); a
//!   watch ended by a `StorageReadError` (the server could not read an object, and may have
//!   deleted it unsafely) relists after a backoff, so that the unreadable object leaves the
//!   cache;
//! - an event that cannot be decoded (invalid JSON) relists from the last synced version, since
//!   its object is unknown (at once or after a backoff, as for a 410); an object without
//!   `metadata.name` cannot be stored and is skipped.
//!   Both are counted ([`ReflectorStats::malformed`]) and logged; neither panics. The watch
//!   lines are read by this crate (not by kube's decoder, which drops any line that stops in the
//!   middle of a JSON value): only the unterminated last bytes of a cut stream are dropped
//!   (the re-watch from the last synced version delivers that event again); a truncated line
//!   inside a stream is malformed.
//! - **Bounded watch lines**: a watch line longer than [`MAX_WATCH_LINE_BYTES`] (16 MiB) is not
//!   buffered: the stream is dropped with [`Error::WatchLineTooLong`] and the reflector relists
//!   after a backoff, so a server streaming bytes without a newline cannot exhaust memory. (kube
//!   5's own watch decoder has no such bound, so [`feed_watcher`], which reads kube-rs's
//!   watcher, does not have it either.) A server that sends nothing, or trickles bytes, is
//!   caught by the watch deadline below.
//!
//! **Backoff.** Failures wait with exponential backoff and jitter ([`BackoffConfig`]: 800 ms
//! doubling to 30 s, reset after 2 quiet minutes), at least as long as the `Retry-After` the
//! server asked for. kube's default client already retries 429/503/504 answers itself,
//! honouring their `Retry-After` header, before an error reaches the reflector; the reflector
//! then honours `details.retryAfterSeconds` of the `Status` body (kube does not expose response
//! headers with errors). Transient watch failures (429, 5xx, transport, refused connections)
//! re-open the watch from the last synced version after the backoff; other failures relist.
//! (client-go relists after a 5xx on a watch unless told to retry internal errors, which
//! [`ReflectorConfig::max_internal_error_retry`] reproduces; re-opening is as safe, since a
//! version that left the history is answered 410 and then relisted, and cheaper.) A streaming
//! list that is throttled or meets a refused connection is retried after the backoff; one that
//! fails otherwise falls back to a list at once (and a server that refuses streaming lists is
//! not asked again).
//!
//! **Reconnection beyond client-go.** A watch that delivered an event resets the backoff
//! ([`BackoffConfig::healthy_watch`]), so an API server that restarts several times in a row
//! is met with short waits each time; client-go resets its backoff only every two minutes, so
//! its waits grow from one restart to the next. A server that accepts requests and then fails
//! them before delivering anything never resets it. And a refused connection (nothing
//! listens) is retried at least every 3.2 s ([`BackoffConfig::refused_max`]): it costs the
//! server nothing, and a restarted server is noticed within seconds. `examples/reconnect.rs`
//! measures both against the test API server (figures in `BENCHMARKS.md`).
//!
//! **Hooks.** [`Reflector::with_watch_error_handler`] (client-go's `SetWatchErrorHandler`)
//! sees every failure; [`ReflectorConfig::resync_period`] with
//! [`Reflector::with_should_resync`] makes the reflector resync its queue itself (client-go's
//! reflector `resyncPeriod` and `ShouldResync`; a [`KubeInformer`] resyncs per handler
//! instead); a streaming list still waiting for its end bookmark reports it every 10 s
//! ([`Step::StreamingListStalled`]).
//!
//! **Watch timeouts.** Each watch asks the server to end it after a random time between
//! [`ReflectorConfig::min_watch_timeout`] and twice that, and is abandoned client-side if the
//! server has not ended it [`ReflectorConfig::watch_grace`] later.
//!
//! **Visible lag.** [`ReflectorStatus::last_sync_resource_version`] is what the reflector
//! received; the informer's `progress().resource_version` is what readers see;
//! [`KubeInformer::lag`] puts both side by side.
//!
//! # Costs
//!
//! - Objects are decoded once by kube and moved into an `Arc`; nothing is copied afterwards.
//!   A decoded pod costs far more heap than its JSON; dropping `managedFields` with
//!   [`transform::strip_managed_fields`] cut the heap held per pod by 60 % in the measurement
//!   recorded in `BENCHMARKS-reflector.md` (26.2 kB to 10.5 kB for a typical StatefulSet pod).
//! - A list is held in memory until its last page arrives, then queued as one `replace` (as
//!   client-go does): peak memory during a relist is one extra copy of the list's objects, plus
//!   whatever old versions the store still shares with readers. A streaming list
//!   ([`ReflectorConfig::watch_list`]) collects its initial events the same way.
//! - A bounded queue ([`snapinformer_core::QueueConfig::max_depth`]) makes the reflector wait for
//!   room before each watch event (a relist never waits).
//! - Status counters are behind one uncontended mutex, updated once per step; Prometheus
//!   metrics ([`metrics`]) are computed from them at scrape time.
//!
//! # Usage
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::Pod;
//! use snapinformer_core::Notification;
//! use snapinformer_kube::{OWNER_UID_INDEX, pods, transform};
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kube::Client::try_default().await?;
//! let informer = pods(kube::Api::all(client))
//!     .transform(transform::strip_managed_fields)
//!     .build()?;
//! informer.add_event_handler(|n: &Notification<Pod>| {
//!     if let Notification::Delete { obj } = n {
//!         println!("deleted (tombstone: {})", obj.is_tombstone());
//!     }
//! })?;
//! informer.start()?;
//! assert!(informer.wait_for_sync(Duration::from_secs(60)).await);
//! let snapshot = informer.snapshot(); // O(1), never waits
//! let owned = snapshot.by_index(OWNER_UID_INDEX, "some-statefulset-uid")?;
//! println!("{} pods, {} owned; lag {:?}", snapshot.len(), owned.len(), informer.lag());
//! informer.shutdown().await;
//! # Ok(()) }
//! ```

mod access;
mod backoff;
mod config;
mod error;
mod factory;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod informer;
mod listwatch;
pub mod metrics;
mod reflector;
pub mod transform;
mod watcher;

pub use access::access;
pub use backoff::{Backoff, BackoffConfig};
pub use config::ReflectorConfig;
pub use error::{Error, Result};
pub use factory::KubeInformerFactory;
pub use informer::{
    KubeInformer, KubeInformerBuilder, Lag, NODE_NAME_INDEX, OWNER_UID_INDEX, daemonsets,
    informer_for, nodes, pods, statefulsets,
};
pub use listwatch::{ListWatch, MAX_WATCH_LINE_BYTES, WatchStream, list_request, watch_request};
pub use reflector::{
    EventKind, INITIAL_EVENTS_END, NextAction, Phase, Reflector, ReflectorHandle, ReflectorStats,
    ReflectorStatus, STREAMING_LIST_STALL, ShouldResync, StatusHandle, Step, Transform,
    WatchErrorHandler,
};
pub use watcher::{WatcherAdapter, WatcherStats, feed_watcher};
