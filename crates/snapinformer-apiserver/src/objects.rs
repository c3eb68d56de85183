//! Server-owned metadata: uids, timestamps, generated names and the defaults set on create.

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::resource::ResourceKind;

/// Current time as the RFC 3339 seconds string Kubernetes uses.
pub(crate) fn now_rfc3339() -> String {
    Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A random version-4 UUID.
pub(crate) fn new_uid() -> String {
    let n: u128 = rand::random();
    let n = (n & !(0xf << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let hex = format!("{n:032x}");
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

/// Five random characters from the alphabet the real server uses for `generateName`.
pub(crate) fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5).map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char).collect()
}

/// A fresh namespace object (status Active, `kubernetes` finalizer), not yet stored.
pub(crate) fn new_namespace_value(name: &str) -> Value {
    let mut value = json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
    });
    prepare_create(ResourceKind::Namespace, &mut value);
    value
}

/// Sets what the server owns on create: uid, creationTimestamp, generation and the status
/// defaults of each kind. The resourceVersion is stamped by the store.
pub(crate) fn prepare_create(kind: ResourceKind, value: &mut Value) {
    crate::defaults::apply(kind, value);
    let Some(object) = value.as_object_mut() else { return };
    object.insert("apiVersion".into(), kind.api_version().into());
    object.insert("kind".into(), kind.kind().into());
    let meta = object.entry("metadata").or_insert_with(|| json!({}));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert("uid".into(), new_uid().into());
        meta.insert("creationTimestamp".into(), now_rfc3339().into());
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        if kind.has_generation() {
            meta.insert("generation".into(), 1.into());
        } else {
            meta.remove("generation");
        }
        if !kind.namespaced() {
            meta.remove("namespace");
        }
    }
    match kind {
        ResourceKind::Pod => {
            let status = object.entry("status").or_insert_with(|| json!({}));
            if status.get("phase").is_none() {
                status["phase"] = "Pending".into();
            }
        }
        ResourceKind::Namespace => {
            object.insert("spec".into(), json!({"finalizers": ["kubernetes"]}));
            object.insert("status".into(), json!({"phase": "Active"}));
        }
        ResourceKind::PersistentVolumeClaim => {
            let status = object.entry("status").or_insert_with(|| json!({}));
            if status.get("phase").is_none() {
                status["phase"] = "Pending".into();
            }
        }
        ResourceKind::Node
        | ResourceKind::StatefulSet
        | ResourceKind::DaemonSet
        | ResourceKind::ControllerRevision
        | ResourceKind::Event
        | ResourceKind::EventsV1Event
        | ResourceKind::Lease => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_look_like_version_4_uuids() {
        let uid = new_uid();
        assert_eq!(uid.len(), 36);
        assert_eq!(&uid[14..15], "4");
        assert_ne!(uid, new_uid());
    }

    #[test]
    fn generated_suffixes_have_five_safe_characters() {
        let s = random_suffix();
        assert_eq!(s.len(), 5);
        assert!(s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
    }
}
