//! Compact, shared objects for the informer cache.
//!
//! A realistic pod costs several times its JSON size as a `k8s_openapi` `Pod` in memory, and the
//! pods of one StatefulSet are nearly identical. This crate stores each pod as what is unique
//! about it plus references to what it shares with others.
//!
//! # What it is
//!
//! - [`Value`]: a JSON value whose strings, arrays and objects are `Arc`-shared. 24 bytes per
//!   value; strings of up to [`INLINE_MAX`] bytes live inline.
//! - [`Interner`]: hash-consing. Every node is looked up by content (children by pointer) and
//!   reused if someone still holds an equal one; a node that only the table holds is forgotten
//!   by incremental sweeps, so the table stays proportional to what is live (see its docs).
//! - [`decode`]: a serde `DeserializeSeed` that decodes JSON straight into interned trees: no
//!   `serde_json::Value` or `k8s_openapi` object is built on the way.
//! - [`encode`]: a serde `Serializer` that turns a typed object (a `k8s_openapi` `Pod`) into the
//!   tree its JSON would decode to, without the JSON: what [`CompactPod::from_pod`] uses.
//! - [`CompactPod`]: a pod as such a tree, with its hot fields (name, namespace, UID,
//!   resourceVersion, labels, node, phase) kept at hand for keys, indexes and selectors. It
//!   implements the store's [`Object`](snapinformer_store::Object) trait and `Deserialize`
//!   (through [`Interner::global`]), so it flows through the reflector, queues, store, snapshots
//!   and handlers like any object.
//! - [`pods_compact`]: the typed pod informer (the plain one's API: snapshots with `get`,
//!   `list`, `by_index`, handlers with old and new objects, transforms), decoding list and
//!   watch responses straight into `CompactPod`s.
//!
//! # Guarantees
//!
//! - A `CompactPod` is its JSON, value for value: [`CompactPod::to_json`] equals the JSON it was
//!   decoded from (as a `serde_json::Value`), and [`CompactPod::to_pod`] the `k8s_openapi` pod.
//!   The model test over random pod streams checks this on every snapshot.
//! - Objects are immutable; sharing is invisible except through memory and pointer equality.
//! - The interning table never holds more than about 1.25 times the live nodes of each of its
//!   shards plus a small constant (the churn test checks it).
//!
//! # Costs
//!
//! - Memory: each pod pays for its root and `metadata` objects, its hot fields, and the nodes
//!   and long strings nobody else has; everything equal between pods is paid once. Objects that
//!   share nothing pay the tree's own overhead (24 bytes per value, 40 per object entry, an
//!   `Arc` header per node) plus a table slot per interned node; that is still far less than a
//!   `k8s_openapi` object, whose structs are mostly empty `Option`s (`BENCHMARKS-compact.md`
//!   beside this crate's manifest has the figures for both cases).
//! - Decoding: one hash-table lookup per key, string over 22 bytes, array and object (about
//!   240 for a realistic pod; with 200,000 pods held, each costs a few cache misses, about
//!   40 µs a pod in all on the project machine). Nodes are built on the interner's own stacks, so one equal to a node
//!   already interned allocates nothing. Sweeps are amortised over insertions and pause one
//!   shard (a 1/256th of a table) at a time. Decoding holds the interner's lock for one object
//!   at a time.
//! - Reads: hot fields are one load; other fields a short linear scan per path step (objects
//!   keep their JSON order). Materialising is cloning the `Arc<CompactPod>`;
//!   [`CompactPod::to_pod`] is the costly, explicit exception.
//! - Dropping a replaced pod frees its few unique allocations (its root and `metadata` objects)
//!   and decrements the shared ones, so the store's writer reclaims a replaced pod in a few
//!   operations; interned nodes it was the last user of are freed by the next sweep of their
//!   shard, on the decoding thread.
//! - Typed access to a part is decoding that part ([`Value::decode`], e.g. the containers into
//!   `Vec<Container>`); the whole `Pod` is [`CompactPod::to_pod`]. Both allocate what they
//!   build and are meant for occasional use.
//!
//! # Why a JSON tree rather than typed structs
//!
//! A hand-written mirror of `k8s_openapi`'s pod types with `Arc`-shared parts would have to be
//! kept in step with every Kubernetes release and would still lose fields it does not know. The
//! tree is the object's JSON, so it is exact for every kind and version by construction (the
//! fuzz target compares it with `serde_json` on arbitrary input), it works for any kind
//! without code per kind, and sharing happens wherever values are equal, not only where a type
//! author expected it.

pub mod decode;
pub mod encode;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod informer;
mod intern;
mod pod;
pub mod transform;
mod value;

pub use error::{Error, Result};
pub use informer::{CompactPodApi, pods_compact};
pub use intern::{Interner, InternerStats};
pub use pod::{CompactPod, access, node_name_index, owner_uid_index};
pub use value::{Array, INLINE_MAX, Key, Object, Str, Value};
