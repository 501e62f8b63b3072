//! The collector's API calls, each a thin wrapper over [`Cluster`].
//!
//! Upstream: `operations.go` and `patch.go` (`getObject`, `patch` with its JSON merge patch
//! fallback, `deleteObject` with its resourceVersion precondition, `removeFinalizer`);
//! GC-SPEC.md §5.

use super::{Collector, ItemError};
use crate::cluster::{Cluster, ClusterError, DeleteOptions, Patch, PropagationPolicy, Resource};
use crate::identity::ObjectReference;
use crate::ingest::{ObjectMeta, OwnerReference};
use crate::patch;

/// How many times `remove_finalizer` tries on conflicts (client-go's `retry.DefaultBackoff`).
const REMOVE_FINALIZER_ATTEMPTS: usize = 5;

impl<C: Cluster> Collector<C> {
    /// The resource of `identity`'s type and the namespace to address it in
    /// (upstream's `apiResource` + `resourceDefaultNamespace`).
    pub(super) fn locate(
        &self,
        identity: &ObjectReference,
    ) -> Result<(Resource, String), ItemError> {
        let resource = self.cluster.resource_for(identity.ty).map_err(|_| {
            ItemError::RestMapping(format!("{}/{}", identity.ty.api_version(), identity.ty.kind()))
        })?;
        let namespace = if resource.namespaced {
            identity.namespace.as_str().to_owned()
        } else {
            String::new()
        };
        Ok((resource, namespace))
    }

    /// Upstream's `getObject`: a live metadata GET of `identity`.
    ///
    /// A namespaced kind named with no namespace is a virtual node a cluster-scoped dependent
    /// created: it cannot be looked up, and is reported without an API call.
    pub(super) async fn get_object(
        &self,
        identity: &ObjectReference,
    ) -> Result<Result<ObjectMeta, ClusterError>, ItemError> {
        let (resource, namespace) = self.locate(identity)?;
        if resource.namespaced && identity.namespace.is_cluster() {
            return Err(ItemError::NamespacedOwnerOfClusterScopedObject);
        }
        Ok(self.cluster.get(&resource, &namespace, &identity.name).await)
    }

    /// Upstream's `patch`: a strategic merge patch, falling back to a JSON merge patch built
    /// from the live object when the server does not support it (415: custom resources).
    pub(super) async fn patch_with_fallback(
        &self,
        identity: &ObjectReference,
        strategic: Patch,
        json_merge: impl FnOnce(&ObjectMeta) -> Patch,
    ) -> Result<ObjectMeta, ClusterError> {
        let (resource, namespace) = match self.locate(identity) {
            Ok(located) => located,
            Err(e) => return Err(ClusterError::NoMapping(e.to_string())),
        };
        match self.cluster.patch(&resource, &namespace, &identity.name, &strategic).await {
            Err(ClusterError::UnsupportedMediaType) => {
                // Divergence from upstream: the current object comes from a live GET, not the
                // informer's cache (kube-gc keeps no object cache); the resourceVersion in the
                // patch keeps it optimistic either way.
                let current = self.cluster.get(&resource, &namespace, &identity.name).await?;
                let body = json_merge(&current);
                self.cluster.patch(&resource, &namespace, &identity.name, &body).await
            }
            other => other,
        }
    }

    /// Removes the owner references with the given UIDs from `identity`'s object.
    pub(super) async fn remove_owner_references(
        &self,
        identity: &ObjectReference,
        owner_uids: &[String],
    ) -> Result<ObjectMeta, ClusterError> {
        let strategic = patch::delete_owner_refs_strategic(identity.uid, owner_uids.iter());
        self.patch_with_fallback(identity, strategic, |current| {
            patch::delete_owner_refs_json_merge(
                &current.resource_version,
                &current.owner_references,
                owner_uids.iter(),
            )
        })
        .await
    }

    /// Upstream's `deleteObject` (newest, #132632): DELETE with UID and resourceVersion
    /// preconditions; on a conflict, if the object's owner references are unchanged since
    /// `resource_version`, retry once with the UID precondition only, so that unrelated writes
    /// cannot starve collection while an adoption in between still wins.
    pub(super) async fn delete_object(
        &self,
        identity: &ObjectReference,
        resource_version: &str,
        owners_at_rv: &[OwnerReference],
        policy: PropagationPolicy,
    ) -> Result<(), ClusterError> {
        let (resource, namespace) = match self.locate(identity) {
            Ok(located) => located,
            Err(e) => return Err(ClusterError::NoMapping(e.to_string())),
        };
        let uid = identity.uid.to_string();
        let mut options = DeleteOptions {
            precondition_uid: Some(uid.clone()),
            precondition_resource_version: (!resource_version.is_empty())
                .then(|| resource_version.to_owned()),
            propagation_policy: Some(policy),
        };
        let result = self.cluster.delete(&resource, &namespace, &identity.name, &options).await;
        let Err(ClusterError::Conflict(conflict)) = result else { return result };
        if options.precondition_resource_version.is_none() {
            return Err(ClusterError::Conflict(conflict));
        }
        let live = self.cluster.get(&resource, &namespace, &identity.name).await?;
        if live.uid == uid
            && live.resource_version != resource_version
            && live.owner_references == owners_at_rv
        {
            tracing::debug!(item = %identity, "retrying delete without resourceVersion, owners unchanged");
            options.precondition_resource_version = None;
            return self.cluster.delete(&resource, &namespace, &identity.name, &options).await;
        }
        Err(ClusterError::Conflict(conflict))
    }

    /// Upstream's `removeFinalizer`: GET, drop `finalizer`, JSON merge patch with the
    /// resourceVersion read, retried on conflicts.
    ///
    /// Divergence from upstream: conflicts are retried at once rather than after 10 ms (the
    /// engine owns no timer); each retry starts from a fresh GET, which is what matters.
    pub(super) async fn remove_finalizer(
        &self,
        identity: &ObjectReference,
        finalizer: &str,
    ) -> Result<(), ItemError> {
        let (resource, namespace) = self.locate(identity)?;
        for _ in 0..REMOVE_FINALIZER_ATTEMPTS {
            let current = match self.cluster.get(&resource, &namespace, &identity.name).await {
                Ok(current) => current,
                Err(ClusterError::NotFound) => return Ok(()),
                Err(e) => {
                    return Err(ItemError::cluster(
                        format_args!(
                            "cannot finalize owner {identity}, because cannot get it. The garbage collector will retry later"
                        ),
                        e,
                    ));
                }
            };
            if !current.finalizers.iter().any(|f| f == finalizer) {
                tracing::trace!(item = %identity, finalizer, "finalizer already removed from object");
                return Ok(());
            }
            let remaining: Vec<String> =
                current.finalizers.iter().filter(|f| *f != finalizer).cloned().collect();
            let body = patch::remove_finalizer_json_merge(&current.resource_version, &remaining);
            match self.cluster.patch(&resource, &namespace, &identity.name, &body).await {
                Ok(_) => return Ok(()),
                Err(ClusterError::Conflict(_)) => continue,
                Err(e) => {
                    return Err(ItemError::cluster(
                        format_args!("cannot remove finalizer {finalizer:?} from {identity}"),
                        e,
                    ));
                }
            }
        }
        Err(ItemError::Other(format!(
            "updateMaxRetries({REMOVE_FINALIZER_ATTEMPTS}) has reached. The garbage collector will retry later for owner {identity}"
        )))
    }
}
