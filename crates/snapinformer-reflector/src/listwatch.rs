//! The two calls a reflector makes: list and watch (client-go's `ListerWatcher`).

use std::fmt::Debug;

use futures::{StreamExt, future::BoxFuture, stream::BoxStream};
use kube::{
    Api, Resource,
    api::{ListParams, ObjectList, WatchEvent, WatchParams},
};
use serde::de::DeserializeOwned;

/// A stream of watch events as the kube client yields them.
pub type WatchStream<K> = BoxStream<'static, Result<WatchEvent<K>, kube::Error>>;

/// What the reflector lists and watches: implemented for [`kube::Api`]; tests implement it to
/// script a server.
///
/// `watch` resolves once the server has answered the request (an HTTP error is an `Err`); the
/// stream then yields events until the server ends it. A decode failure is an `Err` item
/// (kube's `Error::SerdeError`), and the stream goes on.
#[doc(alias = "ListerWatcher")]
pub trait ListWatch<K: Clone>: Send + Sync + 'static {
    /// One list request (one page if `params.limit` is set).
    fn list(&self, params: &ListParams) -> BoxFuture<'_, Result<ObjectList<K>, kube::Error>>;

    /// Opens a watch from `resource_version` (`""`: from now, or a consistent streaming list
    /// with `sendInitialEvents`).
    fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> BoxFuture<'_, Result<WatchStream<K>, kube::Error>>;
}

impl<K> ListWatch<K> for Api<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    fn list(&self, params: &ListParams) -> BoxFuture<'_, Result<ObjectList<K>, kube::Error>> {
        let params = params.clone();
        Box::pin(async move {
            if params.limit.is_some()
                && params.continue_token.is_none()
                && params.resource_version.as_deref() == Some("0")
            {
                // kube drops `resourceVersion=0` when a limit is set (turning the list into a
                // consistent read from etcd); client-go sends both, so that the API server
                // answers from its watch cache. Send both.
                return list_at_zero(self, &params).await;
            }
            Api::list(self, &params).await
        })
    }

    fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> BoxFuture<'_, Result<WatchStream<K>, kube::Error>> {
        let params = params.clone();
        let rv = resource_version.to_owned();
        Box::pin(async move { Ok(Api::watch(self, &params, &rv).await?.boxed()) })
    }
}

/// A list request with `limit` and `resourceVersion=0`, both sent.
async fn list_at_zero<K>(api: &Api<K>, params: &ListParams) -> Result<ObjectList<K>, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let mut query = Vec::new();
    if let Some(labels) = &params.label_selector {
        query.push(format!("labelSelector={}", encode(labels)));
    }
    if let Some(fields) = &params.field_selector {
        query.push(format!("fieldSelector={}", encode(fields)));
    }
    if let Some(limit) = params.limit {
        query.push(format!("limit={limit}"));
    }
    query.push("resourceVersion=0".to_owned());
    let url = format!("{}?{}", api.resource_url(), query.join("&"));
    let request = http::Request::get(url).body(Vec::new()).map_err(kube::Error::HttpError)?;
    api.clone().into_client().request::<ObjectList<K>>(request).await
}

/// Percent-encodes a query value (everything but RFC 3986 unreserved characters).
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(super::encode("app in (a,b),x!=y"), "app%20in%20%28a%2Cb%29%2Cx%21%3Dy");
    }
}
