//! `seed --mode real`: each row on a fresh real control plane.
//!
//! Per row, `scripts/real-cluster start` runs etcd, kube-apiserver (with an audit log) and kwok
//! with `--nodes` fake nodes, which move pods bound to them to Running. The parent creates the
//! `default` ServiceAccounts (without which ServiceAccount admission rejects every pod), the
//! StatefulSets (with `--policy`) and the DaemonSet, then:
//!
//! - **our rows** run in a worker process exactly as in http mode (discovery, the reflector,
//!   the cache, the controllers), as a client of kube-apiserver through the cluster's
//!   kubeconfig, with the user agent [`super::CONTROLLERS_USER_AGENT`]. Our controllers bind
//!   their pods themselves (`nodeName`), so no scheduler runs.
//! - **the `kube-controller-manager` row** runs the real controller manager the script starts
//!   (`statefulset,daemonset,serviceaccount`, leader election off, per-controller credentials,
//!   kcm's default worker counts, `--kube-api-qps 5000 --kube-api-burst 10000` as the `kcm`
//!   scenario uses, so that client-side rate limiting does not decide the result) and
//!   kube-scheduler, which binds its pods (with the same client limits: at its default of 50
//!   QPS, one binding per pod took 40 s for 2,050 pods and decided the row's time).
//!
//! Every row is counted from the server's side, the same way: 409s by client from the audit
//! log (`apiserver_request_total` has no client label; every 409 by request from it is
//! reported too), duplicate daemon pods and the time until every pod runs from a watch of the
//! server's pods ([`crate::scenarios::serverside::observer`]), timed from the workload's
//! creation. The controller manager's row adds its `/metrics` (work queues, its pod informer's
//! FIFO) and its peak RSS. The cluster is stopped on every path; when a row fails its state
//! directory, with the components' logs, is kept and named in the error.

use std::{
    collections::BTreeMap,
    io::IsTerminal,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use k8s_openapi::api::{
    apps::v1::{DaemonSet, StatefulSet},
    core::v1::{Pod, ServiceAccount},
};
use kube::{
    Api,
    api::{ListParams, ObjectMeta, PostParams},
};

use super::{
    CONTROLLERS_USER_AGENT, DAEMON_NAME, DAEMON_NAMESPACE, KCM_ROW, Row, RowSpec, SeedParams,
    ServerInfo,
    controllers::PodManagement,
    kubeconfig_config,
    report::{KcmFigures, SeedRowReport, ServerFigures},
    with_user_agent,
};
use crate::{
    pods::NAMESPACE,
    scenarios::{
        kcm::{
            process::{KUBERNETES_VERSION, proc_stats, scrape},
            report::{Sample, Samples, conflicts_by_client, queue_figures, stale_sync_skips},
        },
        serverside::{
            audit::{self, REAL_SERVER_POLICY},
            observer::{Counts, Observer},
            prom, request_totals,
        },
    },
};

/// Environment variable naming the `real-cluster` script (default: the repository's
/// `scripts/real-cluster`, found from this crate's source directory).
pub const SCRIPT_ENV: &str = "SNAPINFORMER_REAL_CLUSTER_SCRIPT";

/// The binaries `scripts/real-cluster build` caches and this mode needs.
pub const BINARIES: [&str; 5] =
    ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"];

/// The user agent of everything the parent does (setup, the pod watch, scrapes): not counted
/// as any row's controllers.
pub const HARNESS_USER_AGENT: &str = concat!("snapinformer-sim/", env!("CARGO_PKG_VERSION"));

/// kube-controller-manager's `--kube-api-qps` (per controller: it uses per-controller
/// credentials), as the `kcm` scenario sets it.
pub const KCM_QPS: u32 = 5000;
/// Its `--kube-api-burst`.
pub const KCM_BURST: u32 = 10_000;

/// The audit-log clients of kube-controller-manager's two controllers.
const KCM_CLIENTS: [&str; 2] = ["statefulset-controller", "daemon-set-controller"];

/// How long the parent waits for its pod watch to list, and the controller manager's
/// serviceaccount controller to create the `default` ServiceAccounts.
const SETUP_LIMIT: Duration = Duration::from_secs(60);

/// The `real-cluster` script.
pub fn script() -> PathBuf {
    std::env::var_os(SCRIPT_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/real-cluster"))
}

/// The directory where `scripts/real-cluster build` cached every binary of [`BINARIES`] for
/// Kubernetes [`KUBERNETES_VERSION`] (the newest such); an error saying to run the build
/// otherwise.
pub fn find_binaries() -> Result<PathBuf, String> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|c| c.join("snapinformer").join("real-cluster"));
    let prefix = format!("k8s-{KUBERNETES_VERSION}-");
    let complete = |bin: &Path| BINARIES.iter().all(|b| bin.join(b).is_file());
    let newest = cache.as_ref().and_then(|dir| {
        std::fs::read_dir(dir)
            .ok()?
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path().join("bin"))
            .filter(|bin| complete(bin))
            .max_by_key(|bin| std::fs::metadata(bin).and_then(|m| m.modified()).ok())
    });
    newest.ok_or_else(|| {
        format!(
            "the real control plane's binaries ({}) for Kubernetes {KUBERNETES_VERSION} are not \
             built (looked in {}/{prefix}*/bin). Run `scripts/real-cluster build` once: it \
             builds them from their Go modules (needs Go and the Go module proxy) and caches them.",
            BINARIES.join(", "),
            cache.map_or_else(
                || "~/.cache/snapinformer/real-cluster".into(),
                |c| c.display().to_string()
            )
        )
    })
}

