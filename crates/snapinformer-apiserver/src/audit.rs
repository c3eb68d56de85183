//! An audit log in kube-apiserver's format: one `audit.k8s.io/v1` `Event` per line, level
//! `Metadata`, as `--audit-log-path` with `--audit-log-format=json` writes it. It is how requests
//! are attributed to clients (by `userAgent`) the same way on this server and on the real one,
//! whose `apiserver_request_total` has no client label.
//!
//! What is logged: every resource request, at stage `ResponseComplete` (with the response code,
//! and the `Status` reason and message of a failure); a watch also at stage `ResponseStarted`
//! when its stream opens, as the real server logs it (this server logs a watch's
//! `ResponseComplete` when the stream is opened too, since it does not follow the stream to its
//! end: count watches at `ResponseStarted`). Non-resource requests are not logged (a real server
//! logs them unless its policy says `None`, as the policy the `kcm` scenario uses does).
//! `sourceIPs` are not recorded; `user` is the one identity every client has here (no
//! authentication: any bearer token or none is accepted).
//!
//! Events are written by a background thread through a buffer, so a request never waits for
//! the disk; the buffer is flushed at least every 200 ms and when the server shuts down.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::accounting::RequestInfo;
use crate::error::ServerError;
use crate::objects::new_uid;

/// How often the writer flushes its buffer while events arrive.
const FLUSH_EVERY: Duration = Duration::from_millis(200);

/// The audit log writer. Dropping it (or [`AuditLog::close`]) flushes and closes the file.
#[derive(Debug)]
pub(crate) struct AuditLog {
    tx: Option<mpsc::Sender<Vec<u8>>>,
    writer: Option<thread::JoinHandle<()>>,
    path: PathBuf,
}

/// One request, as the audit event records it.
pub(crate) struct AuditRecord<'a> {
    pub(crate) info: &'a RequestInfo,
    pub(crate) request_uri: &'a str,
    pub(crate) user_agent: &'a str,
    pub(crate) code: u16,
    /// The answer's `Status` object for a failure (its status, reason, message, details).
    pub(crate) failure: Option<Value>,
    pub(crate) received: Timestamp,
}

impl AuditLog {
    /// Creates (truncates) the file at `path` and starts the writer thread.
    pub(crate) fn create(path: &Path) -> Result<Self, ServerError> {
        let file = std::fs::File::create(path)
            .map_err(|source| ServerError::AuditLog { path: path.to_owned(), source })?;
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        let shown = path.display().to_string();
        let writer = thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || write_loop(BufWriter::with_capacity(1 << 20, file), &rx, &shown))
            .map_err(|source| ServerError::AuditLog { path: path.to_owned(), source })?;
        Ok(Self { tx: Some(tx), writer: Some(writer), path: path.to_owned() })
    }

    /// The file written.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Queues encoded events for the writer.
    pub(crate) fn send(&self, bytes: Vec<u8>) {
        if let Some(tx) = &self.tx {
            // The writer only stops when the log is closed.
            let _ = tx.send(bytes);
        }
    }

    /// Flushes everything logged so far and closes the file.
    pub(crate) fn close(&mut self) {
        self.tx.take();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// The audit event lines of one request: a watch at `ResponseStarted` and `ResponseComplete`,
/// anything else at `ResponseComplete`; nothing for a non-resource request.
pub(crate) fn encode(record: &AuditRecord<'_>) -> Option<Vec<u8>> {
    let resource = record.info.resource.as_ref()?;
    let mut object_ref = json!({
        "resource": resource.kind.plural(),
        "apiVersion": resource.kind.version(),
    });
    if !resource.kind.group().is_empty() {
        object_ref["apiGroup"] = resource.kind.group().into();
    }
    if !resource.namespace.is_empty() {
        object_ref["namespace"] = resource.namespace.clone().into();
    }
    if !resource.name.is_empty() {
        object_ref["name"] = resource.name.clone().into();
    }
    if !resource.subresource.is_empty() {
        object_ref["subresource"] = resource.subresource.clone().into();
    }
    let mut status = json!({"metadata": {}, "code": record.code});
    if let Some(Value::Object(failure)) = &record.failure {
        for key in ["status", "message", "reason", "details"] {
            if let Some(v) = failure.get(key) {
                status[key] = v.clone();
            }
        }
    }
    let now = Timestamp::now();
    let stages: &[&str] = if record.info.verb == "watch" {
        &["ResponseStarted", "ResponseComplete"]
    } else {
        &["ResponseComplete"]
    };
    let audit_id = new_uid();
    let mut bytes = Vec::with_capacity(700);
    for stage in stages {
        let event = json!({
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": audit_id,
            "stage": stage,
            "requestURI": record.request_uri,
            "verb": record.info.verb,
            "user": {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]},
            "userAgent": record.user_agent,
            "objectRef": object_ref,
            "responseStatus": status,
            "requestReceivedTimestamp": micro(record.received),
            "stageTimestamp": micro(now),
        });
        if serde_json::to_writer(&mut bytes, &event).is_ok() {
            bytes.push(b'\n');
        }
    }
    Some(bytes)
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        self.close();
    }
}

