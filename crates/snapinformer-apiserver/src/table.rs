//! Server-side printing: `meta.k8s.io/v1 Table` answers with the columns `kubectl get` shows.

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::resource::ResourceKind;

/// What each row carries in `object` (the `includeObject` query parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub(crate) fn parse(value: Option<&str>) -> Self {
        match value {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

fn column(name: &str, kind: &str, priority: u8, description: &str) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": kind, "format": format, "description": description, "priority": priority})
}

/// Column definitions of a kind.
pub(crate) fn columns(kind: ResourceKind) -> Value {
    let name = column("Name", "string", 0, "Name must be unique within a namespace.");
    let age = column(
        "Age",
        "string",
        0,
        "CreationTimestamp is a timestamp representing the server time when this object was created.",
    );
    let cols = match kind {
        ResourceKind::Pod => vec![
            name,
            column(
                "Ready",
                "string",
                0,
                "The aggregate readiness state of this pod for accepting traffic.",
            ),
            column("Status", "string", 0, "The aggregate status of the containers in this pod."),
            column(
                "Restarts",
                "string",
                0,
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
            ),
            age,
            column(
                "IP",
                "string",
                1,
                "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            ),
            column(
                "Node",
                "string",
                1,
                "NodeName is a request to schedule this pod onto a specific node.",
            ),
            column(
                "Nominated Node",
                "string",
                1,
                "nominatedNodeName is set when this pod preempts other pods on the node.",
            ),
            column(
                "Readiness Gates",
                "string",
                1,
                "If specified, all readiness gates will be evaluated for pod readiness.",
            ),
        ],
        ResourceKind::Node => vec![
            name,
            column("Status", "string", 0, "The status of the node"),
            column("Roles", "string", 0, "The roles of the node"),
            age,
            column("Version", "string", 0, "Kubelet Version reported by the node."),
            column("Internal-IP", "string", 1, "List of internal IPs."),
            column("External-IP", "string", 1, "List of external IPs."),
            column("OS-Image", "string", 1, "OS Image reported by the node."),
            column("Kernel-Version", "string", 1, "Kernel Version reported by the node."),
            column(
                "Container-Runtime",
                "string",
                1,
                "Container Runtime Version reported by the node.",
            ),
        ],
        ResourceKind::Namespace => {
            vec![name, column("Status", "string", 0, "The status of the namespace"), age]
        }
        ResourceKind::StatefulSet => vec![
            name,
            column("Ready", "string", 0, "Number of the pod with ready state"),
            age,
            column("Containers", "string", 1, "Names of each container in the template."),
            column("Images", "string", 1, "Images referenced by each container in the template."),
        ],
        ResourceKind::DaemonSet => vec![
            name,
            column(
                "Desired",
                "integer",
                0,
                "The total number of nodes that should be running the daemon pod.",
            ),
            column(
                "Current",
                "integer",
                0,
                "The number of nodes that are running at least 1 daemon pod.",
            ),
            column(
                "Ready",
                "integer",
                0,
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
            ),
            column(
                "Up-to-date",
                "integer",
                0,
                "The total number of nodes that are running updated daemon pod",
            ),
            column(
                "Available",
                "integer",
                0,
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
            ),
            column(
                "Node Selector",
                "string",
                0,
                "NodeSelector is a selector which must be true for the pod to fit on a node.",
            ),
            age,
            column("Containers", "string", 1, "Names of each container in the template."),
            column("Images", "string", 1, "Images referenced by each container in the template."),
            column(
                "Selector",
                "string",
                1,
                "A label query over pods that are managed by the daemon set.",
            ),
        ],
        ResourceKind::ControllerRevision => vec![
            name,
            column("Controller", "string", 0, "The object that owns this revision."),
            column("Revision", "integer", 0, "Revision indicates the revision of the state."),
            age,
        ],
        ResourceKind::PersistentVolumeClaim => vec![
            name,
            column("Status", "string", 0, "Phase represents the current phase of the claim."),
            column("Volume", "string", 0, "The volume bound to this claim."),
            age,
        ],
        ResourceKind::Event | ResourceKind::EventsV1Event => vec![
            column("Last Seen", "string", 0, "Time of the most recent occurrence."),
            column("Type", "string", 0, "Type of this event (Normal, Warning)."),
            column("Reason", "string", 0, "Why the action was taken."),
            column("Object", "string", 0, "The object this event is about."),
            column("Message", "string", 0, "A human-readable description."),
        ],
        ResourceKind::Lease => {
            vec![name, column("Holder", "string", 0, "The holder of the lease."), age]
        }
    };
    Value::Array(cols)
}

/// Kubernetes' `HumanDuration` of a number of seconds.
pub(crate) fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    let (m, h) = (s / 60, s / 3600);
    let d = h / 24;
    let y = d / 365;
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 { format!("{m}m") } else { format!("{m}m{}s", s % 60) }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 { format!("{h}h") } else { format!("{h}h{}m", m % 60) }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 { format!("{d}d") } else { format!("{d}d{}h", h % 24) }
    } else if d < 365 * 2 {
        format!("{d}d")
    } else if d < 365 * 8 {
        if d % 365 == 0 { format!("{y}y") } else { format!("{y}y{}d", d % 365) }
    } else {
        format!("{y}y")
    }
}

