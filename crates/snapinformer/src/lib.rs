//! snapinformer: a Kubernetes informer framework whose cache readers never block the cache
//! writer. This crate is the one to depend on; it re-exports the parts, which live in crates of
//! their own so that each can be used (and tested) alone.
//!
//! # The parts, in the order data flows
//!
//! | module | crate | what it is |
//! |---|---|---|
//! | [`runtime`] | `snapinformer-runtime` | The controller runtime: a [`Controller`] maps primary and owned objects' events to keys, runs your reconcile on N workers from the work queue with backoff, shuts down gracefully, exports metrics, and waits before each reconcile until the caches show the key's own last writes (read-your-writes, on by default), with client-go-style expectations. |
//! | [`kube`] | `snapinformer-kube` | List and watch through the `kube` client (the reflector), typed informers ([`pods`], [`nodes`], ...), the [`KubeInformerFactory`], metadata access for any `kube::Resource`, transforms, a kube-rs watcher adapter. Kubernetes types enter here. |
//! | [`informer`] | `snapinformer-core` | client-go's delta queues, the processing loop that applies batches to the store and publishes each once, the shared [`Informer`] with isolated handlers, freshness ([`Informer::wait_for`]), the controllers' [`WorkQueue`]. Generic over the object type. |
//! | [`compact`] | `snapinformer-compact` | Compact, shared objects for the cache: pods decoded straight into hash-consed trees that share what the pods of a set have in common, with [`compact::pods_compact`], the same informer over them. |
//! | [`store`] | `snapinformer-store` | The snapshot store: one writer, any number of readers taking immutable [`Snapshot`]s in O(1) that never make the writer wait. No async, no Kubernetes. |
//!
//! # Consistency guarantees
//!
//! - A [`Snapshot`] is consistent: its primary map and every index are at the same point of the
//!   event history, at a batch boundary.
//! - Snapshots are published in event order; a reader never waits for the writer and the writer
//!   never waits for a reader, however long a reader keeps a snapshot.
//! - Staleness is measured (metrics, [`Progress`]) and waitable: [`Informer::wait_for`] resolves
//!   once the published snapshot includes a resource version, which gives controllers
//!   read-your-writes; the [`runtime`] applies it to every reconcile.
//!
//! # Costs
//!
//! Each batch of changes copies the persistent-map nodes on the paths it touches and publishes
//! with one atomic pointer swap; superseded versions are freed when the last reader holding
//! them lets go. The crates' own documentation describes the costs of each part in words, and
//! `BENCHMARKS.md` at the repository's root has the measured figures with the commands that
//! produced them.
//!
//! # A controller
//!
//! `examples/statefulset.rs`, a StatefulSet controller (its test runs it against the test API
//! server):
//!
//! ```no_run
#![doc = include_str!("../examples/statefulset.rs")]
//! ```
//!
//! # An informer alone
//!
//! ```no_run
//! use std::time::Duration;
//! use k8s_openapi::api::core::v1::Pod;
//! use snapinformer::{Notification, OWNER_UID_INDEX, pods};
//!
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kube::Client::try_default().await?;
//! let informer = pods(kube::Api::all(client)).build()?;
//! informer.add_event_handler(|n: &Notification<Pod>| {
//!     if let Notification::Delete { obj } = n {
//!         println!("deleted (tombstone: {})", obj.is_tombstone());
//!     }
//! })?;
//! informer.start()?;
//! assert!(informer.wait_for_sync(Duration::from_secs(60)).await);
//! let snapshot = informer.snapshot(); // O(1), never waits
//! let owned = snapshot.by_index(OWNER_UID_INDEX, "some-statefulset-uid")?;
//! println!("{} pods, {} owned", snapshot.len(), owned.len());
//! informer.shutdown().await;
//! # Ok(()) }
//! ```

/// The snapshot store (crate `snapinformer-store`).
pub use snapinformer_store as store;

/// The informer runtime (crate `snapinformer-core`): queues, processing, shared informer,
/// freshness, work queue.
#[doc(alias = "core")]
pub use snapinformer_core as informer;

/// The Kubernetes layer (crate `snapinformer-kube`): reflector, typed informers, factory.
#[doc(alias = "reflector")]
pub use snapinformer_kube as kube;

/// The controller runtime (crate `snapinformer-runtime`): controller, reconcile context,
/// read-your-writes, expectations.
pub use snapinformer_runtime as runtime;

/// Compact, shared objects (crate `snapinformer-compact`): pods decoded into shared trees.
pub use snapinformer_compact as compact;

/// One arena per cached object (crate `snapinformer-arena`): install
/// [`arena::ArenaAlloc`] as the global allocator and set the reflector transform
/// [`kube::transform::into_arena`], and each decoded object is rebuilt in a slot of its own,
/// cheap to free when a newer version replaces it.
pub use snapinformer_arena as arena;

pub use snapinformer_core::{
    DeltaFifo, Freshness, FreshnessPolicy, Informer, InformerBuilder, Notification, Processing,
    Progress, QueueKind, RealFifo, WorkQueue, WorkQueueConfig,
};
pub use snapinformer_kube::{
    KubeInformer, KubeInformerBuilder, KubeInformerFactory, NODE_NAME_INDEX, OWNER_UID_INDEX,
    Reflector, ReflectorConfig, daemonsets, informer_for, nodes, pods, statefulsets,
};
pub use snapinformer_runtime::{
    Action, Config as ControllerConfig, Context, Controller, Handle as ControllerHandle, ObjectKey,
    OnTimeout, ReadYourWrites, Tracked, VersionedCache, Writes, backoff_on_error, slow_start_batch,
};
pub use snapinformer_store::{
    IndexFn, Indexers, Object, ObjectAccess, Reader, Snapshot, StoreBuilder, Writer,
};
