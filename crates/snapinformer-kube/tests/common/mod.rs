//! Shared helpers: a scripted list/watch, pods, a recording handler, server helpers and a
//! pluggable TCP proxy.
#![allow(dead_code, unreachable_pub)]

use std::{
    collections::{BTreeMap, VecDeque},
    future::Future,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{StreamExt, future::BoxFuture};
use k8s_openapi::{
    api::core::v1::Pod,
    apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta},
};
use kube::{
    Resource,
    api::{ListParams, ObjectList, WatchEvent, WatchParams},
    core::{
        Status, TypeMeta,
        response::StatusDetails,
        watch::{Bookmark, BookmarkMeta},
    },
};
use snapinformer_core::{DeltaObject, Notification};
use snapinformer_kube::{ListWatch, WatchStream};

// ----- objects -----------------------------------------------------------------------------

/// `default/<name>` at resource version `rv`.
pub fn pod(name: &str, rv: u64) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            resource_version: Some(rv.to_string()),
            uid: Some(format!("uid-{name}")),
            ..ObjectMeta::default()
        },
        ..Pod::default()
    }
}

pub fn list(items: Vec<Pod>, rv: u64, continue_token: Option<&str>) -> ObjectList<Pod> {
    ObjectList {
        types: TypeMeta { api_version: "v1".into(), kind: "PodList".into() },
        metadata: ListMeta {
            resource_version: Some(rv.to_string()),
            continue_: continue_token.map(str::to_owned),
            ..ListMeta::default()
        },
        items,
    }
}

pub fn status(code: u16, reason: &str, message: &str) -> Box<Status> {
    let mut s = Status::failure(message, reason).with_code(code);
    if code == 429 {
        let details: StatusDetails =
            serde_json::from_value(serde_json::json!({"retryAfterSeconds": 3})).unwrap();
        s.details = Some(details);
    }
    Box::new(s)
}

pub fn api_error(code: u16, reason: &str) -> kube::Error {
    kube::Error::Api(status(code, reason, &format!("injected {code}")))
}

pub fn too_large() -> kube::Error {
    kube::Error::Api(status(504, "Timeout", "Too large resource version: 99, current: 5"))
}

pub fn bookmark(rv: u64, initial_end: bool) -> WatchEvent<Pod> {
    let mut annotations = BTreeMap::new();
    if initial_end {
        annotations.insert("k8s.io/initial-events-end".to_owned(), "true".to_owned());
    }
    WatchEvent::Bookmark(Bookmark {
        types: TypeMeta { api_version: "v1".into(), kind: "Pod".into() },
        metadata: BookmarkMeta { resource_version: rv.to_string(), annotations },
    })
}

pub fn serde_error() -> kube::Error {
    kube::Error::SerdeError(serde_json::from_str::<serde_json::Value>("{not json").unwrap_err())
}

// ----- scripted list/watch -------------------------------------------------------------------

/// How a scripted watch stream ends after its events.
pub enum End {
    /// The server ends the stream.
    Close,
    /// The stream stays open without another event.
    Hang,
}

pub enum WatchScript {
    Fail(kube::Error),
    Events(Vec<Result<WatchEvent<Pod>, kube::Error>>, End),
}

/// A request the reflector made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    List { rv: Option<String>, limit: Option<u32>, continue_token: Option<String> },
    Watch { rv: String, initial_events: bool, timeout: Option<u32>, bookmarks: bool },
}

#[derive(Default)]
struct Script {
    lists: VecDeque<Result<ObjectList<Pod>, kube::Error>>,
    watches: VecDeque<WatchScript>,
    calls: Vec<Call>,
    minor: Option<u32>,
}

/// A list/watch that answers from a script; an exhausted script never answers.
#[derive(Clone, Default)]
pub struct FakeLw(Arc<Mutex<Script>>);

impl FakeLw {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn list(&self, answer: Result<ObjectList<Pod>, kube::Error>) -> &Self {
        self.0.lock().unwrap().lists.push_back(answer);
        self
    }
    pub fn watch(&self, script: WatchScript) -> &Self {
        self.0.lock().unwrap().watches.push_back(script);
        self
    }
    pub fn calls(&self) -> Vec<Call> {
        self.0.lock().unwrap().calls.clone()
    }
    /// Makes the fake report Kubernetes `1.<minor>` from `/version`.
    pub fn server_minor(&self, minor: u32) -> &Self {
        self.0.lock().unwrap().minor = Some(minor);
        self
    }
    pub fn last_call(&self) -> Call {
        self.calls().last().cloned().expect("a call was made")
    }
}

