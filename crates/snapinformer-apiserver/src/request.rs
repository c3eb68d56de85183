//! Request parameters: the resource a path names (kind, namespace, name, subresource), the
//! query string (selectors, resource versions, limits, continue tokens, flags), the
//! representation the client accepts, and checks of the request body.

use std::collections::HashMap;

use axum::http::{HeaderMap, Uri, header};
use serde_json::Value;

use crate::error::ApiError;
use crate::resource::ResourceKind;
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{Filter, ObjKey};
use crate::table::IncludeObject;

/// How objects are rendered in answers (from the `Accept` header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Repr {
    Object,
    /// Kubernetes protobuf (`application/vnd.kubernetes.protobuf`).
    Protobuf,
    Table(IncludeObject),
    Metadata,
}

/// The query string as a map (repeated keys keep the last value; `?&a=b` is fine).
pub(crate) type Query = HashMap<String, String>;

pub(crate) fn parse_query(uri: &Uri) -> Query {
    let mut query = Query::new();
    for pair in uri.query().unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        query.insert(decode(k), decode(v));
    }
    query
}

pub(crate) fn decode(text: &str) -> String {
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

pub(crate) fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

pub(crate) fn flag(query: &Query, key: &str) -> bool {
    matches!(query.get(key).map(String::as_str), Some("true" | "1"))
}

pub(crate) fn repr_of(headers: &HeaderMap, query: &Query) -> Repr {
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
        if media.starts_with(crate::protobuf::MEDIA_TYPE) && !media.contains("as=") {
            return Repr::Protobuf;
        }
        if media.starts_with("application/json") || media.starts_with("*/*") || media.is_empty() {
            return Repr::Object;
        }
    }
    Repr::Object
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

pub(crate) fn parse_target(segments: &[&str]) -> Result<Option<Target>, ApiError> {
    let (group, rest) = match segments {
        ["api", "v1", rest @ ..] if !rest.is_empty() => ("", rest),
        ["apis", group, "v1", rest @ ..]
            if !rest.is_empty() && ResourceKind::GROUPS.contains(group) =>
        {
            (*group, rest)
        }
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
        [name, "status"] if kind.has_status() => {
            (Some((*name).to_owned()), Some("status".to_owned()))
        }
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

pub(crate) fn target_clone(t: &Target) -> Target {
    Target {
        kind: t.kind,
        namespace: t.namespace.clone(),
        name: t.name.clone(),
        subresource: t.subresource.clone(),
        watch_path: t.watch_path,
    }
}

pub(crate) fn key(target: &Target, name: &str) -> ObjKey {
    ObjKey::new(target.namespace.as_deref().unwrap_or(""), name)
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

pub(crate) fn encode_continue(rv: u64, key: &ObjKey) -> String {
    let text = format!("{rv}\u{0}{}\u{0}{}", key.namespace, key.name);
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn decode_continue(token: &str) -> Option<(u64, ObjKey)> {
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

pub(crate) fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let content_type =
        headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim();
    if media == "application/json" || media.is_empty() {
        Ok(())
    } else {
        Err(ApiError::unsupported_media_type(content_type))
    }
}

pub(crate) fn is_protobuf(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/vnd.kubernetes.protobuf"))
}

/// The request body as JSON: decoded from protobuf when its content type says so, else parsed
/// as JSON (415 for any other content type).
pub(crate) fn body_value(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    if is_protobuf(headers) {
        if body.is_empty() {
            return Err(ApiError::bad_request("the body of the request was empty"));
        }
        return crate::protobuf::decode(body);
    }
    require_json(headers)?;
    parse_body(body)
}

pub(crate) fn parse_body(body: &[u8]) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request("the body of the request was empty"));
    }
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}

pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric()
}

pub(crate) fn dry_run(query: &Query) -> bool {
    query.get("dryRun").is_some_and(|v| v == "All")
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

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