/// A control plane started by `scripts/real-cluster start`; stopped by [`RealCluster::stop`]
/// or when dropped (and by the script's watchdog if this process dies).
#[derive(Debug)]
pub struct RealCluster {
    dir: PathBuf,
    kubeconfig: PathBuf,
    env: BTreeMap<String, String>,
    running: bool,
    /// Seconds the start took.
    pub start_s: f64,
}

fn run_script(
    args: &[&str],
    dir: &Path,
    extra: &[String],
) -> std::io::Result<std::process::Output> {
    Command::new("bash")
        .arg(script())
        .args(args)
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdin(Stdio::null())
        .output()
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl RealCluster {
    /// Starts a fresh cluster in state directory `dir` with `options` (`--with-kwok`, ...),
    /// owned by this process.
    pub fn start(dir: &Path, options: &[String]) -> Result<RealCluster, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let started = Instant::now();
        let mut all = vec!["--owner-pid".to_owned(), std::process::id().to_string()];
        all.extend(options.iter().cloned());
        let output = run_script(&["start"], dir, &all)
            .map_err(|e| format!("running {}: {e}", script().display()))?;
        if !output.status.success() {
            return Err(format!(
                "scripts/real-cluster start failed ({}); the components' logs are in {}:\n{}",
                output.status,
                dir.join("logs").display(),
                tail(&String::from_utf8_lossy(&output.stderr), 30)
            ));
        }
        let kubeconfig = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        let mut cluster = RealCluster {
            dir: dir.to_owned(),
            kubeconfig,
            env: BTreeMap::new(),
            running: true,
            start_s: started.elapsed().as_secs_f64(),
        };
        let env = run_script(&["env"], dir, &[])
            .map_err(|e| format!("running {} env: {e}", script().display()))?;
        cluster.env = String::from_utf8_lossy(&env.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix("export "))
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.trim_matches(['\'', '"']).to_owned()))
            .collect();
        Ok(cluster)
    }

    /// Stops every component (once; later calls do nothing).
    pub fn stop(&mut self) -> Result<(), String> {
        if !std::mem::replace(&mut self.running, false) {
            return Ok(());
        }
        let output = run_script(&["stop"], &self.dir, &[])
            .map_err(|e| format!("running {} stop: {e}", script().display()))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!(
                "scripts/real-cluster stop --dir {} failed ({}):\n{}",
                self.dir.display(),
                output.status,
                tail(&String::from_utf8_lossy(&output.stderr), 10)
            ))
        }
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The components' logs.
    pub fn logs(&self) -> PathBuf {
        self.dir.join("logs")
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// kube-apiserver's URL.
    pub fn url(&self) -> String {
        self.env.get("REAL_CLUSTER_APISERVER_URL").cloned().unwrap_or_default()
    }

    /// The process id of `component` (`kube-controller-manager`, ...), from the script's
    /// records.
    pub fn pid(&self, component: &str) -> Option<u32> {
        let record = std::fs::read_to_string(self.dir.join("run").join(format!("{component}.pid")));
        record.ok()?.split_whitespace().next()?.parse().ok()
    }

    /// An admin client sending `agent` as its user agent.
    pub async fn client(&self, agent: &str) -> Result<kube::Client, String> {
        let mut config = kubeconfig_config(&self.kubeconfig).await?;
        with_user_agent(&mut config, agent)?;
        kube::Client::try_from(config).map_err(|e| format!("kube client: {e}"))
    }

    /// A client for kube-controller-manager's secure port (same CA, admin token).
    pub async fn kcm_client(&self) -> Result<kube::Client, String> {
        let url = self
            .env
            .get("REAL_CLUSTER_KCM_METRICS_URL")
            .ok_or("the cluster runs no kube-controller-manager")?;
        let base = url.trim_end_matches("/metrics");
        let mut config = kubeconfig_config(&self.kubeconfig).await?;
        config.cluster_url = base.parse().map_err(|e| format!("kcm URL {base}: {e}"))?;
        with_user_agent(&mut config, HARNESS_USER_AGENT)?;
        kube::Client::try_from(config).map_err(|e| format!("kcm client: {e}"))
    }
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("warning: {e}");
        }
    }
}

