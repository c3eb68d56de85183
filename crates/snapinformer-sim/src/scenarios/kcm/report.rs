//! The `kcm` report: samples through the run, and the figures drawn from them, from the
//! server's counters and audit log, and from the controller manager's last `/metrics`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::KcmParams;
use super::audit::ClientRequests;
use super::observer::Counts;
use super::process::ProcStats;
use super::prom::{self, Sample as Metric};
use crate::harness::report::Environment;
use crate::scenarios::serverside::request_totals;

/// The controller manager's work queues that are reported.
pub const QUEUES: [&str; 2] = ["statefulset", "daemonset"];

/// One sample of the run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// Seconds since the controller manager started.
    pub t: f64,
    /// StatefulSet pods that exist (observer).
    pub set_pods: u64,
    /// StatefulSet pods Running (observer).
    pub set_pods_running: u64,
    /// Nodes with a Running daemon pod (observer).
    pub nodes_with_running_daemon: u64,
    /// Daemon pods beyond one per node (observer).
    pub extra_daemon_pods: u64,
    /// The server's resourceVersion.
    pub server_rv: u64,
    /// The newest pod resourceVersion the observer has seen.
    pub observed_pod_rv: u64,
    /// `informer_store_resource_version{resource="pods"}` of the controller manager (0 before
    /// its first scrape).
    pub kcm_pod_store_rv: u64,
    /// `informer_queued_items{resource="pods"}`: deltas waiting in the pod informer's FIFO.
    pub kcm_informer_queued_pods: u64,
    /// `workqueue_depth{name="statefulset"}`.
    pub statefulset_queue_depth: u64,
    /// `workqueue_depth{name="daemonset"}`.
    pub daemonset_queue_depth: u64,
    /// 409 answers so far (server's `apiserver_request_total{code="409"}`).
    pub conflicts_409: u64,
    /// The controller manager's resident set, bytes.
    pub kcm_rss_bytes: u64,
    /// The controller manager's CPU time so far, milliseconds.
    pub kcm_cpu_ms: u64,
}

impl Sample {
    /// Takes a sample from the observer's counts, the server's version, both metric scrapes
    /// and the controller manager's `/proc` figures.
    pub fn take(
        t: f64,
        counts: &Counts,
        server_rv: u64,
        kcm: &[Metric],
        server: &[Metric],
        proc: ProcStats,
    ) -> Self {
        // The core group's pods (a version is a number, not a sum over informers).
        let pods = [("group", ""), ("resource", "pods")];
        Sample {
            t,
            set_pods: counts.set_pods,
            set_pods_running: counts.set_pods_running,
            nodes_with_running_daemon: counts.nodes_with_running_daemon,
            extra_daemon_pods: counts.extra_daemon_pods,
            server_rv,
            observed_pod_rv: counts.pod_rv,
            kcm_pod_store_rv: prom::max(kcm, "informer_store_resource_version", &pods) as u64,
            kcm_informer_queued_pods: prom::sum(kcm, "informer_queued_items", &pods) as u64,
            statefulset_queue_depth: prom::sum(kcm, "workqueue_depth", &[("name", "statefulset")])
                as u64,
            daemonset_queue_depth: prom::sum(kcm, "workqueue_depth", &[("name", "daemonset")])
                as u64,
            conflicts_409: prom::sum(server, "apiserver_request_total", &[("code", "409")]) as u64,
            kcm_rss_bytes: proc.rss_bytes,
            kcm_cpu_ms: proc.cpu_ms,
        }
    }
}

/// Every sample of a run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Samples {
    /// In time order.
    pub samples: Vec<Sample>,
}

impl Samples {
    /// Appends one.
    pub fn push(&mut self, sample: Sample) {
        self.samples.push(sample);
    }

    /// How stale the controller manager's pod cache was at each sample, in seconds: the time
    /// since the observer first saw a pod version newer than the cache's (0 when the cache has
    /// everything the observer has). Resolution: the sampling period.
    pub fn pod_cache_staleness_s(&self) -> Vec<f64> {
        let s = &self.samples;
        s.iter()
            .filter(|x| x.kcm_pod_store_rv > 0)
            .map(|x| {
                s.iter()
                    .take_while(|y| y.t <= x.t)
                    .find(|y| y.observed_pod_rv > x.kcm_pod_store_rv)
                    .map_or(0.0, |y| x.t - y.t)
            })
            .collect()
    }
}

