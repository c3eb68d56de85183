//! One row of `seed`, in this process, phase by phase: learn the world (sets, nodes, daemon
//! set), start the cache under test and the source that feeds it, run the controllers while
//! watching for convergence, drain, and report.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    apps::v1::{DaemonSet, StatefulSet},
    core::v1::{Node, Pod},
};
use kube::api::{Api, ListParams};

use super::{
    DAEMON_NAME, DAEMON_NAMESPACE, Mode, Row, SeedParams, ServerInfo,
    cache::{Classifier, SeedCache, Wiring, summary},
    cluster::{HttpCluster, InprocCluster, StreamStats},
    controllers::{ControllerConfig, Controllers, DaemonSpec, Running, SetSpec},
    informer_cache,
    pipeline::HarnessCache,
    report::{SeedRowReport, StreamEvents},
    slots::SlotLog,
};
use crate::{
    harness::{
        PhaseLog,
        heap::{HeapMeter, MemorySampler},
        placement::pin,
        sched::{ProcessUsage, ThreadsCpu},
    },
    pods::{self, NAMESPACE},
};

/// The sets, the daemon set and (over HTTP) the client to the server.
struct World {
    sets: Vec<SetSpec>,
    daemon: DaemonSpec,
    client: Option<kube::Client>,
}

fn set_index(name: &str) -> usize {
    name.rsplit('-').next().and_then(|i| i.parse().ok()).unwrap_or(0)
}

/// Reads the sets, the daemon set and the nodes from the server, as the controllers' informers
/// would at start.
async fn discover(client: kube::Client) -> Result<(Vec<SetSpec>, DaemonSpec), String> {
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NAMESPACE);
    let sets = sets.list(&ListParams::default()).await.map_err(|e| format!("listing sets: {e}"))?;
    let sets = sets
        .items
        .into_iter()
        .map(|s| {
            let name = s.metadata.name.clone().unwrap_or_default();
            SetSpec {
                namespace: NAMESPACE.into(),
                index: set_index(&name),
                uid: s.metadata.uid.clone().unwrap_or_default(),
                replicas: s.spec.and_then(|s| s.replicas).unwrap_or(1).max(0) as usize,
                name,
            }
        })
        .collect();
    let ds: Api<DaemonSet> = Api::namespaced(client.clone(), DAEMON_NAMESPACE);
    let ds = ds.get(DAEMON_NAME).await.map_err(|e| format!("reading the daemon set: {e}"))?;
    let nodes: Api<Node> = Api::all(client);
    let nodes =
        nodes.list(&ListParams::default()).await.map_err(|e| format!("listing nodes: {e}"))?;
    let daemon = DaemonSpec {
        namespace: DAEMON_NAMESPACE.into(),
        name: DAEMON_NAME.into(),
        uid: ds.metadata.uid.unwrap_or_default(),
        nodes: nodes.items.into_iter().filter_map(|n| n.metadata.name).collect(),
    };
    Ok((sets, daemon))
}

/// Sets, nodes and the daemon set: from the server, or made up for the in-process model.
fn world(
    mode: Mode,
    params: &SeedParams,
    server: Option<&ServerInfo>,
    runtime: &tokio::runtime::Runtime,
) -> Result<World, String> {
    match mode {
        Mode::Http | Mode::Real => {
            let server = server.ok_or("http and real mode need a server")?;
            let config = runtime.block_on(server.client_config())?;
            let client = {
                let _guard = runtime.enter();
                kube::Client::try_from(config).map_err(|e| format!("kube client: {e}"))?
            };
            let (sets, daemon) = runtime.block_on(discover(client.clone()))?;
            Ok(World { sets, daemon, client: Some(client) })
        }
        Mode::Inproc => {
            let sets = (0..params.sets)
                .map(|i| SetSpec {
                    namespace: NAMESPACE.into(),
                    name: format!("web-{i}"),
                    uid: pods::owner_uid(i),
                    replicas: params.replicas,
                    index: i,
                })
                .collect();
            let daemon = DaemonSpec {
                namespace: DAEMON_NAMESPACE.into(),
                name: DAEMON_NAME.into(),
                uid: "d5e0c0de-0000-4000-8000-000000000001".into(),
                nodes: (0..params.nodes).map(pods::node_name).collect(),
            };
            Ok(World { sets, daemon, client: None })
        }
    }
}

/// Starts the cache of `row`: ours through the informer API, a baseline through the pipeline.
pub fn start_cache(row: Row, wiring: Wiring) -> Result<Box<dyn SeedCache>, String> {
    match informer_cache::start(row.cache, wiring.clone())? {
        Some(cache) => Ok(cache),
        None => Ok(Box::new(HarnessCache::start(row.cache, wiring))),
    }
}

