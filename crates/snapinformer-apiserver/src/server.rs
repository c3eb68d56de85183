//! Starting, driving and stopping the server from a test or the binary.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, StatefulSet};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::accounting::RequestMetrics;
use crate::app_state::AppState;
use crate::audit::AuditLog;
use crate::error::ServerError;
use crate::faults::{FaultConfig, Faults};
use crate::kubelet::{self, KubeletConfig};
use crate::objects::prepare_create;
use crate::resource::{FieldValidation, ResourceKind};
use crate::store::{ObjKey, Store};
use crate::{handlers, router};

/// How to start the server.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to bind; port 0 picks a free one. Loopback by default.
    pub listen: SocketAddr,
    /// Number of events kept for watches, resumed lists and continue tokens (at least 1).
    pub history_size: usize,
    /// How often an idle watch that allows bookmarks gets a BOOKMARK event.
    pub bookmark_interval: Duration,
    /// Watch duration when the request gives no `timeoutSeconds`.
    pub default_watch_timeout: Duration,
    /// Faults active from the start.
    pub faults: FaultConfig,
    /// Run the simulated kubelet with these settings.
    pub kubelet: Option<KubeletConfig>,
    /// Keep a log of every request (`METHOD URI STATUS`), see [`ServerHandle::request_log`].
    pub record_requests: bool,
    /// Where to write the kubeconfig; `None` writes one into the temp directory that is
    /// removed again on shutdown.
    pub kubeconfig_path: Option<PathBuf>,
    /// Largest request body accepted, in bytes (default [`DEFAULT_MAX_REQUEST_BODY_BYTES`],
    /// the real server's 3 MiB); a larger body is answered 413 `RequestEntityTooLarge` without
    /// being read further.
    pub max_request_body_bytes: usize,
    /// Write an audit log (`audit.k8s.io/v1` events, level `Metadata`, one JSON object per
    /// line, as kube-apiserver's `--audit-log-path`) of every resource request to this file.
    pub audit_log_path: Option<PathBuf>,
}

/// The real kube-apiserver's limit on request bodies: 3 MiB.
pub const DEFAULT_MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            history_size: 100_000,
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
            faults: FaultConfig::default(),
            kubelet: None,
            record_requests: false,
            kubeconfig_path: None,
            max_request_body_bytes: DEFAULT_MAX_REQUEST_BODY_BYTES,
            audit_log_path: None,
        }
    }
}

/// A Kubernetes object type the server stores, with its [`ResourceKind`].
pub trait ServedResource:
    k8s_openapi::Resource + k8s_openapi::Metadata + Serialize + DeserializeOwned
{
    /// The kind this type is stored as.
    const RESOURCE_KIND: ResourceKind;
}

impl ServedResource for Pod {
    const RESOURCE_KIND: ResourceKind = ResourceKind::Pod;
}
impl ServedResource for Node {
    const RESOURCE_KIND: ResourceKind = ResourceKind::Node;
}
impl ServedResource for Namespace {
    const RESOURCE_KIND: ResourceKind = ResourceKind::Namespace;
}
impl ServedResource for StatefulSet {
    const RESOURCE_KIND: ResourceKind = ResourceKind::StatefulSet;
}
impl ServedResource for DaemonSet {
    const RESOURCE_KIND: ResourceKind = ResourceKind::DaemonSet;
}

/// Entry point: `TestApiServer::start(Config::default()).await`.
#[derive(Debug, Clone, Copy)]
pub struct TestApiServer;