/// Counts of one work queue of the controller manager, from its last `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QueueFigures {
    /// The queue's name.
    pub name: String,
    /// Largest sampled depth.
    pub depth_max: u64,
    /// `workqueue_adds_total`.
    pub adds: u64,
    /// `workqueue_retries_total`.
    pub retries: u64,
    /// Median and 99th percentile of `workqueue_queue_duration_seconds` (time an item waits).
    /// Estimates from the histogram's buckets, capped at its last finite bucket (10 s for
    /// client-go's work queues): 10 means at least 10 s.
    pub queue_wait_p50_s: Option<f64>,
    /// See `queue_wait_p50_s`.
    pub queue_wait_p99_s: Option<f64>,
    /// Median and 99th percentile of `workqueue_work_duration_seconds` (one sync), capped
    /// the same way.
    pub work_p50_s: Option<f64>,
    /// See `work_p50_s`.
    pub work_p99_s: Option<f64>,
}

/// client-go's traces of a FIFO pop whose handlers were slow, read from a klog log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SlowHandlerTraces {
    /// Traces with `Reason:slow event handlers blocking the queue`.
    pub count: u64,
    /// The largest `Depth:` among them.
    pub depth_max: u64,
}

impl SlowHandlerTraces {
    /// Reads them from the log text.
    pub fn from_log(log: &str) -> Self {
        let mut traces = SlowHandlerTraces::default();
        for line in log.lines().filter(|l| l.contains("slow event handlers blocking the queue")) {
            traces.count += 1;
            let depth = line
                .split("Depth:")
                .nth(1)
                .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|d| d.parse::<u64>().ok())
                .unwrap_or(0);
            traces.depth_max = traces.depth_max.max(depth);
        }
        traces
    }
}

/// Requests of one client that got one code, from the audit log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClientCount {
    /// The client.
    pub client: String,
    /// Verb.
    pub verb: String,
    /// Resource (`/subresource`).
    pub resource: String,
    /// How many.
    pub count: u64,
}

/// What the `kcm` scenario measured.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct KcmReport {
    /// Always `"kcm"`.
    pub scenario: String,
    /// Where and when.
    pub environment: Environment,
    /// The load average when the run ended.
    pub load_average_at_end: Option<[f64; 3]>,
    /// The parameters.
    pub params: KcmParams,
    /// Seconds from the controller manager's start until every StatefulSet pod and one daemon
    /// pod per node ran; `None` if not within the time limit.
    pub all_running_s: Option<f64>,
    /// StatefulSet pods Running at the end.
    pub set_pods_running: u64,
    /// Nodes with a Running daemon pod at the end.
    pub nodes_with_running_daemon: u64,
    /// The controller manager's exit status if it exited by itself (a crash).
    pub kcm_exit: Option<String>,
    /// Every 409 the server answered (`apiserver_request_total{code="409"}`), by verb and
    /// resource (`POST pods`, `PUT statefulsets/status`).
    pub conflicts_409: BTreeMap<String, u64>,
    /// 409s by client, verb and resource (audit log).
    pub conflicts_409_by_client: Vec<ClientCount>,
    /// Pods the StatefulSet controller created (201).
    pub set_pods_created: u64,
    /// Pods the DaemonSet controller created (201).
    pub daemon_pods_created: u64,
    /// Pods the DaemonSet controller deleted.
    pub daemon_pods_deleted: u64,
    /// Daemon pods beyond one per node ever created (distinct daemon pods seen minus nodes).
    pub duplicate_daemon_pods: u64,
    /// Largest number of daemon pods beyond one per node at one time.
    pub extra_daemon_pods_peak: u64,
    /// Largest `informer_queued_items{resource="pods"}` sampled: the pod informer's backlog.
    pub kcm_informer_queued_pods_max: u64,
    /// client-go's "slow event handlers blocking the queue" traces in the controller manager's
    /// log (the field report's `DeltaFIFO Pop Process` trace; `RealFIFO PopBatch Process` in
    /// 1.37): how many, and the largest queue depth one reports.
    pub kcm_slow_handler_traces: SlowHandlerTraces,
    /// Staleness of the controller manager's pod cache, seconds: median and largest sample.
    pub kcm_pod_cache_staleness_p50_s: f64,
    /// See `kcm_pod_cache_staleness_p50_s`.
    pub kcm_pod_cache_staleness_max_s: f64,
    /// Median and 99th percentile of `informer_processing_latency_seconds{resource="pods"}`.
    pub kcm_pod_informer_processing_p50_s: Option<f64>,
    /// See `kcm_pod_informer_processing_p50_s`.
    pub kcm_pod_informer_processing_p99_s: Option<f64>,
    /// The StatefulSet and DaemonSet work queues.
    pub queues: Vec<QueueFigures>,
    /// Syncs skipped because the cache had not caught up with the controller's own writes
    /// (client-go 1.36+ `StaleControllerConsistency*`), by metric name.
    pub stale_sync_skips: BTreeMap<String, u64>,
    /// The controller manager's peak resident set (`VmHWM`), bytes.
    pub kcm_rss_peak_bytes: u64,
    /// Its CPU time, seconds.
    pub kcm_cpu_s: f64,
    /// CPU time of this process (test API server, kubelet, observer), seconds.
    pub server_cpu_s: f64,
    /// Requests the server answered, by `VERB resource` and code.
    pub requests: BTreeMap<String, u64>,
    /// Requests by client, verb, resource and code (audit log).
    pub client_requests: ClientRequests,
}

