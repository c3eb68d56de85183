//! Informers over the Kubernetes API: a [`snapinformer_core::Informer`] fed by a [`Reflector`],
//! with typed constructors for the kinds controllers watch most.

use std::{
    fmt,
    ops::Deref,
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::api::{
    apps::v1::{DaemonSet, StatefulSet},
    core::v1::{Node, Pod},
};
use kube::{Api, Resource};
use snapinformer_core::{Informer, InformerBuilder};
use snapinformer_store::{IndexFn, Indexers, ObjectAccess, StoreBuilder};

use crate::{
    ListWatch, Reflector, ReflectorConfig, ReflectorHandle, ReflectorStatus, Result, StatusHandle,
    Transform, WatchErrorHandler, access,
};

/// Name of the pods' index by `spec.nodeName` (a key index).
pub const NODE_NAME_INDEX: &str = "spec.nodeName";
/// Name of the owner-UID index (of keys by default; see
/// [`KubeInformerBuilder::covering_owner_uid_index`]).
pub const OWNER_UID_INDEX: &str = "owner-uid";

type Configure<K> = Box<dyn FnOnce(InformerBuilder<K>) -> InformerBuilder<K> + Send>;

/// Builds a [`KubeInformer`]: the store's indexes, the informer's options, the reflector's
/// configuration and transform.
#[must_use = "a builder does nothing until `build` is called"]
pub struct KubeInformerBuilder<K: Send + Sync + 'static, L = Api<K>> {
    lw: L,
    access: ObjectAccess<K>,
    store: StoreBuilder<K>,
    name: String,
    configure: Vec<Configure<K>>,
    config: ReflectorConfig,
    transform: Option<Transform<K>>,
    watch_error_handler: Option<WatchErrorHandler>,
}

impl<K: Send + Sync + 'static, L> fmt::Debug for KubeInformerBuilder<K, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeInformerBuilder")
            .field("name", &self.name)
            .field("indexers", self.store.configured_indexers())
            .field("config", &self.config)
            .field("transform", &self.transform.is_some())
            .field("watch_error_handler", &self.watch_error_handler.is_some())
            .finish_non_exhaustive()
    }
}

impl<K, L> KubeInformerBuilder<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListWatch<K>,
{
    /// An informer for any `kube::Resource`, listing and watching through `lw` (a
    /// `kube::Api<K>`), on a store with only the namespace index.
    pub fn new(lw: L) -> Self {
        KubeInformerBuilder::with_access(lw, access::<K>())
    }
}

