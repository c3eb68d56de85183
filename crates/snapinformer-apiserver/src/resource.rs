//! The resources the server serves, their discovery facts, and validation through the typed
//! `k8s-openapi` structs.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Namespace, Node, PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event as EventsV1Event;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;

/// One of the resources served.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceKind {
    /// core/v1 `pods` (namespaced).
    Pod,
    /// core/v1 `nodes` (cluster-scoped).
    Node,
    /// core/v1 `namespaces` (cluster-scoped).
    Namespace,
    /// apps/v1 `statefulsets` (namespaced).
    StatefulSet,
    /// apps/v1 `daemonsets` (namespaced).
    DaemonSet,
    /// apps/v1 `controllerrevisions` (namespaced): the revision history StatefulSet and
    /// DaemonSet controllers keep of their pod templates.
    ControllerRevision,
    /// core/v1 `persistentvolumeclaims` (namespaced): the StatefulSet controller watches them.
    PersistentVolumeClaim,
    /// core/v1 `events` (namespaced), as `record.EventRecorder` writes them.
    Event,
    /// events.k8s.io/v1 `events` (namespaced). Stored apart from core/v1 `events` (the real
    /// server keeps both versions in one storage and converts between them).
    EventsV1Event,
    /// coordination.k8s.io/v1 `leases` (namespaced), as leader election and node heartbeats
    /// use them.
    Lease,
}

/// How strictly unknown fields are treated on writes (the `fieldValidation` query parameter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop unknown fields and answer a `Warning` header (the real server's default).
    Warn,
    /// Refuse the request with 400 when a field is unknown.
    Strict,
}

impl FieldValidation {
    /// Parses the query parameter value; anything unrecognised means the default, `Warn`.
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            Some("Strict") => Self::Strict,
            Some("Ignore") => Self::Ignore,
            _ => Self::Warn,
        }
    }
}

impl ResourceKind {
    /// Every served kind, in a fixed order (the index used internally).
    pub const ALL: [ResourceKind; 10] = [
        Self::Pod,
        Self::Node,
        Self::Namespace,
        Self::StatefulSet,
        Self::DaemonSet,
        Self::ControllerRevision,
        Self::PersistentVolumeClaim,
        Self::Event,
        Self::EventsV1Event,
        Self::Lease,
    ];

    /// The named API groups served (besides the legacy core group `""`), in discovery order.
    pub const GROUPS: [&'static str; 3] = ["apps", "events.k8s.io", "coordination.k8s.io"];

    /// Position in [`ResourceKind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// API group (`""` for core).
    pub fn group(self) -> &'static str {
        match self {
            Self::Pod
            | Self::Node
            | Self::Namespace
            | Self::PersistentVolumeClaim
            | Self::Event => "",
            Self::StatefulSet | Self::DaemonSet | Self::ControllerRevision => "apps",
            Self::EventsV1Event => "events.k8s.io",
            Self::Lease => "coordination.k8s.io",
        }
    }