/// What [`KcmReport::build`] is made from.
pub struct Inputs<'a> {
    /// Where and when.
    pub environment: Environment,
    /// Parameters.
    pub params: KcmParams,
    /// Load average at the end.
    pub load_at_end: Option<[f64; 3]>,
    /// Time to all Running.
    pub all_running_s: Option<f64>,
    /// The observer's last counts.
    pub final_counts: Counts,
    /// Every sample.
    pub samples: &'a Samples,
    /// The controller manager's last scrape.
    pub kcm_metrics: &'a [Metric],
    /// The server's last scrape.
    pub server_metrics: &'a [Metric],
    /// The audit log's counts.
    pub clients: ClientRequests,
    /// The controller manager's last `/proc` figures.
    pub kcm_proc: ProcStats,
    /// This process's CPU time during the run, milliseconds.
    pub sim_cpu_ms: u64,
    /// The controller manager's exit status, if it exited by itself.
    pub kcm_exit: Option<String>,
    /// Its log's slow-handler traces.
    pub slow_handler_traces: SlowHandlerTraces,
}

/// The 409 answers of `clients` (the audit log's counts), by client, verb and resource.
pub fn conflicts_by_client(clients: &ClientRequests) -> Vec<ClientCount> {
    clients
        .counts
        .iter()
        .filter(|(k, _)| k.code == 409)
        .map(|(k, n)| ClientCount {
            client: k.client.clone(),
            verb: k.verb.clone(),
            resource: k.resource.clone(),
            count: *n,
        })
        .collect()
}

/// The figures of the controller manager's StatefulSet and DaemonSet work queues: largest
/// sampled depths from `samples`, counts and latencies from its last scrape `kcm_metrics`.
pub fn queue_figures(samples: &Samples, kcm_metrics: &[Metric]) -> Vec<QueueFigures> {
    let max = |f: fn(&Sample) -> u64| samples.samples.iter().map(f).max().unwrap_or(0);
    QUEUES
        .iter()
        .map(|name| {
            let want = [("name", *name)];
            let q = |metric: &str, quantile: f64| {
                prom::histogram_quantile(kcm_metrics, metric, &want, quantile)
            };
            QueueFigures {
                name: (*name).to_owned(),
                depth_max: if *name == "statefulset" {
                    max(|s| s.statefulset_queue_depth)
                } else {
                    max(|s| s.daemonset_queue_depth)
                },
                adds: prom::sum(kcm_metrics, "workqueue_adds_total", &want) as u64,
                retries: prom::sum(kcm_metrics, "workqueue_retries_total", &want) as u64,
                queue_wait_p50_s: q("workqueue_queue_duration_seconds", 0.5),
                queue_wait_p99_s: q("workqueue_queue_duration_seconds", 0.99),
                work_p50_s: q("workqueue_work_duration_seconds", 0.5),
                work_p99_s: q("workqueue_work_duration_seconds", 0.99),
            }
        })
        .collect()
}

