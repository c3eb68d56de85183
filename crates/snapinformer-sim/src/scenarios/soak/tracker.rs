//! The handler's view of every pod name, checked on every notification (invariant 2b of the
//! module docs).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use snapinformer_core::{DeltaObject, Notification};

use super::HandlerCounts;

/// One pod name as the handler knows it.
#[derive(Debug, Default)]
pub(super) struct NameState {
    /// The incarnation held: UID and resourceVersion.
    pub(super) held: Option<(String, u64)>,
    /// Whether the last notification for the name was a delete.
    pub(super) last_was_delete: bool,
}

/// The handler's view, checked on every notification (invariant 2b).
#[derive(Debug, Default)]
pub(super) struct Tracker {
    pub(super) names: HashMap<String, NameState>,
    pub(super) counts: HandlerCounts,
    pub(super) first_violations: Vec<String>,
}

pub(super) fn key_of(pod: &Pod) -> String {
    let m = &pod.metadata;
    format!("{}/{}", m.namespace.as_deref().unwrap_or(""), m.name.as_deref().unwrap_or(""))
}

pub(super) fn uid_rv(pod: &Pod) -> (String, u64) {
    let m = &pod.metadata;
    (
        m.uid.clone().unwrap_or_default(),
        m.resource_version.as_deref().and_then(|rv| rv.parse().ok()).unwrap_or(0),
    )
}

impl Tracker {
    fn violation(&mut self, what: String) {
        self.counts.violations += 1;
        if self.first_violations.len() < 20 {
            self.first_violations.push(what);
        }
    }

    pub(super) fn notify(&mut self, n: &Notification<Pod>) {
        match n {
            Notification::Add { obj, .. } => {
                self.counts.adds += 1;
                let key = key_of(obj);
                let new = uid_rv(obj);
                let state = self.names.entry(key.clone()).or_default();
                let previous = state.held.replace(new);
                state.last_was_delete = false;
                if let Some((uid, rv)) = previous {
                    self.violation(format!("add of {key} while {uid}@{rv} is held"));
                }
            }
            Notification::Update { old, new } => {
                self.counts.updates += 1;
                let key = key_of(new);
                let (old_uid, old_rv) = uid_rv(old);
                let (new_uid, new_rv) = uid_rv(new);
                let state = self.names.entry(key.clone()).or_default();
                let previous = state.held.replace((new_uid.clone(), new_rv));
                state.last_was_delete = false;
                if old_uid != new_uid {
                    self.counts.incarnation_changes += 1;
                }
                match previous {
                    Some((uid, rv)) if uid == old_uid && rv == old_rv => {}
                    Some((uid, rv)) => self.violation(format!(
                        "update of {key} from {old_uid}@{old_rv} while {uid}@{rv} is held"
                    )),
                    None => self.violation(format!("update of {key}, which is not held")),
                }
                if new_rv <= old_rv {
                    self.violation(format!("update of {key} goes back: {old_rv} -> {new_rv}"));
                }
            }
            Notification::Delete { obj } => {
                let (key, uid) = match obj {
                    DeltaObject::Object(o) => {
                        self.counts.deletes += 1;
                        (key_of(o), Some(uid_rv(o).0))
                    }
                    DeltaObject::Tombstone(t) => {
                        self.counts.tombstones += 1;
                        (t.key.to_string(), t.obj.as_deref().map(|o| uid_rv(o).0))
                    }
                };
                let state = self.names.entry(key.clone()).or_default();
                let previous = state.held.take();
                state.last_was_delete = true;
                match (previous, uid) {
                    (None, _) => self.violation(format!("delete of {key}, which is not held")),
                    (Some((held, rv)), Some(uid)) if held != uid => self.violation(format!(
                        "delete of {key} incarnation {uid} while {held}@{rv} is held"
                    )),
                    _ => {}
                }
            }
        }
    }
}
