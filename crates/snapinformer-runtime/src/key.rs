//! The key a controller reconciles: `namespace/name`, or `name` for a cluster-scoped object.

use std::{fmt, sync::Arc};

use kube::Resource;

/// Identifies one object a controller reconciles, in the informer store's key format:
/// `namespace/name`, or `name` for a cluster-scoped object (client-go's
/// `MetaNamespaceKeyFunc`). Cheap to clone (one shared string).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(Arc<str>);

impl ObjectKey {
    /// The key of `name` in `namespace` (`None`, or an empty namespace: cluster-scoped).
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        match namespace.filter(|ns| !ns.is_empty()) {
            Some(ns) => ObjectKey(format!("{ns}/{name}").into()),
            None => ObjectKey(name.into()),
        }
    }

    /// The key of `obj` (its namespace and name); `None` if it has no name.
    pub fn of<K: Resource>(obj: &K) -> Option<Self> {
        let meta = obj.meta();
        Some(Self::new(meta.namespace.as_deref(), meta.name.as_deref().filter(|n| !n.is_empty())?))
    }

    /// A key from its text form (`namespace/name` or `name`), as stores and work queues use it.
    pub fn parse(key: &str) -> Self {
        ObjectKey(key.into())
    }

    /// The namespace, if namespaced.
    pub fn namespace(&self) -> Option<&str> {
        self.0.split_once('/').map(|(ns, _)| ns)
    }

    /// The name.
    pub fn name(&self) -> &str {
        self.0.split_once('/').map_or(&self.0, |(_, name)| name)
    }

    /// The key as text: the store key of the object.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl From<&str> for ObjectKey {
    fn from(key: &str) -> Self {
        Self::parse(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_split_into_namespace_and_name_like_store_keys() {
        let k = ObjectKey::new(Some("default"), "web");
        assert_eq!((k.as_str(), k.namespace(), k.name()), ("default/web", Some("default"), "web"));
        let c = ObjectKey::new(None, "node-1");
        assert_eq!((c.as_str(), c.namespace(), c.name()), ("node-1", None, "node-1"));
        assert_eq!(ObjectKey::new(Some(""), "n"), ObjectKey::parse("n"));
        assert_eq!(ObjectKey::parse("default/web"), k);
    }
}
