//! Where the controllers write: an API server over HTTP, or an in-process cluster model.
//!
//! [`Cluster`] is the seam: pod writes through the runtime's [`Writes`] (so that the runtime
//! records their versions and expectations), and the StatefulSet status write. Over HTTP the
//! pod writes are `kube::Api<Pod>` itself, on any client (the test API server's URL, or a
//! kubeconfig's cluster with its TLS and credentials); in process they go to the cluster model,
//! whose answers are the server's (409 AlreadyExists on a create of an existing name, 404 on a
//! missing one), so a controller acting on a stale cache finds out the same way.

use std::{
    collections::{HashMap, VecDeque},
    future::Future,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Pod};
use kube::{
    api::{Api, DeleteParams, Patch, PatchParams, PostParams},
    core::Status,
};
use snapinformer_apiserver::{ApiError, patch::PatchType};
use snapinformer_core::Queue;
use snapinformer_runtime::{Deleted, Writes};

use super::slots::{Lateness, SlotLog};
use crate::pods::Rng;

/// Where the controllers write.
pub trait Cluster: Clone + Send + Sync + 'static {
    /// The pod writes of one namespace.
    type Pods: Writes<Pod> + 'static;

    /// The pod writes of `namespace`.
    fn pods(&self, namespace: &str) -> Self::Pods;

    /// Writes the status of the StatefulSet `namespace/name` (a merge patch of `replicas`,
    /// `readyReplicas` and `currentReplicas`). Not tracked for read-your-writes: no cache of
    /// StatefulSets is read back.
    fn set_status(
        &self,
        namespace: &str,
        name: &str,
        replicas: i32,
        ready: i32,
    ) -> impl Future<Output = kube::Result<()>> + Send;
}

fn rv_of(pod: &Pod) -> u64 {
    pod.metadata.resource_version.as_deref().and_then(|rv| rv.parse().ok()).unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// Over HTTP

/// An API server through the kube client: the test API server, or any cluster a
/// `kube::Config` reaches.
#[derive(Clone)]
pub struct HttpCluster {
    client: kube::Client,
}

impl HttpCluster {
    /// Writes through `client`.
    pub fn new(client: kube::Client) -> Self {
        HttpCluster { client }
    }
}

impl Cluster for HttpCluster {
    type Pods = Api<Pod>;

    fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), namespace)
    }

    async fn set_status(
        &self,
        namespace: &str,
        name: &str,
        replicas: i32,
        ready: i32,
    ) -> kube::Result<()> {
        let sets: Api<StatefulSet> = Api::namespaced(self.client.clone(), namespace);
        let patch = serde_json::json!({
            "status": { "replicas": replicas, "readyReplicas": ready, "currentReplicas": replicas }
        });
        sets.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(drop)
    }
}

// ---------------------------------------------------------------------------------------------
// In process

/// A change of the cluster, as a watch delivers it.
enum Event {
    Added(Arc<Pod>),
    Modified(Arc<Pod>),
    Deleted(Arc<Pod>),
}

/// How the in-process watch stream is scheduled.
///
/// The stream stands for the API server and the network, which in a real cluster do not share
/// the controller manager's cores. At the same priority as everything else it falls behind its
/// schedule whenever the controllers keep both cores busy, and then delivers in bursts: a
/// faster cache, whose controllers make more progress, would slow its own source. Real-time
/// priority keeps it on schedule; the CPU it takes is still taken from the measured threads,
/// and reported.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum StreamPriority {
    /// `SCHED_FIFO` (set with `chrt`; needs the privilege to, else the stream stays normal).
    #[default]
    Realtime,
    /// The default scheduling policy, like every other thread.
    Normal,
}

impl StreamPriority {
    /// Applies this priority to the calling thread; returns what it got (`realtime`, `normal`,
    /// or `normal (...)` with the reason a real-time request failed).
    fn apply_to_this_thread(self) -> String {
        if self == StreamPriority::Normal {
            return "normal".into();
        }
        let tid = std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        let Some(tid) = tid else { return "normal (no thread id)".into() };
        match std::process::Command::new("chrt")
            .args(["--fifo", "--pid", "10", &tid])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .output()
        {
            Ok(out) if out.status.success() => "realtime".into(),
            Ok(out) => format!("normal (chrt: {})", String::from_utf8_lossy(&out.stderr).trim()),
            Err(e) => format!("normal (chrt: {e})"),
        }
    }
}

