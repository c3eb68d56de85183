//! Shared informers over the Kubernetes API (client-go's `SharedInformerFactory`): one
//! informer and one reflector per resource, however many controllers ask for it.

use std::{
    collections::BTreeMap,
    fmt,
    sync::{Mutex, MutexGuard},
    time::Duration,
};

use k8s_openapi::api::{
    apps::v1::{DaemonSet, StatefulSet},
    core::v1::{Node, Pod},
};
use kube::{Api, Client, Resource};
use snapinformer_core::{Informer, InformerFactory};

use crate::{
    KubeInformerBuilder, ListWatch, ReflectorConfig, ReflectorHandle, ReflectorStatus, Result,
    StatusHandle, daemonsets, nodes, pods, statefulsets,
};

type Spawn = Box<dyn FnOnce() -> ReflectorHandle + Send>;

#[derive(Default)]
struct Reflectors {
    /// Built with their informer, waiting for `start`.
    pending: Vec<(String, Spawn)>,
    running: BTreeMap<String, ReflectorHandle>,
    status: BTreeMap<String, StatusHandle>,
}

/// Shares one informer, fed by one reflector, per resource among any number of controllers,
/// and starts, syncs and stops them together.
///
/// Informers are shared by name (`pods`, `nodes`, ... or the name of a
/// [`KubeInformerBuilder`]): the first ask builds the informer and its reflector, later asks get
/// the same informer. [`start`](KubeInformerFactory::start) starts every informer and reflector
/// not yet started; call it again after asking for new ones, as in client-go.
#[doc(alias = "SharedInformerFactory")]
pub struct KubeInformerFactory {
    client: Client,
    config: ReflectorConfig,
    factory: InformerFactory,
    reflectors: Mutex<Reflectors>,
}

impl fmt::Debug for KubeInformerFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KubeInformerFactory")
            .field("factory", &self.factory)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl KubeInformerFactory {
    /// A factory whose informers list and watch through `client`, in all namespaces.
    pub fn new(client: Client) -> Self {
        Self::with_factory(client, InformerFactory::new())
    }

    /// Same, around an existing [`InformerFactory`] (for example one with a metrics registry).
    pub fn with_factory(client: Client, factory: InformerFactory) -> Self {
        KubeInformerFactory {
            client,
            config: ReflectorConfig::default(),
            factory,
            reflectors: Mutex::default(),
        }
    }

    /// The reflector configuration the typed informers get (their names are their own).
    #[must_use]
    pub fn reflector_config(mut self, config: ReflectorConfig) -> Self {
        self.config = config;
        self
    }

    fn lock(&self) -> MutexGuard<'_, Reflectors> {
        self.reflectors.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The shared informer named after `builder`, built from it on first use (later builders
    /// with the same name are dropped).
    pub fn informer<K, L>(&self, builder: KubeInformerBuilder<K, L>) -> Result<Informer<K>>
    where
        K: Resource + Clone + Send + Sync + 'static,
        L: ListWatch<K>,
    {
        let name = builder.informer_name().to_owned();
        let mut parts = None;
        let informer = self
            .factory
            .informer(&name, || {
                let (informer, reflector) = builder.build_parts()?;
                parts = Some(reflector);
                Ok(informer)
            })
            .map_err(|e| match e {
                snapinformer_core::factory::Error::Informer(e) => crate::Error::Informer(e),
                other => crate::Error::Factory(other),
            })?;
        if let Some(reflector) = parts {
            let mut r = self.lock();
            r.status.insert(name.clone(), reflector.status_handle());
            r.pending.push((name, Box::new(move || reflector.spawn())));
        }
        Ok(informer)
    }

    fn config_named(&self, name: &str) -> ReflectorConfig {
        self.config.clone().name(name)
    }

    /// The shared pod informer (see [`pods`]).
    pub fn pods(&self) -> Result<Informer<Pod>> {
        let b = pods(Api::all(self.client.clone())).reflector(self.config_named("pods"));
        self.informer(b)
    }

    /// The shared node informer (see [`nodes`]).
    pub fn nodes(&self) -> Result<Informer<Node>> {
        let b = nodes(Api::all(self.client.clone())).reflector(self.config_named("nodes"));
        self.informer(b)
    }

    /// The shared StatefulSet informer (see [`statefulsets`]).
    pub fn statefulsets(&self) -> Result<Informer<StatefulSet>> {
        let b = statefulsets(Api::all(self.client.clone()))
            .reflector(self.config_named("statefulsets"));
        self.informer(b)
    }

    /// The shared DaemonSet informer (see [`daemonsets`]).
    pub fn daemonsets(&self) -> Result<Informer<DaemonSet>> {
        let b =
            daemonsets(Api::all(self.client.clone())).reflector(self.config_named("daemonsets"));
        self.informer(b)
    }

    /// Starts every informer and reflector not yet started, on the current Tokio runtime.
    pub fn start(&self) -> Result<()> {
        self.factory.start().map_err(|e| match e {
            snapinformer_core::factory::Error::Informer(e) => crate::Error::Informer(e),
            other => crate::Error::Factory(other),
        })?;
        let mut r = self.lock();
        for (name, spawn) in std::mem::take(&mut r.pending) {
            let handle = spawn();
            r.running.insert(name, handle);
        }
        Ok(())
    }

    /// Waits until every started informer has synced, or `timeout`; returns each informer's
    /// name with whether it synced (client-go's `WaitForCacheSync`).
    #[doc(alias = "WaitForCacheSync")]
    pub async fn wait_for_cache_sync(&self, timeout: Duration) -> BTreeMap<String, bool> {
        self.factory.wait_for_cache_sync(timeout).await
    }

    /// The status of the reflector feeding informer `name`.
    pub fn reflector_status(&self, name: &str) -> Option<ReflectorStatus> {
        self.lock().status.get(name).map(StatusHandle::get)
    }

    /// The underlying informer factory.
    pub fn informer_factory(&self) -> &InformerFactory {
        &self.factory
    }

    /// Stops every reflector, then shuts every informer down.
    pub async fn shutdown(&self) {
        let running = std::mem::take(&mut self.lock().running);
        for handle in running.values() {
            handle.stop().await;
        }
        self.factory.shutdown().await;
    }
}