impl<K, L> KubeInformerBuilder<K, L>
where
    K: Clone + Send + Sync + 'static,
    L: ListWatch<K>,
{
    /// An informer for objects that are not a `kube::Resource` (for example compact objects
    /// decoded by their own [`ListWatch`]), whose metadata the store and reflector read through
    /// `access`; a store with only the namespace index.
    pub fn with_access(lw: L, access: ObjectAccess<K>) -> Self {
        KubeInformerBuilder {
            lw,
            access,
            store: StoreBuilder::new(access),
            name: "informer".to_owned(),
            configure: Vec::new(),
            config: ReflectorConfig::default(),
            transform: None,
            watch_error_handler: None,
        }
    }

    /// Names the informer and its reflector (metrics, logs).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Adds a key index to the store.
    pub fn index(mut self, name: impl Into<Arc<str>>, f: IndexFn<K>) -> Self {
        self.store = self.store.index(name, f);
        self
    }

    /// Adds a covering index to the store.
    pub fn covering_index(mut self, name: impl Into<Arc<str>>, f: IndexFn<K>) -> Self {
        self.store = self.store.covering_index(name, f);
        self
    }

    /// Adds the owner-UID index ([`OWNER_UID_INDEX`]), whose buckets hold keys, as client-go's
    /// indexes do: an owner lookup resolves its keys in the primary map (in groups, so their
    /// cache misses overlap), and an update that keeps its owner does not touch the index.
    pub fn owner_uid_index(self) -> Self {
        let access = self.access;
        self.index(OWNER_UID_INDEX, IndexFn::owner_uid(access))
    }

    /// The index functions registered so far, with their kinds (the namespace index is added
    /// when the informer is built).
    pub fn configured_indexers(&self) -> &Indexers<K> {
        self.store.configured_indexers()
    }

    /// Adds the owner-UID index ([`OWNER_UID_INDEX`]) as a covering index instead: its buckets
    /// hold the objects too, so an owner lookup reads them straight from the bucket (10.5 µs
    /// against 27.4 µs for 1,000 pods of 200,000), and every update writes its owner's bucket
    /// as well (1.41x client-go's CPU per update against 1.31x with keys; BENCHMARKS.md, "The
    /// headline set on an owner index of keys"). For controllers that look up by owner far more
    /// often than pods change. Use it in place of [`owner_uid_index`](Self::owner_uid_index),
    /// not beside it.
    pub fn covering_owner_uid_index(self) -> Self {
        let access = self.access;
        self.covering_index(OWNER_UID_INDEX, IndexFn::owner_uid(access))
    }

    /// Adjusts the informer (queue kind, batch size, freshness policy, publish hook...).
    pub fn informer(
        mut self,
        f: impl FnOnce(InformerBuilder<K>) -> InformerBuilder<K> + Send + 'static,
    ) -> Self {
        self.configure.push(Box::new(f));
        self
    }

    /// Sets the reflector's configuration (its name is set from [`name`](Self::name) if it is
    /// left at the default).
    pub fn reflector(mut self, config: ReflectorConfig) -> Self {
        self.config = config;
        self
    }

    /// Applies `transform` to every object before it enters the queue (see
    /// [`crate::transform`]).
    #[doc(alias = "SetTransform")]
    pub fn transform(mut self, transform: impl Fn(&mut K) + Send + Sync + 'static) -> Self {
        self.transform = Some(Arc::new(transform));
        self
    }

    /// Calls `handler` with the reflector's name and the error each time the reflector's list
    /// or watch fails (client-go's `SetWatchErrorHandler`; see
    /// [`Reflector::with_watch_error_handler`]). Being a builder option, it is set before the
    /// informer exists, so it can never race with a start.
    #[doc(alias = "SetWatchErrorHandler")]
    pub fn watch_error_handler(
        mut self,
        handler: impl Fn(&str, &crate::Error) + Send + Sync + 'static,
    ) -> Self {
        self.watch_error_handler = Some(Arc::new(handler));
        self
    }

    /// The informer's name.
    pub fn informer_name(&self) -> &str {
        &self.name
    }

    /// Builds the informer and the reflector that feeds it, unstarted.
    pub(crate) fn build_parts(
        self,
    ) -> snapinformer_core::informer::Result<(Informer<K>, Reflector<K, L>)> {
        let mut builder = InformerBuilder::with_store(self.store).name(self.name.clone());
        for f in self.configure {
            builder = f(builder);
        }
        let informer = builder.build()?;
        let mut config = self.config;
        if config.name == ReflectorConfig::default().name {
            config.name.clone_from(&self.name);
        }
        let reflector =
            Reflector::with_access(self.lw, informer.queue().clone(), config, self.access)
                .with_shared_transform(self.transform)
                .with_shared_watch_error_handler(self.watch_error_handler);
        Ok((informer, reflector))
    }

    /// Builds the store, the informer and the reflector; nothing runs until
    /// [`KubeInformer::start`].
    pub fn build(self) -> Result<KubeInformer<K, L>> {
        let (informer, reflector) = self.build_parts()?;
        Ok(KubeInformer {
            status: reflector.status_handle(),
            informer,
            reflector: Mutex::new(Some(reflector)),
            handle: Mutex::new(None),
        })
    }
}

/// What the reflector has received and what readers see, side by side.
///
/// client-go reports the reflector's version (`LastSyncResourceVersion`) and, since 1.35, the
/// store's (`LastStoreSyncResourceVersion`) as two separate calls; here both come together with
/// the distance between them and the queue's backlog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lag {
    /// The newest resource version the reflector received and queued.
    pub received: Option<String>,
    /// The resource version the published snapshot includes.
    pub published: Option<Arc<str>>,
    /// `received - published` for numeric versions (0 when caught up).
    pub versions_behind: Option<u64>,
    /// Deltas queued or in flight.
    pub queued_deltas: usize,
}

/// A shared informer fed by a reflector over the Kubernetes API.
///
/// Dereferences to the [`Informer`]: take snapshots, register handlers, wait for versions on
/// it directly.
pub struct KubeInformer<K: Send + Sync + 'static, L = Api<K>> {
    informer: Informer<K>,
    reflector: Mutex<Option<Reflector<K, L>>>,
    handle: Mutex<Option<ReflectorHandle>>,
    status: StatusHandle,
}

impl<K: Send + Sync + 'static, L> fmt::Debug for KubeInformer<K, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeInformer")
            .field("informer", &self.informer)
            .field("reflector", &self.status.get())
            .finish()
    }
}

impl<K: Send + Sync + 'static, L> Deref for KubeInformer<K, L> {
    type Target = Informer<K>;
    fn deref(&self) -> &Informer<K> {
        &self.informer
    }
}