/// Syncs the controller manager skipped because its cache lacked its own writes (client-go
/// 1.36+ `*_stale_sync_skips_total`), by metric name, from its last scrape.
pub fn stale_sync_skips(kcm_metrics: &[Metric]) -> BTreeMap<String, u64> {
    kcm_metrics.iter().filter(|m| m.name.ends_with("_stale_sync_skips_total")).fold(
        BTreeMap::new(),
        |mut acc, m| {
            *acc.entry(m.name.clone()).or_insert(0) += m.value as u64;
            acc
        },
    )
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

impl KcmReport {
    /// Draws the figures.
    pub fn build(i: Inputs<'_>) -> Self {
        let samples = &i.samples.samples;
        let max = |f: fn(&Sample) -> u64| samples.iter().map(f).max().unwrap_or(0);
        let totals = request_totals(i.server_metrics);
        let (conflicts, requests) = (totals.conflicts_409, totals.by_code);
        let conflicts_by_client = conflicts_by_client(&i.clients);
        let queues = queue_figures(i.samples, i.kcm_metrics);
        let stale_sync_skips = stale_sync_skips(i.kcm_metrics);
        let staleness = i.samples.pod_cache_staleness_s();
        let pods = [("resource", "pods")];
        let nodes = i.params.nodes as u64;
        KcmReport {
            scenario: "kcm".to_owned(),
            environment: i.environment,
            load_average_at_end: i.load_at_end,
            params: i.params,
            all_running_s: i.all_running_s,
            set_pods_running: i.final_counts.set_pods_running,
            nodes_with_running_daemon: i.final_counts.nodes_with_running_daemon,
            kcm_exit: i.kcm_exit,
            conflicts_409: conflicts,
            conflicts_409_by_client: conflicts_by_client,
            set_pods_created: i.clients.count(
                Some("statefulset-controller"),
                Some("create"),
                Some("pods"),
                Some(201),
            ),
            daemon_pods_created: i.clients.count(
                Some("daemon-set-controller"),
                Some("create"),
                Some("pods"),
                Some(201),
            ),
            daemon_pods_deleted: i.clients.count(
                Some("daemon-set-controller"),
                Some("delete"),
                Some("pods"),
                Some(200),
            ),
            duplicate_daemon_pods: i.final_counts.daemon_pods_ever.saturating_sub(nodes),
            extra_daemon_pods_peak: max(|s| s.extra_daemon_pods),
            kcm_informer_queued_pods_max: max(|s| s.kcm_informer_queued_pods),
            kcm_slow_handler_traces: i.slow_handler_traces,
            kcm_pod_cache_staleness_p50_s: median(staleness.clone()),
            kcm_pod_cache_staleness_max_s: staleness.iter().copied().fold(0.0, f64::max),
            kcm_pod_informer_processing_p50_s: prom::histogram_quantile(
                i.kcm_metrics,
                "informer_processing_latency_seconds",
                &pods,
                0.5,
            ),
            kcm_pod_informer_processing_p99_s: prom::histogram_quantile(
                i.kcm_metrics,
                "informer_processing_latency_seconds",
                &pods,
                0.99,
            ),
            queues,
            stale_sync_skips,
            kcm_rss_peak_bytes: i.kcm_proc.rss_peak_bytes,
            kcm_cpu_s: i.kcm_proc.cpu_ms as f64 / 1e3,
            server_cpu_s: i.sim_cpu_ms as f64 / 1e3,
            requests,
            client_requests: i.clients,
        }
    }
}

fn opt_s(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |s| format!("{s:.3}s"))
}

