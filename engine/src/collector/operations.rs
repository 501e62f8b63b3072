//! The collector's API calls, each a thin wrapper over [`Cluster`].
//!
//! Upstream: `operations.go` and `patch.go` (`getObject`, `patch` with its JSON merge patch
//! fallback, `deleteObject` with its resourceVersion precondition, `removeFinalizer`);
//! GC-SPEC.md §5.

use super::{Collector, ItemError, View};
use crate::cluster::{Cluster, ClusterError, DeleteOptions, Patch, PropagationPolicy, Resource};
use crate::identity::ObjectReference;
use crate::meta::ObjectMeta;
use crate::patch;

/// How many times `remove_finalizer` tries on conflicts (client-go's `retry.DefaultBackoff`).
const REMOVE_FINALIZER_ATTEMPTS: usize = 5;

/// How [`Collector::remove_finalizer`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FinalizerRemoval {
    /// Its patch removed the finalizer.
    Removed,
    /// There was nothing to remove: the object is gone, another object holds its name, or the
    /// finalizer was already removed (by someone else).
    NotThere,
}

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
        proof: bool,
    ) -> Result<Result<ObjectMeta, ClusterError>, ItemError> {
        let (resource, namespace) = self.locate(identity)?;
        if resource.namespaced && identity.namespace.is_cluster() {
            return Err(ItemError::NamespacedOwnerOfClusterScopedObject);
        }
        Ok(self.read_counted(&resource, &namespace, &identity.name, proof).await)
    }

    /// Every live read of the collector: a GET of `name`, or, for a name no GET can address
    /// (see `classify::is_addressable`: a virtual node or an owner reference named so), a
    /// failed read, retried, never an absence.
    pub(super) async fn read(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<ObjectMeta, ClusterError> {
        self.read_counted(resource, namespace, name, false).await
    }

    /// [`read`](Self::read), counted in `stats.proof_gets` when it is a `proof` (it finds an
    /// owner absent or present): once sure it will be sent, before it waits for the budget,
    /// so that the proofs counted are never fewer than those the cluster counts as sent
    /// (which the read GETs exported are derived from), nor any never sent.
    pub(super) async fn read_counted(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        proof: bool,
    ) -> Result<ObjectMeta, ClusterError> {
        if !super::classify::is_addressable(name) {
            let message = format!("name {name:?} cannot be read by a GET");
            return Err(ClusterError::Other { code: 0, message });
        }
        if proof {
            self.stats.proof_gets.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        self.cluster.get(resource, namespace, name).await
    }

    /// Upstream's `patch`: a strategic merge patch, falling back to a JSON merge patch when the
    /// server does not support it (415: custom resources).
    ///
    /// `view` is the version of the object the decision to patch was taken on, if any. A patch
    /// decided from the graph's copy is pinned to the copy's resourceVersion, so it lands only on
    /// the version the decision saw (409 otherwise). The JSON merge body is built from `view`
    /// itself, owners and resourceVersion together: JSON merge replaces the whole list, so
    /// pairing one version's owners with another's resourceVersion would undo what changed in
    /// between.
    ///
    /// On a conflict with a `view`, the object is read again, and the patch retried once on
    /// the live version (pinned to it as the first was to the view's) if the decision stands:
    /// the same object (UID), not being deleted, its owner references exactly the view's. The
    /// decision read nothing else of the object (its owners' states were read apart, and the
    /// retry goes out after them, as the first patch did). Otherwise the conflict is returned,
    /// and the item decided again from a live read. Without the retry, an object written often
    /// (a custom resource whose controller updates its status every second) would conflict on
    /// every attempt: its version is read before the owners' GETs, each waiting for the API
    /// budget, so seconds old when the patch goes out.
    ///
    /// Divergence from upstream: upstream builds the JSON merge body from its informer's cached
    /// copy; kube-gc keeps no object cache and uses the version the decision read (a live GET,
    /// or the graph's copy), or, with no `view` (orphaning), a live GET.
    pub(super) async fn patch_with_fallback(
        &self,
        identity: &ObjectReference,
        strategic: Patch,
        view: Option<View<'_>>,
        json_merge: impl Fn(&ObjectMeta) -> Patch,
    ) -> Result<ObjectMeta, ClusterError> {
        let (resource, namespace) = match self.locate(identity) {
            Ok(located) => located,
            Err(e) => return Err(ClusterError::NoMapping(e.to_string())),
        };
        let target = (identity, &resource, namespace.as_str());
        let result = self.patch_once(target, strategic.clone(), view, &json_merge).await;
        let (Err(ClusterError::Conflict(conflict)), Some(view)) = (&result, view) else {
            return result;
        };
        let Ok(live) = self.read(&resource, &namespace, &identity.name).await else {
            return result;
        };
        if live.uid != identity.uid.to_string() || !view.stands_on(&live) {
            return Err(ClusterError::Conflict(conflict.clone()));
        }
        tracing::debug!(item = %identity, "retrying patch: same object, not being deleted, owners unchanged");
        let pinned = strategic.body["metadata"].get("resourceVersion").is_some();
        let strategic = if pinned {
            patch::at_resource_version(strategic, &live.resource_version)
        } else {
            strategic
        };
        let view = View { meta: &live, from_graph: view.from_graph };
        self.patch_once(target, strategic, Some(view), &json_merge).await
    }

    /// One try of [`patch_with_fallback`](Self::patch_with_fallback): the strategic merge
    /// patch, pinned to the view's version if the view is the graph's copy, and the JSON merge
    /// patch built from the view (or a live read) if the server refuses strategic merge.
    async fn patch_once(
        &self,
        (identity, resource, namespace): (&ObjectReference, &Resource, &str),
        strategic: Patch,
        view: Option<View<'_>>,
        json_merge: &impl Fn(&ObjectMeta) -> Patch,
    ) -> Result<ObjectMeta, ClusterError> {
        let strategic = match view {
            Some(v) if v.from_graph => {
                patch::at_resource_version(strategic, &v.meta.resource_version)
            }
            _ => strategic,
        };
        match self.cluster.patch(resource, namespace, &identity.name, &strategic).await {
            Err(ClusterError::UnsupportedMediaType) => {
                let read;
                let meta = match view {
                    Some(v) => v.meta,
                    None => {
                        read = self.read(resource, namespace, &identity.name).await?;
                        // Another object under the name: the one this patch was for is gone,
                        // and the successor, which the graph has not shown yet, may be a
                        // dependent too. Not written now (upstream would patch it, on a body
                        // built from it): a conflict, so that the orphaning is tried again once
                        // the graph holds the successor, and patches it as its own dependent.
                        if read.uid != identity.uid.to_string() {
                            return Err(ClusterError::Conflict(format!(
                                "{identity}: the name holds another object now ({})",
                                read.uid
                            )));
                        }
                        &read
                    }
                };
                // The body replaces the whole list: it must land on the version it was built
                // from, never unconditionally.
                if meta.resource_version.is_empty() {
                    return Err(ClusterError::Other {
                        code: 0,
                        message: format!(
                            "{identity} has no resourceVersion to pin a JSON merge patch to"
                        ),
                    });
                }
                self.cluster.patch(resource, namespace, &identity.name, &json_merge(meta)).await
            }
            other => other,
        }
    }

    /// Removes the owner references with the given UIDs from `identity`'s object; `view` as in
    /// [`patch_with_fallback`](Self::patch_with_fallback).
    pub(super) async fn remove_owner_references(
        &self,
        identity: &ObjectReference,
        owner_uids: &[String],
        view: Option<View<'_>>,
    ) -> Result<ObjectMeta, ClusterError> {
        let strategic = patch::delete_owner_refs_strategic(identity.uid, owner_uids.iter());
        self.patch_with_fallback(identity, strategic, view, |current| {
            patch::delete_owner_refs_json_merge(
                &current.resource_version,
                &current.owner_references,
                owner_uids.iter(),
            )
        })
        .await
    }

    /// Upstream's `deleteObject` (newest, #132632): DELETE with UID and resourceVersion
    /// preconditions (the version in `view`, the one the decision read). On a conflict, the
    /// object is read again and the decision taken afresh on what is live:
    ///
    /// * gone, or another UID under the name: the object the decision was about no longer
    ///   exists (UIDs never come back): [`ClusterError::NotFound`], the caller's absence;
    /// * owner references changed, the object now being deleted, or its finalizers calling for
    ///   another propagation policy (`policy_for(&live)` differs): the conflict is returned and
    ///   the item requeued, to be decided again from a live read, never on the old decision (a
    ///   Background DELETE of an object a user is deleting with `orphan` would make the API
    ///   server strip that finalizer);
    /// * otherwise the same decision stands on the live object, and the DELETE is retried once:
    ///   with the UID precondition only, as upstream, when `view` was a live read; pinned to the
    ///   live resourceVersion when `view` was the graph's copy.
    ///
    /// Divergences from upstream, both making fewer writes, never others: upstream retries
    /// whenever the owner references are unchanged, even if the object is now being deleted or
    /// carries another GC finalizer; and a decision from the graph's copy (upstream always
    /// GETs) retries pinned to the version just read, so the DELETE lands only on an object
    /// exactly as it was when the decision was checked. Unrelated writes between that read and
    /// the DELETE (milliseconds) at worst requeue the item with backoff; they cannot make it
    /// delete what upstream would keep.
    pub(super) async fn delete_object(
        &self,
        identity: &ObjectReference,
        view: View<'_>,
        policy: PropagationPolicy,
        policy_for: impl Fn(&ObjectMeta) -> PropagationPolicy,
    ) -> Result<(), ClusterError> {
        let (resource, namespace) = match self.locate(identity) {
            Ok(located) => located,
            Err(e) => return Err(ClusterError::NoMapping(e.to_string())),
        };
        let uid = identity.uid.to_string();
        let resource_version = view.meta.resource_version.as_str();
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
        let live = self.read(&resource, &namespace, &identity.name).await?;
        if live.uid != uid {
            tracing::debug!(item = %identity, "delete conflicted: another object has the name now, the item is gone");
            return Err(ClusterError::NotFound);
        }
        if !view.stands_on(&live) || policy_for(&live) != policy {
            return Err(ClusterError::Conflict(conflict));
        }
        tracing::debug!(item = %identity, "retrying delete: owners, deletion state and policy unchanged");
        options.precondition_resource_version = view.from_graph.then_some(live.resource_version);
        self.cluster.delete(&resource, &namespace, &identity.name, &options).await
    }

    /// Upstream's `removeFinalizer`: GET, drop `finalizer`, JSON merge patch with the
    /// resourceVersion read, retried on conflicts. Says whether this call's patch removed it.
    ///
    /// Divergences from upstream: conflicts are retried at once rather than after 10 ms (the
    /// engine owns no timer); each retry starts from a fresh GET, which is what matters. An
    /// object of the same name with another UID is another object, and its finalizer is left
    /// alone: the one this decision was about is gone, as if the GET had found nothing.
    /// Upstream reads by name only, so if the owner went while its dependents were being
    /// orphaned and a successor of the same name is being deleted with `orphan`, it strips the
    /// successor's finalizer before anyone orphaned the successor's dependents.
    pub(super) async fn remove_finalizer(
        &self,
        identity: &ObjectReference,
        finalizer: &str,
    ) -> Result<FinalizerRemoval, ItemError> {
        let (resource, namespace) = self.locate(identity)?;
        for _ in 0..REMOVE_FINALIZER_ATTEMPTS {
            let current = match self.read(&resource, &namespace, &identity.name).await {
                Ok(current) => current,
                Err(ClusterError::NotFound) => return Ok(FinalizerRemoval::NotThere),
                Err(e) => {
                    return Err(ItemError::cluster(
                        format_args!(
                            "cannot finalize owner {identity}, because cannot get it. The garbage collector will retry later"
                        ),
                        e,
                    ));
                }
            };
            if current.uid != identity.uid.to_string() {
                tracing::trace!(item = %identity, uid = %current.uid, "object replaced by another of the same name, its finalizer is not ours to remove");
                return Ok(FinalizerRemoval::NotThere);
            }
            if !current.finalizers.iter().any(|f| f == finalizer) {
                tracing::trace!(item = %identity, finalizer, "finalizer already removed from object");
                return Ok(FinalizerRemoval::NotThere);
            }
            let remaining: Vec<String> =
                current.finalizers.iter().filter(|f| *f != finalizer).cloned().collect();
            let body = patch::remove_finalizer_json_merge(&current.resource_version, &remaining);
            match self.cluster.patch(&resource, &namespace, &identity.name, &body).await {
                Ok(_) => return Ok(FinalizerRemoval::Removed),
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
