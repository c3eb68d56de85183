//! Fuzzing support (cargo feature `fuzzing`, off by default; not a stable API).
//!
//! [`apiserver_requests`] turns arbitrary bytes into a short sequence of HTTP requests
//! (method, path, query string with selectors, content type, accept, body) and sends them to
//! the server's router in process with `tower::ServiceExt::oneshot`, on a current-thread tokio
//! runtime with a paused clock (waits for a resource version and watch timeouts take no time).
//! It checks that nothing panics, that every error answer is a JSON `Status` whose `code` is
//! the HTTP status, that JSON answers parse, that the server's resource version never goes
//! back, and that the store stays consistent: an object just created, updated or patched is
//! read back at the version the answer gave, and one just deleted is gone or being deleted.
//!
//! Called by the libFuzzer target `apiserver_requests` (in `fuzz/` at the repository root) and
//! by the smoke tests in `tests/fuzz_smoke.rs` (which enable this feature through a
//! dev-dependency of the crate on itself).

use std::{net::SocketAddr, sync::Arc, time::Duration};

use arbitrary::{Arbitrary, Unstructured};
use axum::{
    body::Body,
    http::{Method, Request, StatusCode, header},
};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::{
    app_state::AppState, faults::Faults, resource::ResourceKind, server::router, store::Store,
};

/// A string drawn mostly from a small space (so requests meet the same objects), or arbitrary.
#[derive(Debug, Clone, Arbitrary)]
enum Text {
    Small(u8),
    Small2(u8),
    Any(String),
}

impl Text {
    fn make(&self, prefix: &str) -> String {
        match self {
            Text::Small(n) | Text::Small2(n) => format!("{prefix}{}", n % 4),
            Text::Any(s) => s.clone(),
        }
    }
}

#[derive(Debug, Clone, Arbitrary)]
enum MethodSpec {
    Get,
    Get2,
    Post,
    Post2,
    Put,
    Patch,
    Delete,
    Head,
    Options,
}

#[derive(Debug, Clone, Arbitrary)]
enum Resource {
    Known(u8),
    Any(String),
}

#[derive(Debug, Clone, Arbitrary)]
enum Sub {
    Status,
    Scale,
    Binding,
    Any(String),
}

#[derive(Debug, Clone, Arbitrary)]
enum PathSpec {
    Resource {
        apps: bool,
        watch: bool,
        namespace: Option<Text>,
        resource: Resource,
        name: Option<Text>,
        sub: Option<Sub>,
    },
    Discovery(u8),
    Raw(String),
}

const DISCOVERY: [&str; 12] = [
    "/version",
    "/api",
    "/apis",
    "/api/v1",
    "/apis/apps",
    "/apis/apps/v1",
    "/healthz",
    "/openapi/v2",
    "/debug/snapinformer/faults",
    "/debug/snapinformer/compact",
    "/",
    "/api/v2",
];

#[derive(Debug, Clone, Arbitrary)]
enum QueryKey {
    LabelSelector,
    FieldSelector,
    Limit,
    Continue,
    ResourceVersion,
    ResourceVersionMatch,
    Watch,
    TimeoutSeconds,
    AllowWatchBookmarks,
    SendInitialEvents,
    DryRun,
    FieldValidation,
    GracePeriodSeconds,
    PropagationPolicy,
    IncludeObject,
    Any(String),
}

const SELECTORS: [&str; 16] = [
    "app=a0",
    "app in (a0,a1)",
    "!app",
    "app,tier!=web",
    "app notin (a2)",
    "metadata.name=p0",
    "metadata.namespace!=n1",
    "spec.nodeName=node-0",
    "status.phase=Running",
    "0",
    "1",
    "5",
    "All",
    "Exact",
    "NotOlderThan",
    "true",
];

#[derive(Debug, Clone, Arbitrary)]
enum QueryValue {
    Known(u8),
    Number(u64),
    Any(String),
}

