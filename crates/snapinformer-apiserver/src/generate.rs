//! Object generators for large scenarios: nodes, StatefulSets with their pods, DaemonSets.
//!
//! The objects are complete but small (a generated pod has one container with an image and
//! resource requests, about 430 bytes of JSON once stored; real pods are often 2-10 times
//! larger). Feed them to [`crate::ServerHandle::bulk_create`] or post them over HTTP.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    Container, Node, NodeCondition, NodeStatus, NodeSystemInfo, Pod, PodSpec, PodTemplateSpec,
    ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};

/// The pause image every generated container runs.
pub const IMAGE: &str = "registry.k8s.io/pause:3.10";

fn container() -> Container {
    Container {
        name: "app".into(),
        image: Some(IMAGE.into()),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_owned(), Quantity("10m".into())),
                ("memory".to_owned(), Quantity("16Mi".into())),
            ])),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A pending pod with one container, optionally bound to `node`.
pub fn pod(namespace: &str, name: &str, node: Option<&str>, labels: &[(&str, &str)]) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![container()],
            node_name: node.map(Into::into),
            ..Default::default()
        }),
        status: None,
    }
}

/// `count` Ready nodes named `node-00000`, `node-00001`, ...
pub fn nodes(count: usize) -> Vec<Node> {
    (0..count)
        .map(|i| {
            let name = format!("node-{i:05}");
            Node {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    labels: Some(BTreeMap::from([
                        ("kubernetes.io/hostname".to_owned(), name),
                        ("kubernetes.io/os".to_owned(), "linux".to_owned()),
                    ])),
                    ..Default::default()
                },
                spec: None,
                status: Some(NodeStatus {
                    conditions: Some(vec![NodeCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        reason: Some("KubeletReady".into()),
                        ..Default::default()
                    }]),
                    capacity: Some(BTreeMap::from([
                        ("cpu".to_owned(), Quantity("32".into())),
                        ("memory".to_owned(), Quantity("128Gi".into())),
                        ("pods".to_owned(), Quantity("110".into())),
                    ])),
                    node_info: Some(NodeSystemInfo {
                        kubelet_version: "v1.33.0".into(),
                        os_image: "snapinformer simulated node".into(),
                        container_runtime_version: "containerd://2.0.0".into(),
                        kernel_version: "6.1.0".into(),
                        operating_system: "linux".into(),
                        architecture: "amd64".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            }
        })
        .collect()
}

fn template(labels: &BTreeMap<String, String>) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta { labels: Some(labels.clone()), ..Default::default() }),
        spec: Some(PodSpec { containers: vec![container()], ..Default::default() }),
    }
}

/// A StatefulSet with `replicas` and label `app=<name>`.
pub fn statefulset(namespace: &str, name: &str, replicas: i32) -> StatefulSet {
    let labels = BTreeMap::from([("app".to_owned(), name.to_owned())]);
    StatefulSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector { match_labels: Some(labels.clone()), ..Default::default() },
            service_name: Some(name.into()),
            template: template(&labels),
            ..Default::default()
        }),
        status: None,
    }
}

/// A DaemonSet with label `app=<name>`.
pub fn daemonset(namespace: &str, name: &str) -> DaemonSet {
    let labels = BTreeMap::from([("app".to_owned(), name.to_owned())]);
    DaemonSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        spec: Some(DaemonSetSpec {
            selector: LabelSelector { match_labels: Some(labels.clone()), ..Default::default() },
            template: template(&labels),
            ..Default::default()
        }),
        status: None,
    }
}

/// The pods a StatefulSet controller would create for `set` (`<name>-0` .. `<name>-<n-1>`),
/// owned by it (when it has a uid) and spread round-robin over `nodes` (unbound if empty).
pub fn statefulset_pods(set: &StatefulSet, nodes: &[String]) -> Vec<Pod> {
    let name = set.metadata.name.clone().unwrap_or_default();
    let namespace = set.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let replicas = set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as usize;
    let owner = set.metadata.uid.as_ref().map(|uid| OwnerReference {
        api_version: "apps/v1".into(),
        kind: "StatefulSet".into(),
        name: name.clone(),
        uid: uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    });
    (0..replicas)
        .map(|i| {
            let pod_name = format!("{name}-{i}");
            let node = (!nodes.is_empty()).then(|| nodes[i % nodes.len()].as_str());
            let index = i.to_string();
            let mut pod = pod(
                &namespace,
                &pod_name,
                node,
                &[
                    ("app", &name),
                    ("statefulset.kubernetes.io/pod-name", &pod_name),
                    ("apps.kubernetes.io/pod-index", &index),
                ],
            );
            pod.metadata.owner_references = owner.clone().map(|o| vec![o]);
            if let Some(spec) = pod.spec.as_mut() {
                spec.hostname = Some(pod_name.clone());
                spec.subdomain = Some(name.clone());
            }
            pod
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statefulset_pods_are_numbered_and_spread_over_nodes() {
        let mut set = statefulset("ns", "web", 3);
        set.metadata.uid = Some("u1".into());
        let pods = statefulset_pods(&set, &["n0".into(), "n1".into()]);
        let names: Vec<_> = pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
        assert_eq!(names, ["web-0", "web-1", "web-2"]);
        let nodes: Vec<_> =
            pods.iter().map(|p| p.spec.as_ref().unwrap().node_name.clone().unwrap()).collect();
        assert_eq!(nodes, ["n0", "n1", "n0"]);
        assert_eq!(pods[0].metadata.owner_references.as_ref().unwrap()[0].uid, "u1");
    }
}