/// What feeds the cache and takes the controllers' writes.
enum Source {
    Inproc {
        cluster: Arc<InprocCluster>,
        stream: thread::JoinHandle<StreamStats>,
        stop: Arc<AtomicBool>,
    },
    Http {
        cluster: HttpCluster,
        reflector: snapinformer_kube::ReflectorHandle,
        client: kube::Client,
    },
}

impl Source {
    fn start(
        world: &World,
        params: &SeedParams,
        cache: &dyn SeedCache,
        slots: Arc<SlotLog>,
        runtime: &tokio::runtime::Runtime,
    ) -> Result<Source, String> {
        match &world.client {
            Some(client) => {
                // The arena transform only with `--pod-arena`: without it, no call per object.
                let transform = params.pod_arena.then(|| {
                    Arc::new(snapinformer_kube::transform::into_arena::<Pod>)
                        as snapinformer_kube::Transform<Pod>
                });
                let reflector = {
                    let _guard = runtime.enter();
                    snapinformer_kube::Reflector::new(
                        Api::<Pod>::all(client.clone()),
                        cache.queue(),
                        snapinformer_kube::ReflectorConfig::new().name("seed-pods"),
                    )
                    .with_shared_transform(transform)
                    .spawn()
                };
                let deadline = Instant::now() + Duration::from_secs(60);
                while !cache.queue().has_synced() {
                    if Instant::now() > deadline {
                        return Err("the pod reflector did not sync within 60 s".into());
                    }
                    thread::sleep(Duration::from_millis(20));
                }
                let cluster = HttpCluster::new(client.clone());
                Ok(Source::Http { cluster, reflector, client: client.clone() })
            }
            None => {
                let cluster = Arc::new(
                    InprocCluster::new(cache.queue(), slots, params.startup_delay())
                        .with_fill(params.stream_fill)
                        .with_arena(params.pod_arena),
                );
                // The stream stands for the API server, which is neither the cache's writer nor
                // a controller: never pinned.
                let stop = Arc::new(AtomicBool::new(false));
                let stream =
                    cluster.run_stream(params.rate, stop.clone(), None, params.stream_priority);
                Ok(Source::Inproc { cluster, stream, stop })
            }
        }
    }

    /// Starts the controllers on the current Tokio runtime, writing to this source's cluster.
    fn spawn(
        &self,
        controllers: Controllers,
        config: ControllerConfig,
        world: World,
        cache: &dyn SeedCache,
    ) -> Running {
        let (sets, daemon, pods) = (world.sets, world.daemon, cache.pod_cache());
        match self {
            Source::Inproc { cluster, .. } => {
                controllers.spawn(config, sets, daemon, cluster.clone(), pods)
            }
            Source::Http { cluster, .. } => {
                controllers.spawn(config, sets, daemon, cluster.clone(), pods)
            }
        }
    }

    fn inproc(&self) -> Option<&InprocCluster> {
        match self {
            Source::Inproc { cluster, .. } => Some(cluster),
            Source::Http { .. } => None,
        }
    }

    /// The in-process cluster, kept past [`Source::drain`] (which consumes the source).
    fn inproc_cluster(&self) -> Option<Arc<InprocCluster>> {
        match self {
            Source::Inproc { cluster, .. } => Some(cluster.clone()),
            Source::Http { .. } => None,
        }
    }

    /// Stops the source once the controllers stopped writing, lets the cache catch up with the
    /// cluster, and returns the cluster's pod count (and, in process, what the stream cost).
    fn drain(
        self,
        cache: &dyn SeedCache,
        runtime: &tokio::runtime::Runtime,
    ) -> (u64, Option<StreamStats>) {
        match self {
            Source::Inproc { cluster, stream, stop } => {
                stop.store(true, Ordering::Relaxed);
                let stats = stream.join().ok();
                let version = cache.versioned();
                let wait = version.wait_for_version(cluster.resource_version(), DRAIN_TIMEOUT);
                if let Err(e) = runtime.block_on(wait) {
                    tracing::warn!(error = %e, "the cache did not catch up with the cluster");
                }
                (cluster.pod_count() as u64, stats)
            }
            Source::Http { reflector, client, .. } => {
                let count = runtime
                    .block_on(async {
                        Api::<Pod>::all(client).list_metadata(&ListParams::default()).await
                    })
                    .map(|l| l.items.len() as u64)
                    .unwrap_or(0);
                // Wait until the queue stays empty for a moment: the watch has delivered the
                // rest.
                let deadline = Instant::now() + DRAIN_TIMEOUT;
                let mut quiet_since = Instant::now();
                while Instant::now() < deadline {
                    if !cache.queue().is_empty() {
                        quiet_since = Instant::now();
                    } else if quiet_since.elapsed() > Duration::from_millis(1500) {
                        break;
                    }
                    thread::sleep(Duration::from_millis(50));
                }
                runtime.block_on(reflector.stop());
                (count, None)
            }
        }
    }
}

