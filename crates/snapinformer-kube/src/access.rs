//! [`ObjectAccess`] for every `kube::Resource`: how the store reads a Kubernetes object's
//! metadata.

use std::collections::BTreeMap;

use kube::Resource;
use snapinformer_store::{ObjectAccess, OwnerUids};

/// The store accessors of any `kube::Resource` (every `k8s-openapi` type, `DynamicObject`,
/// custom resources): name, namespace, resourceVersion, uid and labels from `metadata`, owner
/// UIDs from `metadata.ownerReferences`.
///
/// Each accessor is a plain generic function coerced to a function pointer, so reading a field
/// costs one indirect call and allocates nothing.
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use snapinformer_store::{IndexFn, StoreBuilder};
///
/// let access = snapinformer_kube::access::<Pod>();
/// let (_writer, reader) = StoreBuilder::new(access)
///     .covering_index("owner-uid", IndexFn::owner_uid(access))
///     .build()?;
/// assert!(reader.snapshot().is_empty());
/// # Ok::<(), snapinformer_store::Error>(())
/// ```
pub fn access<K: Resource + Send + Sync + 'static>() -> ObjectAccess<K> {
    ObjectAccess {
        name: name::<K>,
        namespace: namespace::<K>,
        resource_version: resource_version::<K>,
        uid: uid::<K>,
        labels: labels::<K>,
        owner_uids: owner_uids::<K>,
    }
}

fn name<K: Resource>(obj: &K) -> Option<&str> {
    obj.meta().name.as_deref()
}

fn namespace<K: Resource>(obj: &K) -> Option<&str> {
    obj.meta().namespace.as_deref()
}

fn resource_version<K: Resource>(obj: &K) -> Option<&str> {
    obj.meta().resource_version.as_deref()
}

fn uid<K: Resource>(obj: &K) -> Option<&str> {
    obj.meta().uid.as_deref()
}

fn labels<K: Resource>(obj: &K) -> Option<&BTreeMap<String, String>> {
    obj.meta().labels.as_ref()
}

fn owner_uids<K: Resource>(obj: &K) -> OwnerUids<'_> {
    obj.meta()
        .owner_references
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|o| o.uid.as_str())
        .filter(|u| !u.is_empty())
        .collect()
}

/// Whether the object can be stored: it has a non-empty `metadata.name`.
pub(crate) fn has_name<K: Resource>(obj: &K) -> bool {
    obj.meta().name.as_deref().is_some_and(|n| !n.is_empty())
}

/// The object's `namespace/name` (or `name`) key, for logs.
#[cfg(feature = "fuzzing")]
pub(crate) fn display_key<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    match (meta.namespace.as_deref(), meta.name.as_deref()) {
        (Some(ns), Some(n)) if !ns.is_empty() => format!("{ns}/{n}"),
        (_, Some(n)) => n.to_owned(),
        (_, None) => "<no name>".to_owned(),
    }
}
