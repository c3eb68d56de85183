//! What kube-controller-manager's StatefulSet and DaemonSet controllers need from the server:
//! controller revisions, claims, events in both groups, leases, API defaults, and the
//! server-side counting (`/metrics`, audit log) that attributes their requests.

mod common;

use common::http;
use serde_json::{Value, json};
use snapinformer_apiserver::{Config, ServerHandle, TestApiServer};

const JSON: (&str, &str) = ("Content-Type", "application/json");

async fn server(config: Config) -> ServerHandle {
    TestApiServer::start(config).await.expect("server starts")
}

#[tokio::test]
async fn controller_revisions_are_created_listed_and_owned_like_any_namespaced_object() {
    let s = server(Config::default()).await;
    let path = "/apis/apps/v1/namespaces/kube-system/controllerrevisions";
    let body = json!({"metadata": {"name": "kube-proxy-5d8f", "labels": {"app": "kube-proxy"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "kube-proxy",
            "uid": "u1", "controller": true}]},
        "data": {"spec": {"template": {"$patch": "replace"}}}, "revision": 1});
    let created = http(s.addr(), "POST", path, &[JSON], &body.to_string()).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.json()["kind"], "ControllerRevision");
    assert_eq!(created.json()["data"]["spec"]["template"]["$patch"], "replace");
    let again = http(s.addr(), "POST", path, &[JSON], &body.to_string()).await;
    assert_eq!(again.status, 409);
    let list =
        http(s.addr(), "GET", &format!("{path}?labelSelector=app%3Dkube-proxy"), &[], "").await;
    assert_eq!(list.json()["kind"], "ControllerRevisionList");
    assert_eq!(list.json()["items"].as_array().map(Vec::len), Some(1));
    let status = http(s.addr(), "GET", &format!("{path}/kube-proxy-5d8f/status"), &[], "").await;
    assert_eq!(status.status, 404, "controller revisions have no status subresource");
    let claims = http(s.addr(), "GET", "/api/v1/persistentvolumeclaims", &[], "").await;
    assert_eq!(
        (claims.status, claims.json()["kind"].clone()),
        (200, "PersistentVolumeClaimList".into())
    );
}

