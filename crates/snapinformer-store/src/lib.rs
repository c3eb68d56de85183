//! A snapshot store for Kubernetes-style objects: one writer, any number of readers, and readers
//! that never block the writer.
//!
//! # What it is
//!
//! client-go's informer cache is one map and its indexes behind one reader/writer lock. A
//! controller that lists 200,000 pods holds the read lock for most of a second, the informer
//! cannot apply watch events meanwhile, its queue grows and every controller reads stale data.
//! This crate keeps the same surface (client-go's `Indexer`: add, update, delete, replace,
//! add_indexers; get, list, by_index, index_keys, ...) but replaces the lock with immutable,
//! structurally shared snapshots:
//!
//! - the [`Writer`] owns a private working copy built on a persistent (copy-on-write) map;
//! - a publication makes the working copy's current version visible with one atomic pointer swap
//!   (`arc-swap`); the writer never waits for readers;
//! - a [`Reader`] takes a [`Snapshot`] in O(1) without waiting and may keep it for seconds; it
//!   sees the primary map and every index at exactly the same point of the write history.
//!
//! # Consistency guarantees
//!
//! - A snapshot is immutable. Everything read from one snapshot (get, list, every index) reflects
//!   the same set of applied changes: those up to [`Snapshot::sequence`].
//! - Snapshots are published in write order; a later [`Reader::snapshot`] never returns an older
//!   publication than an earlier call on any thread.
//! - A single change ([`Writer::add`], [`Writer::delete`], ...) is published when the call
//!   returns. A [`Batch`] (or [`Writer::apply`]) is published as a whole when committed:
//!   readers see all of its changes or none. A batch dropped without a commit is discarded.
//! - Each snapshot reports the resource version it includes ([`Snapshot::resource_version`]) and
//!   when it was published ([`Snapshot::published_at`]), so staleness can be measured and waited
//!   on by the layers above.
//!
//! # Costs
//!
//! - Objects are stored as `Arc<T>`: never deep-copied on read or write. Because a snapshot keeps
//!   everything it contains alive, reads can lend `&Arc<T>` ([`Snapshot::iter`],
//!   [`Snapshot::list_refs`], [`Snapshot::by_index_refs`]) without touching a single reference
//!   count. At 200,000 pods a borrowed full list took 0.69 ms where the locked baseline's list,
//!   which must copy the `Arc`s under its lock (it cannot lend past it), took 30 ms.
//! - A write copies the few map nodes on its path that are still shared with the last published
//!   version (copy-on-write); later writes in the same batch reuse those copies. Each copied
//!   entry costs reference-count traffic now and when the old version is dropped, so batching
//!   (one publication per batch) is what makes writes cheap. The counts are usually in no
//!   cache; a copy or drop reads them all before writing any, so that their misses overlap
//!   ([`backend::Shared`]). Still, at a million small pods an update cost this store's writer
//!   14.7 µs where it cost a locked hash map's 7.5 µs (BENCHMARKS.md, "The store at 1,000,000
//!   pods").
//! - Index maintenance costs two index-function calls per index per write when the object's
//!   index values do not change (the common update), as in client-go. A *covering* index
//!   ([`Indexers::with_covering`]) also swaps the object held in its bucket: one more small-map
//!   write, in exchange for lookups that never touch the primary map. A key index's lookup
//!   resolves its keys in the primary map in groups ([`backend::Backend::resolve`]), so that
//!   the misses of different keys overlap: at a million small pods an owner lookup of 1,000
//!   keys took 38 µs, against 24 µs for a locked hash map and 11 µs for a covering index
//!   (BENCHMARKS.md, "Key lookups in groups").
//! - Freeing what a publication supersedes (copied nodes, replaced objects) is about half of a
//!   write's cost for large objects. By default a reclaimer thread per store does it
//!   ([`StoreBuilder::background_reclaim`]), as Go's garbage collector does for client-go; its
//!   backlog is bounded by the store's size, as `GOGC=100` bounds Go's garbage by the live
//!   heap, beyond which the writer frees inline. The thread competes for cores as an equal by
//!   default; [`ReclaimPriority::Idle`] lowers it to Linux `SCHED_IDLE`, so that on a busy
//!   machine garbage waits (up to the bound) instead of the writer: more updates per second
//!   under load, more memory held (the trade-off is measured in its docs).
//!   In the `store` benchmark at 200,000 realistic pods the store applied 2.5x the updates per
//!   second of inline freeing without readers and 1.7x with ten readers, in the same run; the
//!   price is a thread per store, garbage freed a little later, and possibly more CPU in all
//!   (counted in CPU per update, the store took 28 µs freeing inline and 37 µs with its
//!   reclaimer in one of two runs; BENCHMARKS.md).
//! - Every entry of the primary map carries a 64-bit digest of its object's labels (a Bloom
//!   filter of its `key=value` pairs), so a list with a label selector ([`Snapshot::select`],
//!   [`Snapshot::list_selected`]) skips the objects that cannot match without reading them and
//!   tests only the candidates on their labels. The price is 8 bytes per entry and hashing the
//!   labels on every write. At 200,000 realistic pods in one namespace a namespace list with a
//!   one-label selector took 4.9-6.1 ms against 56-71 ms when every object was read
//!   (BENCHMARKS.md, "Label digests").
//! - Holding an old snapshot retains the nodes and objects the writer has replaced since, and no
//!   more. Dropping the last holder of an old version frees it on the dropping thread.
//! - The allocator matters: copy-on-write allocates and frees many small blocks. In the
//!   benchmark this store applied 19% fewer updates per second on glibc's malloc than on
//!   mimalloc (a locked map 10% fewer), and the informer's writer spent 21-23 µs of CPU per
//!   update on mimalloc 2 against 12-17 µs on mimalloc 3; see BENCHMARKS.md at the repository
//!   root.
//!
//! # Backends
//!
//! Two persistent maps implement [`backend::PersistentMap`]; a store picks one with
//! [`StoreBuilder::backend`]:
//!
//! - [`Chunked`] (the default): a hash table of small chunks (6-12 entries) under a 16-way radix
//!   tree, hand-written for this crate. Iteration is a walk over dense arrays.
//! - [`Hamt`]: `imbl`'s hash array mapped trie.
//!
//! They were measured side by side (the `store` scenario of `snapinformer-sim` and its criterion
//! benchmarks; figures and commands in BENCHMARKS.md). At 200,000 pods `Chunked` applied 57,300
//! updates/s against `Hamt`'s 40,700 in the scenario (16.8 against 18.8 ms per 1000 in
//! criterion), listed them 13 times faster (0.69 against 9.0 ms), read a 1000-object covering
//! bucket 1.8 times faster (3.1 against 5.6 us) and needed half the structure memory (217
//! against 416 bytes per entry), which is why it is the default.
//!
//! # Example
//!
//! ```
//! use std::{collections::BTreeMap, sync::Arc};
//! use snapinformer_store::{IndexFn, Object, ObjectAccess, StoreBuilder};
//!
//! struct Pod { name: String, ns: String, rv: String, node: String }
//! impl Object for Pod {
//!     fn name(&self) -> Option<&str> { Some(&self.name) }
//!     fn namespace(&self) -> Option<&str> { Some(&self.ns) }
//!     fn resource_version(&self) -> Option<&str> { Some(&self.rv) }
//! }
//!
//! let (mut writer, reader) = StoreBuilder::new(ObjectAccess::<Pod>::of())
//!     .index("node", IndexFn::field(|p: &Pod| Some(p.node.as_str())))
//!     .build()?;
//! writer.add(Arc::new(Pod { name: "a".into(), ns: "default".into(), rv: "7".into(), node: "n1".into() }))?;
//!
//! let snap = reader.snapshot(); // O(1), never waits
//! assert_eq!(snap.by_index("node", "n1")?.len(), 1);
//! assert_eq!(snap.resource_version(), Some("7"));
//! assert!(snap.get_by_key("default/a").is_some());
//! # Ok::<(), snapinformer_store::Error>(())
//! ```

pub mod backend;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod index;
mod keying;
mod labels;
mod object;
pub mod reclaim;
mod snapshot;
mod state;
mod writer;

pub use backend::{Backend, Chunked, Hamt};
pub use error::{Error, Result};
pub use index::{IndexFn, IndexValues, Indexers, NAMESPACE_INDEX};
pub use keying::{BoxError, KeyFn, TransformFn, UserError};
pub use object::{Object, ObjectAccess, OwnerUids, split_key};
pub use reclaim::{RECLAIM_BACKLOG_MIN, ReclaimPriority, Reclaimer};
pub use snapshot::Snapshot;
pub use writer::{ApplyOutcome, Batch, Change, Reader, StoreBuilder, Writer};
