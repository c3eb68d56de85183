//! Requests by client, read from an audit log in kube-apiserver's format (`audit.k8s.io/v1`
//! events, one JSON object per line, as `--audit-log-path` with `--audit-log-format=json`
//! writes it, and as the test API server writes it).
//!
//! kube-apiserver's `apiserver_request_total` has no client label, so this is how a 409 is
//! attributed to the StatefulSet controller rather than to another client, the same way on
//! both servers. Each request is counted once: a watch at stage `ResponseStarted` (its
//! `ResponseComplete` comes when the stream ends, if ever), anything else at
//! `ResponseComplete`. The client is the last `/`-separated part of a kube-controller-manager
//! user agent (`statefulset-controller`, `daemon-set-controller`, `shared-informers`), and the
//! product name for any other (`kubectl`, `snapinformer-sim`).

//!
//! On the real kube-apiserver the same log comes from `--audit-policy-file` with
//! [`REAL_SERVER_POLICY`], `--audit-log-path=FILE` and `--audit-log-format=json` (checked with
//! v1.37.2 on loopback). kube-apiserver's other per-client signal, API Priority and Fairness'
//! `apiserver_flowcontrol_dispatched_requests_total`, is labelled by flow schema and priority
//! level only: it has no response code, so it cannot count 409s.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

use serde::Deserialize;

/// An audit policy for kube-apiserver that logs what the test API server logs: every resource
/// request at level `Metadata`, no request bodies, no non-resource requests (health, metrics,
/// discovery), no `RequestReceived` stage.
pub const REAL_SERVER_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [\"RequestReceived\"]
rules:
- level: None
  nonResourceURLs: [\"/healthz*\", \"/readyz*\", \"/livez*\", \"/metrics\", \"/version\", \"/api\", \"/api/*\", \"/apis\", \"/apis/*\", \"/openapi/*\"]
- level: Metadata
";

/// The fields of an audit event that are counted.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuditEvent {
    #[serde(default)]
    stage: String,
    #[serde(default)]
    verb: String,
    #[serde(default)]
    user_agent: String,
    #[serde(default)]
    object_ref: Option<ObjectRef>,
    #[serde(default)]
    response_status: Option<ResponseStatus>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ObjectRef {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    subresource: String,
}

#[derive(Debug, Deserialize)]
struct ResponseStatus {
    #[serde(default)]
    code: u16,
}

/// One counted group of requests.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct RequestKey {
    /// The client (see the module docs).
    pub client: String,
    /// The Kubernetes verb (`create`, `update`, `watch`, ...).
    pub verb: String,
    /// Resource, with `/subresource` when there is one (`statefulsets/status`).
    pub resource: String,
    /// HTTP status code.
    pub code: u16,
}

/// Request counts by client, verb, resource and code.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClientRequests {
    /// Every group of requests with its count, in key order.
    pub counts: Vec<(RequestKey, u64)>,
    /// Lines that were not audit events (cut off at the end of the file, for instance).
    pub unreadable_lines: u64,
}

impl ClientRequests {
    /// Requests matching every given part (`None` matches anything).
    pub fn count(
        &self,
        client: Option<&str>,
        verb: Option<&str>,
        resource: Option<&str>,
        code: Option<u16>,
    ) -> u64 {
        self.counts
            .iter()
            .filter(|(k, _)| {
                client.is_none_or(|c| k.client == c)
                    && verb.is_none_or(|v| k.verb == v)
                    && resource.is_none_or(|r| k.resource == r)
                    && code.is_none_or(|c| k.code == c)
            })
            .map(|(_, n)| n)
            .sum()
    }
}

/// The client a user agent names.
pub fn client_of(user_agent: &str) -> String {
    if user_agent.starts_with("kube-controller-manager/") {
        let last = user_agent.rsplit('/').next().unwrap_or(user_agent);
        // With --use-service-account-credentials (kubeadm's and the real-cluster script's
        // setting) the agent ends in the controller's service account instead.
        let last = last
            .strip_prefix("system:serviceaccount:")
            .map_or(last, |account| account.rsplit(':').next().unwrap_or(account));
        return last.to_owned();
    }
    match user_agent.split('/').next() {
        Some(product) if !product.is_empty() => product.to_owned(),
        _ => "(no user agent)".to_owned(),
    }
}