#[tokio::test]
async fn events_are_created_and_patched_in_both_groups_and_leases_are_served() {
    let s = server(Config::default()).await;
    let core = "/api/v1/namespaces/default/events";
    let event = json!({"metadata": {"name": "web.1"}, "involvedObject": {"kind": "StatefulSet",
        "namespace": "default", "name": "web"}, "reason": "SuccessfulCreate", "message": "create Pod web-0",
        "type": "Normal", "count": 1, "source": {"component": "statefulset-controller"}});
    assert_eq!(http(s.addr(), "POST", core, &[JSON], &event.to_string()).await.status, 201);
    let patched = http(
        s.addr(),
        "PATCH",
        &format!("{core}/web.1"),
        &[("Content-Type", "application/strategic-merge-patch+json")],
        r#"{"count":2,"message":"create Pod web-1"}"#,
    )
    .await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    assert_eq!(patched.json()["count"], 2);
    let by_object = http(
        s.addr(),
        "GET",
        &format!(
            "{core}?fieldSelector=involvedObject.name%3Dweb,involvedObject.kind%3DStatefulSet"
        ),
        &[],
        "",
    )
    .await;
    assert_eq!(by_object.json()["items"].as_array().map(Vec::len), Some(1));
    let v1 = "/apis/events.k8s.io/v1/namespaces/default/events";
    let new_event = json!({"metadata": {"name": "web.2"}, "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "x", "reportingInstance": "y", "action": "Create", "reason": "R",
        "regarding": {"kind": "Pod", "name": "web-0"}, "type": "Normal"});
    let created = http(s.addr(), "POST", v1, &[JSON], &new_event.to_string()).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.json()["apiVersion"], "events.k8s.io/v1");
    let lease = json!({"metadata": {"name": "kube-controller-manager"},
        "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}});
    let leases = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";
    let created = http(s.addr(), "POST", leases, &[JSON], &lease.to_string()).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let group = http(s.addr(), "GET", "/apis/coordination.k8s.io", &[], "").await;
    assert_eq!(group.json()["preferredVersion"]["groupVersion"], "coordination.k8s.io/v1");
    let missing = http(s.addr(), "GET", "/apis/batch/v1", &[], "").await;
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn created_workloads_and_pods_carry_the_api_defaults_controllers_dereference() {
    let s = server(Config::default()).await;
    let ds = json!({"metadata": {"name": "kube-proxy"}, "spec": {"selector": {"matchLabels": {"app": "p"}},
        "template": {"metadata": {"labels": {"app": "p"}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}});
    let created = http(
        s.addr(),
        "POST",
        "/apis/apps/v1/namespaces/default/daemonsets",
        &[JSON],
        &ds.to_string(),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let spec = &created.json()["spec"];
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["updateStrategy"]["rollingUpdate"]["maxSurge"], 0);
    assert_eq!(spec["template"]["spec"]["restartPolicy"], "Always");
    assert_eq!(spec["template"]["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
    // An update that leaves a defaulted field out gets it back, as the real server decodes it.
    let mut without = created.json();
    if let Some(spec) = without["spec"].as_object_mut() {
        spec.remove("revisionHistoryLimit");
    }
    let updated = http(
        s.addr(),
        "PUT",
        "/apis/apps/v1/namespaces/default/daemonsets/kube-proxy",
        &[JSON],
        &without.to_string(),
    )
    .await;
    assert_eq!(updated.status, 200, "{}", updated.body);
    assert_eq!(updated.json()["spec"]["revisionHistoryLimit"], 10);
    let pod =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}});
    let pod =
        http(s.addr(), "POST", "/api/v1/namespaces/default/pods", &[JSON], &pod.to_string()).await;
    assert_eq!(pod.json()["spec"]["priority"], 0);
    assert_eq!(pod.json()["spec"]["enableServiceLinks"], true);
    assert_eq!(pod.json()["spec"]["terminationGracePeriodSeconds"], 30);
}

/// The value of the `apiserver_request_total` series with these label values, 0 if absent.
fn count(metrics: &str, labels: &[(&str, &str)]) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| labels.iter().all(|(k, v)| l.contains(&format!("{k}=\"{v}\""))))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test]
async fn metrics_count_requests_by_verb_resource_and_code_and_the_audit_log_names_the_client() {
    let dir = std::env::temp_dir().join(format!("snapinformer-audit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let audit = dir.join("audit.log");
    let s = server(Config { audit_log_path: Some(audit.clone()), ..Config::default() }).await;
    let pods = "/api/v1/namespaces/default/pods";
    let pod = r#"{"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"i"}]}}"#;
    let agent = (
        "User-Agent",
        "kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/x/statefulset-controller",
    );
    assert_eq!(http(s.addr(), "POST", pods, &[JSON, agent], pod).await.status, 201);
    assert_eq!(http(s.addr(), "POST", pods, &[JSON, agent], pod).await.status, 409);
    assert_eq!(http(s.addr(), "GET", pods, &[], "").await.status, 200);
    let metrics = http(s.addr(), "GET", "/metrics", &[], "").await;
    assert_eq!(metrics.status, 200);
    let text = metrics.body;
    let create = [("resource", "pods"), ("verb", "POST"), ("scope", "resource")];
    assert_eq!(count(&text, &[create.as_slice(), &[("code", "201")]].concat()), 1);
    assert_eq!(count(&text, &[create.as_slice(), &[("code", "409")]].concat()), 1);
    assert_eq!(count(&text, &[("resource", "pods"), ("verb", "LIST"), ("scope", "namespace")]), 1);
    assert!(text.contains("apiserver_storage_objects{resource=\"pods\"} 1"), "{text}");
    s.close_audit_log();
    let lines: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let conflicts: Vec<&Value> =
        lines.iter().filter(|e| e["responseStatus"]["code"] == 409).collect();
    assert_eq!(conflicts.len(), 1, "{lines:?}");
    assert_eq!(conflicts[0]["verb"], "create");
    assert_eq!(conflicts[0]["responseStatus"]["reason"], "AlreadyExists");
    assert!(conflicts[0]["userAgent"].as_str().unwrap().ends_with("/statefulset-controller"));
    assert!(lines.iter().all(|e| e["objectRef"]["resource"] == "pods"), "/metrics is not audited");
    s.shutdown().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// One request with a binary body on a fresh connection; the answer's status, content type
/// and (de-chunked) body bytes.
async fn raw_http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await.expect("write");
        stream.write_all(body).await.expect("write");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.expect("read");
        raw
    };
    let raw = tokio::time::timeout(std::time::Duration::from_secs(20), exchange)
        .await
        .expect("the request finishes");
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("header end");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut rest = &raw[split + 4..];
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status");
    let header = |name: &str| {
        head.lines()
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim().to_owned())
            .unwrap_or_default()
    };
    let mut body = Vec::new();
    if header("transfer-encoding").contains("chunked") {
        while let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") {
            let size =
                usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap().trim(), 16)
                    .unwrap_or(0);
            if size == 0 {
                break;
            }
            body.extend_from_slice(&rest[line_end + 2..line_end + 2 + size]);
            rest = &rest[line_end + 4 + size..];
        }
    } else {
        body = rest.to_vec();
    }
    (status, header("content-type"), body)
}

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

