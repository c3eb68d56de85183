//! Typed listers over snapshots (client-go's generated listers, for any object type).

use std::{fmt, sync::Arc};

use snapinformer_store::{Backend, Chunked, ObjectAccess, Reader, Snapshot};

/// Lists and gets objects of one informer. Every method reads the latest published snapshot
/// and never waits; take [`snapshot`](Lister::snapshot) to do several reads at one consistent
/// point.
#[doc(alias = "GenericLister")]
pub struct Lister<T: Send + Sync + 'static, B: Backend = Chunked> {
    reader: Reader<T, B>,
    access: ObjectAccess<T>,
}

impl<T: Send + Sync + 'static, B: Backend> Clone for Lister<T, B> {
    fn clone(&self) -> Self {
        Lister { reader: self.reader.clone(), access: self.access }
    }
}

impl<T: Send + Sync + 'static, B: Backend> fmt::Debug for Lister<T, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lister").field("backend", &B::NAME).finish()
    }
}

/// Whether every `(key, value)` of `selector` is among the object's labels.
fn labels_match<T>(access: &ObjectAccess<T>, obj: &T, selector: &[(&str, &str)]) -> bool {
    let labels = (access.labels)(obj);
    selector.iter().all(|(k, v)| labels.and_then(|l| l.get(*k)).is_some_and(|x| x == v))
}

impl<T: Send + Sync + 'static, B: Backend> Lister<T, B> {
    /// A lister reading through `reader`.
    pub fn new(reader: Reader<T, B>, access: ObjectAccess<T>) -> Self {
        Lister { reader, access }
    }

    /// The latest published snapshot.
    pub fn snapshot(&self) -> Snapshot<T, B> {
        self.reader.snapshot()
    }

    /// Every object.
    pub fn list(&self) -> Vec<Arc<T>> {
        self.reader.snapshot().list()
    }

    /// Objects carrying every label of `selector` (equality-based label selector).
    pub fn list_by_labels(&self, selector: &[(&str, &str)]) -> Vec<Arc<T>> {
        let snap = self.reader.snapshot();
        snap.iter().filter(|o| labels_match(&self.access, o, selector)).cloned().collect()
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
        NamespaceLister {
            snapshot: self.reader.snapshot(),
            namespace: namespace.into(),
            access: self.access,
        }
    }
}

/// The objects of one namespace, at one snapshot (client-go's `NamespaceLister`).
pub struct NamespaceLister<T: Send + Sync + 'static, B: Backend = Chunked> {
    snapshot: Snapshot<T, B>,
    namespace: String,
    access: ObjectAccess<T>,
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

    /// Objects of the namespace carrying every label of `selector`.
    pub fn list_by_labels(&self, selector: &[(&str, &str)]) -> Vec<Arc<T>> {
        self.snapshot
            .namespace(&self.namespace)
            .filter(|o| labels_match(&self.access, o, selector))
            .cloned()
            .collect()
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
