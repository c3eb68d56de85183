//! API defaulting: the fields kube-apiserver fills in when it decodes an object of a served
//! kind (the `SetDefaults_*` functions of `k8s.io/kubernetes/pkg/apis/{core,apps}/v1`, and the
//! `Priority` admission plugin's `spec.priority` for pods), applied on every create, update and
//! patch as the real server applies them on every decode.
//!
//! Controllers rely on them: kube-controller-manager's DaemonSet controller dereferences
//! `spec.revisionHistoryLimit` without a check, and the StatefulSet controller reads
//! `spec.updateStrategy` and `spec.persistentVolumeClaimRetentionPolicy` the same way; a server
//! that stores objects without their defaults crashes it.
//!
//! Covered: `Pod` (and every pod template inside a StatefulSet or DaemonSet: DNS and restart
//! policy, security context, termination grace period, scheduler name, the service account
//! alias, container pull policy and termination message, port protocol, probe timings, secret
//! and config map volume modes; for pods alone also service links, requests from limits and
//! priority); `StatefulSet` (pod management and update strategy, partition, max unavailable,
//! PVC retention policy, replicas, revision history limit); `DaemonSet` (update strategy,
//! max unavailable and surge, revision history limit); `PersistentVolumeClaim` (volume mode,
//! phase); `Node` (allocatable from capacity). Not covered: defaults of fields the served
//! controllers and tools do not read (ephemeral containers, CSI and other volume sources,
//! topology spread, host-network ports).

use serde_json::{Map, Value, json};

use crate::resource::ResourceKind;

/// Fills in the defaults of `kind` in `value` (an object that went through the typed round
/// trip); fields already set are kept.
pub(crate) fn apply(kind: ResourceKind, value: &mut Value) {
    let Some(object) = value.as_object_mut() else { return };
    match kind {
        ResourceKind::Pod => {
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                pod_spec(spec);
                pod_only(spec);
            }
        }
        ResourceKind::StatefulSet => {
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                statefulset_spec(spec);
                template(spec);
            }
        }
        ResourceKind::DaemonSet => {
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                daemonset_spec(spec);
                template(spec);
            }
        }
        ResourceKind::PersistentVolumeClaim => {
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                default(spec, "volumeMode", json!("Filesystem"));
            }
            let status = object.entry("status").or_insert_with(|| json!({}));
            if let Some(status) = status.as_object_mut() {
                default(status, "phase", json!("Pending"));
            }
        }
        ResourceKind::Node => {
            if let Some(status) = object.get_mut("status").and_then(Value::as_object_mut)
                && let Some(capacity) = status.get("capacity").cloned()
            {
                default(status, "allocatable", capacity);
            }
        }
        ResourceKind::Namespace
        | ResourceKind::ControllerRevision
        | ResourceKind::Event
        | ResourceKind::EventsV1Event
        | ResourceKind::Lease => {}
    }
}

/// Sets `map[key]` to `value` unless it holds something other than null.
fn default(map: &mut Map<String, Value>, key: &str, value: Value) {
    match map.get(key) {
        Some(v) if !v.is_null() => {}
        _ => {
            map.insert(key.to_owned(), value);
        }
    }
}

/// Sets a string field unless it holds a non-empty string (Go's zero value is the empty
/// string, which counts as unset).
fn default_str(map: &mut Map<String, Value>, key: &str, value: &str) {
    if map.get(key).and_then(Value::as_str).is_none_or(str::is_empty) {
        map.insert(key.to_owned(), Value::String(value.to_owned()));
    }
}

/// Sets a number field unless it holds a non-zero number (zero counts as unset).
fn default_nonzero(map: &mut Map<String, Value>, key: &str, value: i64) {
    if map.get(key).and_then(Value::as_i64).is_none_or(|v| v == 0) {
        map.insert(key.to_owned(), json!(value));
    }
}

/// The defaults of the pod template in a workload's `spec.template.spec`.
fn template(spec: &mut Map<String, Value>) {
    if let Some(pod) =
        spec.get_mut("template").and_then(|t| t.get_mut("spec")).and_then(Value::as_object_mut)
    {
        pod_spec(pod);
    }
}

