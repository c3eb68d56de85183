//! How the store reads an object's metadata.

use std::collections::BTreeMap;

use smallvec::SmallVec;

use crate::{Error, Result};

/// Owner UIDs of an object, borrowed from it (most objects have zero or one owner).
pub type OwnerUids<'a> = SmallVec<[&'a str; 2]>;

/// Function pointers that read the metadata the store needs from an object of type `T`.
///
/// The store is generic over any object type and depends on no Kubernetes crate, so it cannot
/// implement a trait of its own for `k8s_openapi` types (Rust's orphan rule forbids that in a third
/// crate). Instead every store is built with an `ObjectAccess<T>`: a copyable bundle of plain
/// function pointers, the same idea as client-go's `KeyFunc` generalised to the fields indexes need.
/// Types you own can implement [`Object`] and use [`ObjectAccess::of`]; the Kubernetes crates of
/// this workspace provide an `ObjectAccess` for every `kube::Resource`.
pub struct ObjectAccess<T> {
    /// `metadata.name`.
    pub name: fn(&T) -> Option<&str>,
    /// `metadata.namespace`; `None` or empty for cluster-scoped objects.
    pub namespace: fn(&T) -> Option<&str>,
    /// `metadata.resourceVersion`.
    pub resource_version: fn(&T) -> Option<&str>,
    /// `metadata.uid`.
    pub uid: fn(&T) -> Option<&str>,
    /// `metadata.labels`.
    pub labels: fn(&T) -> Option<&BTreeMap<String, String>>,
    /// UIDs of `metadata.ownerReferences`.
    pub owner_uids: for<'a> fn(&'a T) -> OwnerUids<'a>,
}

impl<T> Clone for ObjectAccess<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for ObjectAccess<T> {}

impl<T> std::fmt::Debug for ObjectAccess<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectAccess").finish_non_exhaustive()
    }
}

/// Metadata accessors for a type you own. Implement it and build stores with [`ObjectAccess::of`].
pub trait Object: Send + Sync + 'static {
    /// `metadata.name`.
    fn name(&self) -> Option<&str>;
    /// `metadata.namespace`; `None` for cluster-scoped objects.
    fn namespace(&self) -> Option<&str>;
    /// `metadata.resourceVersion`.
    fn resource_version(&self) -> Option<&str>;
    /// `metadata.uid`.
    fn uid(&self) -> Option<&str> {
        None
    }
    /// `metadata.labels`.
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        None
    }
    /// UIDs of the owner references.
    fn owner_uids(&self) -> OwnerUids<'_> {
        OwnerUids::new()
    }
}

impl<T: Object> ObjectAccess<T> {
    /// The accessors of a type that implements [`Object`].
    pub fn of() -> Self {
        ObjectAccess {
            name: T::name,
            namespace: T::namespace,
            resource_version: T::resource_version,
            uid: T::uid,
            labels: T::labels,
            owner_uids: T::owner_uids,
        }
    }
}

impl<T> ObjectAccess<T> {
    /// Writes the object's key into `buf` (cleared first): `namespace/name`, or `name` for
    /// cluster-scoped objects, as client-go's `MetaNamespaceKeyFunc`, except that an object
    /// without a name is refused with [`Error::MissingName`] (client-go would key it `namespace/`
    /// or the empty string, and one such object would overwrite the next).
    pub fn write_key(&self, obj: &T, buf: &mut String) -> Result<()> {
        buf.clear();
        let ns = (self.namespace)(obj).filter(|ns| !ns.is_empty());
        let name = (self.name)(obj).filter(|n| !n.is_empty());
        let Some(name) = name else {
            return Err(Error::MissingName { namespace: ns.map(str::to_owned) });
        };
        if let Some(ns) = ns {
            buf.reserve(ns.len() + 1 + name.len());
            buf.push_str(ns);
            buf.push('/');
        }
        buf.push_str(name);
        Ok(())
    }

    /// The object's key as a new `String` (see [`ObjectAccess::write_key`]).
    pub fn key(&self, obj: &T) -> Result<String> {
        let mut buf = String::new();
        self.write_key(obj, &mut buf)?;
        Ok(buf)
    }
}

/// Splits a key into `(namespace, name)`; cluster-scoped keys have no namespace.
pub fn split_key(key: &str) -> (Option<&str>, &str) {
    match key.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, key),
    }
}
