//! Subresources with their own shape: a StatefulSet's `scale` (an `autoscaling/v1 Scale`) and a
//! pod's `binding` (what a scheduler posts). `status` is a plain update, in the handlers.

use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use crate::app_state::AppState;
use crate::error::ApiError;
use crate::handlers::{MAX_ATTEMPTS, merge_update, precondition_of, without_rv};
use crate::patch::{self, PatchType};
use crate::render::value_response;
use crate::request::{Target, body_value, key};
use crate::resource::ResourceKind;
use crate::store::ReplaceError;

/// The `autoscaling/v1 Scale` view of a StatefulSet.
pub(crate) fn scale_of(set: &Value) -> Value {
    let meta = &set["metadata"];
    let selector: Vec<String> = set
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect())
        .unwrap_or_default();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": set.pointer("/spec/replicas").cloned().unwrap_or(json!(1))},
        "status": {
            "replicas": set.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector.join(","),
        },
    })
}

/// `statefulsets/NAME/scale`: GET, PUT and PATCH of the replica count through a `Scale`.
pub(crate) fn scale(
    state: &AppState,
    method: &Method,
    target: &Target,
    name: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let kind = target.kind;
    let key = key(target, name);
    let current = || {
        state
            .store
            .get(kind, &key)
            .ok_or_else(|| ApiError::not_found(kind.group(), kind.plural(), name))
    };
    let patch_type = match *method {
        Method::GET => return Ok(value_response(StatusCode::OK, &scale_of(&current()?.value()))),
        Method::PUT => None,
        Method::PATCH => {
            let content_type =
                headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
            Some(
                PatchType::from_content_type(content_type)
                    .ok_or_else(|| ApiError::unsupported_media_type(content_type))?,
            )
        }
        _ => return Err(ApiError::method_not_allowed()),
    };
    for _ in 0..MAX_ATTEMPTS {
        let existing = current()?;
        let old = existing.value();
        let requested = match patch_type {
            None => body_value(headers, body)?,
            Some(patch_type) => patch::apply(patch_type, &without_rv(&scale_of(&old)), body)?,
        };
        let replicas = requested
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .ok_or_else(|| ApiError::invalid("Scale", name, "spec.replicas", "Required value"))?;
        if replicas < 0 {
            return Err(ApiError::invalid(
                "Scale",
                name,
                "spec.replicas",
                "Invalid value: must be greater than or equal to 0",
            ));
        }
        if let Some(rv) = precondition_of(&requested)?
            && rv != existing.rv
        {
            return Err(ApiError::conflict(
                kind.group(),
                kind.plural(),
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        let mut new = old.clone();
        new["spec"]["replicas"] = replicas.into();
        let new = merge_update(kind, &old, new, false);
        if new == old {
            return Ok(value_response(StatusCode::OK, &scale_of(&old)));
        }
        match state.store.replace(kind, &key, existing.rv, new) {
            Ok(obj) => return Ok(value_response(StatusCode::OK, &scale_of(&obj.value()))),
            Err(ReplaceError::Stale) => continue,
            Err(ReplaceError::NotFound) => {
                return Err(ApiError::not_found(kind.group(), kind.plural(), name));
            }
            Err(ReplaceError::Api(e)) => return Err(e),
        }
    }
    Err(ApiError::internal("too many concurrent writers on one object"))
}

/// `POST pods/NAME/binding`: assigns the pod to the node named in the Binding's target, as
/// a scheduler does. 409 if the pod already has a node.
pub(crate) fn bind(
    state: &AppState,
    target: &Target,
    name: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let binding = body_value(headers, body)?;
    let node = binding.pointer("/target/name").and_then(Value::as_str).unwrap_or("");
    if node.is_empty() {
        return Err(ApiError::invalid("Binding", name, "target.name", "Required value"));
    }
    let key = key(target, name);
    for _ in 0..MAX_ATTEMPTS {
        let pod = state
            .store
            .get(ResourceKind::Pod, &key)
            .ok_or_else(|| ApiError::not_found("", "pods", name))?;
        let mut value = pod.value();
        if let Some(current) = value.pointer("/spec/nodeName").and_then(Value::as_str)
            && !current.is_empty()
        {
            return Err(ApiError::conflict(
                "",
                "pods/binding",
                name,
                &format!("pod {name} is already assigned to node \"{current}\""),
            ));
        }
        value["spec"]["nodeName"] = node.into();
        match state.store.replace(ResourceKind::Pod, &key, pod.rv, value) {
            Ok(_) => {
                let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
                return Ok(value_response(StatusCode::CREATED, &status));
            }
            Err(ReplaceError::Stale) => continue,
            Err(ReplaceError::NotFound) => return Err(ApiError::not_found("", "pods", name)),
            Err(ReplaceError::Api(e)) => return Err(e),
        }
    }
    Err(ApiError::internal("too many concurrent writers on one object"))
}