/// What the in-process stream delivers in a slot that has no write and no pod to start.
///
/// The stream keeps an exact rate so that every cache receives the same load, and by default
/// fills such slots with a status refresh of a running pod, as a kubelet's periodic updates
/// would. Each refresh is a full pod copy that the cache applies and that the controllers'
/// handlers turn into a sync of its owner. A run whose controllers fall behind leaves more
/// slots without a write, so it gets more refreshes: `idle` leaves those slots empty, which
/// takes that possible feedback out (a control; the headline keeps `refresh`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum StreamFill {
    /// A status refresh of a running pod chosen at random (the default).
    #[default]
    Refresh,
    /// Nothing: the slot stays idle, and the stream delivers fewer events than its rate.
    Idle,
}

/// What the stream thread cost.
#[derive(Debug, Clone, Default)]
pub struct StreamStats {
    /// The scheduling it ran with.
    pub priority: String,
    /// CPU seconds it used (user and system).
    pub cpu_s: f64,
}

/// CPU seconds (user and system) the calling thread has used, from `/proc/thread-self/stat`.
fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the command name (which may hold spaces): state is the 3rd field, utime the
    // 14th and stime the 15th, in clock ticks of 1/100 s.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

/// How an event enters a delta queue.
type Enqueue = fn(&dyn Queue<Pod>, Arc<Pod>) -> snapinformer_core::queue::Result<()>;

impl Event {
    fn into_parts(self) -> (Enqueue, Arc<Pod>) {
        match self {
            Event::Added(p) => (|q, p| q.add(p), p),
            Event::Modified(p) => (|q, p| q.update(p), p),
            Event::Deleted(p) => (|q, p| q.delete(p), p),
        }
    }
}

struct Truth {
    /// Every pod as it was created (the kubelet's updates are made from it; the truth does not
    /// keep them, which spares the stream a copy per update).
    pods: HashMap<String, Arc<Pod>>,
    rv: u64,
    /// Writes not yet delivered to the watch (the server's send buffer), in version order.
    log: VecDeque<Event>,
    /// Pods waiting for the kubelet, by the time they may start.
    starting: VecDeque<(Instant, String)>,
    /// Running pods, for status heartbeats.
    running: Vec<String>,
}

/// The authoritative state in memory, and its watch.
///
/// Writes are kept in order and delivered to the informer's queue by a stream thread at a
/// fixed rate, open loop, as a watch delivers them whatever the cache does: each delivery slot
/// carries the oldest undelivered write, or, when there is none, a kubelet status update (the
/// start of a pod whose startup delay has passed, else a status refresh of a running pod). So
/// the cache receives exactly `rate` events per second, as in the `store` scenario (unless
/// [`StreamFill::Idle`] leaves the slots without a write or a start empty).
///
/// Each delivered event carries its own copy of the object, as a watch client decodes its own
/// copy of every event: the cache never shares objects with the cluster, and a cache that takes
/// events by value (kube-rs) gets a uniquely owned object. (A kubelet update is made fresh from
/// the pod as created and delivered as is; a create is copied on delivery, as the cluster keeps
/// the created pod.) Each event's scheduled slot goes to
/// the [`SlotLog`] before the event enters the queue, and the stream's lateness to
/// [`InprocCluster::lateness`].
pub struct InprocCluster {
    truth: Mutex<Truth>,
    queue: Arc<dyn Queue<Pod>>,
    startup_delay: Duration,
    fill: StreamFill,
    /// Whether each delivered pod is rebuilt in an arena of its own, as a reflector with the
    /// `into_arena` transform would right after decoding it.
    arena: bool,
    slots: Arc<SlotLog>,
    /// Delivery time minus scheduled slot, per event delivered on schedule.
    pub lateness: Lateness,
    /// Time the stream spent on each slot (building and delivering its event).
    pub slot_cost: Lateness,
    /// Events delivered to the queue.
    pub delivered: AtomicU64,
    /// Controllers' writes delivered on schedule (creates, updates, deletes).
    pub writes_delivered: AtomicU64,
    /// The kubelet's status updates that started a pod (Pending to Running).
    pub kubelet_starts: AtomicU64,
    /// The kubelet's refreshes of a running pod's status: what a slot delivers when there is
    /// no write and no pod to start (the stream keeps its rate; none with
    /// [`StreamFill::Idle`]).
    pub kubelet_refreshes: AtomicU64,
    /// Delivery slots that found nothing to deliver.
    pub idle_slots: AtomicU64,
    /// Most slots delivered back to back after the stream thread woke up late (a burst: the
    /// thread was descheduled and caught up with its schedule).
    pub burst_max: AtomicU64,
    /// StatefulSet status writes.
    pub status_writes: AtomicU64,
}

