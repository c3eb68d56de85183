//! Ready-made transforms for [`Reflector::with_transform`](crate::Reflector::with_transform)
//! and [`KubeInformerBuilder::transform`](crate::KubeInformerBuilder::transform).
//!
//! A transform runs once per object, before the object enters the queue, so what it drops is
//! never stored, indexed or handed to handlers (client-go's `SetTransform`). Dropping
//! `metadata.managedFields` is the classic one: the server-side-apply bookkeeping is a large
//! part of every object's size and no controller reading from a cache needs it
//! (BENCHMARKS-reflector.md has the measured saving).

use kube::Resource;

/// Drops `metadata.managedFields`.
#[doc(alias = "TransformStripManagedFields")]
pub fn strip_managed_fields<K: Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// Drops `metadata.managedFields` and the `kubectl.kubernetes.io/last-applied-configuration`
/// annotation (a full copy of the object as last applied by `kubectl apply`).
pub fn strip_managed_fields_and_last_applied<K: Resource>(obj: &mut K) {
    let meta = obj.meta_mut();
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
        if a.is_empty() {
            meta.annotations = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;

    use super::*;

    #[test]
    fn last_applied_annotation_and_managed_fields_are_dropped_other_annotations_kept() {
        let mut pod = Pod::default();
        pod.metadata.managed_fields = Some(vec![Default::default()]);
        pod.metadata.annotations = Some(
            [
                ("kubectl.kubernetes.io/last-applied-configuration".to_owned(), "{}".to_owned()),
                ("keep".to_owned(), "me".to_owned()),
            ]
            .into(),
        );
        strip_managed_fields_and_last_applied(&mut pod);
        assert!(pod.metadata.managed_fields.is_none());
        assert_eq!(pod.metadata.annotations, Some([("keep".to_owned(), "me".to_owned())].into()));
        pod.metadata.annotations =
            Some([("kubectl.kubernetes.io/last-applied-configuration".into(), "{}".into())].into());
        strip_managed_fields_and_last_applied(&mut pod);
        assert_eq!(pod.metadata.annotations, None);
    }
}
