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

/// Rebuilds the object in an arena of its own ([`snapinformer_arena::build`]): every string,
/// map and list it owns in one slot of whole pages, so that freeing it when a newer version
/// replaces it in the cache touches a few pages instead of a block per field.
///
/// Takes effect only in a program whose global allocator is a
/// [`snapinformer_arena::ArenaAlloc`]; elsewhere it leaves the object as it is. Costs two
/// clones of the object on the reflector's task (the first sizes the slot). When combining it
/// with another transform, run it last, so that what the others drop never enters the slot:
///
/// ```
/// use k8s_openapi::api::core::v1::Pod;
/// use snapinformer_kube::transform;
///
/// let both = |pod: &mut Pod| {
///     transform::strip_managed_fields(pod);
///     transform::into_arena(pod);
/// };
/// # let mut pod = Pod::default();
/// # both(&mut pod);
/// ```
///
/// Measured in the `store` benchmark (BENCHMARKS.md, "One arena per pod").
pub fn into_arena<K: Clone>(obj: &mut K) {
    if snapinformer_arena::available() {
        *obj = snapinformer_arena::build(|| obj.clone());
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

    #[test]
    fn into_arena_keeps_the_object_equal_where_no_arena_allocator_is_installed() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web-0".into());
        pod.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
        let before = pod.clone();
        into_arena(&mut pod);
        assert_eq!(pod, before);
        assert!(!snapinformer_arena::in_arena(pod.metadata.name.as_ref().unwrap().as_ptr()));
    }
}
