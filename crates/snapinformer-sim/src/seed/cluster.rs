//! Where the controllers write: the test API server over HTTP, or an in-process cluster model.
//!
//! Both answer a create of an existing name with 409 AlreadyExists, which is how a controller
//! acting on a stale cache finds out.

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use k8s_openapi::api::{apps::v1::StatefulSet, core::v1::Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use snapinformer_core::Queue;

use crate::pods::Rng;

/// Why a write failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// 409: an object with that name exists (the cache did not show it).
    #[error("already exists")]
    AlreadyExists,
    /// 404: no such object.
    #[error("not found")]
    NotFound,
    /// Anything else (network, 5xx, 429).
    #[error("{0}")]
    Other(String),
}

/// The writes the controllers make.
pub trait Cluster: Send + Sync {
    /// Creates `pod`; returns the resource version of the write.
    fn create_pod(&self, pod: Pod) -> Result<u64, WriteError>;
    /// Deletes pod `ns/name`; returns the resource version of the write.
    fn delete_pod(&self, ns: &str, name: &str) -> Result<u64, WriteError>;
    /// Writes the status of StatefulSet `ns/name`.
    fn set_status(&self, ns: &str, name: &str, replicas: i32, ready: i32)
    -> Result<(), WriteError>;
}

fn rv_of(pod: &Pod) -> u64 {
    pod.metadata.resource_version.as_deref().and_then(|rv| rv.parse().ok()).unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// Over HTTP

/// The test API server, through the kube client. Controller threads block on a runtime handle.
pub struct HttpCluster {
    runtime: tokio::runtime::Handle,
    client: kube::Client,
}

impl HttpCluster {
    /// Writes through `client` on `runtime`.
    pub fn new(runtime: tokio::runtime::Handle, client: kube::Client) -> Self {
        HttpCluster { runtime, client }
    }
}

fn kube_err(e: kube::Error) -> WriteError {
    match e {
        kube::Error::Api(status) if status.code == 409 => WriteError::AlreadyExists,
        kube::Error::Api(status) if status.code == 404 => WriteError::NotFound,
        other => WriteError::Other(other.to_string()),
    }
}

impl Cluster for HttpCluster {
    fn create_pod(&self, pod: Pod) -> Result<u64, WriteError> {
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let created =
            self.runtime.block_on(api.create(&PostParams::default(), &pod)).map_err(kube_err)?;
        Ok(rv_of(&created))
    }

    fn delete_pod(&self, ns: &str, name: &str) -> Result<u64, WriteError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), ns);
        let deleted =
            self.runtime.block_on(api.delete(name, &DeleteParams::default())).map_err(kube_err)?;
        Ok(deleted.left().map(|p| rv_of(&p)).unwrap_or(0))
    }

    fn set_status(
        &self,
        ns: &str,
        name: &str,
        replicas: i32,
        ready: i32,
    ) -> Result<(), WriteError> {
        let api: Api<StatefulSet> = Api::namespaced(self.client.clone(), ns);
        let patch = serde_json::json!({
            "status": { "replicas": replicas, "readyReplicas": ready, "currentReplicas": replicas }
        });
        self.runtime
            .block_on(api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)))
            .map_err(kube_err)?;
        Ok(())
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

struct Truth {
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
/// the cache receives exactly `rate` events per second, as in the `store` scenario.
pub struct InprocCluster {
    truth: Mutex<Truth>,
    queue: Arc<dyn Queue<Pod>>,
    startup_delay: Duration,
    /// Events delivered to the queue.
    pub delivered: AtomicU64,
    /// Status updates made by the kubelet.
    pub kubelet_updates: AtomicU64,
    /// Delivery slots that found nothing to deliver.
    pub idle_slots: AtomicU64,
    /// Most slots delivered back to back after the stream thread woke up late (a burst: the
    /// thread was descheduled and caught up with its schedule).
    pub burst_max: AtomicU64,
    /// StatefulSet status writes.
    pub status_writes: AtomicU64,
}

impl InprocCluster {
    /// A cluster that feeds `queue`; pods start `startup_delay` after their creation.
    pub fn new(queue: Arc<dyn Queue<Pod>>, startup_delay: Duration) -> Self {
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
            delivered: AtomicU64::new(0),
            kubelet_updates: AtomicU64::new(0),
            idle_slots: AtomicU64::new(0),
            burst_max: AtomicU64::new(0),
            status_writes: AtomicU64::new(0),
        }
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
    /// pinned to `core` if given.
    pub fn run_stream(
        self: &Arc<Self>,
        rate: u64,
        stop: Arc<AtomicBool>,
        core: Option<core_affinity::CoreId>,
    ) -> thread::JoinHandle<()> {
        let this = self.clone();
        thread::Builder::new()
            .name("watch-stream".into())
            .spawn(move || {
                if let Some(core) = core {
                    core_affinity::set_for_current(core);
                }
                let interval_ns = (1e9 / rate.max(1) as f64) as u128;
                let start = Instant::now();
                let mut done: u64 = 0;
                let mut rng = Rng::new(7);
                while !stop.load(Ordering::Relaxed) {
                    let now = Instant::now();
                    let due = (now - start).as_nanos() / interval_ns.max(1);
                    let burst = due.saturating_sub(u128::from(done)) as u64;
                    this.burst_max.fetch_max(burst, Ordering::Relaxed);
                    let mut run = 0;
                    while u128::from(done) < due {
                        this.slot(now, &mut rng);
                        done += 1;
                        run += 1;
                        // Catching up: let the cache's writer run between groups of events
                        // (on a busy machine it may share this thread's core).
                        if run % 64 == 0 {
                            thread::yield_now();
                        }
                    }
                    thread::sleep(Duration::from_micros(500));
                }
                let mut truth = this.truth.lock().expect("truth lock");
                while let Some(event) = truth.log.pop_front() {
                    this.deliver(event);
                }
            })
            .expect("spawn watch stream")
    }