fn age(obj: &Value) -> String {
    let Some(created) = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<Timestamp>().ok())
    else {
        return "<unknown>".into();
    };
    human_duration(Timestamp::now().as_second() - created.as_second())
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn int_at(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn or_none(s: String) -> String {
    if s.is_empty() { "<none>".into() } else { s }
}

fn template_containers(obj: &Value) -> (String, String) {
    let containers = obj
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> =
        containers.iter().map(|c| c.get("name").and_then(Value::as_str).unwrap_or("")).collect();
    let images: Vec<&str> =
        containers.iter().map(|c| c.get("image").and_then(Value::as_str).unwrap_or("")).collect();
    (names.join(","), images.join(","))
}

fn pod_cells(obj: &Value) -> Vec<Value> {
    let total = obj.pointer("/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
    let statuses = obj
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ready = statuses.iter().filter(|s| s.get("ready") == Some(&Value::Bool(true))).count();
    let restarts: i64 = statuses.iter().map(|s| int_at(s, "/restartCount")).sum();
    let mut reason = str_at(obj, "/status/reason").to_owned();
    if reason.is_empty() {
        reason = str_at(obj, "/status/phase").to_owned();
    }
    for status in &statuses {
        let waiting = str_at(status, "/state/waiting/reason");
        let terminated = str_at(status, "/state/terminated/reason");
        if !waiting.is_empty() {
            reason = waiting.to_owned();
        } else if !terminated.is_empty() {
            reason = terminated.to_owned();
        }
    }
    if obj.pointer("/metadata/deletionTimestamp").is_some() {
        reason = "Terminating".into();
    }
    let gates = obj.pointer("/spec/readinessGates").and_then(Value::as_array).map_or(0, Vec::len);
    vec![
        json!(str_at(obj, "/metadata/name")),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts.to_string()),
        json!(age(obj)),
        json!(or_none(str_at(obj, "/status/podIP").to_owned())),
        json!(or_none(str_at(obj, "/spec/nodeName").to_owned())),
        json!(or_none(str_at(obj, "/status/nominatedNodeName").to_owned())),
        json!(if gates == 0 { "<none>".to_owned() } else { format!("0/{gates}") }),
    ]
}

fn node_cells(obj: &Value) -> Vec<Value> {
    let conditions =
        obj.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut status = match conditions
        .iter()
        .find(|c| str_at(c, "/type") == "Ready")
        .map(|c| str_at(c, "/status"))
    {
        Some("True") => "Ready".to_owned(),
        Some("False") => "NotReady".to_owned(),
        _ => "Unknown".to_owned(),
    };
    if obj.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<&str> = obj
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels.keys().filter_map(|k| k.strip_prefix("node-role.kubernetes.io/")).collect()
        })
        .unwrap_or_default();
    roles.sort_unstable();
    let address = |kind: &str| -> String {
        let found: Vec<&str> = obj
            .pointer("/status/addresses")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter(|x| str_at(x, "/type") == kind)
                    .map(|x| str_at(x, "/address"))
                    .collect()
            })
            .unwrap_or_default();
        or_none(found.join(","))
    };
    vec![
        json!(str_at(obj, "/metadata/name")),
        json!(status),
        json!(or_none(roles.join(","))),
        json!(age(obj)),
        json!(str_at(obj, "/status/nodeInfo/kubeletVersion")),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(or_none(str_at(obj, "/status/nodeInfo/osImage").to_owned())),
        json!(or_none(str_at(obj, "/status/nodeInfo/kernelVersion").to_owned())),
        json!(or_none(str_at(obj, "/status/nodeInfo/containerRuntimeVersion").to_owned())),
    ]
}

fn selector_text(obj: &Value, pointer: &str) -> String {
    let labels: Vec<String> = obj
        .pointer(pointer)
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect())
        .unwrap_or_default();
    or_none(labels.join(","))
}