/// Reads and counts the audit log at `path`.
pub fn read(path: &Path) -> Result<ClientRequests, String> {
    let file = std::fs::File::open(path)
        .map_err(|e| format!("opening audit log {}: {e}", path.display()))?;
    let mut counts: BTreeMap<RequestKey, u64> = BTreeMap::new();
    let mut unreadable = 0;
    for line in std::io::BufReader::new(file).lines() {
        let line = line.map_err(|e| format!("reading audit log {}: {e}", path.display()))?;
        let Ok(event) = serde_json::from_str::<AuditEvent>(&line) else {
            unreadable += 1;
            continue;
        };
        let counted_stage =
            if event.verb == "watch" { "ResponseStarted" } else { "ResponseComplete" };
        if event.stage != counted_stage {
            continue;
        }
        let Some(object) = event.object_ref else { continue };
        let resource = if object.subresource.is_empty() {
            object.resource
        } else {
            format!("{}/{}", object.resource, object.subresource)
        };
        let key = RequestKey {
            client: client_of(&event.user_agent),
            verb: event.verb,
            resource,
            code: event.response_status.map_or(0, |s| s.code),
        };
        *counts.entry(key).or_insert(0) += 1;
    }
    Ok(ClientRequests { counts: counts.into_iter().collect(), unreadable_lines: unreadable })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two lines as kube-apiserver v1.37.2 wrote them (shortened), and a watch.
    const REAL: &str = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"9","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/default/pods","verb":"create","user":{"username":"admin"},"sourceIPs":["127.0.0.1"],"userAgent":"kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/abc/statefulset-controller","objectRef":{"resource":"pods","namespace":"default","name":"web-0","apiVersion":"v1"},"responseStatus":{"metadata":{},"status":"Failure","message":"pods \"web-0\" already exists","reason":"AlreadyExists","details":{"name":"web-0","kind":"pods"},"code":409},"requestReceivedTimestamp":"2026-12-01T06:56:56.958385Z","stageTimestamp":"2026-12-01T06:56:56.960285Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"8","stage":"ResponseStarted","requestURI":"/api/v1/pods?watch=true","verb":"watch","userAgent":"kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/abc/shared-informers","objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"8","stage":"ResponseComplete","requestURI":"/api/v1/pods?watch=true","verb":"watch","userAgent":"kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/abc/shared-informers","objectRef":{"resource":"pods","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200}}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","stage":"ResponseComplete","verb":"update","userAgent":"kubectl/v1.33.1 (linux/amd64)","objectRef":{"resource":"statefulsets","subresource":"status","apiGroup":"apps"},"responseStatus":{"code":200}}
{"kind":"Event","#;

    #[test]
    fn controllers_are_named_with_and_without_service_account_credentials() {
        let plain =
            "kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/abc/statefulset-controller";
        assert_eq!(client_of(plain), "statefulset-controller");
        let account = "kube-controller-manager/v0.0.0 (linux/amd64) kubernetes/$Format/system:serviceaccount:kube-system:daemon-set-controller";
        assert_eq!(client_of(account), "daemon-set-controller");
        assert_eq!(client_of("kubectl/v1.33.1 (linux/amd64) kubernetes/x"), "kubectl");
        assert_eq!(client_of(""), "(no user agent)");
    }

    #[test]
    fn each_request_is_counted_once_under_its_client() {
        let dir = std::env::temp_dir().join(format!("kcm-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.log");
        std::fs::write(&path, REAL).unwrap();
        let counts = read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(counts.unreadable_lines, 1, "the cut-off last line");
        assert_eq!(
            counts.count(Some("statefulset-controller"), Some("create"), Some("pods"), Some(409)),
            1
        );
        assert_eq!(
            counts.count(Some("shared-informers"), Some("watch"), None, None),
            1,
            "once per watch"
        );
        assert_eq!(counts.count(Some("kubectl"), None, Some("statefulsets/status"), Some(200)), 1);
        assert_eq!(counts.count(None, None, None, Some(409)), 1);
    }
}