/// The `start` options of a row's cluster, whose audit policy and log are in `base` (the
/// script's state directory must be its own).
fn start_options(spec: RowSpec, params: &SeedParams, base: &Path) -> Vec<String> {
    let mut o: Vec<String> =
        vec!["--with-kwok".into(), "--kwok-nodes".into(), params.nodes.to_string()];
    for arg in [
        format!("--audit-policy-file={}", base.join("audit-policy.yaml").display()),
        format!("--audit-log-path={}", base.join("audit.log").display()),
        "--audit-log-format=json".to_owned(),
    ] {
        o.extend(["--apiserver-arg".to_owned(), arg]);
    }
    if spec == RowSpec::KubeControllerManager {
        o.extend(
            [
                "--with-controller-manager",
                "--controllers",
                "statefulset,daemonset,serviceaccount",
                "--with-scheduler",
            ]
            .map(String::from),
        );
        o.extend([
            "--kcm-qps".into(),
            KCM_QPS.to_string(),
            "--kcm-burst".into(),
            KCM_BURST.to_string(),
        ]);
        for arg in [
            format!("--concurrent-statefulset-syncs={}", params.set_workers),
            format!("--concurrent-daemonset-syncs={}", params.daemon_workers),
        ] {
            o.extend(["--kcm-arg".to_owned(), arg]);
        }
        // kube-scheduler's own client limit (50 QPS by default) would otherwise bound the time
        // to all Running: one binding per pod.
        for arg in [format!("--kube-api-qps={KCM_QPS}"), format!("--kube-api-burst={KCM_BURST}")] {
            o.extend(["--scheduler-arg".to_owned(), arg]);
        }
    }
    o
}

/// A progress message: on the bar, and as a plain line when stderr is not a terminal.
fn progress(bar: &indicatif::ProgressBar, msg: String) {
    if !std::io::stderr().is_terminal() {
        eprintln!("{msg}");
    }
    bar.set_message(msg);
}

