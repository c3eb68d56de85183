//! What the cluster holds, seen from outside: a watch of every pod on the API server (the same
//! for every row and any server), kept as a small state per pod. It tells how many
//! StatefulSet pods run, which nodes have a running daemon pod, how many daemon pods each node
//! has at once, and how many distinct daemon pods were ever created.
//!
//! Pods are decoded into a slim type (name, owner, node, phase, and the node affinity of daemon
//! pods) so that watching 200,000 pods costs the observer as little as possible of the two
//! cores the controller manager and the server share with it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher;
use serde::Deserialize;
use serde_json::Value;

/// A pod with only what the observer needs.
#[derive(Debug, Clone, Deserialize)]
pub struct SlimPod {
    metadata: ObjectMeta,
    #[serde(default)]
    spec: SlimSpec,
    #[serde(default)]
    status: SlimStatus,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimSpec {
    #[serde(default)]
    node_name: Option<String>,
    #[serde(default)]
    affinity: Option<Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct SlimStatus {
    #[serde(default)]
    phase: Option<String>,
}

impl kube::Resource for SlimPod {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// What a pod is to the observer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    /// Owned by a StatefulSet.
    SetPod,
    /// Owned by a DaemonSet, for this node.
    DaemonPod(String),
    /// Anything else.
    Other,
}

#[derive(Debug, Clone)]
struct PodState {
    role: Role,
    running: bool,
}

/// The node a daemon pod is for: its node name, else the `metadata.name` its required node
/// affinity names (as the DaemonSet controller pins its pods).
fn daemon_node(pod: &SlimPod) -> String {
    if let Some(node) = pod.spec.node_name.as_ref().filter(|n| !n.is_empty()) {
        return node.clone();
    }
    let terms = pod.spec.affinity.as_ref().and_then(|a| {
        a.pointer("/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
    });
    terms
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|t| t.get("matchFields").and_then(Value::as_array).into_iter().flatten())
        .find(|f| f.get("key").and_then(Value::as_str) == Some("metadata.name"))
        .and_then(|f| f.pointer("/values/0").and_then(Value::as_str))
        .unwrap_or("")
        .to_owned()
}

fn state_of(pod: &SlimPod) -> PodState {
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| o.kind.as_str());
    let role = match owner {
        Some("StatefulSet") => Role::SetPod,
        Some("DaemonSet") => Role::DaemonPod(daemon_node(pod)),
        _ => Role::Other,
    };
    PodState { role, running: pod.status.phase.as_deref() == Some("Running") }
}

/// The observer's figures at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// StatefulSet pods that exist.
    pub set_pods: u64,
    /// StatefulSet pods Running.
    pub set_pods_running: u64,
    /// Daemon pods that exist.
    pub daemon_pods: u64,
    /// Nodes with at least one Running daemon pod.
    pub nodes_with_running_daemon: u64,
    /// Daemon pods beyond the first on their node, now.
    pub extra_daemon_pods: u64,
    /// Distinct daemon pods (by UID) ever seen.
    pub daemon_pods_ever: u64,
    /// Watch restarts (relists) of the observer.
    pub relists: u64,
    /// The newest pod resourceVersion seen (a pod event the controller manager's informer
    /// should have applied too).
    pub pod_rv: u64,
    /// Whether the initial list has completed.
    pub synced: bool,
}

#[derive(Debug, Default)]
struct State {
    pods: HashMap<String, PodState>,
    daemon_uids: HashSet<String>,
    set_pods_running: u64,
    relists: u64,
    synced: bool,
    pod_rv: u64,
}

impl State {
    fn see_version(&mut self, pod: &SlimPod) {
        let rv = pod.metadata.resource_version.as_deref().and_then(|v| v.parse().ok());
        self.pod_rv = self.pod_rv.max(rv.unwrap_or(0));
    }

