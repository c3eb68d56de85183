//! Pods for the tests: StatefulSet-style pods with the parts that repeat between pods (containers,
//! volumes, tolerations, owner references, managedFields) and the parts that do not.
#![allow(dead_code, unreachable_pub)]

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

/// What varies between generated pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodSpec {
    /// StatefulSet number.
    pub set: u32,
    /// Ordinal within the set.
    pub ordinal: u32,
    /// Incarnation (a re-created pod gets a new UID).
    pub incarnation: u32,
    /// Resource version.
    pub rv: u64,
    /// Node number (0: not scheduled).
    pub node: u32,
    /// Image version (rolling updates change it).
    pub image: u32,
    /// An extra label's value (0: absent).
    pub extra_label: u32,
    /// Phase: 0 Pending, 1 Running, 2 Succeeded.
    pub phase: u8,
    /// Whether the pod carries managedFields.
    pub managed_fields: bool,
}

/// The pod `p` describes, as `k8s_openapi` decodes it.
pub fn pod(p: &PodSpec) -> Pod {
    serde_json::from_value(pod_json(p)).expect("generated pods are valid pods")
}

/// The pod `p` describes, as JSON.
pub fn pod_json(p: &PodSpec) -> serde_json::Value {
    let set = format!("web-{}", p.set);
    let name = format!("{set}-{}", p.ordinal);
    let image = format!("registry.example.com/team/web-application:1.{}.0", p.image);
    let mut labels = json!({
        "app": set,
        "controller-revision-hash": format!("{set}-7c9d5f8b6d"),
        "statefulset.kubernetes.io/pod-name": name,
        "apps.kubernetes.io/pod-index": p.ordinal.to_string(),
    });
    if p.extra_label != 0 {
        labels["churn"] = json!(format!("value-{}", p.extra_label));
    }
    let container = |cname: &str, image: &str, port: u32| {
        json!({
            "name": cname, "image": image, "imagePullPolicy": "IfNotPresent",
            "ports": [{"containerPort": port, "name": "http", "protocol": "TCP"}],
            "env": (0..4).map(|e| json!({"name": format!("SETTING_{e}"), "value": format!("value-{e}-{set}")})).collect::<Vec<_>>(),
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
            "volumeMounts": [{"name": "data", "mountPath": "/var/lib/data"},
                             {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"
        })
    };
    let mut metadata = json!({
        "name": name, "namespace": "default", "generateName": format!("{set}-"),
        "uid": format!("{:08x}-aaaa-4bbb-8ccc-{:012x}", p.set * 100_000 + p.ordinal, p.incarnation),
        "resourceVersion": p.rv.to_string(), "creationTimestamp": "2026-11-30T07:00:00Z",
        "labels": labels,
        "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9102"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": set,
            "uid": format!("5e1f0c2a-0000-4b7e-9d3c-{:012x}", p.set), "controller": true, "blockOwnerDeletion": true}],
    });
    if p.managed_fields {
        metadata["managedFields"] = json!([
            {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
             "time": "2026-11-30T07:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}}},
                          "f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}}}}}},
            {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
             "time": format!("2026-11-30T07:{:02}:{:02}Z", p.ordinal % 60, p.rv % 60), "fieldsType": "FieldsV1",
             "subresource": "status",
             "fieldsV1": {"f:status": {"f:phase": {}, "f:podIP": {},
                          "f:podIPs": {".": {}, format!("k:{{\"ip\":\"10.1.{}.{}\"}}", p.set % 250, p.ordinal % 250): {".": {}, "f:ip": {}}}}}}
        ]);
    }
    let mut spec = json!({
        "containers": [container("app", &image, 8080), container("sidecar", "registry.example.com/proxy:2.4.1", 15001)],
        "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
        "schedulerName": "default-scheduler", "terminationGracePeriodSeconds": 30, "priority": 0,
        "enableServiceLinks": true, "hostname": name, "subdomain": set,
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": format!("data-{name}")}},
                    {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}]
    });
    if p.node != 0 {
        spec["nodeName"] = json!(format!("ip-10-0-{}-{}.ec2.internal", p.node / 250, p.node % 250));
    }
    let phase = ["Pending", "Running", "Succeeded"][usize::from(p.phase % 3)];
    let mut status = json!({"phase": phase, "qosClass": "Burstable"});
    if p.phase == 1 {
        status["podIP"] = json!(format!("10.1.{}.{}", p.set % 250, p.ordinal % 250));
        status["conditions"] = json!([
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T07:00:40Z"},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-30T07:00:01Z"}]);
        status["containerStatuses"] = json!([{
            "name": "app", "image": image, "ready": true, "restartCount": 0, "started": true,
            "imageID": format!("docker.io/library/web@sha256:{:064x}", p.image),
            "containerID": format!("containerd://{:064x}", u64::from(p.set) << 32 | u64::from(p.ordinal)),
            "state": {"running": {"startedAt": "2026-11-30T07:00:30Z"}}}]);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status})
}