/// Runs one row of real mode on a fresh control plane, stopped on every path. `run_worker`
/// runs one of our rows in a worker process against the given server.
pub(crate) fn run_parent_row(
    spec: RowSpec,
    params: &SeedParams,
    out: &Path,
    runtime: &tokio::runtime::Runtime,
    bar: &indicatif::ProgressBar,
    run_worker: &dyn Fn(Row, &ServerInfo) -> Result<SeedRowReport, String>,
) -> Result<SeedRowReport, String> {
    find_binaries()?;
    let name = spec.name();
    let base =
        std::env::temp_dir().join(format!("snapinformer-seed-real-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).map_err(|e| format!("creating {}: {e}", base.display()))?;
    std::fs::write(base.join("audit-policy.yaml"), REAL_SERVER_POLICY)
        .map_err(|e| format!("writing the audit policy: {e}"))?;
    let dir = base.join("cluster");
    progress(bar, format!("real {name}: starting the control plane in {}", dir.display()));
    let mut cluster = RealCluster::start(&dir, &start_options(spec, params, &base))?;
    let result = measure(&cluster, spec, params, out, runtime, bar, run_worker);
    let stopped = cluster.stop();
    match result {
        Ok(report) => {
            stopped?;
            let _ = std::fs::remove_dir_all(&base);
            Ok(report)
        }
        Err(e) => Err(format!(
            "real {name}: {e}\n(the control plane's logs are kept in {})",
            cluster.logs().display()
        )),
    }
}

/// When things happened, from the pod watch.
#[derive(Debug, Default, Clone, Copy)]
struct Track {
    first_pod_s: Option<f64>,
    all_running_s: Option<f64>,
    extra_daemon_pods_peak: u64,
}

/// Reads the pod watch every 100 ms from `t0` on.
fn track(
    runtime: &tokio::runtime::Runtime,
    observer: Observer,
    params: &SeedParams,
    t0: Instant,
) -> (Arc<Mutex<Track>>, tokio::task::JoinHandle<()>) {
    let tracked = Arc::new(Mutex::new(Track::default()));
    let (desired, nodes) = ((params.sets * params.replicas) as u64, params.nodes as u64);
    let shared = tracked.clone();
    let task = runtime.spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let (c, t) = (observer.counts(), t0.elapsed().as_secs_f64());
            let mut track = shared.lock().unwrap_or_else(|p| p.into_inner());
            if c.set_pods > 0 && track.first_pod_s.is_none() {
                track.first_pod_s = Some(t);
            }
            if all_running(&c, desired, nodes) && track.all_running_s.is_none() {
                track.all_running_s = Some(t);
            }
            track.extra_daemon_pods_peak = track.extra_daemon_pods_peak.max(c.extra_daemon_pods);
        }
    });
    (tracked, task)
}

fn all_running(c: &Counts, desired: u64, nodes: u64) -> bool {
    c.set_pods >= desired && c.set_pods_running >= desired && c.nodes_with_running_daemon >= nodes
}

