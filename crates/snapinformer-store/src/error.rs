//! Errors returned by the store.

/// Everything that can go wrong when writing to or reading from the store.
///
/// The error cases mirror client-go's `Indexer`: an object without a name has no key (or a custom
/// key function failed), an index that was never registered cannot be queried, and an index name
/// can be registered only once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The object has no `metadata.name` (or it is empty), so no key can be computed for it.
    #[error("object has no name{}: cannot compute its key", namespace.as_deref().map(|ns| format!(" (namespace {ns:?})")).unwrap_or_default())]
    MissingName {
        /// The object's namespace, if it has one, to help find the culprit.
        namespace: Option<String>,
    },
    /// A read or write named an index that is not registered.
    #[error("index {name:?} does not exist (registered: {known})")]
    IndexNotFound {
        /// The requested index name.
        name: String,
        /// The registered index names, comma-separated, for the error message.
        known: String,
    },
    /// `add_indexers` was given a name that is already registered (or twice in one call).
    #[error("indexer conflict: index {0:?} is already registered")]
    IndexExists(String),
    /// A custom key function ([`KeyFn::new`](crate::KeyFn::new)) failed for an object.
    #[error("key function failed: {0}")]
    #[doc(alias = "KeyError")]
    KeyFn(#[source] crate::UserError),
    /// The transform ([`TransformFn`](crate::TransformFn)) failed for an object.
    #[error("transforming: {0}")]
    Transform(#[source] crate::UserError),
    /// The background reclaimer thread could not be started.
    #[error("cannot start the background reclaimer thread: {0}")]
    Reclaimer(String),
}

/// `Result` with this crate's [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
