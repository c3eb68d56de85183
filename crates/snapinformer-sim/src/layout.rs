//! Where a pod's memory goes, in Rust and in Go: the struct bodies of one generated pod (each
//! kind of struct it holds, how many, and the bytes of one) and the heap a pod takes.
//!
//! A struct body is what the type's size says, every field inline: an absent optional struct
//! included, as `k8s_openapi` lays out `Option<Probe>` a whole `Probe` wide, where `k8s.io/api`'s
//! `*Probe` is one pointer. The Go side comes from the client-go worker's `layout` subcommand,
//! which lists the same structs of the same generated pod (the port of [`crate::pods`]). The
//! example `pod_layout` prints the two side by side (BENCHMARKS.md, "Where a Rust pod's memory
//! goes").

use std::{path::Path, process::Command};

use k8s_openapi::{
    api::core::v1::{
        Container, ContainerPort, ContainerStatus, EnvVar, Pod, PodCondition, PodIP, Toleration,
        Volume, VolumeMount,
    },
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};

use crate::{harness::worker::arg_name, pods::PodProfile};

/// One kind of struct in a pod: how many the pod holds, and the bytes of one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct StructBodies {
    /// The Go type's name (`Container`, `EnvVar`, ...); the Rust type has the same name.
    #[serde(rename = "type")]
    pub ty: String,
    /// How many the pod holds.
    pub count: usize,
    /// The bytes of one: `size_of` in Rust, `unsafe.Sizeof` in Go.
    pub bytes: usize,
}

impl StructBodies {
    fn of<T>(ty: &str, count: usize) -> Self {
        StructBodies { ty: ty.to_string(), count, bytes: std::mem::size_of::<T>() }
    }

    /// The bytes of all of them.
    pub fn total(&self) -> usize {
        self.count * self.bytes
    }
}

/// The struct bodies of `pod`: the pod and every element of its lists of structs, in the order
/// the Go worker lists them.
pub fn rust_layout(pod: &Pod) -> Vec<StructBodies> {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let containers = spec.map_or(&[][..], |s| &s.containers[..]);
    let in_containers = |f: fn(&Container) -> usize| containers.iter().map(f).sum::<usize>();
    let len = |n: Option<usize>| n.unwrap_or(0);
    vec![
        StructBodies::of::<Pod>("Pod", 1),
        StructBodies::of::<OwnerReference>(
            "OwnerReference",
            len(pod.metadata.owner_references.as_ref().map(Vec::len)),
        ),
        StructBodies::of::<Container>("Container", containers.len()),
        StructBodies::of::<EnvVar>("EnvVar", in_containers(|c| c.env.as_ref().map_or(0, Vec::len))),
        StructBodies::of::<ContainerPort>(
            "ContainerPort",
            in_containers(|c| c.ports.as_ref().map_or(0, Vec::len)),
        ),
        StructBodies::of::<VolumeMount>(
            "VolumeMount",
            in_containers(|c| c.volume_mounts.as_ref().map_or(0, Vec::len)),
        ),
        StructBodies::of::<Toleration>(
            "Toleration",
            len(spec.and_then(|s| s.tolerations.as_ref()).map(Vec::len)),
        ),
        StructBodies::of::<Volume>(
            "Volume",
            len(spec.and_then(|s| s.volumes.as_ref()).map(Vec::len)),
        ),
        StructBodies::of::<PodCondition>(
            "PodCondition",
            len(status.and_then(|s| s.conditions.as_ref()).map(Vec::len)),
        ),
        StructBodies::of::<PodIP>(
            "PodIP",
            len(status.and_then(|s| s.pod_ips.as_ref()).map(Vec::len)),
        ),
        StructBodies::of::<ContainerStatus>(
            "ContainerStatus",
            len(status.and_then(|s| s.container_statuses.as_ref()).map(Vec::len)),
        ),
    ]
}

/// The Go worker's `layout` output: the struct bodies of its pod 0, and the live heap per pod.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct GoLayout {
    /// The struct bodies, as [`rust_layout`] lists them.
    pub structs: Vec<StructBodies>,
    /// Growth of Go's live heap (after a full collection: each object at its size class) per
    /// pod, over `pods` generated pods kept alive.
    pub heap_per_pod: f64,
    /// How many pods the heap was measured over.
    pub pods: usize,
}

/// Runs the Go worker `binary` (see [`crate::rows::client_go::worker_binary`]) for the layout of
/// `profile` pods, the heap measured over `pods` of them.
pub fn go_layout(binary: &Path, profile: PodProfile, pods: usize) -> Result<GoLayout, String> {
    let out = Command::new(binary)
        .args(["layout", "--profile", &arg_name(&profile), "--pods", &pods.to_string()])
        .output()
        .map_err(|e| format!("running {}: {e}", binary.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} layout failed: {}",
            binary.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("the Go worker's layout output: {e}"))
}
