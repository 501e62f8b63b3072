//! The [`Cluster`] trait: the only way the engine reaches a Kubernetes API.
//!
//! Upstream: `operations.go` (getObject, patch, deleteObject, apiResource) and the restMapper;
//! GC-SPEC.md §5.
//!
//! The controller implements it with kube-rs; tests use `kube_gc_testkit::MemoryCluster`, which
//! implements the API server's deletion semantics and records every call.

use std::fmt;
use std::future::Future;

use crate::identity::{ObjectReference, ObjectType};
use crate::meta::ObjectMeta;

/// A resource the API serves, as discovery / the restMapper describe it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Resource {
    /// API group (`""` for core).
    pub group: String,
    /// API version within the group (`v1`).
    pub version: String,
    /// Plural resource name (`pods`).
    pub resource: String,
    /// The kind it serves (`Pod`).
    pub kind: String,
    /// Whether objects of this resource live in namespaces.
    pub namespaced: bool,
}

impl Resource {
    /// A resource from an apiVersion (`v1`, `apps/v1`), a plural name, a kind and a scope.
    pub fn new(api_version: &str, plural: &str, kind: &str, namespaced: bool) -> Resource {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        Resource {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: plural.to_owned(),
            kind: kind.to_owned(),
            namespaced,
        }
    }

    /// The apiVersion its objects carry: `version` for the core group, else `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The [`ObjectType`] (apiVersion and kind) of its objects.
    pub fn object_type(&self) -> ObjectType {
        ObjectType::new(&self.api_version(), &self.kind)
    }
}

impl fmt::Display for Resource {
    /// Upstream's GroupVersionResource string: `apps/v1, Resource=deployments`,
    /// `/v1, Resource=pods` for the core group.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}, Resource={}", self.group, self.version, self.resource)
    }
}

/// How a patch body is to be interpreted.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum PatchType {
    /// `application/strategic-merge-patch+json` (built-in kinds only).
    StrategicMerge,
    /// `application/merge-patch+json`.
    JsonMerge,
}

impl PatchType {
    /// The request's content type.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::JsonMerge => "application/merge-patch+json",
        }
    }
}

/// A patch: its type and its JSON body.
#[derive(Clone, PartialEq, Debug)]
pub struct Patch {
    /// Strategic merge or JSON merge.
    pub patch_type: PatchType,
    /// The patch document, in `patch_type`'s format.
    pub body: serde_json::Value,
}

/// `propagationPolicy` of a delete.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum PropagationPolicy {
    /// Keep dependents: the API server adds the `orphan` finalizer.
    Orphan,
    /// Delete the object now; the collector deletes dependents afterwards.
    Background,
    /// Delete dependents first: the API server adds the `foregroundDeletion` finalizer.
    Foreground,
}

impl PropagationPolicy {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PropagationPolicy::Orphan => "Orphan",
            PropagationPolicy::Background => "Background",
            PropagationPolicy::Foreground => "Foreground",
        }
    }
}

/// Options of a delete call.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct DeleteOptions {
    /// `preconditions.uid`.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub precondition_resource_version: Option<String>,
    /// `propagationPolicy`.
    pub propagation_policy: Option<PropagationPolicy>,
}

/// An API call's failure, classified as the collector needs it.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ClusterError {
    /// 404.
    #[error("not found")]
    NotFound,
    /// 409: a precondition or resourceVersion did not hold.
    #[error("the server reported a conflict: {0}")]
    Conflict(String),
    /// 415: the resource does not support this patch type (strategic merge on custom resources).
    #[error("the server does not support this patch type")]
    UnsupportedMediaType,
    /// 422.
    #[error("the request is invalid: {0}")]
    Invalid(String),
    /// The restMapper knows no resource for this apiVersion/kind.
    #[error("unable to get REST mapping for {0}")]
    NoMapping(String),
    /// Any other failure (transport, 5xx, 429, …).
    #[error("request failed with status {code}: {message}")]
    Other {
        /// HTTP status code, or 0 when the request never got an answer.
        code: u16,
        /// What failed.
        message: String,
    },
}

/// A Kubernetes Event the collector records (only `Warning OwnerRefInvalidNamespace` upstream).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WarningEvent {
    /// The object the event is about.
    pub involved: ObjectReference,
    /// The reason, e.g. `OwnerRefInvalidNamespace`.
    pub reason: &'static str,
    /// The message, for a person.
    pub message: String,
}

/// One object of a list page: where it is and which UID it has.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ListedObject {
    /// Its namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
}

/// One page of a paged LIST.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct ListPage {
    /// The page's objects.
    pub items: Vec<ListedObject>,
    /// The token of the next page (`metadata.continue`), `None` on the last page.
    pub continue_token: Option<String>,
    /// How many objects the later pages hold (`metadata.remainingItemCount`), when the server
    /// says.
    pub remaining: Option<u64>,
}

/// Reads and writes the cluster on the collector's behalf.
///
/// Every call is a live request (never a cache). Implementations must be cheap to call from many
/// workers at once.
pub trait Cluster: Send + Sync + 'static {
    /// Resolves an apiVersion/kind to its resource and scope (upstream's restMapper);
    /// [`ClusterError::NoMapping`] when unknown.
    fn resource_for(&self, ty: ObjectType) -> Result<Resource, ClusterError>;

    /// GETs an object's metadata. `namespace` is empty for cluster-scoped resources.
    fn get(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<ObjectMeta, ClusterError>> + Send;

    /// One page of a consistent LIST of `resource` in every namespace: at most `limit` objects'
    /// metadata, after the page `continue_token` names (`None`: the first page).
    ///
    /// Consistent means read from the store of record, never from a cache that may lag
    /// (kube-apiserver: no `resourceVersion`, so a quorum read from etcd; never
    /// `resourceVersion=0`): an object created before the first page was requested and not
    /// deleted is on one of the pages. The collector proves owners absent with it (see
    /// `collector::absence_proofs`).
    fn list_page(
        &self,
        resource: &Resource,
        continue_token: Option<&str>,
        limit: u32,
    ) -> impl Future<Output = Result<ListPage, ClusterError>> + Send;

    /// Whether [`Cluster::list_page`] of `resource` is consistent, as that method requires:
    /// true for what kube-apiserver serves itself (built-in resources, custom resources);
    /// false for a resource an aggregated API server serves (an APIService with a `service`),
    /// whose lists may come from a cache that lags or be paged by offset, so that an owner
    /// that exists could be missing from every page. The collector proves owners of a resource
    /// without consistent lists absent only by GET, as upstream does.
    fn consistent_lists(&self, resource: &Resource) -> bool;

    /// PATCHes an object, returning its metadata after the patch.
    fn patch(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> impl Future<Output = Result<ObjectMeta, ClusterError>> + Send;

    /// DELETEs an object.
    fn delete(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// Records a Kubernetes Event. Best effort: failures are the implementation's to log.
    /// Must not wait (it is called from the graph builder, between two batches): queue the
    /// event for a recorder of its own, as client-go's broadcaster does.
    fn record_event(&self, event: WarningEvent);
}
