//! A real control plane for integration tests: `scripts/real-cluster` builds etcd and
//! kube-apiserver from their Go modules (cached after the first build) and starts them on
//! loopback in a state directory of the test's own.
//!
//! A test that cannot get a cluster because Go is not installed prints `SKIPPED: <reason>` on
//! stderr and passes, unless `SNAPINFORMER_REQUIRE_REAL_CLUSTER=1` (CI), in which case it
//! fails. Any other failure (build, start) fails the test.
//!
//! A [`RealCluster`] is stopped when dropped. Clusters shared by the tests of one binary live
//! in statics, which are never dropped: the script's watchdog (`start --owner-pid`) stops them
//! when the test process exits.
#![allow(dead_code, unreachable_pub)]

use std::{
    collections::BTreeMap,
    fmt,
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Arc, OnceLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Container, Namespace, Pod, PodSpec, ServiceAccount};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use serde::de::DeserializeOwned;
use snapinformer_core::Informer;
use snapinformer_kube::{KubeInformer, ListWatch, Phase, ReflectorStatus};

/// The environment variable that turns a skip into a failure.
pub const REQUIRE_ENV: &str = "SNAPINFORMER_REQUIRE_REAL_CLUSTER";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/real-cluster")
}

fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1")
}

/// Why the real cluster cannot run here, if it cannot: Go is needed to build it.
fn unavailable() -> Option<String> {
    match Command::new("go").arg("version").stdout(Stdio::null()).stderr(Stdio::null()).status() {
        Ok(status) if status.success() => None,
        Ok(status) => Some(format!(
            "`go version` failed ({status}); Go is needed to build the real control plane"
        )),
        Err(e) => Some(format!(
            "Go is not installed (`go version`: {e}); it is needed to build the real control plane"
        )),
    }
}