impl<K, L> KubeInformer<K, L>
where
    K: Clone + Send + Sync + 'static,
    L: ListWatch<K>,
{
    /// The informer (also reachable through `Deref`).
    pub fn informer(&self) -> &Informer<K> {
        &self.informer
    }

    /// Starts the informer's processing loop and the reflector, on the current Tokio runtime.
    pub fn start(&self) -> Result<()> {
        let mut slot = self.reflector.lock().unwrap_or_else(|e| e.into_inner());
        let Some(reflector) = slot.take() else {
            return Err(snapinformer_core::informer::Error::AlreadyStarted(
                self.informer.name().to_owned(),
            )
            .into());
        };
        if let Err(e) = self.informer.start() {
            *slot = Some(reflector);
            return Err(e.into());
        }
        drop(slot);
        let handle = reflector.spawn();
        *self.handle.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        Ok(())
    }

    /// The reflector's status (phase, last synced version, counters).
    pub fn reflector_status(&self) -> ReflectorStatus {
        self.status.get()
    }

    /// Registers the informer's metrics (prefix `snapinformer`, label `informer`) and the
    /// reflector's (prefix `snapinformer_kube`, label `reflector`, see
    /// [`crate::metrics`]) in `registry`, both named after the informer.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.informer.register_metrics(registry);
        self.status.register_metrics(registry, self.informer.name());
    }

    /// What the reflector received against what readers see.
    pub fn lag(&self) -> Lag {
        let received = self.status.last_sync_resource_version();
        let progress = self.informer.progress();
        let versions_behind = match (
            received.as_deref().and_then(snapinformer_core::parse_resource_version),
            progress.resource_version_num,
        ) {
            (Some(r), Some(p)) => Some(r.saturating_sub(p)),
            (Some(r), None) => Some(r),
            _ => None,
        };
        Lag {
            received,
            published: progress.resource_version,
            versions_behind,
            queued_deltas: self.informer.queue().stats().lag_deltas(),
        }
    }

    /// Waits until the first list is applied and published, or `timeout`.
    pub async fn wait_for_sync(&self, timeout: Duration) -> bool {
        self.informer.wait_for_sync(timeout).await
    }

    /// Stops the reflector, then shuts the informer down (see [`Informer::shutdown`]).
    pub async fn shutdown(&self) {
        let handle = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(handle) = handle {
            handle.stop().await;
        }
        self.informer.shutdown().await;
    }
}

/// An informer for any `kube::Resource` (for example a custom resource or `DynamicObject`).
pub fn informer_for<K>(api: Api<K>) -> KubeInformerBuilder<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + fmt::Debug + Send + Sync + 'static,
{
    KubeInformerBuilder::new(api)
}

/// A pod informer named `pods`, with the [`NODE_NAME_INDEX`] and [`OWNER_UID_INDEX`] indexes
/// (both of keys) that StatefulSet and DaemonSet controllers query.
pub fn pods(api: Api<Pod>) -> KubeInformerBuilder<Pod> {
    KubeInformerBuilder::new(api)
        .name("pods")
        .index(NODE_NAME_INDEX, IndexFn::field(pod_node_name))
        .owner_uid_index()
}

fn pod_node_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.node_name.as_deref()
}

/// A node informer named `nodes`.
pub fn nodes(api: Api<Node>) -> KubeInformerBuilder<Node> {
    KubeInformerBuilder::new(api).name("nodes")
}

/// A StatefulSet informer named `statefulsets`.
pub fn statefulsets(api: Api<StatefulSet>) -> KubeInformerBuilder<StatefulSet> {
    KubeInformerBuilder::new(api).name("statefulsets")
}

/// A DaemonSet informer named `daemonsets`.
pub fn daemonsets(api: Api<DaemonSet>) -> KubeInformerBuilder<DaemonSet> {
    KubeInformerBuilder::new(api).name("daemonsets")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api() -> Api<Pod> {
        // Never connected: the builder only needs a client to hold.
        let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        Api::all(kube::Client::try_from(config).unwrap())
    }

    #[tokio::test]
    async fn the_pod_informer_builds_its_owner_index_of_keys_unless_asked_for_covering() {
        let default = pods(api());
        assert_eq!(default.configured_indexers().is_covering(OWNER_UID_INDEX), Some(false));
        assert_eq!(default.configured_indexers().is_covering(NODE_NAME_INDEX), Some(false));
        assert!(format!("{default:?}").contains("(\"owner-uid\", false)"), "{default:?}");

        let covering = KubeInformerBuilder::new(api()).covering_owner_uid_index();
        assert_eq!(covering.configured_indexers().is_covering(OWNER_UID_INDEX), Some(true));
        assert_eq!(covering.configured_indexers().is_covering("absent"), None);
    }
}
