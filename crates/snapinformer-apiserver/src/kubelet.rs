//! A simulated kubelet: pods bound to a node (`spec.nodeName` set) move from Pending to
//! Running, with Ready conditions, container statuses and a pod IP, after a fixed delay.
//! Optionally it also plays the scheduler and binds pending pods that have no node.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::objects::now_rfc3339;
use crate::resource::ResourceKind;
use crate::store::{EventType, ObjKey, ReplaceError, Store, StoredObject};

/// Settings of the simulated kubelet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletConfig {
    /// Time between a pod being bound (or created bound) and it becoming Running.
    pub startup_delay: Duration,
    /// Also act as a scheduler: bind every pending pod without `spec.nodeName` to a node,
    /// round-robin over the nodes that fit (its `nodeSelector` labels, a required node
    /// affinity on `metadata.name` as DaemonSet pods carry, and not `spec.unschedulable`
    /// unless pinned by name). Pods that fit no node stay pending until a node changes.
    pub schedule: bool,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self { startup_delay: Duration::from_millis(100), schedule: false }
    }
}

/// What the scheduler needs to know about a node.
struct NodeInfo {
    name: String,
    labels: BTreeMap<String, String>,
    unschedulable: bool,
}

fn nodes(store: &Store) -> Vec<NodeInfo> {
    store
        .snapshot(ResourceKind::Node)
        .0
        .values()
        .map(|n| NodeInfo {
            name: n.key.name.clone(),
            labels: n.labels.clone(),
            unschedulable: n.fields.first().is_some_and(|f| f == "true"),
        })
        .collect()
}

/// Node names a required node affinity pins the pod to (`matchFields` on `metadata.name`).
fn pinned_names(pod: &Value) -> Option<Vec<String>> {
    let terms = pod
        .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")?
        .as_array()?;
    let mut names = Vec::new();
    for term in terms {
        for field in term.get("matchFields").and_then(Value::as_array).into_iter().flatten() {
            if field.get("key").and_then(Value::as_str) == Some("metadata.name")
                && field.get("operator").and_then(Value::as_str) == Some("In")
            {
                let values = field.get("values").and_then(Value::as_array).into_iter().flatten();
                names.extend(values.filter_map(Value::as_str).map(str::to_owned));
            }
        }
    }
    (!names.is_empty()).then_some(names)
}

/// Picks a node for `pod`, round-robin from `turn`.
fn choose_node(pod: &Value, nodes: &[NodeInfo], turn: &mut usize) -> Option<String> {
    let selector: BTreeMap<String, String> = pod
        .pointer("/spec/nodeSelector")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default();
    let pinned = pinned_names(pod);
    let fits = |node: &NodeInfo| {
        let by_name = pinned.as_ref().is_none_or(|names| names.contains(&node.name));
        let labels = selector.iter().all(|(k, v)| node.labels.get(k) == Some(v));
        by_name && labels && (pinned.is_some() || !node.unschedulable)
    };
    for offset in 0..nodes.len() {
        let node = &nodes[(*turn + offset) % nodes.len()];
        if fits(node) {
            *turn = (*turn + offset + 1) % nodes.len();
            return Some(node.name.clone());
        }
    }
    None
}

fn wants_node(obj: &StoredObject) -> bool {
    let phase = &obj.fields[ResourceKind::POD_PHASE];
    obj.fields[ResourceKind::POD_NODE_NAME].is_empty() && (phase.is_empty() || phase == "Pending")
}

/// Binds the pods waiting for a node; returns those that fit no node.
fn schedule(store: &Store, waiting: Vec<ObjKey>, turn: &mut usize) -> Vec<ObjKey> {
    let nodes = nodes(store);
    let mut unplaced = Vec::new();
    for key in waiting {
        for _ in 0..4 {
            let Some(pod) = store.get(ResourceKind::Pod, &key) else { break };
            if !wants_node(&pod) {
                break;
            }
            let mut value = pod.value();
            let Some(node) = choose_node(&value, &nodes, turn) else {
                unplaced.push(key.clone());
                break;
            };
            value["spec"]["nodeName"] = node.into();
            match store.replace(ResourceKind::Pod, &key, pod.rv, value) {
                Err(ReplaceError::Stale) => continue,
                _ => break,
            }
        }
    }
    unplaced
}

fn wants_start(obj: &StoredObject) -> bool {
    let node = &obj.fields[ResourceKind::POD_NODE_NAME];
    let phase = &obj.fields[ResourceKind::POD_PHASE];
    !node.is_empty() && (phase.is_empty() || phase == "Pending")
}

/// The Running status a kubelet would report for `pod`.
pub(crate) fn running_status(pod: &Value, ip_seed: u64) -> Value {
    let now = now_rfc3339();
    let containers =
        pod.pointer("/spec/containers").and_then(Value::as_array).cloned().unwrap_or_default();
    let statuses: Vec<Value> = containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let image = c.get("image").and_then(Value::as_str).unwrap_or("");
            json!({
                "name": c.get("name").cloned().unwrap_or(Value::Null),
                "image": image,
                "imageID": format!("{image}@sha256:{:064x}", 0),
                "containerID": format!("containerd://{:064x}", ip_seed * 16 + i as u64),
                "ready": true,
                "started": true,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            })
        })
        .collect();
    let condition = |kind: &str| json!({"type": kind, "status": "True", "lastTransitionTime": now});
    json!({
        "phase": "Running",
        "conditions": [
            condition("PodReadyToStartContainers"),
            condition("Initialized"),
            condition("Ready"),
            condition("ContainersReady"),
            condition("PodScheduled"),
        ],
        "hostIP": "10.0.0.1",
        "podIP": format!("10.{}.{}.{}", 64 + (ip_seed >> 16) % 64, (ip_seed >> 8) % 256, ip_seed % 256),
        "startTime": now,
        "qosClass": "Burstable",
        "containerStatuses": statuses,
    })
}