impl TestApiServer {
    /// Binds, writes the kubeconfig and serves in the background until
    /// [`ServerHandle::shutdown`] (or drop).
    ///
    /// The server has no authentication and serves (and lets anyone change) everything: a
    /// `listen` address that is not loopback is logged as a warning.
    pub async fn start(config: Config) -> Result<ServerHandle, ServerError> {
        if !config.listen.ip().is_loopback() {
            tracing::warn!("{}", non_loopback_warning(config.listen));
        }
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServerError::Bind { addr: config.listen.to_string(), source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ServerError::Bind { addr: config.listen.to_string(), source })?;
        let store = Arc::new(Store::new(config.history_size));
        let audit = match &config.audit_log_path {
            Some(path) => Some(Mutex::new(Some(AuditLog::create(path)?))),
            None => None,
        };
        let faults = Faults::new(config.faults.clone());
        let state = Arc::new(AppState {
            store: store.clone(),
            faults: faults.clone(),
            addr,
            bookmark_interval: config.bookmark_interval,
            default_watch_timeout: config.default_watch_timeout,
            max_request_body_bytes: config.max_request_body_bytes,
            request_log: config.record_requests.then(|| Mutex::new(Vec::new())),
            metrics: RequestMetrics::default(),
            audit,
        });
        let (stop_tx, stop_rx) = watch::channel(false);
        let (serve_stop, server) = serve(listener, state.clone(), config.max_request_body_bytes);
        let kubelet = config
            .kubelet
            .clone()
            .map(|kc| tokio::spawn(kubelet::run(store.clone(), kc, stop_rx.clone())));
        let (kubeconfig_path, remove_kubeconfig) = match &config.kubeconfig_path {
            Some(path) => (path.clone(), false),
            None => (
                std::env::temp_dir().join(format!(
                    "snapinformer-apiserver-{}-{}.kubeconfig",
                    std::process::id(),
                    addr.port()
                )),
                true,
            ),
        };
        let handle = ServerHandle {
            addr,
            state,
            stop_tx,
            serve_stop,
            max_request_body_bytes: config.max_request_body_bytes,
            server: Some(server),
            kubelet,
            kubeconfig_path,
            remove_kubeconfig,
        };
        handle.write_kubeconfig(&handle.kubeconfig_path)?;
        Ok(handle)
    }
}

/// Serves `listener` until the returned switch is set (graceful shutdown: the listener is
/// closed at once, each connection after its response in progress).
fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    max_body: usize,
) -> (watch::Sender<bool>, JoinHandle<()>) {
    let (stop_tx, mut stop_rx) = watch::channel(false);
    // A body over the limit is refused by the extractor; `router::handle` answers 413.
    let app = router(state, max_body);
    let server = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stop_rx.wait_for(|stop| *stop).await;
        };
        // Watch events are small writes that must leave at once: without TCP_NODELAY, Nagle's
        // algorithm meets the client's delayed ACK and holds the first event of every watch
        // for about 40 ms.
        use axum::serve::ListenerExt;
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY: {e}");
            }
        });
        if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(shutdown).await {
            tracing::warn!("server stopped with error: {e}");
        }
    });
    (stop_tx, server)
}

/// The server's router: every request goes to `router::handle`; a body over `max_body` bytes is
/// refused by the extractor and answered 413. Shared by [`TestApiServer::start`] and the
/// in-process fuzzer (`crate::fuzzing`).
pub(crate) fn router(state: Arc<AppState>, max_body: usize) -> axum::Router {
    axum::Router::new()
        .fallback(router::handle)
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .with_state(state)
}

/// The warning for a `listen` address that is not loopback.
fn non_loopback_warning(listen: SocketAddr) -> String {
    format!(
        "the test API server listens on {listen}, which is not a loopback address: it has no \
         authentication, and anyone who can reach this address can read, change and delete \
         every object it serves"
    )
}

/// A running server.
pub struct ServerHandle {
    addr: SocketAddr,
    state: Arc<AppState>,
    stop_tx: watch::Sender<bool>,
    /// Stops the current serving task (see [`ServerHandle::stop_serving`]).
    serve_stop: watch::Sender<bool>,
    max_request_body_bytes: usize,
    /// The serving task; `None` while the server is down.
    server: Option<JoinHandle<()>>,
    kubelet: Option<JoinHandle<()>>,
    kubeconfig_path: PathBuf,
    remove_kubeconfig: bool,
}

