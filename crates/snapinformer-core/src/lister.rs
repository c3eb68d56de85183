//! Typed listers over snapshots (client-go's generated listers, for any object type).

use std::{fmt, sync::Arc};

use snapinformer_store::{Backend, Chunked, Reader, Snapshot};

/// Lists and gets objects of one informer. Every method reads the latest published snapshot
/// and never waits; take [`snapshot`](Lister::snapshot) to do several reads at one consistent
/// point.
#[doc(alias = "GenericLister")]
pub struct Lister<T: Send + Sync + 'static, B: Backend = Chunked> {
    reader: Reader<T, B>,
}

impl<T: Send + Sync + 'static, B: Backend> Clone for Lister<T, B> {
    fn clone(&self) -> Self {
        Lister { reader: self.reader.clone() }
    }
}

impl<T: Send + Sync + 'static, B: Backend> fmt::Debug for Lister<T, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lister").field("backend", &B::NAME).finish()
    }
}

impl<T: Send + Sync + 'static, B: Backend> Lister<T, B> {
    /// A lister reading through `reader` (the store's reader knows how to read its objects'
    /// metadata).
    pub fn new(reader: Reader<T, B>) -> Self {
        Lister { reader }
    }

    /// The latest published snapshot.
    pub fn snapshot(&self) -> Snapshot<T, B> {
        self.reader.snapshot()
    }

    /// Every object.
    pub fn list(&self) -> Vec<Arc<T>> {
        self.reader.snapshot().list()
    }

    /// Objects carrying every label of `selector` (equality-based label selector; see
    /// [`Snapshot::select`] for how objects that cannot match are skipped unread).
    pub fn list_by_labels(&self, selector: &[(&str, &str)]) -> Vec<Arc<T>> {
        self.reader.snapshot().list_selected("", selector)
    }

    /// The object under `key` (`namespace/name`, or `name` for cluster-scoped objects).
    pub fn get(&self, key: &str) -> Option<Arc<T>> {
        self.reader.snapshot().get_by_key(key).cloned()
    }

    /// Objects whose index `index` has `value`.
    pub fn by_index(&self, index: &str, value: &str) -> snapinformer_store::Result<Vec<Arc<T>>> {
        self.reader.snapshot().by_index(index, value)
    }

    /// A lister of one namespace, reading one snapshot taken now.
    pub fn namespace(&self, namespace: impl Into<String>) -> NamespaceLister<T, B> {
        NamespaceLister { snapshot: self.reader.snapshot(), namespace: namespace.into() }
    }
}

/// The objects of one namespace, at one snapshot (client-go's `NamespaceLister`).
pub struct NamespaceLister<T: Send + Sync + 'static, B: Backend = Chunked> {
    snapshot: Snapshot<T, B>,
    namespace: String,
}

impl<T: Send + Sync + 'static, B: Backend> fmt::Debug for NamespaceLister<T, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamespaceLister")
            .field("namespace", &self.namespace)
            .field("snapshot", &self.snapshot)
            .finish()
    }
}

impl<T: Send + Sync + 'static, B: Backend> NamespaceLister<T, B> {
    /// Every object of the namespace (through the namespace index).
    pub fn list(&self) -> Vec<Arc<T>> {
        self.snapshot.list_namespace(&self.namespace)
    }

    /// Objects of the namespace carrying every label of `selector` (see [`Snapshot::select`]).
    pub fn list_by_labels(&self, selector: &[(&str, &str)]) -> Vec<Arc<T>> {
        self.snapshot.list_selected(&self.namespace, selector)
    }

    /// The object `name` of the namespace.
    pub fn get(&self, name: &str) -> Option<Arc<T>> {
        self.snapshot.get_by_key(&format!("{}/{name}", self.namespace)).cloned()
    }

    /// The snapshot this lister reads.
    pub fn snapshot(&self) -> &Snapshot<T, B> {
        &self.snapshot
    }
}