impl InprocCluster {
    /// A cluster that feeds `queue` and records each event's scheduled slot in `slots`; pods
    /// start `startup_delay` after their creation.
    pub fn new(queue: Arc<dyn Queue<Pod>>, slots: Arc<SlotLog>, startup_delay: Duration) -> Self {
        InprocCluster {
            truth: Mutex::new(Truth {
                pods: HashMap::new(),
                rv: 0,
                log: VecDeque::new(),
                starting: VecDeque::new(),
                running: Vec::new(),
            }),
            queue,
            startup_delay,
            fill: StreamFill::Refresh,
            arena: false,
            slots,
            lateness: Lateness::default(),
            slot_cost: Lateness::default(),
            delivered: AtomicU64::new(0),
            writes_delivered: AtomicU64::new(0),
            kubelet_starts: AtomicU64::new(0),
            kubelet_refreshes: AtomicU64::new(0),
            idle_slots: AtomicU64::new(0),
            burst_max: AtomicU64::new(0),
            status_writes: AtomicU64::new(0),
        }
    }

    /// The same cluster with `fill` for the slots that have no write and no pod to start
    /// (default [`StreamFill::Refresh`]).
    #[must_use]
    pub fn with_fill(mut self, fill: StreamFill) -> Self {
        self.fill = fill;
        self
    }

    /// The same cluster delivering every pod rebuilt in an arena of its own
    /// ([`snapinformer_kube::transform::into_arena`], on the stream's thread, where a reflector
    /// would run it after decoding); ordinary pods without
    /// [`snapinformer_arena::ArenaAlloc`] as the global allocator.
    #[must_use]
    pub fn with_arena(mut self, arena: bool) -> Self {
        self.arena = arena;
        self
    }

    /// Pods in the cluster.
    pub fn pod_count(&self) -> usize {
        self.truth.lock().expect("truth lock").pods.len()
    }

    /// The cluster's current resource version.
    pub fn resource_version(&self) -> u64 {
        self.truth.lock().expect("truth lock").rv
    }

    /// Every pod, for comparisons with the cache.
    pub fn pods(&self) -> Vec<Arc<Pod>> {
        self.truth.lock().expect("truth lock").pods.values().cloned().collect()
    }

    /// Writes not yet delivered.
    pub fn undelivered(&self) -> usize {
        self.truth.lock().expect("truth lock").log.len()
    }