#[tokio::test]
async fn clients_that_prefer_protobuf_get_it_and_may_send_it() {
    let s = server(Config::default()).await;
    let pods = "/api/v1/namespaces/default/pods";
    let pod = r#"{"metadata":{"name":"a","labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"i:1",
        "readinessProbe":{"httpGet":{"port":8080}}}]}}"#;
    assert_eq!(http(s.addr(), "POST", pods, &[JSON], pod).await.status, 201);
    let accept = ("Accept", "application/vnd.kubernetes.protobuf, */*");
    let (status, content_type, object) =
        raw_http(s.addr(), "GET", &format!("{pods}/a"), &[accept], b"").await;
    assert_eq!((status, content_type.as_str()), (200, PROTOBUF));
    assert!(object.starts_with(b"k8s\0"), "the envelope's magic");
    let (status, content_type, list) = raw_http(s.addr(), "GET", pods, &[accept], b"").await;
    assert_eq!((status, content_type.as_str()), (200, PROTOBUF));
    assert!(list.windows(7).any(|w| w == b"PodList"));
    // The protobuf object sent back as an update (same resourceVersion: a no-op) and as a
    // status update.
    for path in [format!("{pods}/a"), format!("{pods}/a/status")] {
        let (status, _, _) =
            raw_http(s.addr(), "PUT", &path, &[("Content-Type", PROTOBUF)], &object).await;
        assert_eq!(status, 200, "PUT {path}");
    }
    let json = http(s.addr(), "GET", &format!("{pods}/a"), &[], "").await.json();
    assert_eq!(json["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"], 8080);
    // A watch streams length-prefixed frames.
    let (status, content_type, stream) =
        raw_http(s.addr(), "GET", &format!("{pods}?watch=true&timeoutSeconds=1"), &[accept], b"")
            .await;
    assert_eq!(
        (status, content_type.as_str()),
        (200, "application/vnd.kubernetes.protobuf;stream=watch")
    );
    let len = u32::from_be_bytes(stream[..4].try_into().unwrap()) as usize;
    assert_eq!(stream.len(), 4 + len, "one ADDED event for the one pod");
    assert!(stream.windows(5).any(|w| w == b"ADDED"));
    // DeleteOptions in protobuf: the envelope with an empty message.
    let delete_options =
        [&b"k8s\0"[..], b"\x0a\x13\x0a\x02v1\x12\x0dDeleteOptions", b"\x12\x00"].concat();
    let (status, _, _) = raw_http(
        s.addr(),
        "DELETE",
        &format!("{pods}/a"),
        &[("Content-Type", PROTOBUF)],
        &delete_options,
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, _) =
        raw_http(s.addr(), "POST", pods, &[("Content-Type", PROTOBUF)], b"k8s\0garbage").await;
    assert_eq!(status, 400, "undecodable protobuf is a bad request");
}
