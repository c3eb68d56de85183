//! The HTTP entry point: every request is logged; discovery, health and admin paths are
//! answered here; faults are injected; resource requests are dispatched to the handlers, the
//! subresources or a watch.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::accounting::RequestInfo;
use crate::app_state::AppState;
use crate::audit::{self, AuditRecord};
use crate::error::ApiError;
use crate::faults::FaultConfig;
use crate::handlers::{create, delete, delete_collection, get, list, patch_object, update};
use crate::render::value_response;
use crate::request::{Query, Repr, Target, flag, parse_query, parse_target, repr_of, target_clone};
use crate::subresources::{bind, scale};
use crate::{discovery, watch};

/// The single entry point: every request goes through here.
pub(crate) async fn handle(
    State(state): State<Arc<AppState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let received = k8s_openapi::jiff::Timestamp::now();
    let info = RequestInfo::of(&method, &uri, &headers);
    let dry_run = uri.query().is_some_and(|q| q.contains("dryRun=All"));
    let response = match body {
        Ok(body) => route(&state, &method, &uri, &headers, body).await,
        // The body limit (`Config::max_request_body_bytes`) stops reading at the limit.
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::request_entity_too_large(state.max_request_body_bytes).into_response()
        }
        Err(rejection) => ApiError::bad_request(format!(
            "cannot read the request body: {}",
            rejection.body_text()
        ))
        .into_response(),
    };
    tracing::debug!(%method, %uri, %accept, status = response.status().as_u16(), "request");
    if let Some(log) = &state.request_log {
        log.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!("{method} {uri} {}", response.status().as_u16()));
    }
    let code = response.status().as_u16();
    state.metrics.record(&info, dry_run, code);
    match &state.audit {
        Some(audit) if info.resource.is_some() => {
            let (response, failure) = failure_status(response).await;
            let user_agent =
                headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("");
            let request_uri = uri.path_and_query().map_or(uri.path(), |pq| pq.as_str());
            let record =
                AuditRecord { info: &info, request_uri, user_agent, code, failure, received };
            if let Some(bytes) = audit::encode(&record)
                && let Some(log) = audit.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
            {
                log.send(bytes);
            }
            response
        }
        _ => response,
    }
}

/// The largest error answer read back for the audit log; an error `Status` is far smaller.
const MAX_STATUS_BYTES: usize = 64 * 1024;

/// For an error answer, its `Status` object (read from the body, which is put back); `None`
/// for a success.
async fn failure_status(response: Response) -> (Response, Option<serde_json::Value>) {
    if response.status().as_u16() < 400 {
        return (response, None);
    }
    let (parts, body) = response.into_parts();
    match axum::body::to_bytes(body, MAX_STATUS_BYTES).await {
        Ok(bytes) => {
            let status = serde_json::from_slice(&bytes).ok();
            (Response::from_parts(parts, Body::from(bytes)), status)
        }
        Err(_) => (Response::from_parts(parts, Body::empty()), None),
    }
}

pub(crate) async fn route(
    state: &Arc<AppState>,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path();
    let segments: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let query = parse_query(uri);
    let get = *method == Method::GET;
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    if get
        && discovery::wants_aggregated(accept)
        && matches!(segments.as_slice(), ["api"] | ["apis"])
    {
        let document = discovery::aggregated(segments == ["api"]);
        let mut response = value_response(StatusCode::OK, &document);
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(discovery::AGGREGATED_V2));
        return response;
    }
    match segments.as_slice() {
        ["version"] if get => return value_response(StatusCode::OK, &discovery::version()),
        ["api"] if get => {
            return value_response(StatusCode::OK, &discovery::api_versions(state.addr));
        }
        ["apis"] if get => return value_response(StatusCode::OK, &discovery::api_groups()),
        ["api", "v1"] if get => {
            if let Some(list) = discovery::resource_list("") {
                return value_response(StatusCode::OK, &list);
            }
        }
        ["apis", group] if get => {
            if let Some(group) = discovery::api_group(group) {
                return value_response(StatusCode::OK, &group);
            }
        }
        ["apis", group, "v1"] if get => {
            if let Some(list) = discovery::resource_list(group) {
                return value_response(StatusCode::OK, &list);
            }
        }
        ["healthz" | "livez" | "readyz"] if get => return (StatusCode::OK, "ok").into_response(),
        ["metrics"] if get => {
            let mut response = Response::new(Body::from(state.metrics.render(&state.store)));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            return response;
        }
        ["openapi", "v2"] if get => {
            // An empty protobuf document: kubectl then skips client-side validation.
            let mut response = Response::new(Body::empty());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(
                    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
                ),
            );
            return response;
        }
        ["debug", "snapinformer", "faults"] => return admin_faults(state, method, &body),
        ["debug", "snapinformer", "compact"] if *method == Method::POST => {
            state.store.compact();
            return value_response(
                StatusCode::OK,
                &json!({"resourceVersion": state.store.current_rv().to_string()}),
            );
        }
        _ => {}
    }
    let target = match parse_target(&segments) {
        Ok(Some(target)) => target,
        Ok(None) => return ApiError::no_such_resource().into_response(),
        Err(e) => return e.into_response(),
    };
    let (latency, fault) = state.faults.request_fault();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if let Some(fault) = fault {
        return fault.into_response();
    }
    match resource_request(state, method, &target, &query, headers, &body).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