#[derive(Debug, Clone, Arbitrary)]
enum ContentType {
    None,
    Json,
    MergePatch,
    StrategicMerge,
    JsonPatch,
    Apply,
    Protobuf,
    Any(String),
}

#[derive(Debug, Clone, Arbitrary)]
enum Accept {
    None,
    Json,
    Table,
    Protobuf,
    Aggregated,
    Any(String),
}

#[derive(Debug, Clone, Arbitrary)]
struct ObjectSpec {
    kind: u8,
    name: Option<Text>,
    generate_name: bool,
    namespace: Option<Text>,
    resource_version: Option<Text>,
    labels: Vec<(Text, Text)>,
    node: Option<Text>,
    replicas: Option<i64>,
    extra: Option<(String, String)>,
}

#[derive(Debug, Clone, Arbitrary)]
enum PatchOp {
    Add(Text, Text),
    Remove(Text),
    Replace(Text, Text),
    Test(Text, Text),
}

#[derive(Debug, Clone, Arbitrary)]
enum BodySpec {
    Empty,
    Object(ObjectSpec),
    Object2(ObjectSpec),
    JsonPatch(Vec<PatchOp>),
    Raw(Vec<u8>),
    Text(String),
}

#[derive(Debug, Clone, Arbitrary)]
struct RequestSpec {
    method: MethodSpec,
    path: PathSpec,
    query: Vec<(QueryKey, QueryValue)>,
    content_type: ContentType,
    accept: Accept,
    body: BodySpec,
}

