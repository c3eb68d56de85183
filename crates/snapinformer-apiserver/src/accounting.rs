//! What every request is, for counting: kube-apiserver's `apiserver_request_total` counter (same
//! name and labels, served on `/metrics`), the number of stored objects per resource
//! (`apiserver_storage_objects`), and the facts an audit event records ([`crate::audit`]).
//!
//! The labels follow what kube-apiserver v1.37 reports (checked against the real binary on
//! loopback): `verb` is `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`, `DELETE` or
//! `DELETECOLLECTION`; `scope` is `resource` for a request naming an object (creates included,
//! and watches whose field selector names one), `namespace` for a namespace's collection and
//! `cluster` otherwise; `component` is `apiserver` for resource requests. A request that names
//! no served resource (discovery, health, `/metrics`) is counted as the real server counts
//! non-resource requests: `component`, `group`, `resource` and `scope` empty, and its path in
//! `subresource`; any other unknown path is counted under the empty path, so that hostile
//! clients cannot grow the label set.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use axum::http::{HeaderMap, Method, Uri, header};

use crate::request::{Target, flag, parse_query, parse_target};
use crate::resource::ResourceKind;
use crate::store::Store;

/// Non-resource paths counted under their own path.
const KNOWN_PATHS: [&str; 8] =
    ["/version", "/api", "/apis", "/healthz", "/livez", "/readyz", "/metrics", "/openapi/v2"];

/// The Kubernetes view of one request (the real server's `RequestInfo`, reduced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequestInfo {
    /// Lower-case Kubernetes verb (`get`, `list`, `watch`, `create`, `update`, `patch`,
    /// `delete`, `deletecollection`), or the lower-case HTTP method of a non-resource request.
    pub(crate) verb: String,
    /// The resource request's parts; `None` for a non-resource request.
    pub(crate) resource: Option<ResourceInfo>,
    /// The path, as the real server's audit events record it (`requestURI` has the query too).
    pub(crate) path: String,
}

/// The parts of a resource request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceInfo {
    pub(crate) kind: ResourceKind,
    pub(crate) subresource: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
}

impl RequestInfo {
    /// Classifies a request from its method, URI and headers.
    pub(crate) fn of(method: &Method, uri: &Uri, headers: &HeaderMap) -> Self {
        let path = uri.path().to_owned();
        let segments: Vec<&str> =
            path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
        let target = match parse_target(&segments) {
            Ok(Some(target)) => target,
            _ => {
                return RequestInfo { verb: method.as_str().to_lowercase(), resource: None, path };
            }
        };
        let query = parse_query(uri);
        let watching = target.watch_path || flag(&query, "watch");
        let apply = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("application/apply-patch"));
        let verb = match (method, &target.name) {
            (&Method::GET, _) if watching => "watch",
            (&Method::GET, Some(_)) => "get",
            (&Method::GET, None) => "list",
            (&Method::POST, _) => "create",
            (&Method::PUT, _) => "update",
            (&Method::PATCH, _) if apply => "apply",
            (&Method::PATCH, _) => "patch",
            (&Method::DELETE, Some(_)) => "delete",
            (&Method::DELETE, None) => "deletecollection",
            (other, _) => {
                return RequestInfo { verb: other.as_str().to_lowercase(), resource: None, path };
            }
        };
        let name = target.name.clone().unwrap_or_else(|| name_from_selector(&query));
        RequestInfo { verb: verb.to_owned(), resource: Some(resource_info(&target, name)), path }
    }

    /// The `verb` label of `apiserver_request_total`.
    pub(crate) fn metric_verb(&self) -> String {
        match self.verb.as_str() {
            "get" => "GET",
            "list" => "LIST",
            "watch" => "WATCH",
            "create" => "POST",
            "update" => "PUT",
            "patch" => "PATCH",
            "apply" => "APPLY",
            "delete" => "DELETE",
            "deletecollection" => "DELETECOLLECTION",
            other => return other.to_uppercase(),
        }
        .to_owned()
    }
}

fn resource_info(target: &Target, name: String) -> ResourceInfo {
    ResourceInfo {
        kind: target.kind,
        subresource: target.subresource.clone().unwrap_or_default(),
        namespace: target.namespace.clone().unwrap_or_default(),
        name,
    }
}

/// The object a list or watch names through `fieldSelector=metadata.name=X`, as the real
/// server takes it for its metrics and audit events.
fn name_from_selector(query: &crate::request::Query) -> String {
    let selector = query.get("fieldSelector").map(String::as_str).unwrap_or("");
    selector
        .split(',')
        .find_map(|term| {
            term.strip_prefix("metadata.name==").or_else(|| term.strip_prefix("metadata.name="))
        })
        .unwrap_or("")
        .to_owned()
}

/// The labels of one `apiserver_request_total` series, in the real server's order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Labels {
    verb: String,
    dry_run: &'static str,
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    subresource: String,
    scope: &'static str,
    component: &'static str,
    code: u16,
}