pub(crate) fn admin_faults(state: &Arc<AppState>, method: &Method, body: &Bytes) -> Response {
    match *method {
        Method::GET => {}
        Method::PUT | Method::POST => match serde_json::from_slice::<FaultConfig>(body) {
            Ok(config) => state.faults.set(config),
            Err(e) => return ApiError::bad_request(e.to_string()).into_response(),
        },
        _ => return ApiError::method_not_allowed().into_response(),
    }
    value_response(StatusCode::OK, &serde_json::to_value(state.faults.get()).unwrap_or_default())
}

pub(crate) async fn resource_request(
    state: &Arc<AppState>,
    method: &Method,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let repr = repr_of(headers, query);
    let watching = target.watch_path || flag(query, "watch");
    if repr == Repr::Protobuf && !watching {
        let response =
            resource_request_in(state, method, target, query, headers, body, repr).await?;
        return Ok(to_protobuf(response).await);
    }
    resource_request_in(state, method, target, query, headers, body, repr).await
}

/// The largest JSON answer transcoded to protobuf (a list of a few hundred thousand pods).
const MAX_TRANSCODED_BYTES: usize = 4 << 30;

/// Transcodes a successful JSON answer to protobuf, as the real server answers a client that
/// prefers it. Errors stay JSON `Status` objects (client-go reads either), and so does anything
/// without a protobuf message here.
async fn to_protobuf(response: Response) -> Response {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !response.status().is_success() || !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_TRANSCODED_BYTES).await else {
        return ApiError::internal("reading the answer to transcode it").into_response();
    };
    let encoded = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|value| crate::protobuf::encode(&value));
    match encoded {
        Some(encoded) => {
            parts.headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(crate::protobuf::MEDIA_TYPE),
            );
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(encoded))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

#[allow(clippy::too_many_arguments)]
async fn resource_request_in(
    state: &Arc<AppState>,
    method: &Method,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    body: &Bytes,
    repr: Repr,
) -> Result<Response, ApiError> {
    let watching = target.watch_path || flag(query, "watch");
    match (method.clone(), &target.name) {
        (method, Some(name)) if target.subresource.as_deref() == Some("scale") => {
            scale(state, &method, target, name, headers, body)
        }
        (Method::GET, None) if watching => watch::serve(state, target, query, repr),
        (Method::GET, Some(name)) if watching => {
            let mut query = query.clone();
            let selector = query.get("fieldSelector").cloned().unwrap_or_default();
            let by_name = format!("metadata.name={name}");
            query.insert(
                "fieldSelector".into(),
                if selector.is_empty() { by_name } else { format!("{selector},{by_name}") },
            );
            let target = Target { name: None, ..target_clone(target) };
            watch::serve(state, &target, &query, repr)
        }
        (Method::GET, None) => list(state, target, query, repr).await,
        (Method::GET, Some(name)) => get(state, target, name, repr),
        (Method::POST, None) => create(state, target, query, headers, body),
        (Method::POST, Some(name)) if target.subresource.as_deref() == Some("binding") => {
            bind(state, target, name, headers, body)
        }
        (_, Some(_)) if target.subresource.as_deref() == Some("binding") => {
            Err(ApiError::method_not_allowed())
        }
        (Method::PUT, Some(name)) => update(state, target, name, query, headers, body),
        (Method::PATCH, Some(name)) => patch_object(state, target, name, query, headers, body),
        (Method::DELETE, Some(name)) if target.subresource.is_none() => {
            delete(state, target, name, query, headers, body)
        }
        (Method::DELETE, None) => delete_collection(state, target, query, repr),
        _ => Err(ApiError::method_not_allowed()),
    }
}
