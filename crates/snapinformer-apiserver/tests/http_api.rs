//! Wire-level behaviour: status codes, Status bodies, list and watch semantics over raw HTTP.

mod common;

use common::{http, pod_json};
use serde_json::Value;
use snapinformer_apiserver::{Config, ServerHandle, TestApiServer, generate};

const JSON: (&str, &str) = ("Content-Type", "application/json");

async fn server() -> ServerHandle {
    TestApiServer::start(Config::default()).await.expect("server starts")
}

fn events(body: &str) -> Vec<Value> {
    assert!(body.is_empty() || body.ends_with('\n'), "every event ends with a newline");
    body.lines().map(|l| serde_json::from_str(l).expect("one JSON event per line")).collect()
}

#[tokio::test]
async fn create_answers_201_then_409_already_exists_with_a_status_body() {
    let s = server().await;
    let path = "/api/v1/namespaces/default/pods";
    let first = http(s.addr(), "POST", path, &[JSON], &pod_json("a", "{}")).await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(first.json()["metadata"]["namespace"], "default");
    assert!(first.json()["metadata"]["uid"].as_str().is_some_and(|u| u.len() == 36));
    let second = http(s.addr(), "POST", path, &[JSON], &pod_json("a", "{}")).await;
    assert_eq!(second.status, 409);
    let status = second.json();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "AlreadyExists");
    assert_eq!(status["message"], "pods \"a\" already exists");
    assert_eq!(status["details"]["name"], "a");
}

#[tokio::test]
async fn bad_input_gets_the_real_servers_status_codes() {
    let s = server().await;
    let pods = "/api/v1/namespaces/default/pods";
    let malformed = http(s.addr(), "POST", pods, &[JSON], "{not json").await;
    assert_eq!((malformed.status, malformed.json()["reason"].clone()), (400, "BadRequest".into()));
    let no_name = http(
        s.addr(),
        "POST",
        pods,
        &[JSON],
        r#"{"apiVersion":"v1","kind":"Pod","spec":{"containers":[]}}"#,
    )
    .await;
    assert_eq!(no_name.status, 422, "{}", no_name.body);
    assert!(
        no_name.json()["message"].as_str().unwrap().contains("name or generateName is required")
    );
    let wrong_ns = http(
        s.addr(),
        "POST",
        pods,
        &[JSON],
        r#"{"metadata":{"name":"x","namespace":"other"},"spec":{"containers":[]}}"#,
    )
    .await;
    assert_eq!(wrong_ns.status, 400);
    let unknown = http(s.addr(), "GET", "/api/v1/namespaces/default/services", &[], "").await;
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["reason"], "NotFound");
    let missing = http(s.addr(), "GET", "/api/v1/namespaces/default/pods/nope", &[], "").await;
    assert_eq!(missing.status, 404);
    assert_eq!(missing.json()["message"], "pods \"nope\" not found");
    let put_collection = http(s.addr(), "PUT", pods, &[JSON], "{}").await;
    assert_eq!(put_collection.status, 405);
    let yaml = http(s.addr(), "POST", pods, &[("Content-Type", "text/plain")], "x").await;
    assert_eq!(yaml.status, 415);
    let apply = http(
        s.addr(),
        "PATCH",
        "/api/v1/namespaces/default/pods/a",
        &[("Content-Type", "application/apply-patch+yaml")],
        "{}",
    )
    .await;
    assert_eq!(apply.status, 415);
    let bad_selector =
        http(s.addr(), "GET", "/api/v1/pods?labelSelector=a%20in%20b", &[], "").await;
    assert_eq!(bad_selector.status, 400);
    let bad_field =
        http(s.addr(), "GET", "/api/v1/nodes?fieldSelector=spec.nodeName%3Dx", &[], "").await;
    assert_eq!(bad_field.json()["message"], "field label not supported: spec.nodeName");
    let no_ns =
        http(s.addr(), "POST", "/api/v1/namespaces/ghost/pods", &[JSON], &pod_json("a", "{}"))
            .await;
    assert_eq!(no_ns.status, 404);
    assert_eq!(no_ns.json()["message"], "namespaces \"ghost\" not found");
    // Nothing was half-written.
    let list = http(s.addr(), "GET", "/api/v1/pods", &[], "").await;
    assert_eq!(list.json()["items"].as_array().unwrap().len(), 0);
}

