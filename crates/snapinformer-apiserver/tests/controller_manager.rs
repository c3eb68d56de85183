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
