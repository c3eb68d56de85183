//! Where a reconcile's writes go: the [`Writes`] trait, implemented for `kube::Api` (the
//! Kubernetes API over HTTP) and by tests or simulators for clusters without a server.

use std::{fmt::Debug, future::Future};

use either::Either;
use kube::{
    Api, Resource,
    api::{DeleteParams, Patch, PatchParams, PostParams},
    core::Status,
};
use serde::{Serialize, de::DeserializeOwned};

/// What a delete returned: the object's final state (or its state with a deletion timestamp,
/// for a graceful delete), or only a `Status` (the object is gone and the server did not send
/// it back).
#[derive(Debug, Clone)]
pub enum Deleted<K> {
    /// The deleted object as the server returned it; its resource version is the deletion's.
    Object(K),
    /// A status without the object (boxed: it is large and rare).
    Status(Box<Status>),
}

impl<K> From<Either<K, Status>> for Deleted<K> {
    fn from(e: Either<K, Status>) -> Self {
        match e {
            Either::Left(obj) => Deleted::Object(obj),
            Either::Right(status) => Deleted::Status(Box::new(status)),
        }
    }
}

/// The writes of objects of type `K` in one scope (a namespace, or the cluster), as
/// `kube::Api<K>` makes them: the default implementation. A cluster without an HTTP server (a
/// test's in-memory model, a simulator) implements it to run the same controller.
///
/// Errors are `kube::Error`, so a reconcile handles a 409 from a fake cluster exactly as one
/// from a server: build them as `kube::Error::Api(Box::new(Status::failure(..).with_code(409)))`.
/// Every successful write returns the object as stored, with its new resource version: the
/// runtime's [`Tracked`](crate::Tracked) wrapper records that version for read-your-writes.
pub trait Writes<K>: Send + Sync {
    /// The namespace these writes address (`None`: cluster-scoped objects).
    fn namespace(&self) -> Option<&str>;

    /// Creates `obj` (`POST`).
    fn create(&self, pp: &PostParams, obj: &K) -> impl Future<Output = kube::Result<K>> + Send;

    /// Replaces the object `name` with `obj` (`PUT`; optimistic concurrency through
    /// `obj`'s resource version).
    fn replace(
        &self,
        name: &str,
        pp: &PostParams,
        obj: &K,
    ) -> impl Future<Output = kube::Result<K>> + Send;

    /// Replaces the status of the object `name` (`PUT .../status`).
    fn replace_status(
        &self,
        name: &str,
        pp: &PostParams,
        obj: &K,
    ) -> impl Future<Output = kube::Result<K>> + Send;

    /// Patches the object `name` (`PATCH`).
    fn patch<P: Serialize + Debug + Send + Sync>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> impl Future<Output = kube::Result<K>> + Send;

    /// Patches the status of the object `name` (`PATCH .../status`).
    fn patch_status<P: Serialize + Debug + Send + Sync>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> impl Future<Output = kube::Result<K>> + Send;

    /// Deletes the object `name` (`DELETE`).
    fn delete(
        &self,
        name: &str,
        dp: &DeleteParams,
    ) -> impl Future<Output = kube::Result<Deleted<K>>> + Send;
}

impl<K> Writes<K> for Api<K>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static,
{
    fn namespace(&self) -> Option<&str> {
        Api::namespace(self)
    }

    async fn create(&self, pp: &PostParams, obj: &K) -> kube::Result<K> {
        Api::create(self, pp, obj).await
    }

    async fn replace(&self, name: &str, pp: &PostParams, obj: &K) -> kube::Result<K> {
        Api::replace(self, name, pp, obj).await
    }

    async fn replace_status(&self, name: &str, pp: &PostParams, obj: &K) -> kube::Result<K> {
        Api::replace_status(self, name, pp, obj).await
    }

    async fn patch<P: Serialize + Debug + Send + Sync>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> kube::Result<K> {
        Api::patch(self, name, pp, patch).await
    }

    async fn patch_status<P: Serialize + Debug + Send + Sync>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> kube::Result<K> {
        Api::patch_status(self, name, pp, patch).await
    }

    async fn delete(&self, name: &str, dp: &DeleteParams) -> kube::Result<Deleted<K>> {
        Api::delete(self, name, dp).await.map(Deleted::from)
    }
}