impl std::fmt::Debug for ServerHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerHandle").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl ServerHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The kubeconfig written at start.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// A kubeconfig (YAML) with one cluster, user and context `snapinformer`, namespace
    /// `default`, no credentials.
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: snapinformer\n  cluster:\n    server: {url}\ncontexts:\n- name: snapinformer\n  context:\n    cluster: snapinformer\n    user: snapinformer\n    namespace: default\ncurrent-context: snapinformer\nusers:\n- name: snapinformer\n  user: {{}}\npreferences: {{}}\n",
            url = self.url()
        )
    }

    /// Writes the kubeconfig to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), ServerError> {
        std::fs::write(path, self.kubeconfig_yaml())
            .map_err(|source| ServerError::Kubeconfig { path: path.to_owned(), source })
    }

    /// A `kube::Config` for this server (plain HTTP, namespace `default`).
    pub fn kube_config(&self) -> kube::Config {
        let url =
            self.url().parse().expect("an http URL built from a socket address is a valid URI");
        let mut config = kube::Config::new(url);
        config.default_namespace = "default".into();
        config.read_timeout = Some(Duration::from_secs(330));
        config
    }

    /// A `kube::Client` for this server.
    pub fn client(&self) -> Result<kube::Client, ServerError> {
        Ok(kube::Client::try_from(self.kube_config())?)
    }

    /// The run-time fault switches.
    pub fn faults(&self) -> &Faults {
        &self.state.faults
    }

    /// The current (latest) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.state.store.current_rv()
    }

    /// Every request so far as `METHOD URI STATUS` (empty unless `record_requests`).
    pub fn request_log(&self) -> Vec<String> {
        self.state
            .request_log
            .as_ref()
            .map(|log| log.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .unwrap_or_default()
    }

    /// Creates one object in process, with the same validation and defaults as a POST.
    pub fn create<T: ServedResource>(&self, object: &T) -> Result<T, ServerError> {
        let value = serde_json::to_value(object)?;
        let created = handlers::create_value(
            &self.state.store,
            T::RESOURCE_KIND,
            None,
            &value,
            FieldValidation::Ignore,
            false,
        )?;
        Ok(serde_json::from_slice(&created.body)?)
    }

    /// Creates many objects at once under one store lock: every object gets uid, timestamps,
    /// defaults and its own resourceVersion, and one ADDED event each. All or nothing; missing
    /// namespaces are created. Returns the resourceVersion after the last object.
    pub fn bulk_create<T: ServedResource>(
        &self,
        objects: impl IntoIterator<Item = T>,
    ) -> Result<u64, ServerError> {
        let kind = T::RESOURCE_KIND;
        let mut values = Vec::new();
        for object in objects {
            let mut value = serde_json::to_value(&object)?;
            if kind.namespaced() && value.pointer("/metadata/namespace").is_none_or(|v| v.is_null())
            {
                value["metadata"]["namespace"] = "default".into();
            }
            prepare_create(kind, &mut value);
            values.push(value);
        }
        Ok(self.state.store.bulk_create(kind, values)?)
    }

    /// Bulk-creates pods (see [`ServerHandle::bulk_create`]).
    pub fn bulk_create_pods(
        &self,
        pods: impl IntoIterator<Item = Pod>,
    ) -> Result<u64, ServerError> {
        self.bulk_create(pods)
    }

    /// Bulk-creates nodes (see [`ServerHandle::bulk_create`]).
    pub fn bulk_create_nodes(
        &self,
        nodes: impl IntoIterator<Item = Node>,
    ) -> Result<u64, ServerError> {
        self.bulk_create(nodes)
    }

    /// Reads one object in process.
    pub fn get<T: ServedResource>(&self, namespace: Option<&str>, name: &str) -> Option<T> {
        let key = ObjKey::new(
            if T::RESOURCE_KIND.namespaced() { namespace.unwrap_or("default") } else { "" },
            name,
        );
        let stored = self.state.store.get(T::RESOURCE_KIND, &key)?;
        serde_json::from_slice(&stored.json).ok()
    }

    /// Number of stored objects of a kind.
    pub fn count(&self, kind: ResourceKind) -> usize {
        self.state.store.snapshot(kind).0.len()
    }

    /// Simulates an API server restart onto an etcd whose history was compacted: every open
    /// watch stream ends, and a watch or continue token from any earlier version gets 410.
    /// Objects and the resourceVersion counter are kept.
    pub fn restart_with_compacted_history(&self) {
        self.state.store.compact();
    }

    /// Simulates the API server process going down, as during a restart: it stops listening
    /// (a new connection is refused), ends every open watch stream and closes every connection
    /// once its response in progress is done. Objects, the watch history and the
    /// resourceVersion counter are kept (etcd outlives the API server), and so is the
    /// simulated kubelet. [`start_serving`](Self::start_serving) brings it back on the same
    /// address. Waits at most five seconds for the connections to close.
    pub async fn stop_serving(&mut self) {
        self.serve_stop.send_replace(true);
        let Some(mut server) = self.server.take() else { return };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            // Repeated, so that a watch opened while the listener was closing ends too.
            self.state.store.end_watches();
            let wait = tokio::time::Instant::now() + Duration::from_millis(50);
            match tokio::time::timeout_at(wait.min(deadline), &mut server).await {
                Ok(_) => return,
                Err(_) if tokio::time::Instant::now() >= deadline => {
                    server.abort();
                    return;
                }
                Err(_) => {}
            }
        }
    }

    /// Listens again on the same address after [`stop_serving`](Self::stop_serving), as a
    /// restarted API server does: clients reconnect and find the same objects and versions.
    /// Does nothing if the server is serving.
    pub async fn start_serving(&mut self) -> Result<(), ServerError> {
        if self.server.is_some() {
            return Ok(());
        }
        let listener = tokio::net::TcpListener::bind(self.addr)
            .await
            .map_err(|source| ServerError::Bind { addr: self.addr.to_string(), source })?;
        let (serve_stop, server) = serve(listener, self.state.clone(), self.max_request_body_bytes);
        self.serve_stop = serve_stop;
        self.server = Some(server);
        Ok(())
    }

    /// Whether the server listens (false between [`stop_serving`](Self::stop_serving) and
    /// [`start_serving`](Self::start_serving)).
    pub fn is_serving(&self) -> bool {
        self.server.is_some()
    }

    /// Stops serving: ends watch streams, stops the kubelet, waits for the server task (at most
    /// five seconds) and removes a temporary kubeconfig.
    pub async fn shutdown(mut self) {
        self.stop();
        if let Some(server) = self.server.take() {
            let abort = server.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), server).await.is_err() {
                abort.abort();
            }
        }
        if let Some(kubelet) = self.kubelet.take() {
            let _ = tokio::time::timeout(Duration::from_secs(1), kubelet).await;
        }
        self.close_audit_log();
    }

    /// The `/metrics` text: `apiserver_request_total` by verb, group, version, resource,
    /// subresource, scope, component and code, as kube-apiserver counts requests, and
    /// `apiserver_storage_objects` per resource.
    pub fn metrics_text(&self) -> String {
        self.state.metrics.render(&self.state.store)
    }

    /// The audit log's path, when one is written.
    pub fn audit_log_path(&self) -> Option<PathBuf> {
        let audit = self.state.audit.as_ref()?;
        let log = audit.lock().unwrap_or_else(|p| p.into_inner());
        log.as_ref().map(|l| l.path().to_owned())
    }

    /// Flushes and closes the audit log (requests after this are not logged). Also done by
    /// [`ServerHandle::shutdown`].
    pub fn close_audit_log(&self) {
        if let Some(audit) = &self.state.audit
            && let Some(mut log) = audit.lock().unwrap_or_else(|p| p.into_inner()).take()
        {
            log.close();
        }
    }

    fn stop(&self) {
        self.stop_tx.send_replace(true);
        self.serve_stop.send_replace(true);
        self.state.store.end_watches();
        if self.remove_kubeconfig {
            let _ = std::fs::remove_file(&self.kubeconfig_path);
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop();
        if let Some(server) = self.server.take() {
            server.abort();
        }
        if let Some(kubelet) = self.kubelet.take() {
            kubelet.abort();
        }
    }
}