impl ListWatch<Pod> for FakeLw {
    fn server_minor_version(&self) -> BoxFuture<'_, Option<u32>> {
        let minor = self.0.lock().unwrap().minor;
        Box::pin(async move { minor })
    }

    fn list(&self, params: &ListParams) -> BoxFuture<'_, Result<ObjectList<Pod>, kube::Error>> {
        let mut s = self.0.lock().unwrap();
        s.calls.push(Call::List {
            rv: params.resource_version.clone(),
            limit: params.limit,
            continue_token: params.continue_token.clone(),
        });
        match s.lists.pop_front() {
            Some(answer) => Box::pin(async move { answer }),
            None => Box::pin(futures::future::pending()),
        }
    }

    fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> BoxFuture<'_, Result<WatchStream<Pod>, kube::Error>> {
        let mut s = self.0.lock().unwrap();
        s.calls.push(Call::Watch {
            rv: resource_version.to_owned(),
            initial_events: params.send_initial_events,
            timeout: params.timeout,
            bookmarks: params.bookmarks,
        });
        match s.watches.pop_front() {
            Some(WatchScript::Fail(e)) => Box::pin(async move { Err(e) }),
            Some(WatchScript::Events(events, end)) => {
                let events = futures::stream::iter(events);
                let stream: WatchStream<Pod> = match end {
                    End::Close => events.boxed(),
                    End::Hang => events.chain(futures::stream::pending()).boxed(),
                };
                Box::pin(async move { Ok(stream) })
            }
            None => Box::pin(futures::future::pending()),
        }
    }
}

// ----- handlers ------------------------------------------------------------------------------

/// What a handler saw, checked as it goes: per key, versions only move forward; an add is never
/// for a key the handler already has; a delete is for a key it has.
#[derive(Debug, Default)]
pub struct Model {
    pub objects: BTreeMap<String, u64>,
    pub violations: Vec<String>,
    pub deletes: u64,
    pub tombstones: u64,
    pub notifications: u64,
}

pub type SharedModel = Arc<Mutex<Model>>;

fn key_rv(pod: &Pod) -> (String, u64) {
    let m = pod.meta();
    let key =
        format!("{}/{}", m.namespace.as_deref().unwrap_or(""), m.name.as_deref().unwrap_or(""));
    let rv = m.resource_version.as_deref().and_then(|r| r.parse().ok()).unwrap_or(0);
    (key, rv)
}

pub fn recorder() -> (SharedModel, impl FnMut(&Notification<Pod>) + Send + 'static) {
    let model = SharedModel::default();
    let m = model.clone();
    let handler = move |n: &Notification<Pod>| {
        let mut m = m.lock().unwrap();
        m.notifications += 1;
        match n {
            Notification::Add { obj, .. } => {
                let (key, rv) = key_rv(obj);
                if let Some(old) = m.objects.insert(key.clone(), rv) {
                    m.violations.push(format!("add of {key}@{rv} already held at {old}"));
                }
            }
            Notification::Update { old, new } => {
                let (key, old_rv) = key_rv(old);
                let (_, new_rv) = key_rv(new);
                // No handler here asks for resyncs, so an update must carry a newer version:
                // the same version again is a change seen twice, an older one is out of order.
                if new_rv <= old_rv {
                    m.violations.push(format!("update of {key}: {old_rv} -> {new_rv}"));
                }
                match m.objects.insert(key.clone(), new_rv) {
                    Some(held) if held != old_rv => {
                        m.violations.push(format!("update of {key}: old {old_rv}, held {held}"))
                    }
                    None => m.violations.push(format!("update of unknown {key}")),
                    _ => {}
                }
            }
            Notification::Delete { obj } => {
                m.deletes += 1;
                let key = match obj {
                    DeltaObject::Object(o) => key_rv(o).0,
                    DeltaObject::Tombstone(t) => {
                        m.tombstones += 1;
                        t.key.to_string()
                    }
                };
                if m.objects.remove(&key).is_none() {
                    m.violations.push(format!("delete of unknown {key}"));
                }
            }
        }
    };
    (model, handler)
}

/// Keys and resource versions of a snapshot.
pub fn snapshot_state(snap: &snapinformer_store::Snapshot<Pod>) -> BTreeMap<String, u64> {
    snap.iter().map(|p| key_rv(p)).collect()
}

// ----- waiting -------------------------------------------------------------------------------

/// Awaits `fut`, failing the test after `secs` seconds.
pub async fn within<T>(secs: u64, what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(secs), fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {secs}s: {what}"),
    }
}

/// Polls `cond` every 10 ms (real or paused time) until it holds, for at most `secs` seconds.
pub async fn eventually(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    within(secs, what, async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

/// Like [`eventually`] for conditions that depend on OS threads (handlers) under a paused
/// clock: yields and sleeps in real time.
pub async fn eventually_real(what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(10), "timed out waiting for: {what}");
        tokio::task::yield_now().await;
        std::thread::sleep(Duration::from_millis(1));
    }
}

// ----- live server helpers -----------------------------------------------------------------

pub mod live {
    use std::{
        collections::BTreeMap,
        future::Future,
        net::SocketAddr,
        sync::{
            Arc, Mutex,
            atomic::{AtomicBool, Ordering},
        },
        time::Duration,
    };

    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
    use snapinformer_apiserver::{Config, ServerHandle, TestApiServer};
    use snapinformer_kube::{BackoffConfig, KubeInformer, ReflectorConfig};
    use tokio::{net::TcpListener, task::AbortHandle};

