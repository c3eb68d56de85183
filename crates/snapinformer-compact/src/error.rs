//! Errors of compact decoding.

/// What can go wrong building a compact object.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input is not valid JSON (or not a JSON value this crate can hold).
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A Kubernetes object must be a JSON object.
    #[error("a Kubernetes object must be a JSON object")]
    NotAnObject,
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
