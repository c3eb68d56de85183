//! # snapinformer-apiserver
//!
//! A Kubernetes wire-compatible test API server: real HTTP/1.1 and JSON on loopback, with the
//! paths, query parameters, status codes and `Status` objects of kube-apiserver, so that the
//! real `kubectl`, the `kube` crate's client and `kube_runtime::watcher`, and the real
//! kube-controller-manager's StatefulSet and DaemonSet controllers (client-go 1.37) work against
//! it unmodified. It serves core/v1 `pods`, `nodes`, `namespaces`, `persistentvolumeclaims` and
//! `events`, apps/v1 `statefulsets`, `daemonsets` and `controllerrevisions`, events.k8s.io/v1
//! `events` and coordination.k8s.io/v1 `leases`.
//!
//! ## What it guarantees
//! - **One global, strictly increasing resourceVersion**, like etcd's revision: every write
//!   (create, update, patch, delete, status update) takes the next number, and every write is
//!   exactly one watch event.
//! - **Lists** honour `resourceVersion` (unset = latest, `0` = any, `N` = not older than `N`,
//!   `resourceVersionMatch=Exact` = exactly `N`, rebuilt from history), `limit`/`continue`
//!   (pages are consistent at the first page's version; a token whose version has left the
//!   history answers 410 Expired), label selectors (`=`, `==`, `!=`, `in`, `notin`, exists,
//!   `!`exists, `>`/`<`) and field selectors (`metadata.name`, `metadata.namespace`, and per
//!   kind e.g. `spec.nodeName`, `status.phase`), on all-namespace and namespace paths.
//! - **Watches** (`?watch=true` and `/watch/` paths) stream one JSON event per line:
//!   ADDED/MODIFIED/DELETED/BOOKMARK/ERROR, with `allowWatchBookmarks`, `timeoutSeconds`,
//!   `sendInitialEvents=true` + `resourceVersionMatch=NotOlderThan` ending in the
//!   `k8s.io/initial-events-end` bookmark, and selector transitions (an object leaving a
//!   selector is a DELETED event). A watch from a version older than the bounded history gets
//!   HTTP 200 and an in-stream ERROR event holding a 410 Expired `Status`, like the real server.
//!   Writers never wait for watchers; a watcher that falls out of the history is cut off with
//!   that same ERROR event.
//! - **Writes**: POST (201; 409 AlreadyExists; `generateName`; 404 in a missing namespace),
//!   PUT with resourceVersion precondition (409 Conflict), PATCH with JSON patch, JSON merge
//!   patch and strategic merge patch (merge keys and `$patch`/`$setElementOrder`/
//!   `$deleteFromPrimitiveList`/`$retainKeys` directives for the served kinds), DELETE
//!   (immediate; the DeleteOptions body is read, uid/resourceVersion preconditions honoured),
//!   DELETE on a collection, the `/status` subresource for every kind, `pods/binding` (as a
//!   scheduler binds; 409 when already bound), `statefulsets/scale` (an `autoscaling/v1
//!   Scale`, as `kubectl scale` uses), and `dryRun=All`.
//!   No-op updates do not bump the resourceVersion. Nothing is half-written.
//! - **API defaults** are filled in on every create, update and patch, as the real server does
//!   when it decodes an object: the pod spec's (also inside workload templates), the
//!   StatefulSet's and DaemonSet's update strategy and history limit, pod priority, and so on
//!   (the `defaults` module lists them). Controllers dereference some of them unchecked.
//! - **Counting, as kube-apiserver counts**: `/metrics` serves `apiserver_request_total` with the
//!   real server's name and labels (`verb`, `dry_run`, `group`, `version`, `resource`,
//!   `subresource`, `scope`, `component`, `code`) and `apiserver_storage_objects`; with
//!   [`Config::audit_log_path`] every resource request is written to an audit log in the real
//!   server's format (`audit.k8s.io/v1` events, level `Metadata`, JSON lines), which is how
//!   requests are attributed to clients by user agent on both servers.
//! - **Objects are validated by the typed `k8s-openapi` structs**: objects are stored as JSON
//!   that went through the typed struct and back, exactly as the real server decodes and
//!   re-encodes them. So a field the real server does not know is dropped with a `Warning`
//!   header (the default `fieldValidation=Warn`), dropped silently (`Ignore`) or refused with
//!   400 (`Strict`, which kubectl sends). Objects are kept encoded once (`Bytes`), so lists and
//!   watch events are built by copying bytes, not by re-serializing.
//! - **Protobuf** (`application/vnd.kubernetes.protobuf`), client-go's default for typed
//!   clients: request bodies of every served kind (and `DeleteOptions`, `Binding`, `Scale`) are
//!   read in it, and a client whose `Accept` header prefers it gets objects and lists in it and
//!   watches as length-prefixed `WatchEvent` frames (`;stream=watch`), as from the real server.
//!   The transcoding follows a schema generated from k8s.io/api's `generated.proto` files.
//! - **Table output** (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`) for every kind,
//!   in lists, gets and watches, with kubectl's columns; `PartialObjectMetadata` likewise.
//! - **Discovery**: `/version`, `/api`, `/apis`, `/api/v1`, `/apis/apps`, `/apis/apps/v1`, and
//!   aggregated discovery (`apidiscovery.k8s.io/v2` on `/api` and `/apis`) when the `Accept`
//!   header prefers it, as kubectl 1.30+ and `kube::Discovery::run_aggregated` ask; plus an
//!   empty `/openapi/v2` document that makes kubectl skip client-side validation.
//! - **Errors** are the real server's: 400 for malformed JSON, a name/namespace mismatch or a
//!   bad selector; 404 for unknown resources and objects; 405 for methods a resource does not
//!   take; 415 for unsupported content types (including server-side apply); 422 for a missing
//!   name.
//! - **Hostile input is bounded**: a request body over [`Config::max_request_body_bytes`]
//!   (default 3 MiB, as the real server) is answered 413 `RequestEntityTooLarge`; JSON nested
//!   deeper than serde_json's recursion limit (128) is 400 `BadRequest`; a label or field
//!   selector over [`selector::MAX_SELECTOR_BYTES`] or [`selector::MAX_SELECTOR_TERMS`] is 400
//!   with a message stating the limit (the real server has no such limit); `resourceVersion`,
//!   `limit`, `continue` and `timeoutSeconds` that do not parse are 400 with the real server's
//!   `strconv` messages; `timeoutSeconds` is capped at a year. A URL over 64 KiB is refused by
//!   the HTTP layer (hyper answers 414 without a body).
//! - **Loopback by default**: [`Config::default`] and the binary bind `127.0.0.1`. There is no
//!   authentication, so any other address is logged as a warning (and printed on stderr by the
//!   binary).
//!
//! ## Simulation and fault injection
//! A simulated kubelet ([`KubeletConfig`]) moves bound pods to Running after a delay and, if
//! asked, also schedules: it binds pending pods without a node round-robin over the nodes that
//! fit (node selector, DaemonSet-style `metadata.name` node affinity, unschedulable nodes).
//! [`generate`] builds nodes, StatefulSets with their pods and DaemonSets, and
//! [`ServerHandle::bulk_create`] stores hundreds of thousands of them in seconds. [`Faults`]
//! cut watch streams after N events or at random, force 410 on watches or lists, answer 429
//! (with `Retry-After`) or 500 for a fraction of requests and add latency, changeable at run
//! time; [`ServerHandle::restart_with_compacted_history`] ends every watch and forgets history;
//! [`ServerHandle::stop_serving`] and [`ServerHandle::start_serving`] take the server down
//! (connections refused) and bring it back on the same address, as an API server restart does.
//!
//! ## What it does not emulate
//! Authentication and authorization, admission beyond namespace existence, graceful deletion
//! and finalizers (deletes are immediate), garbage collection of owned objects, controllers
//! (StatefulSet/DaemonSet status is whatever is written), server-side apply and
//! `managedFields`, protobuf for tables, metadata-only answers and error `Status` objects
//! (those stay JSON, which client-go reads whatever it asked for), YAML request bodies,
//! OpenAPI v3 (so
//! `kubectl explain` does not work), field validation beyond the typed decode (no Kubernetes
//! validation rules except name syntax), admission beyond namespace existence and pod priority
//! (no ServiceAccount admission: pods need no service account), `/eviction`, `/log`, `/exec`
//! and other subresources, other resources (services, service accounts, secrets, ...), one
//! storage for both event versions (core/v1 and events.k8s.io/v1 events are kept apart), the
//! event TTL, and the watch cache's handling of a version newer than the store (a watch from
//! such a version simply waits for it).
//!
//! ## Design notes
//! Objects are kept as JSON bytes produced by the typed round trip, with their labels and
//! field-selector values extracted once, in one `imbl::OrdMap` per kind ordered by
//! namespace/name (so a namespace is a key range and pages are key ranges). Every write takes
//! the store mutex briefly, stamps the next resourceVersion, replaces the map entry and appends
//! one event (with the previous object) to a bounded ring. Lists take an O(1) snapshot; a list
//! at an older exact version, or a continue page, undoes the ring's later events on a snapshot
//! (and keeps a few such snapshots for the next pages). Each watch is a task that copies batches
//! of events out of the ring and streams them through a small bounded channel.
//!
//! ## Where things are
//!
//! A request enters `router` (logging, counting in `accounting` and `audit`, discovery and
//! admin paths, fault injection, dispatch),
//! whose parameters `request` parses (path, query, accepted representation, body checks); whole
//! objects are read and written by `handlers` (generic over `resource::ResourceKind`), the
//! `scale` and `binding` subresources by `subresources`, watches by `watch`; `render` turns
//! objects, lists and errors into answers, and `protobuf` transcodes them when the client
//! prefers protobuf; `store` holds the objects and the event history.
//! Serving another kind means adding it to `resource` (and to `discovery`, `table`, and
//! `defaults` if the real server defaults its fields).
//!
//! ## How to use it
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::Pod;
//! use snapinformer_apiserver::{Config, TestApiServer, generate};
//!
//! let server = TestApiServer::start(Config::default()).await?;
//! server.bulk_create_pods((0..1000).map(|i| generate::pod("default", &format!("p{i}"), None, &[])))?;
//! let client = server.client()?;
//! let pods: kube::Api<Pod> = kube::Api::default_namespaced(client);
//! assert_eq!(pods.list(&Default::default()).await?.items.len(), 1000);
//! // kubectl: KUBECONFIG=<server.kubeconfig_path()> kubectl get pods
//! server.shutdown().await;
//! # Ok(()) }
//! ```
//! The binary does the same from a shell:
//! `snapinformer-apiserver --listen 127.0.0.1:0 --kubeconfig ./kubeconfig`.

mod accounting;
mod app_state;
mod audit;
mod defaults;
pub mod discovery;
mod error;
pub mod faults;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod generate;
mod handlers;
mod kubelet;
mod objects;
pub mod patch;
mod protobuf;
mod render;
mod request;
mod resource;
mod router;
pub mod selector;
mod server;
mod store;
mod subresources;
mod table;
mod watch;

pub use error::{ApiError, ServerError};
pub use faults::{FaultConfig, FaultStats, Faults};
pub use kubelet::KubeletConfig;
pub use resource::{FieldValidation, ResourceKind};
pub use server::{
    Config, DEFAULT_MAX_REQUEST_BODY_BYTES, ServedResource, ServerHandle, TestApiServer,
};
