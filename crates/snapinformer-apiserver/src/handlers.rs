//! Reads and writes of whole objects: get, list (pagination, resourceVersion semantics),
//! create, update (optimistic concurrency; the `status` subresource), patch, delete and delete
//! collection. They are generic over [`ResourceKind`]: a new kind is served by adding it there
//! (and to discovery and the table columns), not here.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use crate::app_state::AppState;
use crate::error::ApiError;
use crate::objects::{prepare_create, random_suffix};
use crate::patch::{self, PatchType};
use crate::render::{json_response, render_list, render_object};
use crate::request::{
    Query, Repr, Target, body_value, decode_continue, dry_run, encode_continue, filter_of,
    is_protobuf, key, parse_body, parse_int64, parse_rv, require_json, valid_name,
};
use crate::resource::{FieldValidation, ResourceKind};
use crate::store::{Filter, ObjKey, ObjectMap, ReplaceError, Store, StoredObject, VersionError};

pub(crate) fn get(
    state: &AppState,
    target: &Target,
    name: &str,
    repr: Repr,
) -> Result<Response, ApiError> {
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

pub(crate) const TOO_LARGE_WAIT: Duration = Duration::from_secs(3);

pub(crate) async fn list(
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
pub(crate) fn page(
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

pub(crate) fn create(
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
        crate::protobuf::decode_as(kind, body)?
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
pub(crate) fn merge_update(
    kind: ResourceKind,
    existing: &Value,
    mut new: Value,
    status_only: bool,
) -> Value {
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

pub(crate) fn without_rv(value: &Value) -> Value {
    let mut v = value.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    v
}

/// Outcome of one attempt at writing an update.
pub(crate) enum Attempt {
    Done(Arc<StoredObject>),
    Retry,
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn try_update(
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

pub(crate) fn check_identity(target: &Target, name: &str, value: &Value) -> Result<(), ApiError> {
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

pub(crate) fn precondition_of(value: &Value) -> Result<Option<u64>, ApiError> {
    match value.pointer("/metadata/resourceVersion").and_then(Value::as_str) {
        None | Some("") => Ok(None),
        Some(rv) => parse_rv(rv).map(Some),
    }
}

pub(crate) const MAX_ATTEMPTS: usize = 16;

pub(crate) fn update(
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
    let raw = body_value(headers, body)?;
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

pub(crate) fn patch_object(
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

pub(crate) fn delete(
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
    let options: Value = if body.is_empty() {
        Value::Null
    } else if is_protobuf(headers) {
        crate::protobuf::decode(body)?
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

pub(crate) fn delete_collection(
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