#[tokio::test]
async fn strict_field_validation_refuses_unknown_fields_and_default_warns() {
    let s = server().await;
    let body =
        r#"{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i","bogus":1}]}}"#;
    let strict = http(
        s.addr(),
        "POST",
        "/api/v1/namespaces/default/pods?fieldValidation=Strict",
        &[JSON],
        body,
    )
    .await;
    assert_eq!(strict.status, 400);
    assert!(strict.body.contains("unknown field"), "{}", strict.body);
    let warn = http(s.addr(), "POST", "/api/v1/namespaces/default/pods", &[JSON], body).await;
    assert_eq!(warn.status, 201);
    assert!(warn.header("warning").is_some_and(|w| w.contains("spec.containers[0].bogus")));
    assert!(warn.json()["spec"]["containers"][0].get("bogus").is_none());
}

#[tokio::test]
async fn generate_name_creates_distinct_names() {
    let s = server().await;
    let body = r#"{"metadata":{"generateName":"web-"},"spec":{"containers":[]}}"#;
    let a = http(s.addr(), "POST", "/api/v1/namespaces/default/pods", &[JSON], body).await.json();
    let b = http(s.addr(), "POST", "/api/v1/namespaces/default/pods", &[JSON], body).await.json();
    let (a, b) = (
        a["metadata"]["name"].as_str().unwrap().to_owned(),
        b["metadata"]["name"].as_str().unwrap().to_owned(),
    );
    assert!(a.starts_with("web-") && a.len() == 9, "{a}");
    assert_ne!(a, b);
}

