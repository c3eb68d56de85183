//! PATCH bodies: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and the strategic merge
//! patch subset kubectl `apply`, `patch`, `label` and `annotate` produce for the served kinds.

use serde_json::{Map, Value};

use crate::error::ApiError;

/// The patch flavours, by `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
}

impl PatchType {
    /// Maps a content type (parameters ignored); `None` for unsupported types such as
    /// server-side apply (`application/apply-patch+yaml`).
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        match content_type.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            _ => None,
        }
    }
}

/// Applies `body` to `current`, returning the patched document.
pub fn apply(patch_type: PatchType, current: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let mut doc = current.clone();
    match patch_type {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            json_patch::patch(&mut doc, &ops).map_err(|e| {
                ApiError::new(
                    422,
                    "Invalid",
                    format!("the server rejected our request due to an error in our request: {e}"),
                )
            })?;
        }
        PatchType::Merge => {
            let patch = object_body(body)?;
            json_patch::merge(&mut doc, &patch);
        }
        PatchType::Strategic => {
            let patch = object_body(body)?;
            let (Value::Object(target), Value::Object(patch)) = (&mut doc, &patch) else {
                return Err(ApiError::bad_request("patch must be a JSON object"));
            };
            if merge_map(target, patch) == Outcome::Delete {
                return Err(ApiError::bad_request("a patch cannot delete the whole object"));
            }
        }
    }
    Ok(doc)
}

fn object_body(body: &[u8]) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "json: cannot unmarshal patch into Go value of type map[string]interface {}",
        ));
    }
    Ok(value)
}

/// How a list field merges under a strategic merge patch.
enum ListStrategy {
    /// Elements are objects merged by this key.
    ByKey(&'static str),
    /// Elements are primitives kept as a set.
    Set,
    /// The patch list replaces the list.
    Replace,
}

/// `patchMergeKey`/`patchStrategy` of the list fields of pods, nodes, namespaces,
/// statefulsets and daemonsets (by field name, which is unambiguous for these kinds).
fn list_strategy(field: &str) -> ListStrategy {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "volumeClaimTemplates" => ListStrategy::ByKey("name"),
        "ports" => ListStrategy::ByKey("containerPort"),
        "volumeMounts" => ListStrategy::ByKey("mountPath"),
        "volumeDevices" => ListStrategy::ByKey("devicePath"),
        "conditions" => ListStrategy::ByKey("type"),
        "ownerReferences" => ListStrategy::ByKey("uid"),
        "hostAliases" => ListStrategy::ByKey("ip"),
        "topologySpreadConstraints" => ListStrategy::ByKey("topologyKey"),
        "finalizers" => ListStrategy::Set,
        _ => ListStrategy::Replace,
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Keep,
    Delete,
}

/// Removes `$`-directives from a value taken over from a patch.
fn clean(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), clean(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(clean).collect()),
        other => other.clone(),
    }
}

fn merge_map(target: &mut Map<String, Value>, patch: &Map<String, Value>) -> Outcome {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("delete") => return Outcome::Delete,
        Some("replace") => {
            *target = match clean(&Value::Object(patch.clone())) {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            return Outcome::Keep;
        }
        _ => {}
    }
    for (key, value) in patch {
        if key.starts_with('$') {
            continue;
        }
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(child) => {
                let slot = target.entry(key.clone()).or_insert_with(|| Value::Object(Map::new()));
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                if let Value::Object(slot_map) = slot
                    && merge_map(slot_map, child) == Outcome::Delete
                {
                    target.remove(key);
                }
            }
            Value::Array(items) => {
                let slot = target.entry(key.clone()).or_insert_with(|| Value::Array(Vec::new()));
                merge_list(slot, items, list_strategy(key));
            }
            other => {
                target.insert(key.clone(), other.clone());
            }
        }
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/")
            && let (Some(Value::Array(list)), Value::Array(remove)) = (target.get_mut(field), value)
        {
            list.retain(|v| !remove.contains(v));
        }
    }
    for (key, value) in patch {
        if let Some(field) = key.strip_prefix("$setElementOrder/")
            && let (Some(Value::Array(list)), Value::Array(order)) = (target.get_mut(field), value)
        {
            reorder(list, order, list_strategy(field));
        }
    }
    if let Some(Value::Array(retain)) = patch.get("$retainKeys") {
        target.retain(|k, _| retain.iter().any(|r| r.as_str() == Some(k)));
    }
    Outcome::Keep
}

