//! Rendering answers: JSON responses, errors as `Status` objects, and objects and lists in the
//! negotiated representation (the object, metadata only, or a `Table`).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::request::Repr;
use crate::resource::ResourceKind;
use crate::store::StoredObject;
use crate::table;

/// A JSON answer.
pub(crate) fn json_response(
    status: StatusCode,
    body: impl Into<Body>,
    warnings: &[String],
) -> Response {
    let mut response = Response::new(body.into());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    for warning in warnings {
        let text = format!("299 - \"{}\"", warning.replace('"', "\\\""));
        if let Ok(value) = HeaderValue::from_str(&text) {
            headers.append("warning", value);
        }
    }
    response
}

pub(crate) fn value_response(status: StatusCode, value: &Value) -> Response {
    json_response(status, serde_json::to_vec(value).unwrap_or_default(), &[])
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = value_response(self.status_code(), &self.to_status());
        if self.code == 429 {
            let retry = self
                .details
                .as_ref()
                .and_then(|d| d.get("retryAfterSeconds"))
                .and_then(Value::as_u64)
                .unwrap_or(1);
            if let Ok(v) = HeaderValue::from_str(&retry.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        response
    }
}

/// Renders one object in the negotiated representation.
pub(crate) fn render_object(kind: ResourceKind, obj: &StoredObject, repr: Repr) -> Bytes {
    match repr {
        // Protobuf answers are transcoded from the JSON one by the router.
        Repr::Object | Repr::Protobuf => obj.json.clone(),
        Repr::Table(include) => {
            let value = obj.value();
            let rv = obj.rv.to_string();
            let t = table::table(
                kind,
                vec![table::row(kind, &value, include)],
                json!({"resourceVersion": rv}),
            );
            Bytes::from(serde_json::to_vec(&t).unwrap_or_default())
        }
        Repr::Metadata => {
            Bytes::from(serde_json::to_vec(&metadata_only(&obj.value())).unwrap_or_default())
        }
    }
}

pub(crate) fn metadata_only(value: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": value.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

pub(crate) fn render_list(
    kind: ResourceKind,
    items: &[Arc<StoredObject>],
    meta: Value,
    repr: Repr,
) -> Bytes {
    match repr {
        // Protobuf answers are transcoded from the JSON one by the router.
        Repr::Object | Repr::Protobuf => {
            let mut out =
                Vec::with_capacity(128 + items.iter().map(|o| o.json.len() + 1).sum::<usize>());
            out.extend_from_slice(b"{\"kind\":\"");
            out.extend_from_slice(kind.list_kind().as_bytes());
            out.extend_from_slice(b"\",\"apiVersion\":\"");
            out.extend_from_slice(kind.api_version().as_bytes());
            out.extend_from_slice(b"\",\"metadata\":");
            out.extend_from_slice(&serde_json::to_vec(&meta).unwrap_or_default());
            out.extend_from_slice(b",\"items\":[");
            for (i, obj) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(&obj.json);
            }
            out.extend_from_slice(b"]}");
            Bytes::from(out)
        }
        Repr::Table(include) => {
            let rows = items.iter().map(|o| table::row(kind, &o.value(), include)).collect();
            Bytes::from(serde_json::to_vec(&table::table(kind, rows, meta)).unwrap_or_default())
        }
        Repr::Metadata => {
            let list = json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": meta,
                "items": items.iter().map(|o| metadata_only(&o.value())).collect::<Vec<_>>(),
            });
            Bytes::from(serde_json::to_vec(&list).unwrap_or_default())
        }
    }
}
