//! User functions a store and the delta queues call: the key function and the transform.

use std::{error::Error as StdError, fmt, sync::Arc};

use crate::{Error, ObjectAccess, Result};

/// The error type user functions return.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// An error returned by a user function (a [`KeyFn`] or a [`TransformFn`]), kept whole.
///
/// Its [`source`](StdError::source) is the error the function returned, so callers can find
/// their own error type again with [`UserError::downcast_ref`] (client-go's `KeyError` unwraps
/// to the key function's error in the same way).
#[derive(Clone)]
pub struct UserError(Arc<dyn StdError + Send + Sync + 'static>);

impl UserError {
    /// Wraps the error a user function returned.
    pub fn new(err: BoxError) -> Self {
        UserError(Arc::from(err))
    }

    /// The error the function returned.
    pub fn get_ref(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.0
    }

    /// The error the function returned, if it is an `E`.
    pub fn downcast_ref<E: StdError + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref::<E>()
    }
}

impl fmt::Debug for UserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for UserError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl StdError for UserError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.0)
    }
}

impl PartialEq for UserError {
    /// Two user errors are equal if they are the same error or read the same.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl Eq for UserError {}

type DynKeyFn<T> = dyn Fn(&T) -> std::result::Result<String, BoxError> + Send + Sync;

/// How objects are keyed (client-go's `KeyFunc`).
///
/// The default, [`KeyFn::meta_namespace`], is client-go's `MetaNamespaceKeyFunc`:
/// `namespace/name`, or `name` for cluster-scoped objects, read through the store's
/// [`ObjectAccess`]. [`KeyFn::new`] takes any function instead; a store and the delta queue that
/// feeds it must use the same one. A relist tombstone (snapinformer-core's
/// `DeletedFinalStateUnknown`) keeps the key it was made with and is never passed to the key
/// function: what client-go's `DeletionHandlingMetaNamespaceKeyFunc` does for Go's untyped
/// queues is built in.
///
/// Costs: the default writes the key into a reused buffer; a custom function allocates the
/// `String` it returns, once per write.
pub struct KeyFn<T>(Option<Arc<DynKeyFn<T>>>);

impl<T> Clone for KeyFn<T> {
    fn clone(&self) -> Self {
        KeyFn(self.0.clone())
    }
}

impl<T> Default for KeyFn<T> {
    fn default() -> Self {
        KeyFn(None)
    }
}

impl<T> fmt::Debug for KeyFn<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() { "KeyFn(custom)" } else { "KeyFn(namespace/name)" })
    }
}

impl<T> KeyFn<T> {
    /// client-go's `MetaNamespaceKeyFunc`: `namespace/name`, or `name` without a namespace.
    #[doc(alias = "MetaNamespaceKeyFunc")]
    #[doc(alias = "DeletionHandlingMetaNamespaceKeyFunc")]
    pub fn meta_namespace() -> Self {
        KeyFn(None)
    }

    /// A custom key function. An error it returns refuses the object with [`Error::KeyFn`],
    /// which carries the error. Keys must be deterministic: the same object, the same key.
    pub fn new<F>(f: F) -> Self
    where
        F: Fn(&T) -> std::result::Result<String, BoxError> + Send + Sync + 'static,
    {
        KeyFn(Some(Arc::new(f)))
    }

    /// Whether this is the default `namespace/name` function.
    pub fn is_meta_namespace(&self) -> bool {
        self.0.is_none()
    }

    /// Writes `obj`'s key into `buf` (cleared first).
    pub fn write_key(&self, access: &ObjectAccess<T>, obj: &T, buf: &mut String) -> Result<()> {
        match &self.0 {
            None => access.write_key(obj, buf),
            Some(f) => {
                let key = f(obj).map_err(|e| Error::KeyFn(UserError::new(e)))?;
                buf.clear();
                buf.push_str(&key);
                Ok(())
            }
        }
    }

    /// `obj`'s key as a new `String`.
    pub fn key(&self, access: &ObjectAccess<T>, obj: &T) -> Result<String> {
        match &self.0 {
            None => access.key(obj),
            Some(f) => f(obj).map_err(|e| Error::KeyFn(UserError::new(e))),
        }
    }
}

type DynTransformFn<T> = dyn Fn(Arc<T>) -> std::result::Result<Arc<T>, BoxError> + Send + Sync;

/// A function applied to every object before it is stored (client-go's `TransformFunc`), for
/// example to drop managed fields and save memory.
///
/// It receives the object as it arrived and returns what is stored instead; it may change the
/// object in place when it holds the only reference (`Arc::get_mut`, or `Arc::make_mut` for a
/// `Clone` type). Where it runs follows client-go: a store built with
/// `StoreBuilder::transform` applies it in `add`, `update`, `replace` and batch upserts, never
/// to deletes; a delta queue built with a transform applies it when an object is queued by
/// `add`, `update`, `delete` or `replace`, never to the store's own objects re-queued by
/// `resync` nor to relist tombstones (their objects were transformed when they were queued or
/// stored). Give the transform to the queue or to the store, not both, or objects are transformed
/// twice. It should be idempotent and quick: it runs on the producer's thread.
pub struct TransformFn<T>(Arc<DynTransformFn<T>>);

impl<T> Clone for TransformFn<T> {
    fn clone(&self) -> Self {
        TransformFn(self.0.clone())
    }
}

impl<T> fmt::Debug for TransformFn<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TransformFn")
    }
}

impl<T> TransformFn<T> {
    /// Wraps a function. An error it returns refuses the object with [`Error::Transform`].
    pub fn new<F>(f: F) -> Self
    where
        F: Fn(Arc<T>) -> std::result::Result<Arc<T>, BoxError> + Send + Sync + 'static,
    {
        TransformFn(Arc::new(f))
    }

    /// Applies the function to `obj`.
    pub fn apply(&self, obj: Arc<T>) -> Result<Arc<T>> {
        (self.0)(obj).map_err(|e| Error::Transform(UserError::new(e)))
    }
}