fn statefulset_spec(spec: &mut Map<String, Value>) {
    default_str(spec, "podManagementPolicy", "OrderedReady");
    let strategy = spec.entry("updateStrategy").or_insert_with(|| json!({}));
    if let Some(strategy) = strategy.as_object_mut() {
        if strategy.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
            strategy.insert("type".into(), json!("RollingUpdate"));
            default(strategy, "rollingUpdate", json!({}));
        }
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate")
            && let Some(rolling) = strategy.get_mut("rollingUpdate").and_then(Value::as_object_mut)
        {
            default(rolling, "partition", json!(0));
            // The MaxUnavailableStatefulSet feature is on by default from 1.37.
            default(rolling, "maxUnavailable", json!(1));
        }
    }
    let retention = spec.entry("persistentVolumeClaimRetentionPolicy").or_insert_with(|| json!({}));
    if let Some(retention) = retention.as_object_mut() {
        default_str(retention, "whenDeleted", "Retain");
        default_str(retention, "whenScaled", "Retain");
    }
    default(spec, "replicas", json!(1));
    default(spec, "revisionHistoryLimit", json!(10));
}

fn daemonset_spec(spec: &mut Map<String, Value>) {
    let strategy = spec.entry("updateStrategy").or_insert_with(|| json!({}));
    if let Some(strategy) = strategy.as_object_mut() {
        default_str(strategy, "type", "RollingUpdate");
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            default(strategy, "rollingUpdate", json!({}));
            if let Some(rolling) = strategy.get_mut("rollingUpdate").and_then(Value::as_object_mut)
            {
                default(rolling, "maxUnavailable", json!(1));
                default(rolling, "maxSurge", json!(0));
            }
        }
    }
    default(spec, "revisionHistoryLimit", json!(10));
}

/// Defaults of every pod spec, pods' and templates' alike.
fn pod_spec(spec: &mut Map<String, Value>) {
    // `serviceAccount` is the deprecated alias of `serviceAccountName`; the name wins.
    let account = spec
        .get("serviceAccountName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .or_else(|| spec.get("serviceAccount").and_then(Value::as_str))
        .unwrap_or("")
        .to_owned();
    if account.is_empty() {
        spec.remove("serviceAccount");
    } else {
        spec.insert("serviceAccountName".into(), json!(account));
        spec.insert("serviceAccount".into(), json!(account));
    }
    default_str(spec, "dnsPolicy", "ClusterFirst");
    default_str(spec, "restartPolicy", "Always");
    default(spec, "securityContext", json!({}));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default_str(spec, "schedulerName", "default-scheduler");
    for list in ["containers", "initContainers"] {
        for container in containers(spec, list) {
            container_defaults(container);
        }
    }
    if let Some(volumes) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        for volume in volumes {
            for source in ["secret", "configMap"] {
                if let Some(source) = volume.get_mut(source).and_then(Value::as_object_mut) {
                    default(source, "defaultMode", json!(420));
                }
            }
        }
    }
}

/// Defaults of a pod that a pod template does not get.
fn pod_only(spec: &mut Map<String, Value>) {
    default(spec, "enableServiceLinks", json!(true));
    // The Priority admission plugin: no priority class means priority 0.
    if spec.get("priorityClassName").and_then(Value::as_str).is_none_or(str::is_empty) {
        default(spec, "priority", json!(0));
    }
    default_str(spec, "preemptionPolicy", "PreemptLowerPriority");
    for list in ["containers", "initContainers"] {
        for container in containers(spec, list) {
            // Requests default to the limits that are set.
            let Some(resources) = container.get_mut("resources").and_then(Value::as_object_mut)
            else {
                continue;
            };
            let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() else {
                continue;
            };
            let requests = resources.entry("requests").or_insert_with(|| json!({}));
            if let Some(requests) = requests.as_object_mut() {
                for (key, value) in limits {
                    requests.entry(key).or_insert(value);
                }
            }
        }
    }
}