    /// The version served (every group serves one version, `v1`).
    pub fn version(self) -> &'static str {
        "v1"
    }

    /// `apiVersion` of objects of this kind.
    pub fn api_version(self) -> &'static str {
        match self.group() {
            "" => "v1",
            "apps" => "apps/v1",
            "events.k8s.io" => "events.k8s.io/v1",
            _ => "coordination.k8s.io/v1",
        }
    }

    /// `kind` of objects.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Pod => "Pod",
            Self::Node => "Node",
            Self::Namespace => "Namespace",
            Self::StatefulSet => "StatefulSet",
            Self::DaemonSet => "DaemonSet",
            Self::ControllerRevision => "ControllerRevision",
            Self::PersistentVolumeClaim => "PersistentVolumeClaim",
            Self::Event | Self::EventsV1Event => "Event",
            Self::Lease => "Lease",
        }
    }

    /// `kind` of lists.
    pub fn list_kind(self) -> String {
        format!("{}List", self.kind())
    }

    /// Resource name in URLs.
    pub fn plural(self) -> &'static str {
        match self {
            Self::Pod => "pods",
            Self::Node => "nodes",
            Self::Namespace => "namespaces",
            Self::StatefulSet => "statefulsets",
            Self::DaemonSet => "daemonsets",
            Self::ControllerRevision => "controllerrevisions",
            Self::PersistentVolumeClaim => "persistentvolumeclaims",
            Self::Event | Self::EventsV1Event => "events",
            Self::Lease => "leases",
        }
    }

    /// Singular name for discovery.
    pub fn singular(self) -> &'static str {
        match self {
            Self::Pod => "pod",
            Self::Node => "node",
            Self::Namespace => "namespace",
            Self::StatefulSet => "statefulset",
            Self::DaemonSet => "daemonset",
            Self::ControllerRevision => "controllerrevision",
            Self::PersistentVolumeClaim => "persistentvolumeclaim",
            Self::Event | Self::EventsV1Event => "event",
            Self::Lease => "lease",
        }
    }

    /// Short names for discovery (`po`, `no`, ...).
    pub fn short_names(self) -> &'static [&'static str] {
        match self {
            Self::Pod => &["po"],
            Self::Node => &["no"],
            Self::Namespace => &["ns"],
            Self::StatefulSet => &["sts"],
            Self::DaemonSet => &["ds"],
            Self::ControllerRevision | Self::Lease => &[],
            Self::PersistentVolumeClaim => &["pvc"],
            Self::Event | Self::EventsV1Event => &["ev"],
        }
    }

    /// Whether objects live in a namespace.
    pub fn namespaced(self) -> bool {
        !matches!(self, Self::Node | Self::Namespace)
    }

    /// Whether the kind has a `status` subresource (a `status` the main resource's writes do
    /// not change).
    pub fn has_status(self) -> bool {
        matches!(
            self,
            Self::Pod
                | Self::Node
                | Self::Namespace
                | Self::StatefulSet
                | Self::DaemonSet
                | Self::PersistentVolumeClaim
        )
    }

    /// Whether the kind appears in the `all` category (`kubectl get all`).
    pub(crate) fn in_category_all(self) -> bool {
        matches!(self, Self::Pod | Self::StatefulSet | Self::DaemonSet)
    }

    /// Whether `metadata.generation` is maintained (bumped on spec changes).
    pub(crate) fn has_generation(self) -> bool {
        matches!(self, Self::StatefulSet | Self::DaemonSet)
    }

    /// Finds a kind by group and plural resource name.
    pub fn from_plural(group: &str, plural: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.group() == group && k.plural() == plural)
    }

    /// Index of `spec.nodeName` in the pod's [`ResourceKind::field_labels`].
    pub(crate) const POD_NODE_NAME: usize = 0;
    /// Index of `status.phase` in the pod's [`ResourceKind::field_labels`].
    pub(crate) const POD_PHASE: usize = 5;

    /// Field selector labels this resource supports (besides `metadata.name` and
    /// `metadata.namespace`, which every resource supports).
    pub fn field_labels(self) -> &'static [&'static str] {
        match self {
            Self::Pod => &[
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
            Self::Node => &["spec.unschedulable"],
            Self::Namespace => &["status.phase"],
            Self::PersistentVolumeClaim => &[],
            Self::Event => &[
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "reason",
                "type",
            ],
            Self::EventsV1Event => &["regarding.kind", "regarding.name", "reason", "type"],
            Self::StatefulSet | Self::DaemonSet | Self::ControllerRevision | Self::Lease => &[],
        }
    }

    /// Validates `value` as this kind by decoding it into the typed `k8s-openapi` struct and
    /// encoding it again, exactly like the real server's decode/encode: unknown fields are
    /// dropped (listed in the returned warnings) or, with `Strict`, refused with 400.
    pub(crate) fn normalize(
        self,
        value: &Value,
        validation: FieldValidation,
    ) -> Result<(Value, Vec<String>), ApiError> {
        if !value.is_object() {
            return Err(ApiError::bad_request(format!(
                "Object '{}' is missing in '{}'",
                "Kind",
                truncate(&value.to_string())
            )));
        }
        if let Some(api_version) = value.get("apiVersion")
            && api_version.as_str() != Some(self.api_version())
        {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({}) does not match the expected API version ({})",
                api_version.as_str().unwrap_or_default(),
                self.api_version()
            )));
        }
        if let Some(kind) = value.get("kind")
            && kind.as_str() != Some(self.kind())
        {
            return Err(ApiError::bad_request(format!(
                "{} in version \"v1\" cannot be handled as a {}: the kind in the data does not match",
                kind.as_str().unwrap_or_default(),
                self.kind()
            )));
        }
        let mut typed = match self {
            Self::Pod => roundtrip::<Pod>(value),
            Self::Node => roundtrip::<Node>(value),
            Self::Namespace => roundtrip::<Namespace>(value),
            Self::StatefulSet => roundtrip::<StatefulSet>(value),
            Self::DaemonSet => roundtrip::<DaemonSet>(value),
            Self::ControllerRevision => roundtrip::<ControllerRevision>(value),
            Self::PersistentVolumeClaim => roundtrip::<PersistentVolumeClaim>(value),
            Self::Event => roundtrip::<Event>(value),
            Self::EventsV1Event => roundtrip::<EventsV1Event>(value),
            Self::Lease => roundtrip::<Lease>(value),
        }
        .map_err(|e| {
            ApiError::bad_request(format!(
                "{} in version \"v1\" cannot be handled as a {}: {e}",
                self.kind(),
                self.kind()
            ))
        })?;
        let mut unknown = Vec::new();
        unknown_fields(value, &typed, String::new(), &mut unknown);
        if validation == FieldValidation::Strict && !unknown.is_empty() {
            let list: Vec<String> =
                unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
            return Err(ApiError::bad_request(format!(
                "strict decoding error: {}",
                list.join(", ")
            )));
        }
        crate::defaults::apply(self, &mut typed);
        let warnings = if validation == FieldValidation::Warn {
            unknown.into_iter().map(|f| format!("unknown field \"{f}\"")).collect()
        } else {
            Vec::new()
        };
        Ok((typed, warnings))
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(200).collect()
}

