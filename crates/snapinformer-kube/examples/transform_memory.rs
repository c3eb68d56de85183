//! Measures what the `strip_managed_fields` transform saves: heap bytes held by 10,000 decoded
//! pods that carry the `managedFields` a real cluster writes (kube-controller-manager creating
//! the pod, the scheduler binding it, the kubelet updating its status), with and without the
//! transform, plus their JSON size. Counts allocations with the `cap` allocator.
//!
//! `cargo run -p snapinformer-kube --example transform_memory`

use std::{alloc::System, sync::Arc};

use cap::Cap;
use k8s_openapi::api::core::v1::Pod;
use snapinformer_kube::transform;

#[global_allocator]
static ALLOC: Cap<System> = Cap::new(System, usize::MAX);

const PODS: usize = 10_000;

/// A StatefulSet pod as a 1.33 cluster returns it, managedFields included.
fn pod_json(i: usize) -> String {
    format!(
        r#"{{
  "apiVersion": "v1", "kind": "Pod",
  "metadata": {{
    "name": "web-{i}", "namespace": "default", "uid": "6f1c2d3e-4b5a-4c6d-8e7f-{i:012}",
    "resourceVersion": "{rv}", "creationTimestamp": "2026-11-30T07:00:00Z", "generateName": "web-",
    "labels": {{"app": "web", "apps.kubernetes.io/pod-index": "{i}", "controller-revision-hash": "web-5d8f7c9b6",
               "statefulset.kubernetes.io/pod-name": "web-{i}"}},
    "ownerReferences": [{{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
      "uid": "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", "controller": true, "blockOwnerDeletion": true}}],
    "managedFields": [
      {{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
        "time": "2026-11-30T07:00:00Z", "fieldsType": "FieldsV1",
        "fieldsV1": {{"f:metadata": {{"f:generateName": {{}}, "f:labels": {{".": {{}}, "f:app": {{}},
          "f:apps.kubernetes.io/pod-index": {{}}, "f:controller-revision-hash": {{}},
          "f:statefulset.kubernetes.io/pod-name": {{}}}},
          "f:ownerReferences": {{".": {{}}, "k:{{\"uid\":\"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d\"}}": {{}}}}}},
          "f:spec": {{"f:containers": {{"k:{{\"name\":\"web\"}}": {{".": {{}}, "f:image": {{}},
            "f:imagePullPolicy": {{}}, "f:name": {{}}, "f:ports": {{".": {{}},
            "k:{{\"containerPort\":80,\"protocol\":\"TCP\"}}": {{".": {{}}, "f:containerPort": {{}}, "f:name": {{}}, "f:protocol": {{}}}}}},
            "f:resources": {{".": {{}}, "f:requests": {{".": {{}}, "f:cpu": {{}}, "f:memory": {{}}}}}},
            "f:terminationMessagePath": {{}}, "f:terminationMessagePolicy": {{}}}}}},
            "f:dnsPolicy": {{}}, "f:enableServiceLinks": {{}}, "f:hostname": {{}}, "f:restartPolicy": {{}},
            "f:schedulerName": {{}}, "f:securityContext": {{}}, "f:subdomain": {{}},
            "f:terminationGracePeriodSeconds": {{}}}}}}}},
      {{"manager": "kube-scheduler", "operation": "Update", "apiVersion": "v1",
        "time": "2026-11-30T07:00:01Z", "fieldsType": "FieldsV1", "subresource": "binding",
        "fieldsV1": {{"f:spec": {{"f:nodeName": {{}}}}}}}},
      {{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
        "time": "2026-11-30T07:00:05Z", "fieldsType": "FieldsV1", "subresource": "status",
        "fieldsV1": {{"f:status": {{"f:conditions": {{
          "k:{{\"type\":\"ContainersReady\"}}": {{".": {{}}, "f:lastProbeTime": {{}}, "f:lastTransitionTime": {{}}, "f:status": {{}}, "f:type": {{}}}},
          "k:{{\"type\":\"Initialized\"}}": {{".": {{}}, "f:lastProbeTime": {{}}, "f:lastTransitionTime": {{}}, "f:status": {{}}, "f:type": {{}}}},
          "k:{{\"type\":\"PodReadyToStartContainers\"}}": {{".": {{}}, "f:lastProbeTime": {{}}, "f:lastTransitionTime": {{}}, "f:status": {{}}, "f:type": {{}}}},
          "k:{{\"type\":\"Ready\"}}": {{".": {{}}, "f:lastProbeTime": {{}}, "f:lastTransitionTime": {{}}, "f:status": {{}}, "f:type": {{}}}}}},
          "f:containerStatuses": {{}}, "f:hostIP": {{}}, "f:hostIPs": {{}}, "f:phase": {{}}, "f:podIP": {{}},
          "f:podIPs": {{".": {{}}, "k:{{\"ip\":\"10.244.1.{ip}\"}}": {{".": {{}}, "f:ip": {{}}}}}}, "f:startTime": {{}}}}}}}}
    ]
  }},
  "spec": {{
    "containers": [{{"name": "web", "image": "registry.k8s.io/nginx-slim:0.27", "imagePullPolicy": "IfNotPresent",
      "ports": [{{"name": "web", "containerPort": 80, "protocol": "TCP"}}],
      "resources": {{"requests": {{"cpu": "100m", "memory": "64Mi"}}}},
      "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}}],
    "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "hostname": "web-{i}", "nodeName": "node-{node}",
    "restartPolicy": "Always", "schedulerName": "default-scheduler", "securityContext": {{}},
    "subdomain": "web", "terminationGracePeriodSeconds": 30
  }},
  "status": {{
    "phase": "Running", "hostIP": "172.18.0.{node}", "podIP": "10.244.1.{ip}", "startTime": "2026-11-30T07:00:01Z",
    "conditions": [
      {{"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": "2026-11-30T07:00:03Z"}},
      {{"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-30T07:00:01Z"}},
      {{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-30T07:00:05Z"}},
      {{"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-11-30T07:00:05Z"}}],
    "containerStatuses": [{{"name": "web", "ready": true, "restartCount": 0, "started": true,
      "image": "registry.k8s.io/nginx-slim:0.27", "imageID": "registry.k8s.io/nginx-slim@sha256:0123456789abcdef",
      "containerID": "containerd://{i:064}", "state": {{"running": {{"startedAt": "2026-11-30T07:00:04Z"}}}}}}]
  }}
}}"#,
        rv = 1000 + i,
        node = i % 100,
        ip = i % 250
    )
}

/// Heap bytes held by the pods `build` returns.
fn held(build: impl FnOnce() -> Vec<Arc<Pod>>) -> (usize, Vec<Arc<Pod>>) {
    let before = ALLOC.allocated();
    let pods = build();
    (ALLOC.allocated() - before, pods)
}

fn main() {
    let jsons: Vec<String> = (0..PODS).map(pod_json).collect();
    let json_with: usize = jsons
        .iter()
        .map(|j| serde_json::to_vec(&serde_json::from_str::<Pod>(j).unwrap()).unwrap().len())
        .sum();

    let (with, kept_with) =
        held(|| jsons.iter().map(|j| Arc::new(serde_json::from_str::<Pod>(j).unwrap())).collect());
    let (without, kept_without) = held(|| {
        jsons
            .iter()
            .map(|j| {
                let mut pod: Pod = serde_json::from_str(j).unwrap();
                transform::strip_managed_fields(&mut pod);
                Arc::new(pod)
            })
            .collect()
    });
    let json_without: usize =
        kept_without.iter().map(|p| serde_json::to_vec(&**p).unwrap().len()).sum();
    assert!(kept_with.iter().all(|p| p.metadata.managed_fields.is_some()));

    let pct = |a: usize, b: usize| 100.0 * (a - b) as f64 / a as f64;
    println!("pods: {PODS}");
    println!(
        "heap held, decoded Pod structs: with managedFields {:.1} MiB ({} B/pod), stripped {:.1} MiB ({} B/pod): {:.1}% less",
        with as f64 / 1048576.0,
        with / PODS,
        without as f64 / 1048576.0,
        without / PODS,
        pct(with, without)
    );
    println!(
        "JSON size: with managedFields {} B/pod, stripped {} B/pod: {:.1}% less",
        json_with / PODS,
        json_without / PODS,
        pct(json_with, json_without)
    );
}