    fn deliver(&self, event: Event) {
        // Closed queue: the row is over; nothing to deliver to.
        let _ = match event {
            Event::Added(p) => self.queue.add(p),
            Event::Modified(p) => self.queue.update(p),
            Event::Deleted(p) => self.queue.delete(p),
        };
        self.delivered.fetch_add(1, Ordering::Relaxed);
    }

    /// One delivery slot. Delivers under the truth lock, so the queue sees writes in
    /// resource-version order.
    fn slot(&self, now: Instant, rng: &mut Rng) {
        let mut truth = self.truth.lock().expect("truth lock");
        if let Some(event) = truth.log.pop_front() {
            self.deliver(event);
            return;
        }
        let key = loop {
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
        let key = match key {
            Some(key) => key,
            None if truth.running.is_empty() => {
                self.idle_slots.fetch_add(1, Ordering::Relaxed);
                return;
            }
            None => {
                let i = rng.below(truth.running.len());
                let key = truth.running[i].clone();
                if !truth.pods.contains_key(&key) {
                    truth.running.swap_remove(i);
                    self.idle_slots.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                key
            }
        };
        truth.rv += 1;
        let rv = truth.rv;
        let old = truth.pods.get(&key).expect("pod exists");
        let mut pod = Pod::clone(old);
        pod.metadata.resource_version = Some(rv.to_string());
        let status = pod.status.get_or_insert_with(Default::default);
        status.phase = Some("Running".into());
        status.pod_ip = Some(format!("10.1.{}.{}", (rv >> 8) & 0xff, rv & 0xff));
        let pod = Arc::new(pod);
        truth.pods.insert(key, pod.clone());
        self.kubelet_updates.fetch_add(1, Ordering::Relaxed);
        self.deliver(Event::Modified(pod));
    }
}

fn key_of(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

impl Cluster for InprocCluster {
    fn create_pod(&self, mut pod: Pod) -> Result<u64, WriteError> {
        let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().ok_or_else(|| WriteError::Other("no name".into()))?;
        let key = key_of(&ns, &name);
        let mut truth = self.truth.lock().expect("truth lock");
        if truth.pods.contains_key(&key) {
            return Err(WriteError::AlreadyExists);
        }
        truth.rv += 1;
        let rv = truth.rv;
        pod.metadata.resource_version = Some(rv.to_string());
        pod.metadata.uid = Some(format!("pod-{rv}"));
        let pod = Arc::new(pod);
        truth.pods.insert(key.clone(), pod.clone());
        truth.starting.push_back((Instant::now() + self.startup_delay, key));
        truth.log.push_back(Event::Added(pod));
        Ok(rv)
    }

    fn delete_pod(&self, ns: &str, name: &str) -> Result<u64, WriteError> {
        let mut truth = self.truth.lock().expect("truth lock");
        let old = truth.pods.remove(&key_of(ns, name)).ok_or(WriteError::NotFound)?;
        truth.rv += 1;
        let rv = truth.rv;
        let mut pod = Pod::clone(&old);
        pod.metadata.resource_version = Some(rv.to_string());
        truth.log.push_back(Event::Deleted(Arc::new(pod)));
        Ok(rv)
    }

    fn set_status(
        &self,
        _ns: &str,
        _name: &str,
        _replicas: i32,
        _ready: i32,
    ) -> Result<(), WriteError> {
        // StatefulSets are not cached in process: nothing watches their status here.
        self.status_writes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