/// Builds the binaries once per test process (the script skips the work when they are cached).
/// Its progress goes to the terminal: a first build takes minutes.
fn build() {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let result = BUILT.get_or_init(|| {
        let status = Command::new("bash")
            .arg(script())
            .arg("build")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .status()
            .map_err(|e| format!("running scripts/real-cluster build: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("scripts/real-cluster build failed ({status}); its output is above"))
        }
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// A state directory under the target directory, named after the test binary, the cluster and
/// this process. Directories of earlier runs whose process is gone are stopped (their
/// watchdog may still be at it) and removed first (only ones this harness named).
fn state_dir(name: &str) -> PathBuf {
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "test".to_owned());
    let binary = binary.split('-').next().unwrap_or("test").to_owned();
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("real-cluster");
    std::fs::create_dir_all(&root).expect("create the real-cluster state root");
    if let Ok(entries) = std::fs::read_dir(&root) {
        for entry in entries.flatten() {
            let file_name = entry.file_name().to_string_lossy().into_owned();
            let Some(pid) = file_name.rsplit('-').next().and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            let stale = pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists();
            if stale && entry.path().join("cluster.env").exists() {
                let stopped = Command::new("bash")
                    .arg(script())
                    .arg("stop")
                    .arg("--dir")
                    .arg(entry.path())
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                if stopped.is_ok_and(|s| s.success()) {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
        }
    }
    root.join(format!("{binary}-{name}-{}", std::process::id()))
}

/// A running cluster: etcd and kube-apiserver on loopback, started by `scripts/real-cluster`.
pub struct RealCluster {
    name: String,
    dir: PathBuf,
    env: BTreeMap<String, String>,
}

impl fmt::Debug for RealCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RealCluster").field("name", &self.name).field("dir", &self.dir).finish()
    }
}

impl RealCluster {
    /// Builds (if needed) and starts a cluster with extra `start` options (for example
    /// `--no-watch-cache`). `None`, after printing `SKIPPED: <reason>`, when Go is not
    /// installed and the real cluster is not required.
    pub fn start(name: &str, options: &[&str]) -> Option<RealCluster> {
        if let Some(reason) = unavailable() {
            if required() {
                panic!("the real cluster is required ({REQUIRE_ENV}=1) but cannot run: {reason}");
            }
            // Straight to stderr: libtest captures `eprintln!` of passing tests.
            let _ = writeln!(std::io::stderr(), "SKIPPED: {reason}");
            return None;
        }
        build();
        let dir = state_dir(name);
        let pid = std::process::id().to_string();
        let output = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg("--dir")
            .arg(&dir)
            .args(["--owner-pid", &pid])
            .args(options)
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/real-cluster start");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "scripts/real-cluster start {options:?} failed ({}):\n{stderr}",
            output.status
        );
        let kubeconfig = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        assert_eq!(Path::new(&kubeconfig), dir.join("kubeconfig"), "start prints the kubeconfig");
        let mut cluster = RealCluster { name: name.to_owned(), dir, env: BTreeMap::new() };
        cluster.env = cluster.read_env();
        eprintln!(
            "real cluster {name} {options:?}: {} (state {})",
            cluster.apiserver_url(),
            cluster.dir.display()
        );
        Some(cluster)
    }

    /// The variables `scripts/real-cluster env` exports (`REAL_CLUSTER_APISERVER_URL`, ...).
    fn read_env(&self) -> BTreeMap<String, String> {
        let out = self.run(&["env"]);
        out.lines()
            .filter_map(|line| line.strip_prefix("export "))
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_owned(), unquote(v)))
            .collect()
    }

    /// Runs a script command on this cluster's state directory; its stdout. Panics with the
    /// command's stderr if it fails.
    pub fn run(&self, args: &[&str]) -> String {
        let output = Command::new("bash")
            .arg(script())
            .args(args)
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/real-cluster");
        assert!(
            output.status.success(),
            "scripts/real-cluster {args:?} failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// `https://127.0.0.1:<port>`.
    pub fn apiserver_url(&self) -> &str {
        &self.env["REAL_CLUSTER_APISERVER_URL"]
    }

    /// The API server's address.
    pub fn apiserver_addr(&self) -> std::net::SocketAddr {
        let url = self.apiserver_url();
        url.trim_start_matches("https://").parse().expect("the API server URL is host:port")
    }

    /// The admin kubeconfig (system:masters, bearer token).
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    /// The kube configuration of the admin kubeconfig, as `kube::Config::from_kubeconfig`
    /// builds it (kube's defaults, including its retries of 429/503/504).
    pub async fn config(&self) -> kube::Config {
        let kubeconfig = Kubeconfig::read_from(self.kubeconfig()).expect("read the kubeconfig");
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("a kube config from the kubeconfig")
    }

    /// An admin client with kube's defaults.
    pub async fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config().await).expect("a kube client")
    }

    /// Stops kube-apiserver and starts it again on the same etcd and port; returns once it is
    /// ready.
    pub fn restart_apiserver(&self) {
        self.run(&["restart-apiserver"]);
    }

    /// Compacts etcd at its current revision; returns that revision.
    pub fn compact(&self) -> u64 {
        let out = self.run(&["compact"]);
        out.trim().parse().unwrap_or_else(|_| panic!("compact printed {out:?}"))
    }
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        let status = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if status.as_ref().is_ok_and(|s| s.success()) {
            let _ = std::fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("stopping the real cluster in {} failed: {status:?}", self.dir.display());
        }
    }
}

/// Undoes bash's `printf %q` for the plain values `env` prints (backslash escapes only).
fn unquote(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else if c != '\'' {
            out.push(c);
        }
    }
    out
}

/// A cluster shared by the tests of one binary, started on first use; `None` when skipped.
pub fn shared(
    cell: &'static OnceLock<Option<Arc<RealCluster>>>,
    name: &str,
    options: &[&str],
) -> Option<Arc<RealCluster>> {
    cell.get_or_init(|| RealCluster::start(name, options).map(Arc::new)).clone()
}

// ----- namespaces and pods ---------------------------------------------------------------------