/// The report as text for the terminal.
pub fn render(r: &KcmReport) -> String {
    let p = &r.params;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kcm: real kube-controller-manager against the test API server, {} sets x {} replicas ({}), DaemonSet on {} nodes, kcm speaks {}",
        p.sets, p.replicas, p.policy, p.nodes, p.kcm_content_type
    );
    let _ = writeln!(
        out,
        "  all Running: {}   set pods Running {}/{}, nodes with a Running daemon pod {}/{}{}",
        r.all_running_s
            .map_or_else(|| "not within the time limit".to_owned(), |s| format!("{s:.1} s")),
        r.set_pods_running,
        p.sets * p.replicas,
        r.nodes_with_running_daemon,
        p.nodes,
        r.kcm_exit.as_ref().map_or_else(String::new, |e| format!("   kcm EXITED: {e}"))
    );
    let total_409: u64 = r.conflicts_409.values().sum();
    let _ =
        writeln!(out, "  409 Conflict/AlreadyExists (server): {total_409} {:?}", r.conflicts_409);
    for c in &r.conflicts_409_by_client {
        let _ = writeln!(out, "    {} {} {}: {}", c.client, c.verb, c.resource, c.count);
    }
    let _ = writeln!(
        out,
        "  pods created: {} by the StatefulSet controller, {} by the DaemonSet controller ({} deleted); duplicate daemon pods {} (peak {} at once)",
        r.set_pods_created,
        r.daemon_pods_created,
        r.daemon_pods_deleted,
        r.duplicate_daemon_pods,
        r.extra_daemon_pods_peak
    );
    let _ = writeln!(
        out,
        "  kcm pod informer: FIFO backlog max {} (slow-handler traces {}, depth max {}), cache staleness p50 {:.1} s max {:.1} s, processing p50 {} p99 {}",
        r.kcm_informer_queued_pods_max,
        r.kcm_slow_handler_traces.count,
        r.kcm_slow_handler_traces.depth_max,
        r.kcm_pod_cache_staleness_p50_s,
        r.kcm_pod_cache_staleness_max_s,
        opt_s(r.kcm_pod_informer_processing_p50_s),
        opt_s(r.kcm_pod_informer_processing_p99_s)
    );
    for q in &r.queues {
        let _ = writeln!(
            out,
            "  kcm queue {}: depth max {}, adds {}, retries {}, wait p50 {} p99 {}, sync p50 {} p99 {}",
            q.name,
            q.depth_max,
            q.adds,
            q.retries,
            opt_s(q.queue_wait_p50_s),
            opt_s(q.queue_wait_p99_s),
            opt_s(q.work_p50_s),
            opt_s(q.work_p99_s)
        );
    }
    let _ = writeln!(out, "  stale-sync skips (read-your-writes): {:?}", r.stale_sync_skips);
    let _ = writeln!(
        out,
        "  kcm peak RSS {:.0} MiB, CPU {:.1} s; server+kubelet+observer CPU {:.1} s; load {:?} -> {:?}",
        r.kcm_rss_peak_bytes as f64 / 1048576.0,
        r.kcm_cpu_s,
        r.server_cpu_s,
        r.environment.load_average,
        r.load_average_at_end
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, observed: u64, store: u64) -> Sample {
        Sample { t, observed_pod_rv: observed, kcm_pod_store_rv: store, ..Sample::default() }
    }

    #[test]
    fn slow_handler_traces_are_counted_with_their_largest_depth() {
        let log = "I1201 trace.go:236] Trace[9]: \"RealFIFO PopBatch Process\" ID:default/web-2-820,Depth:342,Reason:slow event handlers blocking the queue,BatchSize:5\n\
                   I1201 other line Depth:999999\n\
                   I1201 Trace[3]: \"DeltaFIFO Pop Process\" ID:kube-system/kube-proxy-fv428,Depth:229809,Reason:slow event handlers blocking the queue (total time: 321ms)\n";
        let traces = SlowHandlerTraces::from_log(log);
        assert_eq!(traces, SlowHandlerTraces { count: 2, depth_max: 229_809 });
    }

    #[test]
    fn cache_staleness_counts_from_the_first_version_the_cache_lacks() {
        let samples = Samples {
            samples: vec![
                sample(1.0, 10, 0),
                sample(2.0, 20, 10),
                sample(3.0, 30, 15),
                sample(4.0, 30, 30),
            ],
        };
        // At t=2 the cache has 10 while 20 was seen at t=2: 0 s; at t=3 it has 15 while 20 was
        // seen at t=2: 1 s; at t=4 it has everything.
        assert_eq!(samples.pod_cache_staleness_s(), vec![0.0, 1.0, 0.0]);
    }
}