fn write_loop(mut out: BufWriter<std::fs::File>, rx: &mpsc::Receiver<Vec<u8>>, path: &str) {
    let mut failed = false;
    let mut write = |out: &mut BufWriter<std::fs::File>, bytes: &[u8]| {
        if let Err(e) = out.write_all(bytes)
            && !failed
        {
            failed = true;
            tracing::warn!("writing the audit log {path}: {e}; later events are lost");
        }
    };
    loop {
        match rx.recv_timeout(FLUSH_EVERY) {
            Ok(bytes) => {
                write(&mut out, &bytes);
                // Take what else is queued before flushing.
                while let Ok(more) = rx.try_recv() {
                    write(&mut out, &more);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let _ = out.flush();
    }
    if let Err(e) = out.flush() {
        tracing::warn!("flushing the audit log {path}: {e}");
    }
}

/// RFC 3339 with microseconds, as the real server's audit timestamps.
fn micro(at: Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, Method};

    use super::*;

    fn log_one(log: &AuditLog, record: &AuditRecord<'_>) {
        if let Some(bytes) = encode(record) {
            log.send(bytes);
        }
    }

    #[test]
    fn a_refused_create_is_logged_with_its_client_code_and_reason() {
        let dir = std::env::temp_dir().join(format!("audit-test-{}", new_uid()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.log");
        let mut log = AuditLog::create(&path).unwrap();
        let uri = "/api/v1/namespaces/default/pods";
        let info = RequestInfo::of(&Method::POST, &uri.parse().unwrap(), &HeaderMap::new());
        log_one(
            &log,
            &AuditRecord {
                info: &info,
                request_uri: uri,
                user_agent: "kube-controller-manager/v1.37.2 (linux/amd64) kubernetes/abc/statefulset-controller",
                code: 409,
                failure: Some(
                    json!({"status": "Failure", "reason": "AlreadyExists", "message": "pods \"web-0\" already exists"}),
                ),
                received: Timestamp::now(),
            },
        );
        let watch_uri = "/api/v1/pods?watch=true";
        let watch = RequestInfo::of(&Method::GET, &watch_uri.parse().unwrap(), &HeaderMap::new());
        log_one(
            &log,
            &AuditRecord {
                info: &watch,
                request_uri: watch_uri,
                user_agent: "w",
                code: 200,
                failure: None,
                received: Timestamp::now(),
            },
        );
        let health = RequestInfo::of(&Method::GET, &"/healthz".parse().unwrap(), &HeaderMap::new());
        log_one(
            &log,
            &AuditRecord {
                info: &health,
                request_uri: "/healthz",
                user_agent: "h",
                code: 200,
                failure: None,
                received: Timestamp::now(),
            },
        );
        log.close();
        let text = std::fs::read_to_string(&path).unwrap();
        let events: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(events.len(), 3, "{text}");
        assert_eq!(events[0]["verb"], "create");
        assert_eq!(events[0]["stage"], "ResponseComplete");
        assert_eq!(events[0]["objectRef"]["resource"], "pods");
        assert_eq!(events[0]["objectRef"]["namespace"], "default");
        assert_eq!(events[0]["responseStatus"]["code"], 409);
        assert_eq!(events[0]["responseStatus"]["reason"], "AlreadyExists");
        assert!(events[0]["userAgent"].as_str().unwrap().ends_with("/statefulset-controller"));
        assert_eq!(events[1]["stage"], "ResponseStarted");
        assert_eq!(events[1]["verb"], "watch");
        assert_eq!(events[2]["stage"], "ResponseComplete");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