    fn apply(&mut self, pod: &SlimPod) {
        self.see_version(pod);
        let key = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or(""),
            pod.metadata.name.as_deref().unwrap_or("")
        );
        let new = state_of(pod);
        if matches!(new.role, Role::DaemonPod(_))
            && let Some(uid) = &pod.metadata.uid
        {
            self.daemon_uids.insert(uid.clone());
        }
        if new.role == Role::SetPod && new.running {
            self.set_pods_running += 1;
        }
        if let Some(old) = self.pods.insert(key, new)
            && old.role == Role::SetPod
            && old.running
        {
            self.set_pods_running -= 1;
        }
    }

    fn delete(&mut self, pod: &SlimPod) {
        self.see_version(pod);
        let key = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or(""),
            pod.metadata.name.as_deref().unwrap_or("")
        );
        if let Some(old) = self.pods.remove(&key)
            && old.role == Role::SetPod
            && old.running
        {
            self.set_pods_running -= 1;
        }
    }

    fn counts(&self) -> Counts {
        let mut per_node: HashMap<&str, (u64, bool)> = HashMap::new();
        let mut counts = Counts {
            set_pods_running: self.set_pods_running,
            daemon_pods_ever: self.daemon_uids.len() as u64,
            relists: self.relists,
            synced: self.synced,
            pod_rv: self.pod_rv,
            ..Counts::default()
        };
        for state in self.pods.values() {
            match &state.role {
                Role::SetPod => counts.set_pods += 1,
                Role::DaemonPod(node) => {
                    counts.daemon_pods += 1;
                    let entry = per_node.entry(node.as_str()).or_insert((0, false));
                    entry.0 += 1;
                    entry.1 |= state.running;
                }
                Role::Other => {}
            }
        }
        for (live, running) in per_node.values() {
            counts.extra_daemon_pods += live.saturating_sub(1);
            counts.nodes_with_running_daemon += u64::from(*running);
        }
        counts
    }
}

/// A running observer; [`Observer::counts`] reads it at any time.
#[derive(Debug, Clone, Default)]
pub struct Observer {
    state: Arc<Mutex<State>>,
}

impl Observer {
    /// Starts watching every pod through `client` (on the current Tokio runtime).
    pub fn start(client: kube::Client) -> (Self, tokio::task::JoinHandle<()>) {
        let observer = Observer::default();
        let state = observer.state.clone();
        let api: kube::Api<SlimPod> = kube::Api::all(client);
        let task = tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default().page_size(5000));
            futures::pin_mut!(stream);
            while let Some(event) = stream.next().await {
                let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
                match event {
                    Ok(watcher::Event::Init) => {
                        // A relist: what follows replaces the state.
                        state.pods.clear();
                        state.set_pods_running = 0;
                        state.relists += 1;
                    }
                    Ok(watcher::Event::InitApply(pod) | watcher::Event::Apply(pod)) => {
                        state.apply(&pod);
                    }
                    Ok(watcher::Event::InitDone) => state.synced = true,
                    Ok(watcher::Event::Delete(pod)) => state.delete(&pod),
                    Err(e) => tracing::debug!("observer watch error (retried): {e}"),
                }
            }
        });
        (observer, task)
    }

    /// The figures now.
    pub fn counts(&self) -> Counts {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).counts()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(
        name: &str,
        owner: &str,
        node: Option<&str>,
        pinned: Option<&str>,
        phase: &str,
    ) -> SlimPod {
        let mut value = json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": "o", "uid": "u", "controller": true}]},
            "spec": {"nodeName": node}, "status": {"phase": phase}});
        if let Some(pinned) = pinned {
            value["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [pinned]}]}]}}});
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn daemon_pods_are_counted_per_node_from_affinity_until_bound() {
        let mut state = State::default();
        state.apply(&pod("ds-a", "DaemonSet", None, Some("n1"), "Pending"));
        state.apply(&pod("ds-b", "DaemonSet", None, Some("n1"), "Pending"));
        state.apply(&pod("ds-c", "DaemonSet", Some("n2"), None, "Running"));
        let counts = state.counts();
        assert_eq!(counts.daemon_pods, 3);
        assert_eq!(counts.extra_daemon_pods, 1, "two pods for n1");
        assert_eq!(counts.nodes_with_running_daemon, 1);
        state.delete(&pod("ds-b", "DaemonSet", None, Some("n1"), "Pending"));
        let counts = state.counts();
        assert_eq!(counts.extra_daemon_pods, 0);
        assert_eq!(counts.daemon_pods_ever, 3, "a deleted duplicate was still created");
    }

    #[test]
    fn running_set_pods_follow_updates_and_deletes() {
        let mut state = State::default();
        state.apply(&pod("web-0", "StatefulSet", None, None, "Pending"));
        state.apply(&pod("web-0", "StatefulSet", Some("n1"), None, "Running"));
        state.apply(&pod("web-0", "StatefulSet", Some("n1"), None, "Running"));
        assert_eq!(state.counts().set_pods_running, 1);
        state.delete(&pod("web-0", "StatefulSet", Some("n1"), None, "Running"));
        assert_eq!((state.counts().set_pods, state.counts().set_pods_running), (0, 0));
    }
}