/// Percent-encodes everything but RFC 3986 unreserved characters (and `/` if `keep_slash`).
fn encode(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else if keep_slash && b == b'/' {
            out.push('/');
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn kind_of(n: u8) -> ResourceKind {
    ResourceKind::ALL[usize::from(n) % ResourceKind::ALL.len()]
}

impl PathSpec {
    fn make(&self) -> String {
        match self {
            PathSpec::Resource { apps, watch, namespace, resource, name, sub } => {
                let (group, resource) = match resource {
                    Resource::Known(n) => {
                        let kind = kind_of(*n);
                        (kind.group(), kind.plural().to_owned())
                    }
                    Resource::Any(s) => (if *apps { "apps" } else { "" }, s.clone()),
                };
                let mut path = if group.is_empty() {
                    "/api/v1".to_owned()
                } else {
                    format!("/apis/{group}/v1")
                };
                if *watch {
                    path.push_str("/watch");
                }
                if let Some(ns) = namespace {
                    path.push_str(&format!("/namespaces/{}", encode(&ns.make("n"), false)));
                }
                path.push_str(&format!("/{}", encode(&resource, false)));
                if let Some(name) = name {
                    path.push_str(&format!("/{}", encode(&name.make("p"), false)));
                    match sub {
                        Some(Sub::Status) => path.push_str("/status"),
                        Some(Sub::Scale) => path.push_str("/scale"),
                        Some(Sub::Binding) => path.push_str("/binding"),
                        Some(Sub::Any(s)) => path.push_str(&format!("/{}", encode(s, false))),
                        None => {}
                    }
                }
                path
            }
            PathSpec::Discovery(n) => DISCOVERY[usize::from(*n) % DISCOVERY.len()].to_owned(),
            PathSpec::Raw(s) => format!("/{}", encode(s, true)),
        }
    }
}

impl QueryKey {
    fn name(&self) -> String {
        match self {
            QueryKey::LabelSelector => "labelSelector",
            QueryKey::FieldSelector => "fieldSelector",
            QueryKey::Limit => "limit",
            QueryKey::Continue => "continue",
            QueryKey::ResourceVersion => "resourceVersion",
            QueryKey::ResourceVersionMatch => "resourceVersionMatch",
            QueryKey::Watch => "watch",
            QueryKey::TimeoutSeconds => "timeoutSeconds",
            QueryKey::AllowWatchBookmarks => "allowWatchBookmarks",
            QueryKey::SendInitialEvents => "sendInitialEvents",
            QueryKey::DryRun => "dryRun",
            QueryKey::FieldValidation => "fieldValidation",
            QueryKey::GracePeriodSeconds => "gracePeriodSeconds",
            QueryKey::PropagationPolicy => "propagationPolicy",
            QueryKey::IncludeObject => "includeObject",
            QueryKey::Any(s) => return s.clone(),
        }
        .to_owned()
    }
}

impl QueryValue {
    fn make(&self) -> String {
        match self {
            QueryValue::Known(n) => SELECTORS[usize::from(*n) % SELECTORS.len()].to_owned(),
            QueryValue::Number(n) => (n % 64).to_string(),
            QueryValue::Any(s) => s.clone(),
        }
    }
}

impl ObjectSpec {
    fn make(&self) -> Value {
        let kind = kind_of(self.kind);
        let mut meta = json!({});
        if let Some(name) = &self.name {
            meta[if self.generate_name { "generateName" } else { "name" }] = name.make("p").into();
        }
        if let Some(ns) = &self.namespace {
            meta["namespace"] = ns.make("n").into();
        }
        if let Some(rv) = &self.resource_version {
            meta["resourceVersion"] = rv.make("").into();
        }
        if !self.labels.is_empty() {
            let labels: serde_json::Map<String, Value> = self
                .labels
                .iter()
                .take(4)
                .map(|(k, v)| (k.make("app"), Value::from(v.make("a"))))
                .collect();
            meta["labels"] = labels.into();
        }
        let mut obj =
            json!({"apiVersion": kind.api_version(), "kind": kind.kind(), "metadata": meta});
        if let Some(node) = &self.node {
            obj["spec"] = json!({"nodeName": node.make("node-"), "containers": [{"name": "c", "image": "i"}]});
        }
        if let Some(replicas) = self.replicas {
            obj["spec"]["replicas"] = replicas.into();
        }
        if let Some((k, v)) = &self.extra {
            obj[k.as_str()] = v.as_str().into();
        }
        obj
    }
}

impl BodySpec {
    fn make(&self) -> Vec<u8> {
        match self {
            BodySpec::Empty => Vec::new(),
            BodySpec::Object(o) | BodySpec::Object2(o) => o.make().to_string().into_bytes(),
            BodySpec::JsonPatch(ops) => {
                let ops: Vec<Value> = ops
                    .iter()
                    .take(8)
                    .map(|op| match op {
                        PatchOp::Add(p, v) => json!({"op": "add", "path": p.make("/metadata/labels/l"), "value": v.make("v")}),
                        PatchOp::Remove(p) => json!({"op": "remove", "path": p.make("/metadata/labels/l")}),
                        PatchOp::Replace(p, v) => json!({"op": "replace", "path": p.make("/spec/replicas"), "value": v.make("")}),
                        PatchOp::Test(p, v) => json!({"op": "test", "path": p.make("/metadata/name"), "value": v.make("p")}),
                    })
                    .collect();
                Value::from(ops).to_string().into_bytes()
            }
            BodySpec::Raw(bytes) => bytes.clone(),
            BodySpec::Text(text) => text.clone().into_bytes(),
        }
    }
}

impl RequestSpec {
    fn build(&self) -> Option<(Request<Body>, bool)> {
        let method = match self.method {
            MethodSpec::Get | MethodSpec::Get2 => Method::GET,
            MethodSpec::Post | MethodSpec::Post2 => Method::POST,
            MethodSpec::Put => Method::PUT,
            MethodSpec::Patch => Method::PATCH,
            MethodSpec::Delete => Method::DELETE,
            MethodSpec::Head => Method::HEAD,
            MethodSpec::Options => Method::OPTIONS,
        };
        let path = self.path.make();
        // Fault injection is a test switch, not request handling: keep it off.
        if path.contains("faults") && method != Method::GET {
            return None;
        }
        let query: Vec<String> = self
            .query
            .iter()
            .take(6)
            .map(|(k, v)| format!("{}={}", encode(&k.name(), false), encode(&v.make(), false)))
            .collect();
        let dry_run = self.query.iter().any(|(k, _)| k.name() == "dryRun");
        let uri = if query.is_empty() { path } else { format!("{path}?{}", query.join("&")) };
        let mut request = Request::builder().method(method).uri(uri);
        let content_type = match &self.content_type {
            ContentType::None => None,
            ContentType::Json => Some("application/json".to_owned()),
            ContentType::MergePatch => Some("application/merge-patch+json".to_owned()),
            ContentType::StrategicMerge => {
                Some("application/strategic-merge-patch+json".to_owned())
            }
            ContentType::JsonPatch => Some("application/json-patch+json".to_owned()),
            ContentType::Apply => Some("application/apply-patch+yaml".to_owned()),
            ContentType::Protobuf => Some("application/vnd.kubernetes.protobuf".to_owned()),
            ContentType::Any(s) => Some(s.clone()),
        };
        if let Some(ct) = content_type {
            request = request.header(header::CONTENT_TYPE, ct);
        }
        let accept = match &self.accept {
            Accept::None => None,
            Accept::Json => Some("application/json".to_owned()),
            Accept::Table => Some(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json".to_owned(),
            ),
            Accept::Protobuf => Some("application/vnd.kubernetes.protobuf,application/json".to_owned()),
            Accept::Aggregated => Some(
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json".to_owned(),
            ),
            Accept::Any(s) => Some(s.clone()),
        };
        if let Some(accept) = accept {
            request = request.header(header::ACCEPT, accept);
        }
        // Header values that are not valid HTTP are refused by the client before the server.
        request.body(Body::from(self.body.make())).ok().map(|r| (r, dry_run))
    }
}

/// A fresh server state and its router.
fn server() -> (Arc<AppState>, axum::Router) {
    let state = Arc::new(AppState {
        store: Arc::new(Store::new(1000)),
        faults: Faults::new(Default::default()),
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        bookmark_interval: Duration::from_secs(60),
        default_watch_timeout: Duration::from_secs(1800),
        max_request_body_bytes: crate::DEFAULT_MAX_REQUEST_BODY_BYTES,
        request_log: None,
        metrics: Default::default(),
        audit: None,
    });
    let app = router(state.clone(), crate::DEFAULT_MAX_REQUEST_BODY_BYTES);
    (state, app)
}

/// Sends one request; returns the status, the content type and the body read within 5 s of
/// (paused) time: a watch is cut there.
async fn send(app: &axum::Router, request: Request<Body>) -> (StatusCode, String, Vec<u8>) {
    let response = app.clone().oneshot(request).await.expect("the router is infallible");
    let status = response.status();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let mut body = response.into_body().into_data_stream();
    let mut bytes = Vec::new();
    let read = async {
        use futures::StreamExt;
        while let Some(chunk) = body.next().await {
            bytes.extend_from_slice(&chunk.expect("body chunks"));
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), read).await;
    (status, content_type, bytes)
}

fn check_answer(what: &str, status: StatusCode, content_type: &str, body: &[u8]) {
    if status.is_client_error() || status.is_server_error() {
        let value: Value = serde_json::from_slice(body).unwrap_or_else(|e| {
            panic!(
                "{what}: error {status} without a JSON body ({e}): {:?}",
                String::from_utf8_lossy(body)
            )
        });
        assert_eq!(value["kind"], "Status", "{what}: error body is a Status: {value}");
        assert_eq!(value["status"], "Failure", "{what}: {value}");
        assert_eq!(value["code"], status.as_u16(), "{what}: Status code is the HTTP status");
        return;
    }
    if content_type == crate::protobuf::MEDIA_TYPE {
        if let Err(e) = crate::protobuf::codec::decode_object(body) {
            panic!("{what}: {status} protobuf answer does not decode: {e}");
        }
        return;
    }
    if content_type == crate::protobuf::WATCH_MEDIA_TYPE {
        let mut rest = body;
        while rest.len() >= 4 {
            let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            let frame = rest.get(4..4 + len).unwrap_or_else(|| panic!("{what}: cut watch frame"));
            let event = crate::protobuf::codec::decode_message(
                "k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent",
                frame,
            );
            assert!(event.is_ok(), "{what}: watch frame does not decode: {event:?}");
            rest = &rest[4 + len..];
        }
        assert!(rest.is_empty(), "{what}: trailing bytes after the last watch frame");
        return;
    }
    if content_type.starts_with("application/json") && !body.is_empty() {
        // A watch is one JSON value per line; anything else is one JSON value.
        for line in body.split(|b| *b == b'\n').filter(|l| !l.trim_ascii().is_empty()) {
            if let Err(e) = serde_json::from_slice::<Value>(line) {
                panic!(
                    "{what}: {status} answer is not JSON ({e}): {:?}",
                    String::from_utf8_lossy(line)
                );
            }
        }
    }
}

/// The path of an object the server answered with, from its `apiVersion`, `kind` and metadata.
fn object_path(value: &Value) -> Option<String> {
    let kind = ResourceKind::ALL.into_iter().find(|k| value["kind"] == k.kind())?;
    let name = value["metadata"]["name"].as_str()?;
    let prefix = if kind.group().is_empty() {
        "/api/v1".to_owned()
    } else {
        format!("/apis/{}/v1", kind.group())
    };
    Some(match value["metadata"]["namespace"].as_str() {
        Some(ns) if kind.namespaced() => {
            format!(
                "{prefix}/namespaces/{}/{}/{}",
                encode(ns, false),
                kind.plural(),
                encode(name, false)
            )
        }
        _ => format!("{prefix}/{}/{}", kind.plural(), encode(name, false)),
    })
}

/// Runs the request sequence encoded in `data` against a fresh in-process server. Panics on any
/// violation.
pub fn apiserver_requests(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let mut requests = Vec::new();
    while !u.is_empty() && requests.len() < 8 {
        match RequestSpec::arbitrary(&mut u) {
            Ok(r) => requests.push(r),
            Err(_) => break,
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(async move {
        let (state, app) = server();
        let mut last_rv = state.store.current_rv();
        for (i, spec) in requests.iter().enumerate() {
            let Some((request, dry_run)) = spec.build() else { continue };
            let method = request.method().clone();
            let what = format!("request {i}: {method} {}", request.uri());
            let (status, content_type, body) = send(&app, request).await;
            if method != Method::HEAD {
                // A HEAD answer has no body (axum drops it).
                check_answer(&what, status, &content_type, &body);
            }
            let rv = state.store.current_rv();
            assert!(rv >= last_rv, "{what}: the resource version went back from {last_rv} to {rv}");
            last_rv = rv;
            if dry_run || !status.is_success() || !content_type.starts_with("application/json") {
                continue;
            }
            let Ok(value) = serde_json::from_slice::<Value>(&body) else { continue };
            let Some(path) = object_path(&value) else { continue };
            let get = Request::get(&path).body(Body::empty()).expect("a valid path");
            let (got_status, got_type, got_body) = send(&app, get).await;
            check_answer(&format!("{what}, then GET {path}"), got_status, &got_type, &got_body);
            let got: Value = serde_json::from_slice(&got_body).unwrap_or_default();
            match method {
                Method::POST | Method::PUT | Method::PATCH => {
                    assert_eq!(got_status, StatusCode::OK, "{what}: GET {path} after a write");
                    assert_eq!(
                        got["metadata"]["resourceVersion"], value["metadata"]["resourceVersion"],
                        "{what}: GET {path} reads the version just written"
                    );
                }
                Method::DELETE => {
                    let deleting = got["metadata"]["deletionTimestamp"].is_string();
                    assert!(
                        got_status == StatusCode::NOT_FOUND || deleting,
                        "{what}: GET {path} after a delete answered {got_status}: {got}"
                    );
                }
                _ => {}
            }
        }
    });
}
