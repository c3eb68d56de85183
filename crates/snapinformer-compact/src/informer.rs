//! The compact pod informer: list and watch responses decoded straight into [`CompactPod`]s.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{ListParams, ObjectList, WatchParams},
};
use snapinformer_kube::{
    KubeInformerBuilder, ListWatch, MAX_WATCH_LINE_BYTES, NODE_NAME_INDEX, WatchStream,
    list_request, watch_request,
};

use crate::{CompactPod, access, node_name_index};

/// Lists and watches pods through a `kube::Api<Pod>`'s client and path, decoding every object
/// straight into a [`CompactPod`] through [`Interner::global`](crate::Interner::global): no
/// `k8s_openapi` `Pod` is built on the way. Watch lines are bounded as the plain reflector's
/// are ([`MAX_WATCH_LINE_BYTES`]).
#[derive(Clone)]
pub struct CompactPodApi {
    client: kube::Client,
    url: String,
}

impl std::fmt::Debug for CompactPodApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactPodApi").field("url", &self.url).finish_non_exhaustive()
    }
}

impl CompactPodApi {
    /// The pods `api` lists (all namespaces or one, as `api` was made).
    pub fn new(api: Api<Pod>) -> Self {
        CompactPodApi { url: api.resource_url().to_owned(), client: api.into_client() }
    }
}

impl ListWatch<CompactPod> for CompactPodApi {
    fn list(
        &self,
        params: &ListParams,
    ) -> BoxFuture<'_, Result<ObjectList<CompactPod>, kube::Error>> {
        let params = params.clone();
        Box::pin(async move { list_request(self.client.clone(), &self.url, &params).await })
    }

    fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> BoxFuture<'_, Result<WatchStream<CompactPod>, kube::Error>> {
        let request = kube::core::Request::new(&self.url).watch(params, resource_version);
        Box::pin(async move {
            let request = request.map_err(kube::Error::BuildRequest)?;
            watch_request(self.client.clone(), request, MAX_WATCH_LINE_BYTES).await
        })
    }
}

/// A pod informer named `pods` that caches [`CompactPod`]s, with the same indexes as
/// [`snapinformer_kube::pods`]: [`NODE_NAME_INDEX`] (key) and
/// [`OWNER_UID_INDEX`](snapinformer_kube::OWNER_UID_INDEX) (both of keys).
///
/// Everything else is the plain informer's: snapshots answer `get`, `list`, `by_index`;
/// handlers receive `Arc<CompactPod>` old and new objects; transforms take `&mut CompactPod`
/// (see [`crate::transform`]).
///
/// ```no_run
/// use std::time::Duration;
/// use snapinformer_compact::pods_compact;
/// use snapinformer_kube::OWNER_UID_INDEX;
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kube::Client::try_default().await?;
/// let informer = pods_compact(kube::Api::all(client)).build()?;
/// informer.start()?;
/// assert!(informer.wait_for_sync(Duration::from_secs(60)).await);
/// let snapshot = informer.snapshot();
/// for pod in snapshot.by_index(OWNER_UID_INDEX, "some-statefulset-uid")? {
///     println!("{:?} on {:?}", pod.name(), pod.node_name()); // Arc<CompactPod>
/// }
/// informer.shutdown().await;
/// # Ok(()) }
/// ```
pub fn pods_compact(api: Api<Pod>) -> KubeInformerBuilder<CompactPod, CompactPodApi> {
    KubeInformerBuilder::with_access(CompactPodApi::new(api), access())
        .name("pods")
        .index(NODE_NAME_INDEX, node_name_index())
        .owner_uid_index()
}