#[tokio::test]
async fn put_with_a_stale_resource_version_is_a_409_conflict() {
    let s = server().await;
    let created =
        http(s.addr(), "POST", "/api/v1/namespaces/default/pods", &[JSON], &pod_json("a", "{}"))
            .await
            .json();
    let path = "/api/v1/namespaces/default/pods/a";
    let mut update = created.clone();
    update["metadata"]["labels"] = serde_json::json!({"v": "1"});
    let ok = http(s.addr(), "PUT", path, &[JSON], &update.to_string()).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let new_rv: u64 = ok.json()["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let old_rv: u64 = created["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    assert!(new_rv > old_rv);
    // Same body again: its resourceVersion is now stale.
    let stale = http(s.addr(), "PUT", path, &[JSON], &update.to_string()).await;
    assert_eq!(stale.status, 409);
    assert_eq!(stale.json()["reason"], "Conflict");
    // A no-op update does not move the resourceVersion.
    let same = http(s.addr(), "PUT", path, &[JSON], &ok.body).await;
    assert_eq!(
        same.json()["metadata"]["resourceVersion"],
        ok.json()["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn status_subresource_changes_only_status_and_main_resource_keeps_status() {
    let s = server().await;
    http(s.addr(), "POST", "/api/v1/namespaces/default/pods", &[JSON], &pod_json("a", "{}")).await;
    let patch = r#"{"status":{"phase":"Running"},"metadata":{"labels":{"ignored":"yes"}}}"#;
    let status = http(
        s.addr(),
        "PATCH",
        "/api/v1/namespaces/default/pods/a/status",
        &[("Content-Type", "application/merge-patch+json")],
        patch,
    )
    .await;
    assert_eq!(status.status, 200, "{}", status.body);
    assert_eq!(status.json()["status"]["phase"], "Running");
    assert!(status.json()["metadata"].get("labels").is_none_or(|l| l.get("ignored").is_none()));
    let main = http(
        s.addr(),
        "PATCH",
        "/api/v1/namespaces/default/pods/a",
        &[("Content-Type", "application/merge-patch+json")],
        r#"{"status":{"phase":"Failed"}}"#,
    )
    .await;
    assert_eq!(main.json()["status"]["phase"], "Running");
}

#[tokio::test]
async fn json_patch_and_delete_with_a_body_work_on_one_connection_each() {
    let s = server().await;
    http(
        s.addr(),
        "POST",
        "/api/v1/namespaces/default/pods",
        &[JSON],
        &pod_json("a", r#"{"x":"1"}"#),
    )
    .await;
    let patched = http(
        s.addr(),
        "PATCH",
        "/api/v1/namespaces/default/pods/a",
        &[("Content-Type", "application/json-patch+json")],
        r#"[{"op":"add","path":"/metadata/labels/y","value":"2"}]"#,
    )
    .await;
    assert_eq!(patched.json()["metadata"]["labels"], serde_json::json!({"x": "1", "y": "2"}));
    let deleted = http(
        s.addr(),
        "DELETE",
        "/api/v1/namespaces/default/pods/a",
        &[JSON],
        r#"{"propagationPolicy":"Background"}"#,
    )
    .await;
    assert_eq!(deleted.status, 200);
    let again = http(s.addr(), "DELETE", "/api/v1/namespaces/default/pods/a", &[], "").await;
    assert_eq!(again.status, 404);
}

#[tokio::test]
async fn list_pages_are_consistent_and_expired_continue_tokens_get_410() {
    let s = TestApiServer::start(Config { history_size: 5, ..Config::default() }).await.unwrap();
    s.bulk_create_pods((0..7).map(|i| generate::pod("default", &format!("p{i}"), None, &[])))
        .unwrap();
    let first =
        http(s.addr(), "GET", "/api/v1/namespaces/default/pods?limit=3", &[], "").await.json();
    assert_eq!(first["items"].as_array().unwrap().len(), 3);
    assert_eq!(first["metadata"]["remainingItemCount"], 4);
    let token = first["metadata"]["continue"].as_str().unwrap().to_owned();
    // A write after the first page does not show up in later pages.
    s.bulk_create_pods([generate::pod("default", "p99", None, &[])]).unwrap();
    let second = http(
        s.addr(),
        "GET",
        &format!("/api/v1/namespaces/default/pods?limit=10&continue={token}"),
        &[],
        "",
    )
    .await
    .json();
    let names: Vec<&str> = second["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["p3", "p4", "p5", "p6"]);
    assert_eq!(second["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"]);
    // Push the first page's version out of the history.
    s.bulk_create_pods((0..10).map(|i| generate::pod("default", &format!("q{i}"), None, &[])))
        .unwrap();
    let expired = http(
        s.addr(),
        "GET",
        &format!("/api/v1/namespaces/default/pods?limit=10&continue={token}"),
        &[],
        "",
    )
    .await;
    assert_eq!(expired.status, 410);
    assert_eq!(expired.json()["reason"], "Expired");
}

#[tokio::test]
async fn list_at_an_exact_resource_version_shows_the_past() {
    let s = server().await;
    let rv = s.bulk_create_pods([generate::pod("default", "a", None, &[])]).unwrap();
    s.bulk_create_pods([generate::pod("default", "b", None, &[])]).unwrap();
    let past = http(
        s.addr(),
        "GET",
        &format!("/api/v1/pods?resourceVersion={rv}&resourceVersionMatch=Exact"),
        &[],
        "",
    )
    .await
    .json();
    assert_eq!(past["items"].as_array().unwrap().len(), 1);
    assert_eq!(past["metadata"]["resourceVersion"], rv.to_string());
    let now = http(s.addr(), "GET", "/api/v1/pods?resourceVersion=0", &[], "").await.json();
    assert_eq!(now["items"].as_array().unwrap().len(), 2);
    let forbidden = http(s.addr(), "GET", "/api/v1/pods?resourceVersionMatch=Exact", &[], "").await;
    assert_eq!(forbidden.status, 422);
}

#[tokio::test]
async fn watch_from_compacted_version_gets_410_error_event() {
    let s = TestApiServer::start(Config { history_size: 2, ..Config::default() }).await.unwrap();
    s.bulk_create_pods((0..5).map(|i| generate::pod("default", &format!("p{i}"), None, &[])))
        .unwrap();
    let answer = http(
        s.addr(),
        "GET",
        "/api/v1/pods?watch=true&resourceVersion=1&timeoutSeconds=2",
        &[],
        "",
    )
    .await;
    assert_eq!(answer.status, 200, "a too-old watch is still HTTP 200");
    let events = events(&answer.body);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
    assert_eq!(events[0]["object"]["reason"], "Expired");
}

#[tokio::test]
async fn watch_with_selectors_sees_objects_enter_and_leave_the_selection() {
    let s = server().await;
    let rv = s.resource_version();
    let merge = ("Content-Type", "application/merge-patch+json");
    http(
        s.addr(),
        "POST",
        "/api/v1/namespaces/default/pods",
        &[JSON],
        &pod_json("a", r#"{"app":"x"}"#),
    )
    .await;
    http(
        s.addr(),
        "POST",
        "/api/v1/namespaces/default/pods",
        &[JSON],
        &pod_json("b", r#"{"app":"y"}"#),
    )
    .await;
    http(
        s.addr(),
        "PATCH",
        "/api/v1/namespaces/default/pods/b",
        &[merge],
        r#"{"metadata":{"labels":{"app":"x"}}}"#,
    )
    .await;
    http(
        s.addr(),
        "PATCH",
        "/api/v1/namespaces/default/pods/a",
        &[merge],
        r#"{"metadata":{"labels":{"app":"z"}}}"#,
    )
    .await;
    let answer = http(s.addr(), "GET", &format!("/api/v1/watch/namespaces/default/pods?resourceVersion={rv}&labelSelector=app%3Dx&timeoutSeconds=1"), &[], "").await;
    let seen: Vec<(String, String)> = events(&answer.body)
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["object"]["metadata"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected = [("ADDED", "a"), ("ADDED", "b"), ("DELETED", "a")];
    assert_eq!(seen, expected.map(|(t, n)| (t.to_owned(), n.to_owned())));
}

#[tokio::test]
async fn streaming_list_watch_ends_initial_events_with_the_annotated_bookmark() {
    let s = server().await;
    s.bulk_create_pods((0..3).map(|i| generate::pod("default", &format!("p{i}"), None, &[])))
        .unwrap();
    let answer = http(s.addr(), "GET", "/api/v1/pods?&watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1", &[], "").await;
    let events = events(&answer.body);
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(&types[..4], ["ADDED", "ADDED", "ADDED", "BOOKMARK"]);
    assert_eq!(events[3]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    assert_eq!(
        events[3]["object"]["metadata"]["resourceVersion"],
        s.resource_version().to_string()
    );
    let invalid =
        http(s.addr(), "GET", "/api/v1/pods?watch=true&sendInitialEvents=true", &[], "").await;
    assert_eq!(invalid.status, 422);
}

#[tokio::test]
async fn table_lists_carry_column_definitions_and_rows() {
    let s = server().await;
    s.bulk_create_nodes(generate::nodes(2)).unwrap();
    let table = http(
        s.addr(),
        "GET",
        "/api/v1/nodes",
        &[("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")],
        "",
    )
    .await
    .json();
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["columnDefinitions"][0]["name"], "Name");
    assert_eq!(table["rows"][0]["cells"][0], "node-00000");
    assert_eq!(table["rows"][0]["cells"][1], "Ready");
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
}

#[tokio::test]
async fn discovery_documents_describe_the_served_resources() {
    let s = server().await;
    let core = http(s.addr(), "GET", "/api/v1", &[], "").await.json();
    let names: Vec<&str> =
        core["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"pods") && names.contains(&"pods/status") && names.contains(&"nodes"));
    let apps = http(s.addr(), "GET", "/apis/apps/v1", &[], "").await.json();
    assert_eq!(apps["groupVersion"], "apps/v1");
    let groups = http(s.addr(), "GET", "/apis", &[], "").await.json();
    assert_eq!(groups["groups"][0]["name"], "apps");
    let version = http(s.addr(), "GET", "/version?timeout=5s", &[], "").await.json();
    assert_eq!(version["major"], "1");
    let openapi = http(s.addr(), "GET", "/openapi/v2", &[], "").await;
    assert_eq!(openapi.status, 200);
    assert!(openapi.header("content-type").unwrap().contains("protobuf"));
}

#[tokio::test]
async fn faults_can_be_changed_at_run_time_over_http() {
    let s = server().await;
    let set = http(
        s.addr(),
        "PUT",
        "/debug/snapinformer/faults",
        &[JSON],
        r#"{"throttleFraction":1.0,"retryAfterSeconds":7}"#,
    )
    .await;
    assert_eq!(set.status, 200, "{}", set.body);
    let throttled = http(s.addr(), "GET", "/api/v1/pods", &[], "").await;
    assert_eq!(throttled.status, 429);
    assert_eq!(throttled.header("retry-after"), Some("7"));
    // Discovery is never throttled, so kubectl can still start.
    assert_eq!(http(s.addr(), "GET", "/version", &[], "").await.status, 200);
    s.faults().update(|f| {
        f.throttle_fraction = 0.0;
        f.error_fraction = 1.0;
    });
    assert_eq!(http(s.addr(), "GET", "/api/v1/pods", &[], "").await.status, 500);
    s.faults().clear();
    assert_eq!(http(s.addr(), "GET", "/api/v1/pods", &[], "").await.status, 200);
    assert_eq!(s.faults().stats().throttled, 1);
}

#[tokio::test]
async fn slow_watcher_is_cut_off_with_a_410_error_instead_of_blocking_writers() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = TestApiServer::start(Config { history_size: 100, ..Config::default() }).await.unwrap();
    let rv = s.resource_version();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = common::bounded("connect", socket.connect(s.addr())).await.unwrap();
    let request = format!(
        "GET /api/v1/pods?watch=true&resourceVersion={rv} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    // 2,000 pods of about 10 KiB each: far more than the socket and channel buffers hold,
    // written while the watcher reads nothing. Writers must not wait for it.
    let padding = "x".repeat(10_000);
    for batch in 0..20 {
        let pods = (0..100).map(|i| {
            let mut pod = generate::pod("default", &format!("p{batch}-{i}"), None, &[]);
            pod.metadata.annotations = Some([("padding".to_owned(), padding.clone())].into());
            pod
        });
        s.bulk_create_pods(pods).unwrap();
    }
    let mut raw = Vec::new();
    common::bounded("read watch", stream.read_to_end(&mut raw)).await.unwrap();
    let text = String::from_utf8_lossy(&raw);
    let last = text.lines().rfind(|l| l.starts_with("{\"type\"")).expect("some events");
    let last: Value = serde_json::from_str(last).unwrap();
    assert_eq!(last["type"], "ERROR");
    assert_eq!(last["object"]["code"], 410);
}

#[tokio::test]
async fn injected_latency_delays_resource_requests() {
    let s = server().await;
    s.faults().update(|f| f.latency_ms = 200);
    let started = std::time::Instant::now();
    assert_eq!(http(s.addr(), "GET", "/api/v1/pods", &[], "").await.status, 200);
    assert!(started.elapsed() >= std::time::Duration::from_millis(200));
}

#[tokio::test]
async fn table_watch_events_are_one_row_tables() {
    let s = server().await;
    let rv = s.resource_version();
    s.bulk_create_pods([generate::pod("default", "a", Some("n1"), &[])]).unwrap();
    let accept = ("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json");
    let answer = http(
        s.addr(),
        "GET",
        &format!(
            "/api/v1/namespaces/default/pods?watch=true&resourceVersion={rv}&timeoutSeconds=1"
        ),
        &[accept],
        "",
    )
    .await;
    let events = events(&answer.body);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["kind"], "Table");
    assert_eq!(events[0]["object"]["rows"][0]["cells"][0], "a");
    assert_eq!(events[0]["object"]["rows"][0]["cells"][6], "n1");
}

#[tokio::test]
async fn delete_collection_removes_only_selected_objects() {
    let s = server().await;
    s.bulk_create_pods([
        generate::pod("default", "a", None, &[("app", "x")]),
        generate::pod("default", "b", None, &[("app", "y")]),
        generate::pod("kube-system", "c", None, &[("app", "x")]),
    ])
    .unwrap();
    let deleted =
        http(s.addr(), "DELETE", "/api/v1/namespaces/default/pods?labelSelector=app%3Dx", &[], "")
            .await;
    assert_eq!(deleted.status, 200);
    assert_eq!(deleted.json()["items"][0]["metadata"]["name"], "a");
    let left = http(s.addr(), "GET", "/api/v1/pods", &[], "").await.json();
    let names: Vec<&str> = left["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["b", "c"]);
}

#[tokio::test]
async fn dry_run_create_validates_without_storing() {
    let s = server().await;
    let before = s.resource_version();
    let answer = http(
        s.addr(),
        "POST",
        "/api/v1/namespaces/default/pods?dryRun=All",
        &[JSON],
        &pod_json("a", "{}"),
    )
    .await;
    assert_eq!(answer.status, 201);
    assert_eq!(answer.json()["metadata"]["name"], "a");
    assert_eq!(s.resource_version(), before);
    assert_eq!(
        http(s.addr(), "GET", "/api/v1/namespaces/default/pods/a", &[], "").await.status,
        404
    );
}

#[tokio::test]
async fn statefulset_generation_moves_only_when_the_spec_changes() {
    let s = server().await;
    s.create(&generate::statefulset("default", "web", 1)).unwrap();
    let merge = ("Content-Type", "application/merge-patch+json");
    let path = "/apis/apps/v1/namespaces/default/statefulsets/web";
    let labels = http(s.addr(), "PATCH", path, &[merge], r#"{"metadata":{"labels":{"a":"b"}}}"#)
        .await
        .json();
    assert_eq!(labels["metadata"]["generation"], 1);
    let scaled = http(s.addr(), "PATCH", path, &[merge], r#"{"spec":{"replicas":3}}"#).await.json();
    assert_eq!(scaled["metadata"]["generation"], 2);
    let status = http(
        s.addr(),
        "PATCH",
        &format!("{path}/status"),
        &[merge],
        r#"{"status":{"replicas":3,"readyReplicas":3}}"#,
    )
    .await
    .json();
    assert_eq!(status["metadata"]["generation"], 2);
    assert_eq!(status["status"]["readyReplicas"], 3);
}

#[tokio::test]
async fn watch_streams_are_cut_at_random_when_asked() {
    let s = server().await;
    s.bulk_create_pods((0..50).map(|i| generate::pod("default", &format!("p{i}"), None, &[])))
        .unwrap();
    s.faults().update(|f| f.watch_cut_probability = 1.0);
    let answer = http(s.addr(), "GET", "/api/v1/pods?watch=true&timeoutSeconds=5", &[], "").await;
    assert_eq!(events(&answer.body).len(), 1, "cut right after the first event");
    assert_eq!(s.faults().stats().watches_cut, 1);
}

#[tokio::test]
async fn restart_with_compacted_history_ends_open_watches_and_refuses_older_versions() {
    let s = server().await;
    let old = s.resource_version();
    s.bulk_create_pods([generate::pod("default", "a", None, &[])]).unwrap();
    let addr = s.addr();
    let open = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let answer = http(
            addr,
            "GET",
            "/api/v1/pods?watch=true&resourceVersion=0&timeoutSeconds=30",
            &[],
            "",
        )
        .await;
        (answer, started.elapsed())
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    s.restart_with_compacted_history();
    let (answer, took) = common::bounded("open watch ends", open).await.unwrap();
    assert!(took < std::time::Duration::from_secs(10), "the stream ended at the restart");
    assert_eq!(events(&answer.body).len(), 1, "it had received the initial ADDED");
    let expired = http(
        s.addr(),
        "GET",
        &format!("/api/v1/pods?watch=true&resourceVersion={old}&timeoutSeconds=1"),
        &[],
        "",
    )
    .await;
    assert_eq!(events(&expired.body)[0]["object"]["code"], 410);
    let current = http(
        s.addr(),
        "GET",
        &format!(
            "/api/v1/pods?watch=true&resourceVersion={}&timeoutSeconds=1",
            s.resource_version()
        ),
        &[],
        "",
    )
    .await;
    assert!(events(&current.body).is_empty(), "a watch from the current version is fine");
}

#[tokio::test]
async fn stop_serving_refuses_connections_and_start_serving_comes_back_with_the_same_objects() {
    let mut s = server().await;
    let old = s.resource_version();
    s.bulk_create_pods([generate::pod("default", "a", None, &[])]).unwrap();
    let addr = s.addr();
    let open = tokio::spawn(async move {
        http(addr, "GET", "/api/v1/pods?watch=true&resourceVersion=0&timeoutSeconds=30", &[], "")
            .await
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    common::bounded("stop serving", s.stop_serving()).await;
    assert!(!s.is_serving());
    let answer = common::bounded("open watch ends", open).await.unwrap();
    assert_eq!(events(&answer.body).len(), 1, "the open watch ended at the stop");
    let refused = tokio::net::TcpStream::connect(addr).await.unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);

    s.start_serving().await.unwrap();
    assert!(s.is_serving() && s.addr() == addr);
    let list = http(addr, "GET", "/api/v1/pods", &[], "").await;
    assert_eq!(list.status, 200);
    assert_eq!(list.json()["items"][0]["metadata"]["name"], "a");
    // The history survived: a watch from before the stop replays what came after.
    let replay = http(
        addr,
        "GET",
        &format!("/api/v1/pods?watch=true&resourceVersion={old}&timeoutSeconds=1"),
        &[],
        "",
    )
    .await;
    assert_eq!(events(&replay.body)[0]["type"], "ADDED");
}

#[tokio::test]
async fn binding_subresource_assigns_a_node_once() {
    let s = server().await;
    http(s.addr(), "POST", "/api/v1/namespaces/default/pods", &[JSON], &pod_json("a", "{}")).await;
    let binding = r#"{"apiVersion":"v1","kind":"Binding","metadata":{"name":"a"},"target":{"kind":"Node","name":"n1"}}"#;
    let path = "/api/v1/namespaces/default/pods/a/binding";
    let bound = http(s.addr(), "POST", path, &[JSON], binding).await;
    assert_eq!(bound.status, 201, "{}", bound.body);
    assert_eq!(bound.json()["status"], "Success");
    let pod = http(s.addr(), "GET", "/api/v1/namespaces/default/pods/a", &[], "").await.json();
    assert_eq!(pod["spec"]["nodeName"], "n1");
    let again = http(s.addr(), "POST", path, &[JSON], binding).await;
    assert_eq!(again.status, 409);
    assert!(again.json()["message"].as_str().unwrap().contains("already assigned to node \"n1\""));
    let missing =
        http(s.addr(), "POST", "/api/v1/namespaces/default/pods/zz/binding", &[JSON], binding)
            .await;
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn scale_subresource_reads_and_changes_statefulset_replicas() {
    let s = server().await;
    s.create(&generate::statefulset("default", "web", 2)).unwrap();
    let path = "/apis/apps/v1/namespaces/default/statefulsets/web/scale";
    let scale = http(s.addr(), "GET", path, &[], "").await.json();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(scale["status"]["selector"], "app=web");
    let merge = ("Content-Type", "application/merge-patch+json");
    let patched =
        http(s.addr(), "PATCH", path, &[merge], r#"{"spec":{"replicas":4}}"#).await.json();
    assert_eq!(patched["spec"]["replicas"], 4);
    let mut put = patched.clone();
    put["spec"]["replicas"] = 1.into();
    let updated = http(s.addr(), "PUT", path, &[JSON], &put.to_string()).await;
    assert_eq!(updated.json()["spec"]["replicas"], 1);
    let stale = http(s.addr(), "PUT", path, &[JSON], &put.to_string()).await;
    assert_eq!(stale.status, 409, "the Scale's resourceVersion is a precondition");
    let negative = http(s.addr(), "PATCH", path, &[merge], r#"{"spec":{"replicas":-1}}"#).await;
    assert_eq!(negative.status, 422);
    let set = http(s.addr(), "GET", "/apis/apps/v1/namespaces/default/statefulsets/web", &[], "")
        .await
        .json();
    assert_eq!(
        (set["spec"]["replicas"].clone(), set["metadata"]["generation"].clone()),
        (1.into(), 3.into())
    );
}
