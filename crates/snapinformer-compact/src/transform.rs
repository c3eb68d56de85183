//! Ready-made transforms for compact pods (for
//! [`KubeInformerBuilder::transform`](snapinformer_kube::KubeInformerBuilder::transform)).
//!
//! A compact pod's `managedFields` entries are shared between pods whose entries are equal, so
//! keeping them costs far less than in a `k8s_openapi` `Pod`; dropping them still saves the
//! per-pod entries (their timestamps and per-pod keys differ).

use crate::CompactPod;

/// Drops `metadata.managedFields`.
pub fn strip_managed_fields(pod: &mut CompactPod) {
    pod.remove_metadata_field("managedFields");
}