fn cells(kind: ResourceKind, obj: &Value) -> Vec<Value> {
    match kind {
        ResourceKind::Pod => pod_cells(obj),
        ResourceKind::Node => node_cells(obj),
        ResourceKind::Namespace => vec![
            json!(str_at(obj, "/metadata/name")),
            json!(str_at(obj, "/status/phase")),
            json!(age(obj)),
        ],
        ResourceKind::StatefulSet => {
            let (names, images) = template_containers(obj);
            vec![
                json!(str_at(obj, "/metadata/name")),
                json!(format!(
                    "{}/{}",
                    int_at(obj, "/status/readyReplicas"),
                    obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1)
                )),
                json!(age(obj)),
                json!(names),
                json!(images),
            ]
        }
        ResourceKind::DaemonSet => {
            let (names, images) = template_containers(obj);
            vec![
                json!(str_at(obj, "/metadata/name")),
                json!(int_at(obj, "/status/desiredNumberScheduled")),
                json!(int_at(obj, "/status/currentNumberScheduled")),
                json!(int_at(obj, "/status/numberReady")),
                json!(int_at(obj, "/status/updatedNumberScheduled")),
                json!(int_at(obj, "/status/numberAvailable")),
                json!(selector_text(obj, "/spec/template/spec/nodeSelector")),
                json!(age(obj)),
                json!(names),
                json!(images),
                json!(selector_text(obj, "/spec/selector/matchLabels")),
            ]
        }
        ResourceKind::ControllerRevision => {
            let controller = obj
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .and_then(|refs| refs.iter().find(|r| r["controller"] == json!(true)))
                .map(|r| {
                    let group = r["apiVersion"].as_str().unwrap_or("").split('/').next();
                    let kind = r["kind"].as_str().unwrap_or("").to_lowercase();
                    let name = r["name"].as_str().unwrap_or("");
                    match group {
                        Some(g) if g != "v1" && !g.is_empty() => format!("{kind}.{g}/{name}"),
                        _ => format!("{kind}/{name}"),
                    }
                })
                .unwrap_or_else(|| "<none>".into());
            vec![
                json!(str_at(obj, "/metadata/name")),
                json!(controller),
                json!(int_at(obj, "/revision")),
                json!(age(obj)),
            ]
        }
        ResourceKind::PersistentVolumeClaim => vec![
            json!(str_at(obj, "/metadata/name")),
            json!(str_at(obj, "/status/phase")),
            json!(str_at(obj, "/spec/volumeName")),
            json!(age(obj)),
        ],
        ResourceKind::Event | ResourceKind::EventsV1Event => event_cells(kind, obj),
        ResourceKind::Lease => vec![
            json!(str_at(obj, "/metadata/name")),
            json!(str_at(obj, "/spec/holderIdentity")),
            json!(age(obj)),
        ],
    }
}

/// How long ago an RFC 3339 timestamp at `pointer` was, `<unknown>` without one.
fn since(obj: &Value, pointer: &str) -> String {
    match obj.pointer(pointer).and_then(Value::as_str).and_then(|s| s.parse::<Timestamp>().ok()) {
        Some(at) => human_duration(Timestamp::now().as_second() - at.as_second()),
        None => "<unknown>".into(),
    }
}

/// The columns of an event (core/v1 or events.k8s.io/v1): last seen, type, reason, object,
/// message.
fn event_cells(kind: ResourceKind, obj: &Value) -> Vec<Value> {
    let (regarding, note, last) = if kind == ResourceKind::Event {
        let last = ["/lastTimestamp", "/eventTime", "/metadata/creationTimestamp"]
            .into_iter()
            .find(|p| obj.pointer(p).and_then(Value::as_str).is_some())
            .unwrap_or("/metadata/creationTimestamp");
        ("/involvedObject", "/message", last)
    } else {
        ("/regarding", "/note", "/eventTime")
    };
    let object = format!(
        "{}/{}",
        str_at(obj, &format!("{regarding}/kind")).to_lowercase(),
        str_at(obj, &format!("{regarding}/name"))
    );
    vec![
        json!(since(obj, last)),
        json!(str_at(obj, "/type")),
        json!(str_at(obj, "/reason")),
        json!(object),
        json!(str_at(obj, note)),
    ]
}

/// One table row for an object.
pub(crate) fn row(kind: ResourceKind, obj: &Value, include: IncludeObject) -> Value {
    let mut row = json!({"cells": cells(kind, obj)});
    match include {
        IncludeObject::None => {}
        IncludeObject::Object => row["object"] = obj.clone(),
        IncludeObject::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
            });
        }
    }
    row
}

/// A full Table answer.
pub(crate) fn table(kind: ResourceKind, rows: Vec<Value>, list_meta: Value) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns(kind),
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_duration_matches_kubectl_ages() {
        for (secs, text) in [
            (5, "5s"),
            (119, "119s"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600 + 120, "3h2m"),
            (10 * 3600, "10h"),
            (3 * 86400 + 3600, "3d1h"),
            (30 * 86400, "30d"),
        ] {
            assert_eq!(human_duration(secs), text);
        }
    }

    #[test]
    fn pod_rows_show_readiness_status_and_node() {
        let pod = json!({
            "metadata": {"name": "p", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                       "containerStatuses": [{"ready": true, "restartCount": 2}]}
        });
        let r = row(ResourceKind::Pod, &pod, IncludeObject::Metadata);
        assert_eq!(r["cells"][0], "p");
        assert_eq!(r["cells"][1], "1/1");
        assert_eq!(r["cells"][2], "Running");
        assert_eq!(r["cells"][3], "2");
        assert_eq!(r["cells"][6], "n1");
        assert_eq!(r["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(
            columns(ResourceKind::Pod).as_array().unwrap().len(),
            r["cells"].as_array().unwrap().len()
        );
    }
}
