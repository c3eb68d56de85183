//! A factory that shares one informer per resource among many controllers (client-go's
//! `SharedInformerFactory`).

use std::{
    any::{Any, TypeId},
    collections::BTreeMap,
    fmt,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use prometheus_client::registry::Registry;
use snapinformer_store::Backend;

use crate::informer::{self, Control, Informer};

/// Errors of the factory.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Building or starting an informer failed.
    #[error(transparent)]
    Informer(#[from] informer::Error),
    /// An informer of this name exists with another object type or backend.
    #[error("informer {name:?} exists with another type ({existing}), not {requested}")]
    TypeMismatch {
        /// The informer's name.
        name: String,
        /// The type it was created with.
        existing: &'static str,
        /// The type requested now.
        requested: &'static str,
    },
    /// The factory was shut down.
    #[error("the informer factory is shut down")]
    ShutDown,
}

/// `Result` with the factory [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

struct Entry {
    type_id: TypeId,
    type_name: &'static str,
    informer: Box<dyn Any + Send + Sync>,
    control: Arc<dyn Control>,
}

#[derive(Default)]
struct State {
    informers: BTreeMap<String, Entry>,
    started: bool,
    shut_down: bool,
}

/// Shares one informer per resource (by name, for example `"pods"`) among any number of
/// controllers, and starts, syncs and stops them together.
///
/// Controllers ask with [`informer`](InformerFactory::informer); the first ask builds the
/// informer, later asks get the same one. [`start`](InformerFactory::start) starts every
/// informer not yet started (call it again after asking for new ones, as in client-go).
#[doc(alias = "SharedInformerFactory")]
#[derive(Default)]
pub struct InformerFactory {
    state: Mutex<State>,
    registry: Option<Arc<Mutex<Registry>>>,
}

impl fmt::Debug for InformerFactory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.lock();
        f.debug_struct("InformerFactory")
            .field("informers", &st.informers.keys().collect::<Vec<_>>())
            .field("started", &st.started)
            .finish()
    }
}

impl InformerFactory {
    /// An empty factory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the metrics of every informer this factory builds in `registry`.
    #[must_use]
    pub fn with_registry(mut self, registry: Arc<Mutex<Registry>>) -> Self {
        self.registry = Some(registry);
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The shared informer `name`, built with `build` on first use.
    ///
    /// Fails with [`Error::TypeMismatch`] if `name` exists with another object type or
    /// backend.
    #[doc(alias = "InformerFor")]
    pub fn informer<T, B>(
        &self,
        name: &str,
        build: impl FnOnce() -> informer::Result<Informer<T, B>>,
    ) -> Result<Informer<T, B>>
    where
        T: Send + Sync + 'static,
        B: Backend,
    {
        let mut st = self.lock();
        if st.shut_down {
            return Err(Error::ShutDown);
        }
        if let Some(entry) = st.informers.get(name) {
            return match entry.informer.downcast_ref::<Informer<T, B>>() {
                Some(inf) => Ok(inf.clone()),
                None => Err(Error::TypeMismatch {
                    name: name.to_owned(),
                    existing: entry.type_name,
                    requested: std::any::type_name::<T>(),
                }),
            };
        }
        let inf = build()?;
        if let Some(registry) = &self.registry {
            let mut reg = registry.lock().unwrap_or_else(|e| e.into_inner());
            inf.register_metrics(&mut reg);
        }
        st.informers.insert(
            name.to_owned(),
            Entry {
                type_id: TypeId::of::<Informer<T, B>>(),
                type_name: std::any::type_name::<T>(),
                informer: Box::new(inf.clone()),
                control: Arc::new(inf.clone()),
            },
        );
        Ok(inf)
    }

    /// The informer `name` if it exists with this type.
    pub fn get<T: Send + Sync + 'static, B: Backend>(&self, name: &str) -> Option<Informer<T, B>> {
        let st = self.lock();
        let entry = st.informers.get(name)?;
        if entry.type_id != TypeId::of::<Informer<T, B>>() {
            return None;
        }
        entry.informer.downcast_ref::<Informer<T, B>>().cloned()
    }

    /// Names of the informers, sorted.
    pub fn names(&self) -> Vec<String> {
        self.lock().informers.keys().cloned().collect()
    }

    /// Starts every informer not yet started, on the current Tokio runtime.
    pub fn start(&self) -> Result<()> {
        let mut st = self.lock();
        if st.shut_down {
            return Err(Error::ShutDown);
        }
        st.started = true;
        for entry in st.informers.values() {
            if !entry.control.is_started() {
                entry.control.start()?;
            }
        }
        Ok(())
    }

    /// Waits until every started informer has synced, or `timeout`. Returns each informer's
    /// name with whether it synced (client-go's `WaitForCacheSync`).
    #[doc(alias = "WaitForCacheSync")]
    pub async fn wait_for_cache_sync(&self, timeout: Duration) -> BTreeMap<String, bool> {
        let controls: Vec<Arc<dyn Control>> = {
            let st = self.lock();
            st.informers
                .values()
                .filter(|e| e.control.is_started())
                .map(|e| e.control.clone())
                .collect()
        };
        let all = async {
            while !controls.iter().all(|c| c.has_synced()) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        let _ = tokio::time::timeout(timeout, all).await;
        controls.iter().map(|c| (c.name().to_owned(), c.has_synced())).collect()
    }

    /// Shuts every informer down (see [`Informer::shutdown`]); the factory builds no more.
    pub async fn shutdown(&self) {
        let controls: Vec<Arc<dyn Control>> = {
            let mut st = self.lock();
            st.shut_down = true;
            st.informers.values().map(|e| e.control.clone()).collect()
        };
        for c in controls {
            c.shutdown().await;
        }
    }
}