fn containers<'a>(
    spec: &'a mut Map<String, Value>,
    list: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    spec.get_mut(list)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn container_defaults(container: &mut Map<String, Value>) {
    let image = container.get("image").and_then(Value::as_str).unwrap_or("");
    let policy = if image_tag(image) == "latest" { "Always" } else { "IfNotPresent" };
    default_str(container, "imagePullPolicy", policy);
    default_str(container, "terminationMessagePath", "/dev/termination-log");
    default_str(container, "terminationMessagePolicy", "File");
    if let Some(ports) = container.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            default_str(port, "protocol", "TCP");
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = container.get_mut(probe).and_then(Value::as_object_mut) {
            default_nonzero(probe, "timeoutSeconds", 1);
            default_nonzero(probe, "periodSeconds", 10);
            default_nonzero(probe, "successThreshold", 1);
            default_nonzero(probe, "failureThreshold", 3);
            if let Some(get) = probe.get_mut("httpGet").and_then(Value::as_object_mut) {
                default_str(get, "path", "/");
                default_str(get, "scheme", "HTTP");
            }
        }
    }
}

/// The tag of an image reference: `latest` when it has neither tag nor digest, empty when it
/// has only a digest.
fn image_tag(image: &str) -> &str {
    let name = image.split('@').next().unwrap_or(image);
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, tag)) => tag,
        None if image.contains('@') => "",
        None => "latest",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daemonset_gets_its_update_strategy_and_history_limit() {
        let mut ds = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "img:1"}]}}}});
        apply(ResourceKind::DaemonSet, &mut ds);
        assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(ds["spec"]["updateStrategy"]["type"], "RollingUpdate");
        assert_eq!(ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"], 1);
        assert_eq!(ds["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"], 0);
        let container = &ds["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["imagePullPolicy"], "IfNotPresent");
        assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(ds["spec"]["template"]["spec"]["schedulerName"], "default-scheduler");
        assert!(
            ds["spec"]["template"]["spec"].get("enableServiceLinks").is_none(),
            "templates do not get pod-only defaults"
        );
    }

    #[test]
    fn a_statefulset_keeps_what_is_set_and_gets_the_rest() {
        let mut set = json!({"spec": {"replicas": 0, "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"}, "template": {"spec": {"containers": []}}}});
        apply(ResourceKind::StatefulSet, &mut set);
        assert_eq!(set["spec"]["replicas"], 0, "zero replicas is a value, not unset");
        assert_eq!(set["spec"]["podManagementPolicy"], "Parallel");
        assert!(set["spec"]["updateStrategy"].get("rollingUpdate").is_none());
        assert_eq!(set["spec"]["persistentVolumeClaimRetentionPolicy"]["whenScaled"], "Retain");
        assert_eq!(set["spec"]["revisionHistoryLimit"], 10);
        let mut plain = json!({"spec": {"template": {"spec": {"containers": []}}}});
        apply(ResourceKind::StatefulSet, &mut plain);
        assert_eq!(plain["spec"]["podManagementPolicy"], "OrderedReady");
        assert_eq!(plain["spec"]["replicas"], 1);
        assert_eq!(plain["spec"]["updateStrategy"]["rollingUpdate"]["partition"], 0);
    }

    #[test]
    fn a_pod_gets_priority_service_links_and_requests_from_limits() {
        let mut pod = json!({"spec": {"serviceAccount": "sa", "containers": [{"name": "c", "image": "img",
            "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Mi"}},
            "ports": [{"containerPort": 80}]}]}});
        apply(ResourceKind::Pod, &mut pod);
        let spec = &pod["spec"];
        assert_eq!(spec["priority"], 0);
        assert_eq!(spec["enableServiceLinks"], true);
        assert_eq!(spec["serviceAccountName"], "sa");
        assert_eq!(spec["containers"][0]["imagePullPolicy"], "Always", "untagged means latest");
        assert_eq!(
            spec["containers"][0]["resources"]["requests"],
            json!({"cpu": "1", "memory": "1Mi"})
        );
        assert_eq!(spec["containers"][0]["ports"][0]["protocol"], "TCP");
    }

    #[test]
    fn image_tags_are_read_past_registry_ports_and_digests() {
        assert_eq!(image_tag("registry:5000/pause"), "latest");
        assert_eq!(image_tag("registry:5000/pause:3.10"), "3.10");
        assert_eq!(image_tag("pause@sha256:abc"), "");
        assert_eq!(image_tag("pause:latest"), "latest");
    }
}
