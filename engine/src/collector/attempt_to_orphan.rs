//! The attemptToOrphan path: remove an owner from its dependents' owner references, then its
//! `orphan` finalizer.
//!
//! Upstream: `garbagecollector.go` (`attemptToOrphanWorker`, `orphanDependents`);
//! GC-SPEC.md §4.

use std::sync::atomic::Ordering;

use futures_util::future::join_all;

use super::operations::FinalizerRemoval;
use super::{Collector, HeldDecision, ItemError, Outcome};
use crate::cluster::{Cluster, ClusterError};
use crate::graph::NodeKey;
use crate::identity::ObjectReference;
use crate::meta::FINALIZER_ORPHAN;

impl<C: Cluster> Collector<C> {
    /// The body of an attemptToOrphan worker for one item.
    pub async fn attempt_to_orphan_worker(&self, key: NodeKey) -> Outcome {
        if self.is_warming_up() {
            // Orphaning patches the dependents the graph knows: wait until it knows them all.
            self.deferred_orphans.lock().push(key);
            self.stats.deferred_until_synced.fetch_add(1, Ordering::Relaxed);
            if !self.is_warming_up() {
                self.finish_warm_up();
            }
            return Outcome::Forget;
        }
        // The owner as the graph knows it; a node gone from the graph has nothing to orphan.
        let Some(owner) = self.graph.node(key.uid) else { return Outcome::Forget };
        // Nor has a virtual node: the item was queued for the observed owner, and a virtual
        // node under its UID means the owner's delete event came (its node left the graph)
        // and a dependent's reference has named the UID since. The owner is gone, so no write
        // is owed, and the dependents the owner still had were queued to attemptToDelete when
        // its node left, as upstream's removeNode queues them. Upstream's worker, holding the
        // removed node, may patch those dependents first and then finds the owner gone (404):
        // a race it runs against its own attemptToDelete, and kube-gc's outcome is that of
        // its attemptToDelete. Reading the virtual identity instead would GET what the
        // reference says (one GET more), and a cluster-scoped dependent's reference gives a
        // namespaced kind no namespace: an error no retry resolves, so the item came back for
        // ever.
        if owner.is_virtual {
            return Outcome::Forget;
        }
        // Divergence from upstream, which orphans whatever its informers have delivered: while
        // a watcher that had synced is behind (its watch broke, it relists), the dependents it
        // missed are not in the graph, would keep their reference and be collected once seen.
        // Wait for it, within the catch-up timeout (see `LaggingWatchers`). Before the owner's
        // live read, so that the read is as new as the graph the dependents come from.
        if self.hold_for_watchers(key, &owner.identity, HeldDecision::Orphaning) {
            return Outcome::Forget;
        }
        // Divergence from upstream, which orphans on its graph's word alone: the owner is read
        // live first, and orphaned only if it still asks for it (being deleted, `orphan`
        // finalizer, same UID). A user may have deleted it again with another policy since
        // (the API server then drops `orphan`), or it may be gone: orphaning its dependents
        // then would be a write no decision on the live state makes. One GET per orphaned
        // owner, not per dependent.
        let deleted_at = match self.get_object(&owner.identity, false).await {
            Ok(Ok(live))
                if live.uid == owner.identity.uid.to_string()
                    && live.deletion_timestamp
                    && live.has_finalizer(FINALIZER_ORPHAN) =>
            {
                live.deletion_time
            }
            Ok(Ok(_)) | Ok(Err(ClusterError::NotFound)) => {
                tracing::debug!(owner = %owner.identity, "owner no longer being orphaned, skipping attemptToOrphan");
                return Outcome::Forget;
            }
            Ok(Err(e)) => {
                tracing::warn!(owner = %owner.identity, error = %e, "cannot read the owner to orphan");
                return Outcome::Requeue;
            }
            Err(e) => {
                tracing::warn!(owner = %owner.identity, error = %e, "cannot read the owner to orphan");
                return Outcome::Requeue;
            }
        };
        let dependents: Vec<ObjectReference> = self
            .graph
            .dependents(key.uid)
            .into_iter()
            .filter_map(|d| self.graph.node(d.uid).map(|n| n.identity))
            .collect();
        if let Err(e) = self.orphan_dependents(&owner.identity, &dependents).await {
            tracing::warn!(owner = %owner.identity, error = %e, "orphanDependents failed");
            return Outcome::Requeue;
        }
        // Remembered before the finalizer goes, not after: the owner can vanish the moment the
        // API server applies the removal, and a worker that then finds it absent (by a GET or
        // through its delete event) must find it here too, or it collects the dependents the
        // graph did not hold yet instead of orphaning them (see `OrphanedOwners`). Forgotten if
        // the removal finds nothing to remove (below), or if it fails: the owner most likely
        // stays, and the next attempt reads it live again. Were the patch applied and only its
        // answer lost, forgetting falls back to upstream's behaviour; keeping the owner could
        // orphan the dependents of an owner the user has since deleted with another policy, a
        // write upstream would not make.
        // The guard forgets the owner unless confirmed: on NotThere, on an error, and if this
        // future panics or is dropped mid-removal.
        let orphaning = self.orphaned.begin(owner.identity.uid, deleted_at);
        match self.remove_finalizer(&owner.identity, FINALIZER_ORPHAN).await {
            Ok(FinalizerRemoval::Removed) => {
                orphaning.confirm();
                Outcome::Forget
            }
            // Someone else let the owner go (a user removed `orphan`, or it went) before this
            // worker did: the orphaning did not end by kube-gc's hand, so a dependent the graph
            // did not hold is upstream's to decide (collected once its owner is found gone),
            // not one to keep.
            Ok(FinalizerRemoval::NotThere) => Outcome::Forget,
            Err(e) => {
                drop(orphaning);
                tracing::warn!(owner = %owner.identity, error = %e, "removeOrphanFinalizer failed");
                Outcome::Requeue
            }
        }
    }

    /// Upstream's `orphanDependents`: removes `owner` from each dependent's owner references,
    /// all dependents at once. A dependent already gone is not an error.
    ///
    /// Dependents not yet in the graph are not orphaned (upstream's known race, #26120).
    pub async fn orphan_dependents(
        &self,
        owner: &ObjectReference,
        dependents: &[ObjectReference],
    ) -> Result<(), ItemError> {
        let owner_uid = [owner.uid.to_string()];
        let owner_uid = &owner_uid;
        let results = join_all(dependents.iter().map(|dep| async move {
            match self.remove_owner_references(dep, owner_uid, None).await {
                Ok(_) | Err(ClusterError::NotFound) => None,
                Err(e) => Some(format!("orphaning {dep} failed, {e}")),
            }
        }))
        .await;
        let errors: Vec<String> = results.into_iter().flatten().collect();
        if errors.is_empty() {
            tracing::trace!(%owner, "successfully updated all dependents");
            Ok(())
        } else {
            Err(ItemError::Other(format!(
                "failed to orphan dependents of owner {owner}, got errors: [{}]",
                errors.join(", ")
            )))
        }
    }
}