/// A namespace name unique to this process and call.
pub fn unique_namespace(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{prefix}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Creates a namespace and its `default` ServiceAccount (which the ServiceAccount admission
/// plugin requires of every pod; in a full cluster the controller manager's serviceaccount
/// controller creates it, and these clusters run none).
pub async fn create_namespace(client: &kube::Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
        ..Namespace::default()
    };
    namespaces.create(&PostParams::default(), &ns).await.expect("create the namespace");
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    let sa = ServiceAccount {
        metadata: ObjectMeta { name: Some("default".to_owned()), ..ObjectMeta::default() },
        ..ServiceAccount::default()
    };
    accounts.create(&PostParams::default(), &sa).await.expect("create the default ServiceAccount");
}

/// A pod that never runs (no node, no scheduler): deleting it removes it at once.
pub fn pod(name: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some([("app".to_owned(), "real-cluster-test".to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            automount_service_account_token: Some(false),
            containers: vec![Container {
                name: "c".to_owned(),
                image: Some("registry.k8s.io/pause:3.10".to_owned()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        ..Pod::default()
    }
}

/// `prefix-00000`, `prefix-00001`, ...
pub fn names(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}-{i:05}")).collect()
}

/// How many writes are in flight at once.
const PARALLEL_WRITES: usize = 32;

/// Creates the pods, `PARALLEL_WRITES` at a time.
pub async fn create_pods(api: &Api<Pod>, names: &[String]) {
    futures::stream::iter(names)
        .map(|name| async move {
            api.create(&PostParams::default(), &pod(name))
                .await
                .map_err(|e| format!("create pod {name}: {e}"))
        })
        .buffer_unordered(PARALLEL_WRITES)
        .try_collect::<Vec<_>>()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Sets label `step=<value>` on each pod (an update: a new resourceVersion).
pub async fn relabel_pods(api: &Api<Pod>, names: &[String], value: &str) {
    let patch = Patch::Merge(serde_json::json!({"metadata": {"labels": {"step": value}}}));
    let patch = &patch;
    futures::stream::iter(names)
        .map(|name| async move {
            api.patch(name, &PatchParams::default(), patch)
                .await
                .map_err(|e| format!("patch pod {name}: {e}"))
        })
        .buffer_unordered(PARALLEL_WRITES)
        .try_collect::<Vec<_>>()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Deletes the pods (unscheduled pods go at once, without a grace period).
pub async fn delete_pods(api: &Api<Pod>, names: &[String]) {
    futures::stream::iter(names)
        .map(|name| async move {
            api.delete(name, &DeleteParams::default())
                .await
                .map_err(|e| format!("delete pod {name}: {e}"))
        })
        .buffer_unordered(PARALLEL_WRITES)
        .try_collect::<Vec<_>>()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

// ----- comparing the informer with the server --------------------------------------------------

/// Name -> (UID, resourceVersion) of one namespace's objects.
pub type State = BTreeMap<String, (String, String)>;

/// The names, UIDs and resource versions of `objects` in `namespace`.
pub fn state_of<'a, K: Resource + 'a>(
    objects: impl IntoIterator<Item = &'a Arc<K>>,
    namespace: &str,
) -> State {
    objects
        .into_iter()
        .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
        .map(|o| {
            let m = o.meta();
            (
                m.name.clone().unwrap_or_default(),
                (m.uid.clone().unwrap_or_default(), m.resource_version.clone().unwrap_or_default()),
            )
        })
        .collect()
}

/// A readable difference between two states (empty when equal).
pub fn diff(expected: &State, actual: &State) -> String {
    let mut out = Vec::new();
    for (name, want) in expected {
        match actual.get(name) {
            None => out.push(format!("missing {name} {want:?}")),
            Some(have) if have != want => out.push(format!("{name}: want {want:?}, have {have:?}")),
            _ => {}
        }
    }
    for (name, have) in actual {
        if !expected.contains_key(name) {
            out.push(format!("unexpected {name} {have:?}"));
        }
    }
    let shown = out.len().min(20);
    let mut text = out[..shown].join("\n  ");
    if out.len() > shown {
        text.push_str(&format!("\n  ... and {} more", out.len() - shown));
    }
    text
}

/// How a test brings the informer up to a list's version before comparing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncBy {
    /// `wait_for(list's resourceVersion)`. A quiet informer only gets there through a
    /// bookmark, so its watches must be short (bookmarks come two seconds before a watch's
    /// timeout, and every minute): needs the watch cache (kube-apiserver sends no bookmarks to
    /// watches served from etcd).
    Bookmark,
    /// After the list, update the pod named [`SENTINEL`] (which must exist) and
    /// `wait_for(its new resourceVersion)`: the snapshot must then equal the list plus that
    /// update. Works without bookmarks (`--watch-cache=false`, the kube-rs watcher adapter).
    Sentinel,
}

/// The pod [`SyncBy::Sentinel`] updates.
pub const SENTINEL: &str = "sentinel";

/// How long a wait for a version may take: a bookmark comes within two watch timeouts.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(45);

/// Lists `namespace`'s objects from the server (a consistent list), brings the informer up to the
/// list's version (see [`SyncBy`]), and asserts that its snapshot holds exactly the listed objects
/// with their UIDs and resource versions. Returns the state compared.
pub async fn assert_matches_server<K>(
    what: &str,
    informer: &Informer<K>,
    api: &Api<K>,
    namespace: &str,
    sync: SyncBy,
) -> State
where
    K: Resource + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static,
{
    let list = api.list(&ListParams::default()).await.expect("list from the server");
    let list_rv = list.metadata.resource_version.clone().expect("a list has a resourceVersion");
    let items: Vec<Arc<K>> = list.items.into_iter().map(Arc::new).collect();
    let mut expected = state_of(&items, namespace);
    let target = match sync {
        SyncBy::Bookmark => list_rv.clone(),
        SyncBy::Sentinel => {
            let patch = Patch::Merge(serde_json::json!({
                "metadata": {"annotations": {"sync": list_rv.clone()}}
            }));
            let touched = api
                .patch(SENTINEL, &PatchParams::default(), &patch)
                .await
                .expect("update the sentinel");
            let rv = touched.resource_version().expect("the sentinel has a resourceVersion");
            expected.insert(SENTINEL.to_owned(), (touched.uid().unwrap_or_default(), rv.clone()));
            rv
        }
    };
    let snapshot = match informer.wait_for(&target, SYNC_TIMEOUT).await {
        Ok(snapshot) => snapshot,
        Err(e) => panic!(
            "{what}: the informer did not reach resourceVersion {target} (list {list_rv}, {sync:?}): {e}"
        ),
    };
    let actual = state_of(snapshot.iter(), namespace);
    let d = diff(&expected, &actual);
    assert!(
        d.is_empty(),
        "{what}: the snapshot at {:?} differs from the server's list at {list_rv}:\n  {d}",
        snapshot.resource_version()
    );
    expected
}

/// Waits until the handler recording into `model` (`common::recorder`) holds exactly `state`'s
/// pods at their resource versions (handlers are fed after each publication, on their own
/// threads, so they may trail the snapshot a little), and checks that it saw no ordering
/// violation.
pub async fn assert_handler_converges(
    what: &str,
    model: &crate::common::SharedModel,
    namespace: &str,
    state: &State,
) {
    let expected: BTreeMap<String, u64> = state
        .iter()
        .map(|(name, (_, rv))| (format!("{namespace}/{name}"), rv.parse().unwrap_or(0)))
        .collect();
    let deadline = tokio::time::Instant::now() + SYNC_TIMEOUT;
    loop {
        let (view, violations) = {
            let m = model.lock().unwrap_or_else(|e| e.into_inner());
            (m.objects.clone(), m.violations.clone())
        };
        assert!(violations.is_empty(), "{what}: handler violations: {violations:?}");
        if view == expected {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            let to_state = |m: &BTreeMap<String, u64>| -> State {
                m.iter().map(|(k, rv)| (k.clone(), (String::new(), rv.to_string()))).collect()
            };
            panic!(
                "{what}: the handler's view differs from the server's list after {SYNC_TIMEOUT:?}:\n  {}",
                diff(&to_state(&expected), &to_state(&view))
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The deletes a recording handler (`common::recorder`) saw, and how many were tombstones.
pub fn deletes(model: &crate::common::SharedModel) -> (u64, u64) {
    let m = model.lock().unwrap_or_else(|e| e.into_inner());
    (m.deletes, m.tombstones)
}

/// The reflector's status once it is watching again. The reflector counts a list just after
/// queueing it (and records its phase after each step), so the informer can have synced, or
/// published a relist, a moment before the status says so; a reflector that is watching has
/// finished its last list.
pub async fn settled<K, L>(informer: &KubeInformer<K, L>) -> ReflectorStatus
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListWatch<K>,
{
    let deadline = tokio::time::Instant::now() + SYNC_TIMEOUT;
    loop {
        let status = informer.reflector_status();
        if status.phase == Phase::Watching {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the reflector is not watching after {SYNC_TIMEOUT:?}: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
