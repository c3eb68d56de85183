//! Objects in the form a row holds them: `k8s_openapi` pods for most rows, compact pods for
//! `snapshot-compact`. The `store` scenario generates its pools in the row's form (as that row's
//! reflector would decode them) and reads owned results in it, so that no row pays for a
//! conversion inside a measurement.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use snapinformer_compact::CompactPod;

/// A vector of objects in a row's own form: what a pool of updates holds and what an owned read
/// returns (`Arc` clones either way).
#[derive(Debug, Clone)]
pub enum Objects {
    /// `k8s_openapi` pods.
    Pods(Vec<Arc<Pod>>),
    /// Compact pods.
    Compact(Vec<Arc<CompactPod>>),
}

impl Objects {
    /// How many objects.
    pub fn len(&self) -> usize {
        match self {
            Objects::Pods(v) => v.len(),
            Objects::Compact(v) => v.len(),
        }
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The objects front to back, taken a batch at a time.
    pub fn into_batches(self) -> Batches {
        match self {
            Objects::Pods(v) => Batches::Pods(v.into_iter()),
            Objects::Compact(v) => Batches::Compact(v.into_iter()),
        }
    }

    /// The resource version of the first object, if it has a numeric one.
    pub fn first_resource_version(&self) -> Option<u64> {
        let rv = match self {
            Objects::Pods(v) => v.first()?.metadata.resource_version.as_deref(),
            Objects::Compact(v) => v.first()?.resource_version(),
        };
        snapinformer_core::parse_resource_version(rv?)
    }

    /// The objects as `k8s_openapi` pods: free for pods, a full decode of every compact pod
    /// otherwise (for the scenarios whose controllers read `Pod`s).
    pub fn into_pods(self) -> Vec<Arc<Pod>> {
        match self {
            Objects::Pods(v) => v,
            Objects::Compact(v) => v.iter().map(|c| Arc::new(super::compact::to_pod(c))).collect(),
        }
    }
}

/// The rest of an [`Objects`], consumed in batches.
#[derive(Debug)]
pub enum Batches {
    /// `k8s_openapi` pods.
    Pods(std::vec::IntoIter<Arc<Pod>>),
    /// Compact pods.
    Compact(std::vec::IntoIter<Arc<CompactPod>>),
}

impl Batches {
    /// The next `n` objects (fewer at the end; empty when none is left).
    pub fn take(&mut self, n: usize) -> Objects {
        match self {
            Batches::Pods(it) => Objects::Pods(it.by_ref().take(n).collect()),
            Batches::Compact(it) => Objects::Compact(it.by_ref().take(n).collect()),
        }
    }

    /// The objects left, without taking them (`Arc` clones).
    pub fn as_objects(&self) -> Objects {
        match self {
            Batches::Pods(it) => Objects::Pods(it.as_slice().to_vec()),
            Batches::Compact(it) => Objects::Compact(it.as_slice().to_vec()),
        }
    }

    /// How many objects are left.
    pub fn remaining(&self) -> usize {
        match self {
            Batches::Pods(it) => it.len(),
            Batches::Compact(it) => it.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::{self, PodProfile, Shape};

    #[test]
    fn batches_hand_out_every_object_once_in_order() {
        let shape = Shape::for_objects(7, 2).with_profile(PodProfile::Small);
        let all = pods::initial_pods(&shape);
        let mut batches = Objects::Pods(all.clone()).into_batches();
        let mut seen = Vec::new();
        while batches.remaining() > 0 {
            let Objects::Pods(b) = batches.take(3) else { panic!("pods stay pods") };
            assert!(b.len() <= 3);
            seen.extend(b);
        }
        assert!(batches.take(3).is_empty());
        assert_eq!(seen.len(), 7);
        assert!(seen.iter().zip(&all).all(|(a, b)| Arc::ptr_eq(a, b)));
    }
}