fn merge_list(slot: &mut Value, items: &[Value], strategy: ListStrategy) {
    let replace = items.iter().any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"));
    let rest = || {
        items
            .iter()
            .filter(|i| i.get("$patch").and_then(Value::as_str) != Some("replace"))
            .map(clean)
            .collect::<Vec<_>>()
    };
    if replace || !slot.is_array() {
        *slot = Value::Array(rest());
        return;
    }
    let Value::Array(list) = slot else { return };
    match strategy {
        ListStrategy::Replace => *list = rest(),
        ListStrategy::Set => {
            for item in items {
                if !list.contains(item) {
                    list.push(item.clone());
                }
            }
        }
        ListStrategy::ByKey(merge_key) => {
            for item in items {
                let Value::Object(patch_item) = item else {
                    if !list.contains(item) {
                        list.push(item.clone());
                    }
                    continue;
                };
                let id = patch_item.get(merge_key);
                let position =
                    id.and_then(|id| list.iter().position(|e| e.get(merge_key) == Some(id)));
                let delete = patch_item.get("$patch").and_then(Value::as_str) == Some("delete");
                match (position, delete) {
                    (Some(at), true) => {
                        list.remove(at);
                    }
                    (None, true) => {}
                    (Some(at), false) => {
                        if let Value::Object(existing) = &mut list[at]
                            && merge_map(existing, patch_item) == Outcome::Delete
                        {
                            list.remove(at);
                        }
                    }
                    (None, false) => list.push(clean(item)),
                }
            }
        }
    }
}

/// Orders `list` as `order` says; elements the order does not name keep their place at the end.
fn reorder(list: &mut Vec<Value>, order: &[Value], strategy: ListStrategy) {
    let identity = |v: &Value| -> Value {
        match &strategy {
            ListStrategy::ByKey(k) => v.get(*k).cloned().unwrap_or(Value::Null),
            _ => v.clone(),
        }
    };
    let order_ids: Vec<Value> = order.iter().map(&identity).collect();
    let mut ordered: Vec<Value> = Vec::with_capacity(list.len());
    for id in &order_ids {
        if let Some(at) = list.iter().position(|v| identity(v) == *id) {
            ordered.push(list.remove(at));
        }
    }
    ordered.append(list);
    *list = ordered;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
               "spec": {"containers": [{"name": "c1", "image": "i1"}, {"name": "c2", "image": "i2"}]}})
    }

    #[test]
    fn merge_patch_sets_and_removes_labels() {
        let out = apply(PatchType::Merge, &pod(), br#"{"metadata":{"labels":{"a":null,"c":"3"}}}"#)
            .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"b": "2", "c": "3"}));
    }

    #[test]
    fn json_patch_applies_operations_and_failed_tests_are_invalid() {
        let out = apply(
            PatchType::Json,
            &pod(),
            br#"[{"op":"replace","path":"/spec/containers/0/image","value":"new"}]"#,
        )
        .unwrap();
        assert_eq!(out["spec"]["containers"][0]["image"], "new");
        let err = apply(
            PatchType::Json,
            &pod(),
            br#"[{"op":"test","path":"/metadata/name","value":"q"}]"#,
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
    }

    #[test]
    fn strategic_merge_patch_merges_containers_by_name() {
        let out = apply(
            PatchType::Strategic,
            &pod(),
            br#"{"spec":{"containers":[{"name":"c2","image":"new"},{"name":"c3","image":"i3"}]}}"#,
        )
        .unwrap();
        assert_eq!(
            out["spec"]["containers"],
            json!([{"name": "c1", "image": "i1"}, {"name": "c2", "image": "new"}, {"name": "c3", "image": "i3"}])
        );
    }

    #[test]
    fn strategic_merge_patch_honours_delete_and_order_directives() {
        let out = apply(
            PatchType::Strategic,
            &pod(),
            br#"{"metadata":{"finalizers":["y"],"$deleteFromPrimitiveList/finalizers":["x"]},
                "spec":{"$setElementOrder/containers":[{"name":"c2"},{"name":"c1"}],
                        "containers":[{"name":"c1","$patch":"delete"}]}}"#,
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["y"]));
        assert_eq!(out["spec"]["containers"], json!([{"name": "c2", "image": "i2"}]));
    }

    #[test]
    fn non_object_merge_patch_is_a_bad_request() {
        assert_eq!(apply(PatchType::Merge, &pod(), b"[1]").unwrap_err().code, 400);
        assert_eq!(apply(PatchType::Strategic, &pod(), b"{").unwrap_err().code, 400);
    }
}