/// Request counters, shared by every request handler.
#[derive(Debug, Default)]
pub(crate) struct RequestMetrics {
    counts: Mutex<BTreeMap<Labels, u64>>,
}

impl RequestMetrics {
    /// Counts one answered request.
    pub(crate) fn record(&self, info: &RequestInfo, dry_run: bool, code: u16) {
        let labels = match &info.resource {
            Some(r) => Labels {
                verb: info.metric_verb(),
                dry_run: if dry_run { "All" } else { "" },
                group: r.kind.group(),
                version: r.kind.version(),
                resource: r.kind.plural(),
                subresource: r.subresource.clone(),
                scope: if !r.name.is_empty() || info.verb == "create" {
                    "resource"
                } else if !r.namespace.is_empty() {
                    "namespace"
                } else {
                    "cluster"
                },
                component: "apiserver",
                code,
            },
            None => Labels {
                verb: info.metric_verb(),
                dry_run: "",
                group: "",
                version: "",
                resource: "",
                subresource: known_path(&info.path).to_owned(),
                scope: "",
                component: "",
                code,
            },
        };
        *self.counts.lock().unwrap_or_else(|p| p.into_inner()).entry(labels).or_insert(0) += 1;
    }

    /// The Prometheus text exposition of the counters and of the store's object counts.
    pub(crate) fn render(&self, store: &Store) -> String {
        let mut out = String::new();
        out.push_str(
            "# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.\n# TYPE apiserver_request_total counter\n",
        );
        for (l, count) in self.counts.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = writeln!(
                out,
                "apiserver_request_total{{code=\"{}\",component=\"{}\",dry_run=\"{}\",group=\"{}\",resource=\"{}\",scope=\"{}\",subresource=\"{}\",verb=\"{}\",version=\"{}\"}} {count}",
                l.code,
                l.component,
                l.dry_run,
                l.group,
                l.resource,
                l.scope,
                escape(&l.subresource),
                escape(&l.verb),
                l.version
            );
        }
        out.push_str(
            "# HELP apiserver_storage_objects [STABLE] Number of stored objects at the time of last check split by kind.\n# TYPE apiserver_storage_objects gauge\n",
        );
        for kind in ResourceKind::ALL {
            let resource = if kind.group().is_empty() {
                kind.plural().to_owned()
            } else {
                format!("{}.{}", kind.plural(), kind.group())
            };
            let _ = writeln!(
                out,
                "apiserver_storage_objects{{resource=\"{resource}\"}} {}",
                store.snapshot(kind).0.len()
            );
        }
        out
    }
}

fn known_path(path: &str) -> &str {
    let trimmed = if path.len() > 1 { path.trim_end_matches('/') } else { path };
    KNOWN_PATHS.iter().find(|p| **p == trimmed).copied().unwrap_or("")
}

/// Escapes a label value for the text exposition format.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: Method, uri: &str) -> RequestInfo {
        RequestInfo::of(&method, &uri.parse().unwrap(), &HeaderMap::new())
    }

    #[test]
    fn requests_get_the_real_servers_verbs_and_scopes() {
        let metrics = RequestMetrics::default();
        let store = Store::new(10);
        metrics.record(&info(Method::POST, "/api/v1/namespaces/default/pods"), false, 409);
        metrics.record(&info(Method::GET, "/api/v1/pods?watch=true"), false, 200);
        metrics.record(&info(Method::GET, "/api/v1/namespaces/default/pods"), false, 200);
        metrics.record(
            &info(Method::PUT, "/apis/apps/v1/namespaces/default/statefulsets/web/status"),
            false,
            200,
        );
        metrics.record(&info(Method::GET, "/healthz"), false, 200);
        metrics.record(&info(Method::GET, "/no/such/thing"), false, 404);
        let text = metrics.render(&store);
        for line in [
            r#"apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 1"#,
            r#"apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 1"#,
            r#"apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 1"#,
            r#"apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="statefulsets",scope="resource",subresource="status",verb="PUT",version="v1"} 1"#,
            r#"apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/healthz",verb="GET",version=""} 1"#,
            r#"apiserver_request_total{code="404",component="",dry_run="",group="",resource="",scope="",subresource="",verb="GET",version=""} 1"#,
            r#"apiserver_storage_objects{resource="namespaces"} 4"#,
            r#"apiserver_storage_objects{resource="controllerrevisions.apps"} 0"#,
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
    }

    #[test]
    fn a_watch_naming_one_object_by_field_selector_has_resource_scope() {
        let watch = info(
            Method::GET,
            "/api/v1/namespaces/kube-system/configmaps?watch=1&fieldSelector=metadata.name%3Dx",
        );
        // configmaps are not served: a non-resource request.
        assert!(watch.resource.is_none());
        let watch = info(Method::GET, "/api/v1/nodes?watch=1&fieldSelector=metadata.name%3Dn1");
        assert_eq!(watch.verb, "watch");
        assert_eq!(watch.resource.map(|r| r.name), Some("n1".to_owned()));
    }
}