fn roundtrip<T: DeserializeOwned + Serialize>(value: &Value) -> Result<Value, serde_json::Error> {
    let typed = T::deserialize(value)?;
    serde_json::to_value(typed)
}

/// Collects the paths present (non-null) in `original` but absent after the typed round trip.
fn unknown_fields(original: &Value, typed: &Value, path: String, out: &mut Vec<String>) {
    match (original, typed) {
        (Value::Object(o), Value::Object(t)) => {
            for (key, value) in o {
                let child = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                match t.get(key) {
                    Some(tv) => unknown_fields(value, tv, child, out),
                    None if !value.is_null() => out.push(child),
                    None => {}
                }
            }
        }
        (Value::Array(o), Value::Array(t)) => {
            for (i, (ov, tv)) in o.iter().zip(t).enumerate() {
                unknown_fields(ov, tv, format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Labels of an object (`metadata.labels`).
pub(crate) fn labels_of(value: &Value) -> BTreeMap<String, String> {
    value
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned()))).collect()
        })
        .unwrap_or_default()
}

/// Values of the kind-specific field-selector labels, in `field_labels()` order.
pub(crate) fn field_values(kind: ResourceKind, value: &Value) -> Box<[String]> {
    kind.field_labels()
        .iter()
        .map(|label| {
            // Walk the dotted path directly (no pointer string to build per object).
            let found = label.split('.').try_fold(value, |v, part| v.get(part));
            match found {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                // Booleans default to false, strings to "" as in the real field sets.
                _ if label.ends_with("hostNetwork") || label.ends_with("unschedulable") => {
                    "false".to_owned()
                }
                _ => String::new(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_dropped_and_reported_by_default() {
        let pod = json!({"metadata": {"name": "a", "bogus": 1},
            "spec": {"containers": [{"name": "c", "image": "i", "nope": true}]}});
        let (value, warnings) =
            ResourceKind::Pod.normalize(&pod, FieldValidation::Warn).expect("valid pod");
        assert!(value.pointer("/metadata/bogus").is_none());
        assert_eq!(
            warnings,
            vec![
                "unknown field \"metadata.bogus\"".to_owned(),
                "unknown field \"spec.containers[0].nope\"".to_owned()
            ]
        );
    }

    #[test]
    fn strict_validation_refuses_unknown_fields_with_400() {
        let pod = json!({"metadata": {"name": "a"}, "spec": {"containers": [], "what": 1}});
        let err = ResourceKind::Pod.normalize(&pod, FieldValidation::Strict).unwrap_err();
        assert_eq!(err.code, 400);
        assert!(err.message.contains("unknown field \"spec.what\""), "{}", err.message);
    }

    #[test]
    fn wrong_kind_in_body_is_a_bad_request() {
        let err = ResourceKind::Pod
            .normalize(&json!({"kind": "Node", "metadata": {"name": "a"}}), FieldValidation::Warn)
            .unwrap_err();
        assert_eq!(err.code, 400);
    }

    #[test]
    fn pod_field_values_follow_field_label_order() {
        let pod = json!({"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let values = field_values(ResourceKind::Pod, &pod);
        assert_eq!(values[0], "n1");
        assert_eq!(values[4], "false");
        assert_eq!(values[5], "Running");
    }
}