/// Creates the namespaces' `default` ServiceAccounts (our rows), or waits for the controller
/// manager's serviceaccount controller to (its row).
async fn service_accounts(client: &kube::Client, create: bool) -> Result<(), String> {
    let deadline = Instant::now() + SETUP_LIMIT;
    for namespace in [NAMESPACE, DAEMON_NAMESPACE] {
        let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
        if create {
            let account = ServiceAccount {
                metadata: ObjectMeta { name: Some("default".into()), ..Default::default() },
                ..Default::default()
            };
            match api.create(&PostParams::default(), &account).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(format!("creating {namespace}/default ServiceAccount: {e}")),
            }
        } else {
            while api
                .get_opt("default")
                .await
                .map_err(|e| format!("reading ServiceAccounts: {e}"))?
                .is_none()
            {
                if Instant::now() > deadline {
                    return Err(format!(
                        "the serviceaccount controller did not create {namespace}/default within {} s",
                        SETUP_LIMIT.as_secs()
                    ));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    Ok(())
}

/// Creates the StatefulSets (with the run's pod management policy) and the DaemonSet.
async fn create_workload(client: &kube::Client, params: &SeedParams) -> Result<(), String> {
    use snapinformer_apiserver::generate;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NAMESPACE);
    let policy = match params.policy {
        PodManagement::Parallel => "Parallel",
        PodManagement::OrderedReady => "OrderedReady",
    };
    for i in 0..params.sets {
        let mut set = generate::statefulset(NAMESPACE, &format!("web-{i}"), params.replicas as i32);
        if let Some(spec) = set.spec.as_mut() {
            spec.pod_management_policy = Some(policy.to_owned());
        }
        sets.create(&PostParams::default(), &set)
            .await
            .map_err(|e| format!("creating web-{i}: {e}"))?;
    }
    let daemons: Api<DaemonSet> = Api::namespaced(client.clone(), DAEMON_NAMESPACE);
    daemons
        .create(&PostParams::default(), &generate::daemonset(DAEMON_NAMESPACE, DAEMON_NAME))
        .await
        .map_err(|e| format!("creating the DaemonSet: {e}"))?;
    Ok(())
}

/// The audit log of `cluster`: beside its state directory (which must be the script's own).
fn audit_log(cluster: &RealCluster) -> PathBuf {
    cluster.dir().parent().unwrap_or(cluster.dir()).join("audit.log")
}

/// The run of one row on a started cluster, and its server-side counts.
fn measure(
    cluster: &RealCluster,
    spec: RowSpec,
    params: &SeedParams,
    out: &Path,
    runtime: &tokio::runtime::Runtime,
    bar: &indicatif::ProgressBar,
    run_worker: &dyn Fn(Row, &ServerInfo) -> Result<SeedRowReport, String>,
) -> Result<SeedRowReport, String> {
    let name = spec.name();
    let admin = runtime.block_on(cluster.client(HARNESS_USER_AGENT))?;
    let kcm = spec == RowSpec::KubeControllerManager;
    runtime.block_on(service_accounts(&admin, !kcm))?;
    let (observer, watch) = {
        let _guard = runtime.enter();
        Observer::start(admin.clone())
    };
    let deadline = Instant::now() + SETUP_LIMIT;
    while !observer.counts().synced {
        if Instant::now() > deadline {
            watch.abort();
            return Err(format!("the pod watch did not list within {} s", SETUP_LIMIT.as_secs()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    progress(bar, format!("real {name}: creating {} StatefulSets and the DaemonSet", params.sets));
    if let Err(e) = runtime.block_on(create_workload(&admin, params)) {
        watch.abort();
        return Err(e);
    }
    let t0 = Instant::now();
    let (tracked, tracker) = track(runtime, observer.clone(), params, t0);
    let result = match spec {
        RowSpec::Ours(row) => {
            let info = ServerInfo {
                url: cluster.url(),
                kubeconfig: Some(cluster.kubeconfig().to_owned()),
            };
            run_worker(row, &info).map(|report| {
                // The pod watch may be a moment behind the worker's cache.
                let until = Instant::now() + Duration::from_secs(10);
                while report.time_to_all_running_s.is_some()
                    && tracked.lock().unwrap_or_else(|p| p.into_inner()).all_running_s.is_none()
                    && Instant::now() < until
                {
                    std::thread::sleep(Duration::from_millis(100));
                }
                (report, None)
            })
        }
        RowSpec::KubeControllerManager => {
            run_kcm(cluster, params, runtime, bar, &observer, &tracked, t0)
                .map(|(r, k)| (r, Some(k)))
        }
    };
    tracker.abort();
    let counts = observer.counts();
    watch.abort();
    let (mut report, kcm_figures) = result?;
    let track = *tracked.lock().unwrap_or_else(|p| p.into_inner());

    // The server's side.
    let metrics = runtime.block_on(scrape(&admin)).map_err(|e| format!("kube-apiserver {e}"))?;
    let metrics_file = out.join(format!("real-{name}-apiserver-metrics.txt"));
    std::fs::write(&metrics_file, &metrics)
        .map_err(|e| format!("writing {}: {e}", metrics_file.display()))?;
    let clients = audit::read(&audit_log(cluster))?;
    let totals = request_totals(&prom::parse(&metrics));
    let ours = [audit::client_of(CONTROLLERS_USER_AGENT)];
    let controller_clients: Vec<String> =
        if kcm { KCM_CLIENTS.map(String::from).to_vec() } else { ours.to_vec() };
    let count = |code: Option<u16>, verb: Option<&str>, resource: Option<&str>| -> u64 {
        controller_clients.iter().map(|c| clients.count(Some(c), verb, resource, code)).sum()
    };
    let conflicts = count(Some(409), None, None);
    let pod_creates = count(Some(201), Some("create"), Some("pods"));
    let create_failures = count(None, Some("create"), Some("pods"))
        .saturating_sub(pod_creates + count(Some(409), Some("create"), Some("pods")));
    let duplicates = counts.daemon_pods_ever.saturating_sub(params.nodes as u64);
    let client_view = (!kcm).then_some((
        report.conflicts_409,
        report.duplicate_daemon_pods,
        report.time_to_all_running_s,
    ));
    report.conflicts_409 = conflicts;
    report.duplicate_daemon_pods = duplicates;
    report.time_to_all_running_s = track.all_running_s;
    report.server = Some(ServerFigures {
        controller_clients,
        conflicts_409_by_request: totals.conflicts_409,
        conflicts_409_by_client: conflicts_by_client(&clients),
        pod_creates,
        pod_create_failures: create_failures,
        first_pod_s: track.first_pod_s,
        extra_daemon_pods_peak: track.extra_daemon_pods_peak,
        control_plane_start_s: cluster.start_s,
        client_conflicts_409: client_view.map(|v| v.0),
        client_duplicate_daemon_pods: client_view.map(|v| v.1),
        client_time_to_all_running_s: client_view.and_then(|v| v.2),
        kcm: kcm_figures,
    });
    Ok(report)
}

/// The controller manager's row: sampled every half second until every pod runs (plus the
/// settle time) or the time limit.
fn run_kcm(
    cluster: &RealCluster,
    params: &SeedParams,
    runtime: &tokio::runtime::Runtime,
    bar: &indicatif::ProgressBar,
    observer: &Observer,
    tracked: &Mutex<Track>,
    t0: Instant,
) -> Result<(SeedRowReport, KcmFigures), String> {
    let client = runtime.block_on(cluster.kcm_client())?;
    let pid = cluster.pid("kube-controller-manager").ok_or("no kube-controller-manager pid")?;
    let exited = || {
        format!(
            "kube-controller-manager exited during the run; its log: {}",
            cluster.logs().join("kube-controller-manager.log").display()
        )
    };
    let (desired, nodes) = (params.sets * params.replicas, params.nodes);
    let mut samples = Samples::default();
    let (mut heap_peak, mut last_metrics, mut last_report) = (0.0f64, String::new(), 0.0);
    proc_stats(pid).ok_or_else(exited)?;
    let mut proc;
    let run_s = loop {
        std::thread::sleep(Duration::from_millis(500));
        let t = t0.elapsed().as_secs_f64();
        if let Ok(text) = runtime.block_on(scrape(&client)) {
            last_metrics = text;
        }
        let metrics = prom::parse(&last_metrics);
        heap_peak = heap_peak.max(prom::max(&metrics, "go_memstats_heap_alloc_bytes", &[]));
        proc = proc_stats(pid).ok_or_else(exited)?;
        let counts = observer.counts();
        let sample = Sample::take(t, &counts, 0, &metrics, &[], proc);
        if t - last_report >= 1.0 {
            last_report = t;
            progress(
                bar,
                format!(
                    "real {KCM_ROW}: {t:.0}s, running {}/{desired} + {}/{nodes} daemon, pod informer queued {}, queues {}+{}, extra daemon pods {}",
                    counts.set_pods_running,
                    counts.nodes_with_running_daemon,
                    sample.kcm_informer_queued_pods,
                    sample.statefulset_queue_depth,
                    sample.daemonset_queue_depth,
                    counts.extra_daemon_pods
                ),
            );
        }
        samples.push(sample);
        let converged = tracked.lock().unwrap_or_else(|p| p.into_inner()).all_running_s;
        if converged.is_some_and(|c| t >= c + params.settle_s) || t >= params.max_time_s {
            break t;
        }
    };
    let metrics = prom::parse(&last_metrics);
    let informer_queued_pods_max =
        samples.samples.iter().map(|s| s.kcm_informer_queued_pods).max().unwrap_or(0);
    let figures = KcmFigures {
        queues: queue_figures(&samples, &metrics),
        informer_queued_pods_max,
        stale_sync_skips: stale_sync_skips(&metrics),
        rss_peak_bytes: proc.rss_peak_bytes,
        heap_peak_bytes: heap_peak as u64,
        cpu_s: proc.cpu_ms as f64 / 1e3,
    };
    let cluster_pods = runtime
        .block_on(async {
            let client = cluster.client(HARNESS_USER_AGENT).await?;
            Api::<Pod>::all(client)
                .list_metadata(&ListParams::default())
                .await
                .map_err(|e| format!("listing pods: {e}"))
        })?
        .items
        .len() as u64;
    let report = SeedRowReport {
        name: KCM_ROW.to_owned(),
        cache: KCM_ROW.to_owned(),
        queue_depth_max: informer_queued_pods_max,
        peak_heap_bytes: heap_peak as u64,
        rss_bytes: proc.rss_peak_bytes,
        run_s,
        cluster_pods,
        ..SeedRowReport::default()
    };
    Ok((report, figures))
}
