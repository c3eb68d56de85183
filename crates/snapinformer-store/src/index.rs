//! Index functions: how objects are grouped into index buckets.

use std::{borrow::Cow, fmt, sync::Arc};

use smallvec::SmallVec;

use crate::ObjectAccess;

/// The values an index function returns for one object (most return zero or one).
pub type IndexValues<'a> = SmallVec<[Cow<'a, str>; 2]>;

/// Name of the namespace index every store has (client-go's `cache.NamespaceIndex`).
pub const NAMESPACE_INDEX: &str = "namespace";

type DynIndexFn<T> = dyn for<'a> Fn(&'a T) -> IndexValues<'a> + Send + Sync;

/// A function from an object to the index values (bucket names) it belongs to.
///
/// Like client-go's `IndexFunc`, it may return several values (multi-valued indexes) or none (the
/// object is not in the index). Unlike client-go it cannot fail: a client-go index function error
/// panics the informer, so here the function must decide what an object it cannot index means.
/// Values may borrow from the object, so the common case allocates nothing.
pub struct IndexFn<T>(Arc<DynIndexFn<T>>);

impl<T> Clone for IndexFn<T> {
    fn clone(&self) -> Self {
        IndexFn(self.0.clone())
    }
}

impl<T> fmt::Debug for IndexFn<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IndexFn")
    }
}

impl<T> IndexFn<T> {
    /// Wraps a function. Passing a closure directly lets it borrow from the object:
    /// `IndexFn::new(|pod: &Pod| smallvec![Cow::Borrowed(pod.node())])`.
    pub fn new<F>(f: F) -> Self
    where
        F: for<'a> Fn(&'a T) -> IndexValues<'a> + Send + Sync + 'static,
    {
        IndexFn(Arc::new(f))
    }

    /// The index values of `obj`.
    pub fn values<'a>(&self, obj: &'a T) -> IndexValues<'a> {
        (self.0)(obj)
    }

    /// Indexes objects by namespace, cluster-scoped objects under the empty value `""`, as
    /// client-go's `MetaNamespaceIndexFunc` does (so `by_index(NAMESPACE_INDEX, "")` lists the
    /// cluster-scoped objects). Every store has it under [`NAMESPACE_INDEX`].
    #[doc(alias = "MetaNamespaceIndexFunc")]
    pub fn namespace(access: ObjectAccess<T>) -> Self
    where
        T: 'static,
    {
        IndexFn::new(move |obj: &T| {
            let mut values = IndexValues::new();
            values.push(Cow::Borrowed((access.namespace)(obj).unwrap_or("")));
            values
        })
    }

    /// Indexes objects by the UIDs of their owners (client-go's controllers add this as
    /// `controllerUID`-style indexes). An object with two owners is in two buckets.
    pub fn owner_uid(access: ObjectAccess<T>) -> Self
    where
        T: 'static,
    {
        IndexFn::new(move |obj: &T| {
            (access.owner_uids)(obj).into_iter().map(Cow::Borrowed).collect()
        })
    }

    /// Indexes objects by the value of one label; objects without the label are not indexed.
    pub fn label(access: ObjectAccess<T>, label: impl Into<String>) -> Self
    where
        T: 'static,
    {
        let label = label.into();
        IndexFn::new(move |obj: &T| {
            (access.labels)(obj)
                .and_then(|l| l.get(&label))
                .map(|v| Cow::Borrowed(v.as_str()))
                .into_iter()
                .collect()
        })
    }

    /// Indexes objects by a string field that the caller reads, for example a pod's
    /// `spec.nodeName`: `IndexFn::field(|p: &Pod| p.spec.as_ref()?.node_name.as_deref())`.
    /// Objects for which it returns `None` or an empty string are not indexed.
    pub fn field(get: for<'a> fn(&'a T) -> Option<&'a str>) -> Self
    where
        T: 'static,
    {
        IndexFn::new(move |obj: &T| {
            get(obj).filter(|v| !v.is_empty()).map(Cow::Borrowed).into_iter().collect()
        })
    }
}

/// One registered index.
pub(crate) struct IndexEntry<T> {
    pub(crate) name: Arc<str>,
    pub(crate) f: IndexFn<T>,
    pub(crate) covering: bool,
}

impl<T> Clone for IndexEntry<T> {
    fn clone(&self) -> Self {
        IndexEntry { name: self.name.clone(), f: self.f.clone(), covering: self.covering }
    }
}

/// A set of named index functions, as passed to `add_indexers` (client-go's `cache.Indexers`).
///
/// An index is either a *key* index (buckets hold keys; a lookup resolves each key in the primary
/// map, as client-go does) or a *covering* index (buckets also hold the objects, so
/// [`by_index`](crate::Snapshot::by_index) reads them straight from the bucket). Covering
/// saves one primary-map lookup per object returned and costs one more small-map write per
/// update of an object in the index: use it for the indexes your controllers query in hot loops.
#[must_use]
pub struct Indexers<T> {
    pub(crate) entries: Vec<IndexEntry<T>>,
}

impl<T> Clone for Indexers<T> {
    fn clone(&self) -> Self {
        Indexers { entries: self.entries.clone() }
    }
}

impl<T> fmt::Debug for Indexers<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.entries.iter().map(|e| (&e.name, e.covering))).finish()
    }
}

impl<T> Default for Indexers<T> {
    fn default() -> Self {
        Indexers { entries: Vec::new() }
    }
}

impl<T> Indexers<T> {
    /// No index functions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a named key index. A duplicate name is reported by `add_indexers`.
    pub fn with(mut self, name: impl Into<Arc<str>>, f: IndexFn<T>) -> Self {
        self.entries.push(IndexEntry { name: name.into(), f, covering: false });
        self
    }

    /// Adds a named covering index: its buckets hold the objects too (see the type docs).
    pub fn with_covering(mut self, name: impl Into<Arc<str>>, f: IndexFn<T>) -> Self {
        self.entries.push(IndexEntry { name: name.into(), f, covering: true });
        self
    }

    /// Number of index functions.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the index named `name` is covering (`Some(true)`), of keys (`Some(false)`), or
    /// not registered here (`None`).
    pub fn is_covering(&self, name: &str) -> Option<bool> {
        self.entries.iter().find(|e| &*e.name == name).map(|e| e.covering)
    }
}