/// The longest the drain waits for the cache to catch up with the cluster.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(120);

/// What the watch over the running controllers saw.
#[derive(Default)]
struct Watched {
    depth_series: Vec<(f64, u64)>,
    undelivered_max: u64,
    converged_at: Option<f64>,
    run_s: f64,
    queue_depth_end: u64,
}

/// Samples the queue every 100 ms until every desired pod runs (plus the settle time) or the
/// time limit, reporting progress every second.
fn watch(
    cache: &dyn SeedCache,
    controllers: &Running,
    source: &Source,
    params: &SeedParams,
    label: &str,
    log: PhaseLog<'_>,
) -> Watched {
    let desired = controllers.desired_set_pods();
    let nodes = params.nodes;
    let started = Instant::now();
    let mut w = Watched::default();
    let mut last_report = 0.0;
    let counters = cache.counters();
    loop {
        thread::sleep(Duration::from_millis(100));
        let t = started.elapsed().as_secs_f64();
        let depth = cache.queue().len() as u64;
        w.depth_series.push((t, depth));
        if let Some(inproc) = source.inproc() {
            w.undelivered_max = w.undelivered_max.max(inproc.undelivered() as u64);
        }
        let running = counters.set_pods_running.load(Ordering::Relaxed);
        let daemon_nodes = counters.nodes_with_running_daemon.load(Ordering::Relaxed);
        if w.converged_at.is_none() && running >= desired && daemon_nodes >= nodes {
            w.converged_at = Some(t);
        }
        if t - last_report >= 1.0 {
            last_report = t;
            log(&format!(
                "{label}: {t:.0}s, running in cache {running}/{desired} + {daemon_nodes}/{nodes} daemon, queue {depth}, 409s {}, duplicates {}",
                controllers.conflicts_409(),
                controllers.duplicate_daemon_pods(),
            ));
        }
        if w.converged_at.is_some_and(|c| t - c >= params.settle_s) || t >= params.max_time_s {
            break;
        }
    }
    w.run_s = started.elapsed().as_secs_f64();
    w.queue_depth_end = cache.queue().len() as u64;
    w
}

/// The runtime the controllers run on: one thread per worker, as each of
/// kube-controller-manager's sync goroutines can run (or wait on a lock) on its own; pinned to
/// `core` in the pinned layout.
fn controller_runtime(
    params: &SeedParams,
    core: Option<core_affinity::CoreId>,
) -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads((params.set_workers + params.daemon_workers).max(2))
        .thread_name("controller")
        .on_thread_start(move || pin(core))
        .enable_all()
        .build()
        .map_err(|e| format!("starting the controllers' runtime: {e}"))
}