    use super::{SharedModel, snapshot_state, within};

    pub async fn server(config: Config) -> ServerHandle {
        TestApiServer::start(config).await.expect("the test API server starts")
    }

    /// A client without kube's own retry layer, so the reflector sees every 429 itself.
    pub fn client_for(url: &str) -> kube::Client {
        let mut config = kube::Config::new(url.parse().unwrap());
        config.default_namespace = "default".into();
        config.default_retry = false;
        config.read_timeout = Some(Duration::from_secs(30));
        kube::Client::try_from(config).unwrap()
    }

    /// Fast backoff so that faults are ridden out in milliseconds.
    pub fn fast() -> ReflectorConfig {
        ReflectorConfig::new().backoff(
            BackoffConfig::new()
                .initial(Duration::from_millis(10))
                .max(Duration::from_millis(200))
                .jitter(0.5),
        )
    }

    /// Retries a write through injected 429/500s and dropped connections.
    pub async fn retry<T, F, Fut>(what: &str, mut f: F) -> Option<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        within(30, what, async {
            loop {
                match f().await {
                    Ok(v) => return Some(v),
                    Err(kube::Error::Api(s)) if s.code == 404 => return None,
                    Err(kube::Error::Api(s)) if s.code == 429 || s.code >= 500 => {}
                    Err(kube::Error::Api(s)) => panic!("{what}: {s:?}"),
                    Err(_) => {}
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
    }

    pub async fn relabel(pods: &Api<Pod>, name: &str, value: &str) {
        let patch = Patch::Merge(serde_json::json!({"metadata": {"labels": {"step": value}}}));
        let pp = PatchParams::default();
        retry("patch", || pods.patch(name, &pp, &patch)).await;
    }

    pub async fn delete(pods: &Api<Pod>, name: &str) {
        let dp = DeleteParams::default();
        retry("delete", || pods.delete(name, &dp)).await;
    }

    /// The server's pods (keys and resource versions), read with faults off.
    pub async fn server_state(server: &ServerHandle) -> BTreeMap<String, u64> {
        let pods: Api<Pod> = Api::all(client_for(&server.url()));
        let lp = ListParams::default();
        let list = retry("list", || pods.list(&lp)).await.unwrap();
        list.items
            .iter()
            .map(|p| {
                let m = &p.metadata;
                (
                    format!("{}/{}", m.namespace.as_deref().unwrap(), m.name.as_deref().unwrap()),
                    m.resource_version.as_deref().unwrap().parse().unwrap(),
                )
            })
            .collect()
    }

    /// Clears the faults and waits until the published snapshot and every handler's view equal
    /// the server's state exactly (keys and resource versions); no handler saw a violation.
    pub async fn assert_converged(
        server: &ServerHandle,
        informer: &KubeInformer<Pod>,
        models: &[&SharedModel],
    ) -> BTreeMap<String, u64> {
        server.faults().clear();
        let expected = server_state(server).await;
        let mut last = (BTreeMap::new(), Vec::new());
        let converged = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let snap = snapshot_state(&informer.snapshot());
                let views: Vec<_> =
                    models.iter().map(|m| m.lock().unwrap().objects.clone()).collect();
                if snap == expected && views.iter().all(|v| *v == expected) {
                    return;
                }
                last = (snap, views);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        if converged.is_err() {
            panic!(
                "not converged: server {expected:?}\nstore {:?}\nhandlers {:?}\nreflector {:?}",
                last.0,
                last.1,
                informer.reflector_status()
            );
        }
        for m in models {
            let m = m.lock().unwrap();
            assert!(m.violations.is_empty(), "handler violations: {:?}", m.violations);
        }
        expected
    }

    /// A TCP proxy that can be unplugged: open connections are cut and new ones are closed at
    /// once, as if the network between the reflector and the server went down.
    pub struct Proxy {
        addr: SocketAddr,
        plugged: Arc<AtomicBool>,
        conns: Arc<Mutex<Vec<AbortHandle>>>,
        task: AbortHandle,
    }

    impl Proxy {
        pub async fn start(upstream: SocketAddr) -> Proxy {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let plugged = Arc::new(AtomicBool::new(true));
            let conns: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
            let (p, c) = (plugged.clone(), conns.clone());
            let task = tokio::spawn(async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    if !p.load(Ordering::SeqCst) {
                        drop(inbound);
                        continue;
                    }
                    let conn = tokio::spawn(async move {
                        if let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                    c.lock().unwrap().push(conn.abort_handle());
                }
            })
            .abort_handle();
            Proxy { addr, plugged, conns, task }
        }

        pub fn url(&self) -> String {
            format!("http://{}", self.addr)
        }

        pub fn unplug(&self) {
            self.plugged.store(false, Ordering::SeqCst);
            for c in self.conns.lock().unwrap().drain(..) {
                c.abort();
            }
        }

        pub fn plug(&self) {
            self.plugged.store(true, Ordering::SeqCst);
        }
    }

    impl Drop for Proxy {
        fn drop(&mut self) {
            self.task.abort();
            self.unplug();
        }
    }
}
