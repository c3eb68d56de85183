//! Errors: the Kubernetes `Status` answers the server gives, and errors of the library API.

use axum::http::StatusCode;
use serde_json::{Value, json};

/// A failed API request, answered with a `meta/v1 Status` object exactly as kube-apiserver does.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code (also the Status `code`).
    pub code: u16,
    /// Machine-readable reason, e.g. `NotFound`, `AlreadyExists`, `Conflict`, `Expired`.
    pub reason: &'static str,
    /// Human-readable message, worded like the real server's.
    pub message: String,
    /// Optional `details` object (name, group, kind, causes, retryAfterSeconds).
    pub details: Option<Value>,
}

impl ApiError {
    /// Builds an error with no details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self { code, reason, message: message.into(), details: None }
    }

    /// Attaches a `details` object.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 404 NotFound for a named object of a resource (`pods "x" not found`).
    pub fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{plural}{} \"{name}\" not found", group_suffix(group)))
            .with_details(json!({"name": name, "group": group, "kind": plural}))
    }

    /// 404 NotFound for a path the server does not serve.
    pub fn no_such_resource() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource")
            .with_details(json!({}))
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{plural}{} \"{name}\" already exists", group_suffix(group)),
        )
        .with_details(json!({"name": name, "group": group, "kind": plural}))
    }

    /// 409 Conflict for a failed resourceVersion (or uid) precondition.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {plural}{} \"{name}\": {why}",
                group_suffix(group)
            ),
        )
        .with_details(json!({"name": name, "group": group, "kind": plural}))
    }

    /// 410 Expired (too old resource version, expired continue token).
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 422 Invalid with one field cause.
    pub fn invalid(kind: &str, name: &str, field: &str, message: &str) -> Self {
        Self::new(422, "Invalid", format!("{kind} \"{name}\" is invalid: {field}: {message}"))
            .with_details(json!({
                "name": name,
                "kind": kind,
                "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}]
            }))
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml (got {content_type:?})"
            ),
        )
    }

    /// 413 RequestEntityTooLarge for a request body over `limit` bytes, worded as the real
    /// server words it.
    pub fn request_entity_too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 429 TooManyRequests with `retryAfterSeconds`.
    pub fn too_many_requests(retry_after: u64) -> Self {
        Self::new(
            429,
            "TooManyRequests",
            "the server has received too many requests and has asked us to try again later",
        )
        .with_details(json!({"retryAfterSeconds": retry_after}))
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        let message = message.into();
        Self::new(500, "InternalError", format!("Internal error occurred: {message}"))
            .with_details(json!({"causes": [{"message": message}]}))
    }

    /// 504 Timeout for a resourceVersion newer than the server has (`ResourceVersionTooLarge`).
    pub fn too_large_resource_version(rv: u64, current: u64) -> Self {
        Self::new(504, "Timeout", format!("Too large resource version: {rv}, current: {current}"))
            .with_details(json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1
            }))
    }

    /// The HTTP status code.
    pub fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

fn group_suffix(group: &str) -> String {
    if group.is_empty() { String::new() } else { format!(".{group}") }
}

/// Errors of the library API (starting the server, bulk loading, writing files).
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Binding or serving the listening socket failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Writing the kubeconfig failed.
    #[error("cannot write kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file path.
        path: std::path::PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An object given to a bulk or in-process call was refused, as the HTTP API would refuse it.
    #[error("object refused: {0}")]
    Api(#[from] ApiError),
    /// Building a kube client failed.
    #[error("cannot build kube client: {0}")]
    Client(#[from] kube::Error),
    /// Serializing an object failed.
    #[error("cannot serialize object: {0}")]
    Serialize(#[from] serde_json::Error),
    /// Creating the audit log file or its writer thread failed.
    #[error("cannot write the audit log {path}: {source}")]
    AuditLog {
        /// The file path.
        path: std::path::PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}