    /// Runs the watch stream: `rate` deliveries per second on a fixed schedule, until `stop` is
    /// set; after that, delivers what is left of the log at once (kubelet updates stop). Runs
    /// pinned to `core` if given, at `priority`. Returns what the stream thread cost.
    pub fn run_stream(
        self: &Arc<Self>,
        rate: u64,
        stop: Arc<AtomicBool>,
        core: Option<core_affinity::CoreId>,
        priority: StreamPriority,
    ) -> thread::JoinHandle<StreamStats> {
        let this = self.clone();
        thread::Builder::new()
            .name("watch-stream".into())
            .spawn(move || {
                if let Some(core) = core {
                    core_affinity::set_for_current(core);
                }
                let priority = priority.apply_to_this_thread();
                let interval_ns = ((1e9 / rate.max(1) as f64) as u128).max(1);
                let start = Instant::now();
                let start_at = |k: u128, interval: u128| {
                    start + Duration::from_nanos((k * interval).min(u128::from(u64::MAX)) as u64)
                };
                let mut done: u64 = 0;
                let mut rng = Rng::new(7);
                while !stop.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    // Slot k is due at start + k * interval: slots 0..=elapsed/interval are due.
                    let due = (now - start).as_nanos() / interval_ns + 1;
                    let burst = due.saturating_sub(u128::from(done)) as u64;
                    this.burst_max.fetch_max(burst, Ordering::Relaxed);
                    let mut run = 0;
                    while u128::from(done) < due {
                        let began = Instant::now();
                        this.slot(now, start_at(u128::from(done), interval_ns), &mut rng);
                        this.slot_cost.record(began.elapsed());
                        done += 1;
                        run += 1;
                        // Catching up: let the cache's writer run between groups of events
                        // (on a busy machine it may share this thread's core).
                        if run % 64 == 0 {
                            thread::yield_now();
                        }
                    }
                    // Until the next slot, but at least 50 us and at most 500 us (a wakeup per
                    // event at high rates would cost more than it measures).
                    let next = start_at(due, interval_ns).saturating_duration_since(Instant::now());
                    thread::sleep(
                        next.clamp(Duration::from_micros(50), Duration::from_micros(500)),
                    );
                }
                // After the row: the rest of the log at once, off schedule (no slot, no lateness).
                let mut truth = this.truth.lock().expect("truth lock");
                while let Some(event) = truth.log.pop_front() {
                    this.deliver(event, None);
                }
                StreamStats { priority, cpu_s: thread_cpu_seconds().unwrap_or(0.0) }
            })
            .expect("spawn watch stream")
    }

    /// Hands `event` to the queue with an object of its own (the watch client's decoded copy:
    /// copied here if the cluster still holds it), after recording its scheduled `slot` if it
    /// has one. (Nobody takes a new reference to an event's object: if this is the only one,
    /// it stays the only one.)
    fn deliver(&self, event: Event, slot: Option<Instant>) {
        let (enqueue, pod) = event.into_parts();
        let pod = if Arc::strong_count(&pod) == 1 { pod } else { Arc::new(Pod::clone(&pod)) };
        let pod = if self.arena {
            let mut pod = Arc::unwrap_or_clone(pod);
            snapinformer_kube::transform::into_arena(&mut pod);
            Arc::new(pod)
        } else {
            pod
        };
        if let Some(slot) = slot {
            self.slots.push(rv_of(&pod), slot);
            self.lateness.record(Instant::now().saturating_duration_since(slot));
        }
        // Closed queue: the row is over; nothing to deliver to.
        let _ = enqueue(&*self.queue, pod);
        self.delivered.fetch_add(1, Ordering::Relaxed);
    }

    /// One delivery slot, scheduled at `slot`: the oldest undelivered write, else a kubelet
    /// update. Only this thread delivers, in the order it takes events from the truth, so the
    /// queue sees them in resource-version order although the copy and the delivery happen
    /// after the truth's lock is released (the controllers' writes never wait for them).
    fn slot(&self, now: Instant, slot: Instant, rng: &mut Rng) {
        match self.next_event(now, rng) {
            Some(Next::Write(event)) => {
                self.writes_delivered.fetch_add(1, Ordering::Relaxed);
                self.deliver(event, Some(slot));
            }
            Some(Next::Start { created, rv, refresh }) => {
                let mut pod = Pod::clone(&created);
                drop(created);
                pod.metadata.resource_version = Some(rv.to_string());
                let status = pod.status.get_or_insert_with(Default::default);
                status.phase = Some("Running".into());
                status.pod_ip = Some(format!("10.1.{}.{}", (rv >> 8) & 0xff, rv & 0xff));
                let counter = if refresh { &self.kubelet_refreshes } else { &self.kubelet_starts };
                counter.fetch_add(1, Ordering::Relaxed);
                self.deliver(Event::Modified(Arc::new(pod)), Some(slot));
            }
            None => {
                self.idle_slots.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Takes the next event from the truth, under its lock: the oldest undelivered write, else
    /// the kubelet's next status update (a pod whose startup delay has passed, else a refresh
    /// of a running pod) with its resource version.
    fn next_event(&self, now: Instant, rng: &mut Rng) -> Option<Next> {
        let mut truth = self.truth.lock().expect("truth lock");
        if let Some(event) = truth.log.pop_front() {
            return Some(Next::Write(event));
        }
        let started = loop {
            match truth.starting.front() {
                Some((at, _)) if *at <= now => {
                    let (_, key) = truth.starting.pop_front().expect("front exists");
                    if truth.pods.contains_key(&key) {
                        truth.running.push(key.clone());
                        break Some(key);
                    }
                }
                _ => break None,
            }
        };
        let refresh = started.is_none();
        let key = match started {
            Some(key) => key,
            None if truth.running.is_empty() || self.fill == StreamFill::Idle => return None,
            None => {
                let i = rng.below(truth.running.len());
                let key = truth.running[i].clone();
                if !truth.pods.contains_key(&key) {
                    truth.running.swap_remove(i);
                    return None;
                }
                key
            }
        };
        truth.rv += 1;
        let rv = truth.rv;
        let created = truth.pods.get(&key).expect("pod exists").clone();
        Some(Next::Start { created, rv, refresh })
    }
}

/// What a slot delivers.
enum Next {
    /// A controller's write, from the log.
    Write(Event),
    /// The kubelet's status update of the pod created as `created`, at resource version `rv`:
    /// its start, or (`refresh`) a refresh of a pod already running.
    Start { created: Arc<Pod>, rv: u64, refresh: bool },
}

fn key_of(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

/// A server's error answer as the kube client returns it.
fn api_error(e: ApiError) -> kube::Error {
    kube::Error::Api(Box::new(Status::failure(&e.message, e.reason).with_code(e.code)))
}

impl InprocCluster {
    /// Stores a change of the existing pod `namespace/name`: `change` makes the new object from
    /// the stored one (or refuses); the write gets the next resource version and goes to the
    /// watch as a modification.
    fn modify(
        &self,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&Pod) -> Result<Pod, ApiError>,
    ) -> kube::Result<Pod> {
        let key = key_of(namespace, name);
        let stored = {
            let mut truth = self.truth.lock().expect("truth lock");
            let current = truth
                .pods
                .get(&key)
                .ok_or_else(|| api_error(ApiError::not_found("", "pods", name)))?;
            let mut pod = change(current).map_err(api_error)?;
            if pod.metadata.name.as_deref() != Some(name) {
                return Err(api_error(ApiError::bad_request(
                    "the name of the object does not match the name on the URL",
                )));
            }
            pod.metadata.namespace = Some(namespace.to_owned());
            pod.metadata.uid.clone_from(&current.metadata.uid);
            truth.rv += 1;
            pod.metadata.resource_version = Some(truth.rv.to_string());
            let pod = Arc::new(pod);
            truth.pods.insert(key, pod.clone());
            truth.log.push_back(Event::Modified(pod.clone()));
            pod
        };
        Ok(Pod::clone(&stored))
    }

    /// `obj` in place of the stored `current`, if its resource version (when it has one) is
    /// the stored one (optimistic concurrency).
    fn replacing(current: &Pod, obj: &Pod) -> Result<(), ApiError> {
        match &obj.metadata.resource_version {
            Some(rv) if Some(rv) != current.metadata.resource_version.as_ref() => {
                Err(ApiError::conflict(
                    "",
                    "pods",
                    current.metadata.name.as_deref().unwrap_or_default(),
                    "the object has been modified; please apply your changes to the latest version and try again",
                ))
            }
            _ => Ok(()),
        }
    }

    /// The stored `current` with `patch` applied (merge and strategic merge patches; the
    /// model takes no JSON patch nor server-side apply, and says so as a server does).
    fn patched<P: serde::Serialize>(current: &Pod, patch: &Patch<P>) -> Result<Pod, ApiError> {
        let (kind, body) = match patch {
            Patch::Merge(p) => (PatchType::Merge, serde_json::to_vec(p)),
            Patch::Strategic(p) => (PatchType::Strategic, serde_json::to_vec(p)),
            // Server-side apply, and JSON patches (with kube's `jsonpatch` feature).
            _ => {
                return Err(ApiError::new(
                    415,
                    "UnsupportedMediaType",
                    "the cluster model takes merge and strategic merge patches only",
                ));
            }
        };
        let body = body.map_err(|e| ApiError::bad_request(format!("encoding the patch: {e}")))?;
        let doc = serde_json::to_value(current)
            .map_err(|e| ApiError::new(500, "InternalError", e.to_string()))?;
        let patched = snapinformer_apiserver::patch::apply(kind, &doc, &body)?;
        serde_json::from_value(patched)
            .map_err(|e| ApiError::new(422, "Invalid", format!("the patched pod is invalid: {e}")))
    }
}

/// The pod writes of one namespace of an [`InprocCluster`]: what `kube::Api<Pod>` does against
/// a server, answered by the model.
#[derive(Clone)]
pub struct InprocPods {
    cluster: Arc<InprocCluster>,
    namespace: String,
}

/// Which part of a pod a write changes: the status is its own subresource.
#[derive(Clone, Copy)]
enum Part {
    /// Everything but the status.
    Object,
    /// The status only.
    Status,
}

impl InprocPods {
    /// Writes `part` of the pod `name`: `write` makes the new object from the stored one; the
    /// other part stays as stored.
    fn write_part(
        &self,
        name: &str,
        part: Part,
        write: impl FnOnce(&Pod) -> Result<Pod, ApiError>,
    ) -> kube::Result<Pod> {
        self.cluster.modify(&self.namespace, name, |current| {
            let new = write(current)?;
            Ok(match part {
                Part::Object => Pod { status: current.status.clone(), ..new },
                Part::Status => Pod { status: new.status, ..current.clone() },
            })
        })
    }
}

impl Writes<Pod> for InprocPods {
    fn namespace(&self) -> Option<&str> {
        Some(&self.namespace)
    }

    /// Stores a copy of `pod` with the next resource version and a UID; the kubelet starts it
    /// after the startup delay. 409 AlreadyExists if the name is taken.
    async fn create(&self, _pp: &PostParams, obj: &Pod) -> kube::Result<Pod> {
        let ns = &self.namespace;
        if obj.metadata.namespace.as_ref().is_some_and(|n| n != ns) {
            return Err(api_error(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            )));
        }
        let Some(name) = obj.metadata.name.as_deref() else {
            return Err(api_error(ApiError::invalid(
                "Pod",
                "",
                "metadata.name",
                "name is required",
            )));
        };
        let key = key_of(ns, name);
        let stored = {
            let mut truth = self.cluster.truth.lock().expect("truth lock");
            if truth.pods.contains_key(&key) {
                return Err(api_error(ApiError::already_exists("", "pods", name)));
            }
            truth.rv += 1;
            let rv = truth.rv;
            let mut pod = obj.clone();
            pod.metadata.namespace = Some(ns.clone());
            pod.metadata.resource_version = Some(rv.to_string());
            pod.metadata.uid = Some(format!("pod-{rv}"));
            let pod = Arc::new(pod);
            truth.pods.insert(key.clone(), pod.clone());
            truth.starting.push_back((Instant::now() + self.cluster.startup_delay, key));
            truth.log.push_back(Event::Added(pod.clone()));
            pod
        };
        // The answer is the client's own copy, as a server's response decodes into one.
        Ok(Pod::clone(&stored))
    }

    async fn replace(&self, name: &str, _pp: &PostParams, obj: &Pod) -> kube::Result<Pod> {
        self.write_part(name, Part::Object, |current| {
            InprocCluster::replacing(current, obj)?;
            Ok(obj.clone())
        })
    }

    async fn replace_status(&self, name: &str, _pp: &PostParams, obj: &Pod) -> kube::Result<Pod> {
        self.write_part(name, Part::Status, |current| {
            InprocCluster::replacing(current, obj)?;
            Ok(obj.clone())
        })
    }

    async fn patch<P: serde::Serialize + std::fmt::Debug + Send + Sync>(
        &self,
        name: &str,
        _pp: &PatchParams,
        patch: &Patch<P>,
    ) -> kube::Result<Pod> {
        self.write_part(name, Part::Object, |current| InprocCluster::patched(current, patch))
    }

    async fn patch_status<P: serde::Serialize + std::fmt::Debug + Send + Sync>(
        &self,
        name: &str,
        _pp: &PatchParams,
        patch: &Patch<P>,
    ) -> kube::Result<Pod> {
        self.write_part(name, Part::Status, |current| InprocCluster::patched(current, patch))
    }

    /// Removes the pod at once (no grace period) with the next resource version; the answer
    /// is its final state at that version.
    async fn delete(&self, name: &str, _dp: &DeleteParams) -> kube::Result<Deleted<Pod>> {
        let gone = {
            let mut truth = self.cluster.truth.lock().expect("truth lock");
            let old = truth
                .pods
                .remove(&key_of(&self.namespace, name))
                .ok_or_else(|| api_error(ApiError::not_found("", "pods", name)))?;
            truth.rv += 1;
            let mut pod = Pod::clone(&old);
            pod.metadata.resource_version = Some(truth.rv.to_string());
            let pod = Arc::new(pod);
            truth.log.push_back(Event::Deleted(pod.clone()));
            pod
        };
        Ok(Deleted::Object(Pod::clone(&gone)))
    }
}

impl Cluster for Arc<InprocCluster> {
    type Pods = InprocPods;

    fn pods(&self, namespace: &str) -> InprocPods {
        InprocPods { cluster: self.clone(), namespace: namespace.to_owned() }
    }

    async fn set_status(
        &self,
        _namespace: &str,
        _name: &str,
        _replicas: i32,
        _ready: i32,
    ) -> kube::Result<()> {
        // The model keeps no StatefulSets (nothing reads their status back here): the write
        // is counted, as the server would take it.
        self.status_writes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
