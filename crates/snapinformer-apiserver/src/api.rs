//! The HTTP layer: path routing, content negotiation, reads and writes.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::faults::{FaultConfig, Faults};
use crate::objects::{prepare_create, random_suffix};
use crate::patch::{self, PatchType};
use crate::resource::{FieldValidation, ResourceKind};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{Filter, ObjKey, ObjectMap, ReplaceError, Store, StoredObject, VersionError};
use crate::table::{self, IncludeObject};
use crate::{discovery, watch};

/// Everything a request handler needs.
pub(crate) struct AppState {
    pub(crate) store: Arc<Store>,
    pub(crate) faults: Faults,
    pub(crate) addr: SocketAddr,
    pub(crate) bookmark_interval: Duration,
    pub(crate) default_watch_timeout: Duration,
    pub(crate) max_request_body_bytes: usize,
    pub(crate) request_log: Option<Mutex<Vec<String>>>,
}

/// How objects are rendered in answers (from the `Accept` header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repr {
    Object,
    Table(IncludeObject),
    Metadata,
}

/// The query string as a map (repeated keys keep the last value; `?&a=b` is fine).
pub(crate) type Query = HashMap<String, String>;

fn parse_query(uri: &Uri) -> Query {
    let mut query = Query::new();
    for pair in uri.query().unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        query.insert(decode(k), decode(v));
    }
    query
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match (hex_digit(bytes[i + 1]), hex_digit(bytes[i + 2])) {
                    (Some(hi), Some(lo)) => {
                        out.push(hi * 16 + lo);
                        i += 2;
                    }
                    _ => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn flag(query: &Query, key: &str) -> bool {
    matches!(query.get(key).map(String::as_str), Some("true" | "1"))
}

fn repr_of(headers: &HeaderMap, query: &Query) -> Repr {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    // The first acceptable media type wins, as in the real server's negotiation.
    for media in accept.split(',') {
        let media = media.trim();
        if media.contains("as=Table") && media.contains("g=meta.k8s.io") {
            return Repr::Table(IncludeObject::parse(
                query.get("includeObject").map(String::as_str),
            ));
        }
        if media.contains("as=PartialObjectMetadata") && media.contains("g=meta.k8s.io") {
            return Repr::Metadata;
        }
        if media.starts_with("application/json") || media.starts_with("*/*") || media.is_empty() {
            return Repr::Object;
        }
    }
    Repr::Object
}

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

fn value_response(status: StatusCode, value: &Value) -> Response {
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

/// A resource request, parsed from the path.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) kind: ResourceKind,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    pub(crate) subresource: Option<String>,
    pub(crate) watch_path: bool,
}

fn parse_target(segments: &[&str]) -> Result<Option<Target>, ApiError> {
    let (group, rest) = match segments {
        ["api", "v1", rest @ ..] if !rest.is_empty() => ("", rest),
        ["apis", "apps", "v1", rest @ ..] if !rest.is_empty() => ("apps", rest),
        _ => return Ok(None),
    };
    let (watch_path, rest) = match rest {
        ["watch", rest @ ..] if !rest.is_empty() => (true, rest),
        _ => (false, rest),
    };
    let (namespace, resource, tail) = match rest {
        ["namespaces", ns, resource, tail @ ..] if !matches!(*resource, "status" | "finalize") => {
            (Some((*ns).to_owned()), *resource, tail)
        }
        [resource, tail @ ..] => (None, *resource, tail),
        [] => return Ok(None),
    };
    let Some(kind) = ResourceKind::from_plural(group, resource) else { return Ok(None) };
    if namespace.is_some() && !kind.namespaced() {
        return Ok(None);
    }
    let (name, subresource) = match tail {
        [] => (None, None),
        [name] => (Some((*name).to_owned()), None),
        [name, "status"] => (Some((*name).to_owned()), Some("status".to_owned())),
        [name, "scale"] if kind == ResourceKind::StatefulSet => {
            (Some((*name).to_owned()), Some("scale".to_owned()))
        }
        [name, "binding"] if kind == ResourceKind::Pod => {
            (Some((*name).to_owned()), Some("binding".to_owned()))
        }
        _ => return Ok(None),
    };
    if watch_path && subresource.is_some() {
        return Ok(None);
    }
    Ok(Some(Target { kind, namespace, name, subresource, watch_path }))
}

/// The single entry point: every request goes through here.
pub(crate) async fn handle(
    State(state): State<Arc<AppState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
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
    response
}

async fn route(
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
            return value_response(StatusCode::OK, &discovery::resource_list(""));
        }
        ["apis", "apps"] if get => {
            return value_response(StatusCode::OK, &discovery::apps_api_group());
        }
        ["apis", "apps", "v1"] if get => {
            return value_response(StatusCode::OK, &discovery::resource_list("apps"));
        }
        ["healthz" | "livez" | "readyz"] if get => return (StatusCode::OK, "ok").into_response(),
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

fn admin_faults(state: &Arc<AppState>, method: &Method, body: &Bytes) -> Response {
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

async fn resource_request(
    state: &Arc<AppState>,
    method: &Method,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let repr = repr_of(headers, query);
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
            delete(state, target, name, query, body)
        }
        (Method::DELETE, None) => delete_collection(state, target, query, repr),
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn target_clone(t: &Target) -> Target {
    Target {
        kind: t.kind,
        namespace: t.namespace.clone(),
        name: t.name.clone(),
        subresource: t.subresource.clone(),
        watch_path: t.watch_path,
    }
}

fn key(target: &Target, name: &str) -> ObjKey {
    ObjKey::new(target.namespace.as_deref().unwrap_or(""), name)
}

/// Renders one object in the negotiated representation.
pub(crate) fn render_object(kind: ResourceKind, obj: &StoredObject, repr: Repr) -> Bytes {
    match repr {
        Repr::Object => obj.json.clone(),
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

fn get(state: &AppState, target: &Target, name: &str, repr: Repr) -> Result<Response, ApiError> {
    let kind = target.kind;
    if kind.namespaced() && target.namespace.is_none() {
        return Err(ApiError::no_such_resource());
    }
    let obj = state
        .store
        .get(kind, &key(target, name))
        .ok_or_else(|| ApiError::not_found(kind.group(), kind.plural(), name))?;
    Ok(json_response(StatusCode::OK, render_object(kind, &obj, repr), &[]))
}

/// Parses label and field selectors and the namespace into a filter.
pub(crate) fn filter_of(target: &Target, query: &Query) -> Result<Filter, ApiError> {
    Ok(Filter {
        namespace: target.namespace.clone(),
        labels: LabelSelector::parse(query.get("labelSelector").map(String::as_str).unwrap_or(""))?,
        fields: FieldSelector::parse(
            target.kind,
            query.get("fieldSelector").map(String::as_str).unwrap_or(""),
        )?,
    })
}

/// Parses a resourceVersion parameter.
pub(crate) fn parse_rv(text: &str) -> Result<u64, ApiError> {
    text.parse().map_err(|e: std::num::ParseIntError| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow => "value out of range",
            _ => "invalid syntax",
        };
        ApiError::bad_request(format!(
            "invalid resource version: strconv.ParseUint: parsing {text:?}: {why}"
        ))
    })
}

/// Parses an integer query parameter (`limit`, `timeoutSeconds`) as the real server does,
/// answering 400 with Go's `strconv.ParseInt` message when it does not parse.
pub(crate) fn parse_int64(text: &str) -> Result<i64, ApiError> {
    text.parse().map_err(|e: std::num::ParseIntError| {
        let why = match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                "value out of range"
            }
            _ => "invalid syntax",
        };
        ApiError::bad_request(format!("strconv.ParseInt: parsing {text:?}: {why}"))
    })
}