/// Runs one row in this process. With `leak_at_end`, the cache is not freed at the end (for a
/// worker process that exits right after).
pub fn run_row(
    row: Row,
    mode: Mode,
    params: &SeedParams,
    server: Option<&ServerInfo>,
    heap: &'static dyn HeapMeter,
    log: PhaseLog<'_>,
    leak_at_end: bool,
) -> Result<SeedRowReport, String> {
    let sampler = MemorySampler::start(heap, Duration::from_millis(100));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("starting runtime: {e}"))?;
    let label = format!("{} {}", mode.name(), row.name());
    let world = world(mode, params, server, &runtime)?;
    let classifier = Classifier {
        nodes: world.daemon.nodes.iter().enumerate().map(|(i, n)| (n.clone(), i as u32)).collect(),
        daemon_uid: world.daemon.uid.clone(),
    };
    let cores = params.placement.cores();
    let slots = Arc::new(SlotLog::new());
    let wiring = Wiring {
        classifier,
        slots: slots.clone(),
        core: cores.writer,
        batch_window: params.informer_batch_window_s.map(std::time::Duration::from_secs_f64),
        baseline_batch_window: params
            .baseline_batch_window_s
            .map_or(std::time::Duration::ZERO, std::time::Duration::from_secs_f64),
    };
    let cache = start_cache(row, wiring)?;
    let source = Source::start(&world, params, &*cache, slots, &runtime)?;
    let config = ControllerConfig {
        read_your_writes: row.read_your_writes,
        set_list: params.set_list,
        daemon_list: params.daemon_list,
        policy: params.policy,
        set_workers: params.set_workers,
        daemon_workers: params.daemon_workers,
        profile: params.profile(mode),
        with_container: mode == Mode::Real,
    };
    let nodes = world.daemon.nodes.len();
    let controller_rt = controller_runtime(params, cores.readers)?;
    let controllers = cache.attach(Controllers::new(&config));
    let mut running = {
        let _guard = controller_rt.enter();
        source.spawn(controllers, config, world, &*cache)
    };
    log(&format!(
        "{label}: controllers start ({} set pods, {nodes} nodes)",
        running.desired_set_pods()
    ));
    let threads_before = ThreadsCpu::now();
    let usage_before = ProcessUsage::now();
    let watched = watch(&*cache, &running, &source, params, &label, log);
    let (kernel_cpu_s, minor_faults) = match (usage_before, ProcessUsage::now()) {
        (Some(before), Some(after)) => {
            (after.system_since(&before).as_secs_f64(), after.minor_faults_since(&before))
        }
        _ => (0.0, 0),
    };
    let cpu_by_thread_s = match (threads_before, ThreadsCpu::now()) {
        (Some(before), Some(after)) => after
            .since(&before)
            .into_iter()
            .map(|(group, cpu)| (group, cpu.as_secs_f64()))
            .collect(),
        _ => Default::default(),
    };

    log(&format!("{label}: stopping, draining the cache"));
    controller_rt.block_on(running.stop())?;
    // Read the stream's counters only once its thread has been joined (in `drain`): read
    // earlier, an event counted but not yet built in its arena can be missing from the latter.
    let inproc = source.inproc_cluster();
    let (cluster_pods, stream) = source.drain(&*cache, &runtime);
    let lateness = inproc.as_ref().map(|c| c.lateness.latency().summary()).unwrap_or_default();
    let slot_cost = inproc.as_ref().map(|c| c.slot_cost.latency().summary()).unwrap_or_default();
    let stream_burst_max = inproc.as_ref().map_or(0, |c| c.burst_max.load(Ordering::Relaxed));
    let arena_objects = snapinformer_arena::stats().built;
    let stream_events = inproc.as_ref().map_or(StreamEvents::default(), |c| StreamEvents {
        writes: c.writes_delivered.load(Ordering::Relaxed),
        starts: c.kubelet_starts.load(Ordering::Relaxed),
        refreshes: c.kubelet_refreshes.load(Ordering::Relaxed),
        idle: c.idle_slots.load(Ordering::Relaxed),
    });
    let outcome = cache.finish(leak_at_end);
    let memory = sampler.finish();
    let (sets, daemons) = (running.set_stats(), running.daemon_stats());
    let counters = &running.counters;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let report = SeedRowReport {
        name: row.name(),
        cache: row.cache.name().into(),
        read_your_writes: row.read_your_writes,
        apply_per_s: outcome.applied as f64 / outcome.processing_s.max(1e-9),
        staleness_us: outcome.staleness.from_slot.summary(),
        staleness_from_queue_us: outcome.staleness.from_queue.summary(),
        stream_lateness_us: lateness,
        stream_slot_us: slot_cost,
        stream_priority: stream.as_ref().map(|s| s.priority.clone()).unwrap_or_default(),
        stream_cpu_s: stream.as_ref().map_or(0.0, |s| s.cpu_s),
        cpu_by_thread_s,
        kernel_cpu_s,
        minor_faults,
        queue_depth_max: outcome.depth_max,
        queue_depth_end: watched.queue_depth_end,
        undelivered_max: watched.undelivered_max,
        stream_burst_max,
        stream_events,
        arena_objects,
        list_us: summary(&running.reads.list),
        index_us: summary(&running.reads.index),
        peak_heap_bytes: memory.heap_peak_bytes,
        rss_bytes: memory.rss_peak_bytes,
        conflicts_409: running.conflicts_409(),
        duplicate_daemon_pods: running.duplicate_daemon_pods(),
        time_to_all_running_s: watched.converged_at,
        run_s: watched.run_s,
        events_applied: outcome.applied,
        set_creates: sets.created,
        set_deletes: sets.deleted,
        daemon_creates: daemons.created,
        daemon_deletes: daemons.deleted,
        write_errors: sets.write_errors
            + sets.write_conflicts
            + daemons.write_errors
            + daemons.write_conflicts
            + load(&counters.status_errors),
        syncs: load(&counters.syncs),
        failed_syncs: sets.errors + daemons.errors,
        ryw_deferrals: sets.ryw_waits + daemons.ryw_waits,
        ryw_timeouts: sets.ryw_timeouts + daemons.ryw_timeouts,
        expectation_deferrals: load(&counters.expectation_deferrals),
        extra_copies: outcome.extra_copies,
        cache_pods: outcome.pods,
        cluster_pods,
        depth_series: watched.depth_series,
        staleness_cdf: outcome.staleness.from_slot.cdf(),
        memory_trace: memory,
        server: None,
        machine_speed: None,
    };
    Ok(report)
}