/// Runs the kubelet until `stop` changes.
pub(crate) async fn run(store: Arc<Store>, config: KubeletConfig, mut stop: watch::Receiver<bool>) {
    let (mut rv_rx, _) = store.subscribe();
    let mut queue: VecDeque<(Instant, ObjKey, String)> = VecDeque::new();
    let mut queued: HashSet<ObjKey> = HashSet::new();
    let mut started: u64 = 0;
    let mut waiting: Vec<ObjKey> = Vec::new();
    let mut unplaced: Vec<ObjKey> = Vec::new();
    let mut turn = 0usize;
    let mut cursor = rescan(&store, &config, &mut queue, &mut queued, &mut waiting);
    loop {
        if *stop.borrow() {
            return;
        }
        rv_rx.borrow_and_update();
        match store.events_after(cursor, 4096) {
            Err(_) => cursor = rescan(&store, &config, &mut queue, &mut queued, &mut waiting),
            Ok(events) => {
                let due = Instant::now() + config.startup_delay;
                for event in &events {
                    cursor = event.rv;
                    if event.kind == ResourceKind::Node && config.schedule {
                        // A node appeared or changed: pods that fit nowhere may fit now.
                        waiting.append(&mut unplaced);
                    }
                    if event.kind != ResourceKind::Pod || event.etype == EventType::Deleted {
                        continue;
                    }
                    if wants_start(&event.obj) && queued.insert(event.obj.key.clone()) {
                        queue.push_back((due, event.obj.key.clone(), event.obj.uid.clone()));
                    } else if config.schedule && wants_node(&event.obj) {
                        waiting.push(event.obj.key.clone());
                    }
                }
                if !events.is_empty() {
                    continue;
                }
            }
        }
        if !waiting.is_empty() {
            let batch = std::mem::take(&mut waiting);
            unplaced.extend(schedule(&store, batch, &mut turn));
            continue;
        }
        let now = Instant::now();
        while queue.front().is_some_and(|(due, _, _)| *due <= now) {
            let Some((_, key, uid)) = queue.pop_front() else { break };
            queued.remove(&key);
            for _ in 0..4 {
                let Some(pod) = store.get(ResourceKind::Pod, &key) else { break };
                if pod.uid != uid || !wants_start(&pod) {
                    break;
                }
                let mut value = pod.value();
                started += 1;
                value["status"] = running_status(&value, started);
                match store.replace(ResourceKind::Pod, &key, pod.rv, value) {
                    Err(ReplaceError::Stale) => continue,
                    _ => break,
                }
            }
        }
        let next_due = queue.front().map(|(due, _, _)| *due);
        tokio::select! {
            changed = rv_rx.changed() => if changed.is_err() { return },
            _ = stop.changed() => return,
            _ = async {
                match next_due {
                    Some(due) => tokio::time::sleep_until(due).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    }
}

fn rescan(
    store: &Store,
    config: &KubeletConfig,
    queue: &mut VecDeque<(Instant, ObjKey, String)>,
    queued: &mut HashSet<ObjKey>,
    waiting: &mut Vec<ObjKey>,
) -> u64 {
    let (map, rv) = store.snapshot(ResourceKind::Pod);
    let due = Instant::now() + config.startup_delay;
    waiting.clear();
    for (key, obj) in map.iter() {
        if wants_start(obj) && queued.insert(key.clone()) {
            queue.push_back((due, key.clone(), obj.uid.clone()));
        } else if config.schedule && wants_node(obj) {
            waiting.push(key.clone());
        }
    }
    rv
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, labels: &[(&str, &str)], unschedulable: bool) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            unschedulable,
        }
    }

    #[test]
    fn scheduler_round_robins_over_fitting_nodes() {
        let nodes =
            [node("a", &[], false), node("b", &[], true), node("c", &[("disk", "ssd")], false)];
        let mut turn = 0;
        let plain = json!({"spec": {}});
        let picks: Vec<_> =
            (0..3).map(|_| choose_node(&plain, &nodes, &mut turn).unwrap()).collect();
        assert_eq!(picks, ["a", "c", "a"], "unschedulable b is skipped");
        let ssd = json!({"spec": {"nodeSelector": {"disk": "ssd"}}});
        assert_eq!(choose_node(&ssd, &nodes, &mut turn).as_deref(), Some("c"));
        let pinned = json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}}}}});
        assert_eq!(
            choose_node(&pinned, &nodes, &mut turn).as_deref(),
            Some("b"),
            "a pin overrides unschedulable"
        );
        let nowhere = json!({"spec": {"nodeSelector": {"gpu": "yes"}}});
        assert_eq!(choose_node(&nowhere, &nodes, &mut turn), None);
    }
}