fn encode_continue(rv: u64, key: &ObjKey) -> String {
    let text = format!("{rv}\u{0}{}\u{0}{}", key.namespace, key.name);
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

fn decode_continue(token: &str) -> Option<(u64, ObjKey)> {
    if !token.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok())
        .collect();
    let text = String::from_utf8(bytes?).ok()?;
    let mut parts = text.split('\u{0}');
    let rv = parts.next()?.parse().ok()?;
    let namespace = parts.next()?;
    let name = parts.next()?;
    Some((rv, ObjKey::new(namespace, name)))
}

const TOO_LARGE_WAIT: Duration = Duration::from_secs(3);

async fn list(
    state: &AppState,
    target: &Target,
    query: &Query,
    repr: Repr,
) -> Result<Response, ApiError> {
    let kind = target.kind;
    if state.faults.take_list_410() {
        return Err(ApiError::expired(format!(
            "too old resource version: {} ({})",
            query.get("resourceVersion").map(String::as_str).unwrap_or("0"),
            state.store.current_rv()
        )));
    }
    let filter = filter_of(target, query)?;
    // Like the real server, a zero or negative limit means no limit.
    let limit = match query.get("limit").map(String::as_str) {
        None | Some("") => 0,
        Some(text) => usize::try_from(parse_int64(text)?).unwrap_or(0),
    };
    let rv_param = query.get("resourceVersion").map(String::as_str).unwrap_or("");
    let rv_match = query.get("resourceVersionMatch").map(String::as_str).unwrap_or("");
    let token = query.get("continue").map(String::as_str).unwrap_or("");
    if !matches!(rv_match, "" | "Exact" | "NotOlderThan") {
        return Err(ApiError::invalid(
            "ListOptions",
            "",
            "resourceVersionMatch",
            &format!(
                "Unsupported value: \"{rv_match}\": supported values: \"Exact\", \"NotOlderThan\", \"\""
            ),
        ));
    }
    let (map, rv, start_after) = if !token.is_empty() {
        if !rv_match.is_empty() {
            return Err(ApiError::invalid(
                "ListOptions",
                "",
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if !rv_param.is_empty() && rv_param != "0" {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let (rv, after) = decode_continue(token).ok_or_else(|| {
            ApiError::bad_request("invalid continue token: continue key is not valid")
        })?;
        let map = state.store.snapshot_at(kind, rv).map_err(|e| match e {
            VersionError::TooOld(_) => ApiError::expired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."),
            VersionError::TooLarge(current) => ApiError::too_large_resource_version(rv, current),
        })?;
        (map, rv, Some(after))
    } else if rv_param.is_empty() {
        if !rv_match.is_empty() {
            return Err(ApiError::invalid(
                "ListOptions",
                "",
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        let (map, rv) = state.store.snapshot(kind);
        (map, rv, None)
    } else {
        let wanted = parse_rv(rv_param)?;
        if rv_match == "Exact" {
            if wanted == 0 {
                return Err(ApiError::invalid(
                    "ListOptions",
                    "",
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
            state.store.wait_for_rv(wanted, TOO_LARGE_WAIT).await;
            let map = state.store.snapshot_at(kind, wanted).map_err(|e| match e {
                VersionError::TooOld(oldest) => {
                    ApiError::expired(format!("too old resource version: {wanted} ({oldest})"))
                }
                VersionError::TooLarge(current) => {
                    ApiError::too_large_resource_version(wanted, current)
                }
            })?;
            (map, wanted, None)
        } else {
            if !state.store.wait_for_rv(wanted, TOO_LARGE_WAIT).await {
                return Err(ApiError::too_large_resource_version(wanted, state.store.current_rv()));
            }
            let (map, rv) = state.store.snapshot(kind);
            (map, rv, None)
        }
    };
    let (items, next, remaining) = page(&map, &filter, start_after.as_ref(), limit);
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if let Some(last) = next {
        state.store.remember_snapshot(kind, rv, map.clone());
        meta["continue"] = encode_continue(rv, &last).into();
        if filter.labels.is_empty() && filter.fields.is_empty() {
            meta["remainingItemCount"] = remaining.into();
        }
    }
    Ok(json_response(StatusCode::OK, render_list(kind, &items, meta, repr), &[]))
}

/// Matching objects in key order after `start_after`, at most `limit` (0 = all), plus the key
/// to continue from and how many matching objects remain.
fn page(
    map: &ObjectMap,
    filter: &Filter,
    start_after: Option<&ObjKey>,
    limit: usize,
) -> (Vec<Arc<StoredObject>>, Option<ObjKey>, u64) {
    let lower = match (start_after, &filter.namespace) {
        (Some(after), _) => std::ops::Bound::Excluded(after.clone()),
        (None, Some(ns)) => std::ops::Bound::Included(ObjKey::new(ns, "")),
        (None, None) => std::ops::Bound::Unbounded,
    };
    let mut items = Vec::new();
    let mut next = None;
    let mut remaining = 0u64;
    // remainingItemCount is only given without selectors (as the real server does); then
    // counting the rest needs no selector evaluation. With selectors, stop at the next match.
    let count_rest = filter.labels.is_empty() && filter.fields.is_empty();
    let iter = map
        .range((lower, std::ops::Bound::Unbounded))
        .take_while(|(k, _)| filter.namespace.as_ref().is_none_or(|ns| *ns == k.namespace));
    for (_, obj) in iter {
        if limit > 0 && items.len() == limit {
            if count_rest {
                remaining += 1;
            } else if obj.matches(filter) {
                remaining += 1;
                break;
            }
            continue;
        }
        if obj.matches(filter) {
            items.push(obj.clone());
        }
    }
    if remaining > 0 {
        next = items.last().map(|o| o.key.clone());
    }
    (items, next, remaining)
}

fn render_list(kind: ResourceKind, items: &[Arc<StoredObject>], meta: Value, repr: Repr) -> Bytes {
    match repr {
        Repr::Object => {
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

fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let content_type =
        headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim();
    if media == "application/json" || media.is_empty() {
        Ok(())
    } else {
        Err(ApiError::unsupported_media_type(content_type))
    }
}

fn is_protobuf(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/vnd.kubernetes.protobuf"))
}

fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request("the body of the request was empty"));
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric()
}

fn dry_run(query: &Query) -> bool {
    query.get("dryRun").is_some_and(|v| v == "All")
}

/// A successful create: the stored object's JSON (for a dry run, the object that would have
/// been stored) and the unknown-field warnings.
pub(crate) struct Created {
    pub(crate) body: Bytes,
    pub(crate) warnings: Vec<String>,
}

/// Validates, completes and stores a new object; shared by HTTP create and the library.
pub(crate) fn create_value(
    store: &Store,
    kind: ResourceKind,
    namespace: Option<&str>,
    body: &Value,
    validation: FieldValidation,
    dry_run: bool,
) -> Result<Created, ApiError> {
    let (mut value, warnings) = kind.normalize(body, validation)?;
    let meta = value
        .as_object_mut()
        .map(|o| o.entry("metadata").or_insert_with(|| json!({})))
        .ok_or_else(|| ApiError::bad_request("object expected"))?;
    if kind.namespaced() {
        let body_ns = meta.get("namespace").and_then(Value::as_str).unwrap_or("").to_owned();
        let ns = match (namespace, body_ns.as_str()) {
            (Some(path), "") => path.to_owned(),
            (Some(path), body) if path != body => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            (_, body) if !body.is_empty() => body.to_owned(),
            _ => "default".to_owned(),
        };
        meta["namespace"] = ns.into();
    }
    if meta.get("resourceVersion").and_then(Value::as_str).is_some_and(|rv| !rv.is_empty()) {
        return Err(ApiError::internal(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let name = meta.get("name").and_then(Value::as_str).unwrap_or("").to_owned();
    let generate = meta.get("generateName").and_then(Value::as_str).unwrap_or("").to_owned();
    if name.is_empty() && generate.is_empty() {
        return Err(ApiError::invalid(
            kind.kind(),
            "",
            "metadata.name",
            "Required value: name or generateName is required",
        ));
    }
    let candidate =
        if name.is_empty() { format!("{generate}{}", random_suffix()) } else { name.clone() };
    if !valid_name(&candidate) {
        return Err(ApiError::invalid(
            kind.kind(),
            &candidate,
            "metadata.name",
            &format!(
                "Invalid value: \"{candidate}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            ),
        ));
    }
    prepare_create(kind, &mut value);
    let mut attempt = 0;
    loop {
        let mut value = value.clone();
        value["metadata"]["name"] = if name.is_empty() && attempt > 0 {
            format!("{generate}{}", random_suffix())
        } else {
            candidate.clone()
        }
        .into();
        if dry_run {
            let body = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
            return Ok(Created { body, warnings });
        }
        match store.create(kind, value) {
            Ok(obj) => return Ok(Created { body: obj.json.clone(), warnings }),
            Err(e) if e.code == 409 && name.is_empty() && attempt < 8 => attempt += 1,
            Err(e) => return Err(e),
        }
    }
}

fn create(
    state: &AppState,
    target: &Target,
    query: &Query,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let kind = target.kind;
    if target.subresource.is_some() || (kind.namespaced() && target.namespace.is_none()) {
        return Err(ApiError::method_not_allowed());
    }
    let value = if is_protobuf(headers) {
        crate::protobuf::decode(kind, body)?
    } else {
        require_json(headers)?;
        parse_body(body)?
    };
    let validation = FieldValidation::parse(query.get("fieldValidation").map(String::as_str));
    let created = create_value(
        &state.store,
        kind,
        target.namespace.as_deref(),
        &value,
        validation,
        dry_run(query),
    )?;
    Ok(json_response(StatusCode::CREATED, created.body, &created.warnings))
}

/// Produces the object to store from the existing one and the requested new state.
fn merge_update(kind: ResourceKind, existing: &Value, mut new: Value, status_only: bool) -> Value {
    if status_only {
        let mut out = existing.clone();
        match new.get_mut("status").map(Value::take) {
            Some(status) => out["status"] = status,
            None => {
                if let Some(o) = out.as_object_mut() {
                    o.remove("status");
                }
            }
        }
        return out;
    }
    for field in ["uid", "creationTimestamp", "generation", "deletionTimestamp", "namespace"] {
        match existing.pointer(&format!("/metadata/{field}")) {
            Some(v) => new["metadata"][field] = v.clone(),
            None => {
                if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove(field);
                }
            }
        }
    }
    match existing.get("status") {
        Some(status) => new["status"] = status.clone(),
        None => {
            if let Some(o) = new.as_object_mut() {
                o.remove("status");
            }
        }
    }
    if kind.has_generation() && existing.get("spec") != new.get("spec") {
        let generation =
            existing.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
        new["metadata"]["generation"] = (generation + 1).into();
    }
    new
}

fn without_rv(value: &Value) -> Value {
    let mut v = value.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    v
}

/// Outcome of one attempt at writing an update.
enum Attempt {
    Done(Arc<StoredObject>),
    Retry,
}

#[allow(clippy::too_many_arguments)]
fn try_update(
    store: &Store,
    target: &Target,
    name: &str,
    existing: &Arc<StoredObject>,
    requested: Value,
    precondition: Option<u64>,
    status_only: bool,
    dry_run: bool,
) -> Result<Attempt, ApiError> {
    let kind = target.kind;
    if let Some(rv) = precondition
        && rv != existing.rv
    {
        return Err(ApiError::conflict(
            kind.group(),
            kind.plural(),
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ));
    }
    if let Some(uid) = requested.pointer("/metadata/uid").and_then(Value::as_str)
        && !uid.is_empty()
        && uid != existing.uid
    {
        return Err(ApiError::conflict(
            kind.group(),
            kind.plural(),
            name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                existing.uid
            ),
        ));
    }
    let old = existing.value();
    let new = merge_update(kind, &old, requested, status_only);
    if without_rv(&new) == without_rv(&old) || dry_run {
        return Ok(Attempt::Done(existing.clone()));
    }
    match store.replace(kind, &key(target, name), existing.rv, new) {
        Ok(obj) => Ok(Attempt::Done(obj)),
        Err(ReplaceError::Stale) if precondition.is_none() => Ok(Attempt::Retry),
        Err(ReplaceError::Stale) => Err(ApiError::conflict(
            kind.group(),
            kind.plural(),
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )),
        Err(ReplaceError::NotFound) => Err(ApiError::not_found(kind.group(), kind.plural(), name)),
        Err(ReplaceError::Api(e)) => Err(e),
    }
}

fn check_identity(target: &Target, name: &str, value: &Value) -> Result<(), ApiError> {
    let body_name = value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if let (Some(path_ns), Some(body_ns)) =
        (&target.namespace, value.pointer("/metadata/namespace").and_then(Value::as_str))
        && !body_ns.is_empty()
        && body_ns != path_ns
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

fn precondition_of(value: &Value) -> Result<Option<u64>, ApiError> {
    match value.pointer("/metadata/resourceVersion").and_then(Value::as_str) {
        None | Some("") => Ok(None),
        Some(rv) => parse_rv(rv).map(Some),
    }
}

const MAX_ATTEMPTS: usize = 16;

fn update(
    state: &AppState,
    target: &Target,
    name: &str,
    query: &Query,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let kind = target.kind;
    if kind.namespaced() && target.namespace.is_none() {
        return Err(ApiError::method_not_allowed());
    }
    require_json(headers)?;
    let raw = parse_body(body)?;
    let validation = FieldValidation::parse(query.get("fieldValidation").map(String::as_str));
    let (value, warnings) = kind.normalize(&raw, validation)?;
    check_identity(target, name, &value)?;
    let precondition = precondition_of(&value)?;
    for _ in 0..MAX_ATTEMPTS {
        let existing = state
            .store
            .get(kind, &key(target, name))
            .ok_or_else(|| ApiError::not_found(kind.group(), kind.plural(), name))?;
        match try_update(
            &state.store,
            target,
            name,
            &existing,
            value.clone(),
            precondition,
            target.subresource.is_some(),
            dry_run(query),
        )? {
            Attempt::Done(obj) => {
                return Ok(json_response(StatusCode::OK, obj.json.clone(), &warnings));
            }
            Attempt::Retry => continue,
        }
    }
    Err(ApiError::internal("too many concurrent writers on one object"))
}

fn patch_object(
    state: &AppState,
    target: &Target,
    name: &str,
    query: &Query,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let kind = target.kind;
    if kind.namespaced() && target.namespace.is_none() {
        return Err(ApiError::method_not_allowed());
    }
    let content_type =
        headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let patch_type = PatchType::from_content_type(content_type)
        .ok_or_else(|| ApiError::unsupported_media_type(content_type))?;
    let validation = FieldValidation::parse(query.get("fieldValidation").map(String::as_str));
    for _ in 0..MAX_ATTEMPTS {
        let existing = state
            .store
            .get(kind, &key(target, name))
            .ok_or_else(|| ApiError::not_found(kind.group(), kind.plural(), name))?;
        // The patch applies to the object without its resourceVersion, so a resourceVersion in
        // the result can only come from the patch itself: that is its precondition.
        let patched = patch::apply(patch_type, &without_rv(&existing.value()), body)?;
        let (value, warnings) = kind.normalize(&patched, validation)?;
        if value.pointer("/metadata/name").and_then(Value::as_str) != Some(name) {
            return Err(ApiError::invalid(
                kind.kind(),
                name,
                "metadata.name",
                "Invalid value: field is immutable",
            ));
        }
        let precondition = precondition_of(&value)?;
        match try_update(
            &state.store,
            target,
            name,
            &existing,
            value,
            precondition,
            target.subresource.is_some(),
            dry_run(query),
        )? {
            Attempt::Done(obj) => {
                return Ok(json_response(StatusCode::OK, obj.json.clone(), &warnings));
            }
            Attempt::Retry => continue,
        }
    }
    Err(ApiError::internal("too many concurrent writers on one object"))
}

/// The `autoscaling/v1 Scale` view of a StatefulSet.
fn scale_of(set: &Value) -> Value {
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
fn scale(
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
        Method::PUT => {
            require_json(headers)?;
            None
        }
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
            None => parse_body(body)?,
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
fn bind(
    state: &AppState,
    target: &Target,
    name: &str,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    require_json(headers)?;
    let binding = parse_body(body)?;
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

fn delete(
    state: &AppState,
    target: &Target,
    name: &str,
    query: &Query,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let kind = target.kind;
    if kind.namespaced() && target.namespace.is_none() {
        return Err(ApiError::method_not_allowed());
    }
    let options: Value = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("couldn't decode DeleteOptions: {e}")))?
    };
    let uid = options.pointer("/preconditions/uid").and_then(Value::as_str);
    let rv = match options.pointer("/preconditions/resourceVersion").and_then(Value::as_str) {
        Some(rv) => Some(parse_rv(rv)?),
        None => None,
    };
    let dry = dry_run(query)
        || options
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v == "All"));
    let key = key(target, name);
    if dry {
        let obj = state
            .store
            .get(kind, &key)
            .ok_or_else(|| ApiError::not_found(kind.group(), kind.plural(), name))?;
        return Ok(json_response(StatusCode::OK, obj.json.clone(), &[]));
    }
    let obj = state.store.delete(kind, &key, uid, rv)?;
    Ok(json_response(StatusCode::OK, obj.json.clone(), &[]))
}

fn delete_collection(
    state: &AppState,
    target: &Target,
    query: &Query,
    repr: Repr,
) -> Result<Response, ApiError> {
    let kind = target.kind;
    if target.subresource.is_some() {
        return Err(ApiError::method_not_allowed());
    }
    let filter = filter_of(target, query)?;
    let (map, _) = state.store.snapshot(kind);
    let (items, _, _) = page(&map, &filter, None, 0);
    let mut deleted = Vec::with_capacity(items.len());
    for obj in items {
        match state.store.delete(kind, &obj.key, None, None) {
            Ok(gone) => deleted.push(gone),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let meta = json!({"resourceVersion": state.store.current_rv().to_string()});
    Ok(json_response(StatusCode::OK, render_list(kind, &deleted, meta, repr), &[]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let key = ObjKey::new("ns", "pod-1");
        assert_eq!(decode_continue(&encode_continue(42, &key)), Some((42, key)));
        assert_eq!(decode_continue("zz"), None);
    }

    #[test]
    fn query_strings_starting_with_ampersand_are_parsed() {
        let uri: Uri =
            "/api/v1/pods?&watch=true&labelSelector=a%3Db%2Cc+in+%28x%29".parse().unwrap();
        let q = parse_query(&uri);
        assert!(flag(&q, "watch"));
        assert_eq!(q["labelSelector"], "a=b,c in (x)");
    }

    #[test]
    fn paths_map_to_kinds_namespaces_and_subresources() {
        let t = parse_target(&["api", "v1", "namespaces", "ns", "pods", "p", "status"])
            .unwrap()
            .unwrap();
        assert_eq!(
            (t.kind, t.namespace.as_deref(), t.name.as_deref()),
            (ResourceKind::Pod, Some("ns"), Some("p"))
        );
        assert_eq!(t.subresource.as_deref(), Some("status"));
        let t = parse_target(&["api", "v1", "namespaces", "ns"]).unwrap().unwrap();
        assert_eq!((t.kind, t.name.as_deref()), (ResourceKind::Namespace, Some("ns")));
        let t = parse_target(&["apis", "apps", "v1", "watch", "statefulsets"]).unwrap().unwrap();
        assert!(t.watch_path);
        assert!(parse_target(&["api", "v1", "namespaces", "ns", "nodes"]).unwrap().is_none());
        assert!(parse_target(&["api", "v1", "services"]).unwrap().is_none());
    }

    #[test]
    fn table_accept_header_selects_table_output() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            ),
        );
        assert_eq!(repr_of(&headers, &Query::new()), Repr::Table(IncludeObject::Metadata));
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert_eq!(repr_of(&headers, &Query::new()), Repr::Object);
    }
}
