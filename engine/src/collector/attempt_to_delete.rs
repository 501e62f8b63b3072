//! The attemptToDelete path: decide whether an object is garbage, and collect it.
//!
//! Upstream: `garbagecollector.go` (`attemptToDeleteWorker`, `attemptToDeleteItem`,
//! `processDeletingDependentsItem`); GC-SPEC.md §3.

use super::orphaned_owners::Judgement;
use super::{Collector, HeldDecision, ItemError, Outcome, REASON_OTHER, REASON_VERIFY, View};
use crate::cluster::{Cluster, ClusterError, PropagationPolicy};
use crate::error::IngestError;
use crate::graph::{NodeKey, NodeView};
use crate::identity::OwnerRef;
use crate::meta::ObjectMeta;
use crate::meta::{FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN};
use crate::patch;

/// What `attempt_to_delete_item` did, when it did not fail.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DeleteItemResult {
    /// Nothing to do (being deleted, no owners, all owners solid).
    Kept,
    /// Dangling or waiting owner references were patched away.
    Patched,
    /// The object was deleted (or its deletion started).
    Deleted,
    /// A deleting-dependents owner: queued its blocking dependents, or removed its finalizer.
    ProcessedDeletingDependents,
    /// A step of a foreground deletion held while a watcher is behind (see
    /// [`HeldDecision::ForegroundDeletion`]): queued again once none is, or at the catch-up
    /// timeout.
    HeldForWatchers,
}

impl<C: Cluster> Collector<C> {
    /// The body of an attemptToDelete worker for one item (upstream's `attemptToDeleteWorker`):
    /// decides, for the node the item stands for, whether to forget or requeue it.
    pub async fn attempt_to_delete_worker(&self, key: NodeKey) -> Outcome {
        let reasons = self.take_reasons(key);
        let outcome = self.attempt_to_delete_worker_inner(key, reasons).await;
        if outcome == Outcome::Requeue {
            self.restore_reasons(key, reasons);
        }
        outcome
    }

    async fn attempt_to_delete_worker_inner(&self, key: NodeKey, reasons: u8) -> Outcome {
        // The item stands for the node as it was queued. A node re-identified since (upstream
        // cloned it into a new pointer) was a virtual node: its old item is skipped, as
        // upstream skips the old pointer once the graph holds an observed node.
        let Some(node) = self.graph.node(key.uid) else {
            // Divergence from upstream: upstream skips only *virtual* items whose UID left the
            // graph; an observed one it GETs, finds gone (404) and answers with a no-op virtual
            // delete. A node leaves the graph only on its object's delete event, and UIDs are
            // never reused, so the outcome is the same with one API call fewer.
            tracing::trace!(item = ?key, "item no longer in the graph, skipping attemptToDeleteItem");
            self.stale_copies.lock().pop(&key);
            return Outcome::Forget;
        };
        if node.incarnation != key.incarnation {
            // Divergence from upstream: when the graph's node is still virtual (it was given an
            // alternate identity), upstream would verify the old identity again; that
            // identity was just verified absent, and the new one is queued on its own.
            tracing::trace!(item = ?key, "item no longer virtual in the graph, skipping attemptToDeleteItem on virtual node");
            self.stale_copies.lock().pop(&key);
            return Outcome::Forget;
        }
        if reasons == REASON_VERIFY && !node.is_virtual {
            // Queued only to verify the node while it was virtual; the informer has observed
            // it in place since (see CollectorOptions::skip_observed_verification).
            tracing::trace!(item = %node.identity, "item was observed since it was queued for verification, skipping attemptToDeleteItem");
            self.stats.verifications_skipped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Outcome::Forget;
        }
        if self.offer_for_proof(&node, reasons) {
            // The prover now holds the item: it proves the owner absent, or puts the item back
            // for the GET (see `absence_proofs`).
            return Outcome::HandedOver;
        }
        let was_virtual = node.is_virtual;
        let result = self.attempt_to_delete_item(&node).await;
        match result {
            Err(ItemError::DeferredUntilSynced) => {
                tracing::trace!(item = %node.identity, "deferring item until the graph is synced");
                self.stats.deferred_until_synced.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.deferred.lock().push(key);
                if !self.is_warming_up() {
                    // Warm-up ended while this item was processed: queue it now.
                    self.finish_warm_up();
                }
                Outcome::Forget
            }
            Err(e) if e.outcome() == Outcome::Forget => {
                self.last_errors.lock().pop(&node.identity.uid);
                Outcome::Forget
            }
            Err(e) => {
                match &e {
                    ItemError::RestMapping(_) => {
                        tracing::error!(item = %node.identity, error = %e, "error syncing item")
                    }
                    // The graph's copy was stale and the write pinned to it refused (409): the
                    // shortcut working as meant, not an error; the next attempt reads live.
                    _ if self.stale_copies.lock().contains(&key) => tracing::debug!(
                        item = %node.identity,
                        error = %e,
                        "the graph's copy of the item was stale, deciding again from a live read"
                    ),
                    _ => tracing::warn!(item = %node.identity, error = %e, "error syncing item"),
                }
                self.last_errors.lock().put(node.identity.uid, e.to_string());
                Outcome::Requeue
            }
            // Held for watchers behind: queued again when they catch up, or at the timeout.
            Ok(DeleteItemResult::HeldForWatchers) => Outcome::Forget,
            Ok(_) if was_virtual && self.still_virtual(key) => {
                // #56121: requeue a virtual node until the informer observes it or a live read
                // finds it absent, so that it is never stranded in the graph.
                tracing::trace!(item = ?key, "item hasn't been observed via informer yet");
                self.restore_reasons(key, REASON_VERIFY);
                Outcome::Requeue
            }
            Ok(_) => {
                self.last_errors.lock().pop(&node.identity.uid);
                Outcome::Forget
            }
        }
    }

    /// Whether the node `key` stands for is still virtual: either the graph's node with that
    /// incarnation is, or it was re-identified or removed meanwhile (upstream's old pointer
    /// stays virtual).
    fn still_virtual(&self, key: NodeKey) -> bool {
        match self.graph.node(key.uid) {
            Some(n) if n.incarnation == key.incarnation => n.is_virtual,
            _ => true,
        }
    }

    /// Upstream's `attemptToDeleteItem`.
    pub async fn attempt_to_delete_item(
        &self,
        item: &NodeView,
    ) -> Result<DeleteItemResult, ItemError> {
        let identity = &item.identity;
        tracing::debug!(item = %identity, virtual = item.is_virtual, "Processing item");
        if item.being_deleted && !item.deleting_dependents {
            tracing::trace!(item = %identity, "processing item returned at once, because its DeletionTimestamp is non-nil");
            return Ok(DeleteItemResult::Kept);
        }
        let (read, mut from_graph) = match self.observed_state(item) {
            Some(observed) => (Ok(observed), true),
            None => {
                // A virtual item's read proves it absent or present.
                (self.get_object(identity, item.is_virtual).await?, false)
            }
        };
        let mut latest = match read {
            Ok(latest) => latest,
            Err(ClusterError::NotFound) => {
                tracing::trace!(item = %identity, "item not found, generating a virtual delete event");
                self.enqueue_virtual_delete_event(identity);
                return Err(ItemError::EnqueuedVirtualDeleteEvent);
            }
            Err(e) => return Err(ItemError::cluster(format_args!("cannot get {identity}"), e)),
        };
        if latest.uid != identity.uid.to_string() {
            tracing::trace!(item = %identity, "UID doesn't match, item not found, generating a virtual delete event");
            self.enqueue_virtual_delete_event(identity);
            return Err(ItemError::EnqueuedVirtualDeleteEvent);
        }
        let warming_up = self.is_warming_up();
        if item.deleting_dependents {
            if warming_up {
                // Reads the dependents set, which is incomplete until synced.
                return Err(ItemError::DeferredUntilSynced);
            }
            return self.process_deleting_dependents_item(item).await;
        }
        // The live owner references, not the graph's.
        let mut owners = live_owner_refs(&latest)?;
        if owners.is_empty() {
            tracing::debug!(item = %identity, "item doesn't have an owner, continue on next item");
            return Ok(DeleteItemResult::Kept);
        }
        // Divergence from upstream: a virtual item read live is classified in the namespace
        // the object lives in, not the one its virtual node borrowed from the dependent that
        // named it. Upstream classifies a cluster-scoped object reached as a virtual node with
        // that dependent's namespace, so its invalid reference to a namespaced owner (which
        // upstream never decides on once the object is observed: a cluster-scoped object cannot
        // have a namespaced owner) is looked up in that namespace and may be found dangling,
        // and the object deleted: whether it is depends only on which watch delivered first.
        // Here such an object is always kept, as upstream keeps it when observed; a namespaced
        // object's live namespace is the one the node already has.
        let live_identity;
        let classified_as = if item.is_virtual && latest.namespace != identity.namespace.as_str() {
            live_identity = crate::identity::ObjectReference {
                namespace: crate::identity::Namespace::new(&latest.namespace),
                ..identity.clone()
            };
            &live_identity
        } else {
            identity
        };
        let mut c = self.classify_references(classified_as, &owners).await?;
        tracing::trace!(item = %identity, solid = ?c.solid, dangling = ?c.dangling, waiting = ?c.waiting_for_dependents_deletion, "classify item's references");
        let dangling: Vec<crate::Uid> = c.dangling.iter().map(|o| o.uid).collect();
        let judged =
            self.orphaned.judge(owners.iter().map(|o| o.uid), &dangling, latest.creation_time);
        if from_graph && judged != Judgement::Upstream {
            // An owner was remembered after `observed_state` chose the graph's copy, which has
            // no creationTimestamp: decide again, from a live read (a later write, never
            // another).
            return Err(ItemError::Other(format!(
                "an owner of {identity} was orphaned while it was being decided"
            )));
        }
        if judged == Judgement::Wait {
            // An owner found gone while its orphaning removes the finalizer: if that removal
            // let it go, this item is one the orphaning would have patched; if someone else
            // did first, it is upstream's to collect. Not known yet: decide again later (a
            // later write, never another).
            return Err(ItemError::Other(format!(
                "an owner of {identity} is gone while its orphaning finishes"
            )));
        }
        if judged == Judgement::CreatedAfterDeletion {
            // Created after an owner's deletion was asked for: no orphaning was meant for it,
            // and upstream's decision below stands (see `OrphanedOwners`).
            tracing::debug!(item = %identity, owners = ?dangling, "created after its orphaned owners' deletion, decided as upstream decides it");
            self.stats.created_after_orphaning.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if judged == Judgement::RemoveReferences {
            let late = dangling;
            // Owners this collector orphaned, gone now, are all this item names: it was not
            // in the graph when they were orphaned (or its reference came later). Remove those
            // references, the write their orphaning would have made (see `OrphanedOwners`).
            // Only when they are all its owners: beside any other owner, the item's fate is
            // the one upstream decides below whether or not those references go (a solid owner
            // keeps it, and upstream's own patch removes every dangling reference; with none,
            // it is garbage either way), so a patch first would be a write upstream never makes.
            // Only absent owners: one that still exists (another finalizer holds it) is
            // classified as upstream classifies it and keeps the item while it is solid. The
            // orphaning remembers an owner before its finalizer goes, so an owner gone because
            // of it is remembered by the time a read can find it absent.
            tracing::debug!(item = %identity, owners = ?late, "removing references to orphaned owners that are gone");
            let view = View { meta: &latest, from_graph };
            let uids: Vec<String> = late.iter().map(ToString::to_string).collect();
            latest = match self.remove_owner_references(identity, &uids, Some(view)).await {
                Ok(patched) => patched,
                // A 404 (or a Status saying NotFound, which an admission webhook may give) is
                // not taken for the item's absence, as upstream never takes a PATCH's: the
                // next attempt reads the item, and its GET says.
                Err(e) => {
                    return Err(self.write_failed(
                        item,
                        view,
                        format_args!("cannot remove references to orphaned owners from {identity}"),
                        e,
                    ));
                }
            };
            self.stats
                .late_orphans
                .fetch_add(late.len() as u64, std::sync::atomic::Ordering::Relaxed);
            from_graph = false;
            owners = live_owner_refs(&latest)?;
            // No owner left; or the answer still names them: a dry run (shadow mode answers a
            // patch with the object as it is) or a writer that put them back. The write was
            // made (or logged); deciding again would only repeat it, for ever in a dry run. A
            // later change of the object queues it again.
            if owners.is_empty() || owners.iter().any(|o| late.contains(&o.uid)) {
                return Ok(DeleteItemResult::Patched);
            }
            c = self.classify_references(classified_as, &owners).await?;
            if c.dangling.iter().any(|o| self.orphaned.contains(o.uid)) {
                // Another orphaned owner went while this one was being decided: decide again.
                return Err(ItemError::Other(format!(
                    "an owner of {identity} was orphaned while it was being decided"
                )));
            }
        }

        if !c.solid.is_empty() {
            tracing::debug!(item = %identity, "item has at least one existing owner, will not garbage collect");
        }
        let classes = OwnerClasses {
            solid: c.solid.len(),
            dangling: c.dangling.len(),
            waiting_for_dependents_deletion: c.waiting_for_dependents_deletion.len(),
        };
        let has_gc_finalizers = latest.has_finalizer(FINALIZER_ORPHAN)
            || latest.has_finalizer(FINALIZER_DELETE_DEPENDENTS);
        // The dependents as they are now, after the owners' reads, as upstream's verdict reads
        // `dependentsLength()`: one observed meanwhile makes a deletion foreground.
        let has_dependents = self.graph.dependents_len(identity.uid) != 0;
        let waiting_with_dependents = match classes.verdict(
            has_dependents,
            has_gc_finalizers,
            warming_up,
        ) {
            Verdict::Keep => return Ok(DeleteItemResult::Kept),
            Verdict::DeferUntilSynced => return Err(ItemError::DeferredUntilSynced),
            Verdict::RemoveReferences => {
                tracing::debug!(item = %identity, "remove dangling references and waiting references for item");
                let uids: Vec<String> = c
                    .dangling
                    .iter()
                    .chain(&c.waiting_for_dependents_deletion)
                    .map(|o| o.uid.to_string())
                    .collect();
                let view = View { meta: &latest, from_graph };
                return match self.remove_owner_references(identity, &uids, Some(view)).await {
                    Ok(_) => Ok(DeleteItemResult::Patched),
                    Err(e) => Err(self.write_failed(
                        item,
                        view,
                        format_args!("cannot patch {identity}"),
                        e,
                    )),
                };
            }
            Verdict::Delete { foreground } => {
                // Divergence from upstream: an owner waits for its dependents, and the graph
                // shows this item none, so it would go in the background and any dependents a
                // watcher behind has not delivered would be collected after it, perhaps after
                // the waiting owner too; with them seen, it goes in the foreground and holds
                // that owner until they are gone. Wait for the watchers, as the owner's own
                // finalizer does (below): that owner waits for them anyway.
                if classes.waiting_for_dependents_deletion > 0
                    && !foreground
                    && self.hold_for_watchers(
                        item.key(),
                        identity,
                        HeldDecision::ForegroundDeletion,
                    )
                {
                    return Ok(DeleteItemResult::HeldForWatchers);
                }
                foreground
            }
        };
        let policy = if waiting_with_dependents {
            // Some owner waits for its dependents and this item has dependents of its own: if
            // one of those is itself waiting, the chain is a cycle; unblock our references so
            // the owner's foreground deletion can proceed.
            for dep in self.graph.dependents(identity.uid) {
                let deleting = self.graph.node(dep.uid).is_some_and(|d| d.deleting_dependents);
                if deleting {
                    tracing::debug!(item = %identity, dependent = ?dep.uid, "processing item: at least one owner of item has FinalizerDeletingDependents, and the item itself has dependents, one of which is also deletingDependents: unblocking the owner references");
                    // Built from the references the decision read, and pinned to the version
                    // they were read at. Upstream builds it from the graph's owners, unpinned:
                    // a strategic-merge element whose UID the object no longer has *adds* that
                    // reference, so a stale copy (or a change after the read) would give the
                    // object back an owner a user removed. A 409 requeues the item; its next
                    // decision reads it again.
                    let strategic = patch::at_resource_version(
                        patch::unblock_owner_refs_strategic(identity.uid, &owners),
                        &latest.resource_version,
                    );
                    let view = View { meta: &latest, from_graph };
                    if let Err(e) = self
                        .patch_with_fallback(identity, strategic, Some(view), |current| {
                            patch::unblock_owner_refs_json_merge(
                                &current.resource_version,
                                &current.owner_references,
                            )
                        })
                        .await
                    {
                        return Err(self.write_failed(
                            item,
                            view,
                            format_args!("cannot unblock {identity}"),
                            e,
                        ));
                    }
                    break;
                }
            }
            tracing::debug!(item = %identity, "at least one owner of item has FinalizerDeletingDependents, and the item itself has dependents, so it is going to be deleted in Foreground");
            PropagationPolicy::Foreground
        } else {
            policy_for_finalizers(&latest)
        };
        tracing::debug!(item = %identity, propagation_policy = policy.as_str(), "Deleting item");
        let view = View { meta: &latest, from_graph };
        // The policy the same decision would give on another version of the object (the
        // delete's conflict path checks it on the live one).
        let policy_for = |meta: &ObjectMeta| {
            if waiting_with_dependents {
                PropagationPolicy::Foreground
            } else {
                policy_for_finalizers(meta)
            }
        };
        match self.delete_object(identity, view, policy, policy_for).await {
            Ok(()) => {
                self.stats.record_deletion();
                Ok(DeleteItemResult::Deleted)
            }
            Err(ClusterError::NotFound) => {
                self.enqueue_virtual_delete_event(identity);
                Err(ItemError::EnqueuedVirtualDeleteEvent)
            }
            Err(e) => {
                Err(self.write_failed(item, view, format_args!("cannot delete {identity}"), e))
            }
        }
    }

    /// A write decided on `view` failed. A conflict (or a 404) on a write decided from the
    /// graph's copy means the copy is stale: the item's next decision reads it live (and a
    /// live 404 is the item's absence, a virtual delete, rather than the same write refused
    /// again until the watch delivers the delete).
    fn write_failed(
        &self,
        item: &NodeView,
        view: View<'_>,
        context: std::fmt::Arguments<'_>,
        error: ClusterError,
    ) -> ItemError {
        if view.from_graph && matches!(error, ClusterError::Conflict(_) | ClusterError::NotFound) {
            self.stats.stale_view_conflicts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.stale_copies.lock().put(item.key(), ());
        }
        ItemError::cluster(context, error)
    }

    /// The item as the graph observed it, standing in for upstream's live GET when
    /// [`CollectorOptions::read_items_from_graph`](super::CollectorOptions) allows (see there
    /// why that is safe): an observed node, not being deleted, without GC finalizers, whose
    /// resourceVersion is known.
    fn observed_state(&self, item: &NodeView) -> Option<ObjectMeta> {
        if !self.options.read_items_from_graph
            || item.is_virtual
            || item.being_deleted
            || item.has_gc_finalizers
        {
            return None;
        }
        if self.stale_copies.lock().pop(&item.key()).is_some() {
            // A write decided from this copy was refused because the object had changed: the
            // graph may still lag, so decide from a live read this time.
            return None;
        }
        if item.owners.iter().any(|o| o.ty == crate::ObjectType::unrepresentable()) {
            // The copy holds a reference ingestion could not intern (see
            // `identity::owner_coordinates`); a live read interns it again, and a type refused
            // only for the cap may be served by now.
            return None;
        }
        if self.orphaned.remembers_any(item.owners.iter().map(|o| o.uid)) {
            // The memory of orphaned owners may be asked, and it reads the object's
            // creationTimestamp, which the graph does not keep.
            return None;
        }
        // A write decided from the copy is safe only because the server refuses it once the
        // object has changed (its resourceVersion precondition). kube-apiserver enforces that
        // for the resources it serves itself; an aggregated API server promises no more than
        // its lists do (`consistent_lists`), and may apply the write to the changed object.
        let served_here = self.cluster.resource_for(item.identity.ty);
        if !served_here.is_ok_and(|resource| self.cluster.consistent_lists(&resource)) {
            return None;
        }
        let resource_version = item.resource_version?;
        self.stats.item_reads_saved.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(ObjectMeta {
            uid: item.identity.uid.to_string(),
            name: item.identity.name.clone(),
            namespace: item.identity.namespace.as_str().to_owned(),
            resource_version: resource_version.to_string(),
            owner_references: item.owners.iter().map(patch::owner_ref_to_api).collect(),
            finalizers: Vec::new(),
            deletion_timestamp: false,
            creation_time: None,
            deletion_time: None,
        })
    }

    /// Upstream's `processDeletingDependentsItem`: an owner deleting its dependents in the
    /// foreground waits for its blocking dependents; once none is left, its
    /// `foregroundDeletion` finalizer is removed.
    async fn process_deleting_dependents_item(
        &self,
        item: &NodeView,
    ) -> Result<DeleteItemResult, ItemError> {
        let blocking = self.graph.blocking_dependents(item.identity.uid);
        if blocking.is_empty() {
            // Divergence from upstream, which removes the finalizer on its graph's word: while
            // a watcher that had synced is behind, a blocking dependent it has not delivered is
            // not in the graph, and the owner would go before it. Wait for the watcher, within
            // the catch-up timeout, as orphaning does (see `LaggingWatchers`).
            if self.hold_for_watchers(item.key(), &item.identity, HeldDecision::ForegroundDeletion)
            {
                return Ok(DeleteItemResult::HeldForWatchers);
            }
            tracing::debug!(item = %item.identity, "remove DeleteDependents finalizer for item");
            // Removed here or already (by someone else, or the owner is gone): nothing more is
            // owed.
            self.remove_finalizer(&item.identity, FINALIZER_DELETE_DEPENDENTS).await?;
            return Ok(DeleteItemResult::ProcessedDeletingDependents);
        }
        for dep in blocking {
            if let Some(d) = self.graph.node(dep)
                && !d.deleting_dependents
            {
                tracing::debug!(item = %item.identity, dependent = %d.identity, "adding dependent to attemptToDelete, because its owner is deletingDependents");
                self.enqueue_delete(d.key(), REASON_OTHER, false);
            }
        }
        Ok(DeleteItemResult::ProcessedDeletingDependents)
    }
}

/// What attemptToDeleteItem does with a live item, not being deleted, once its owner
/// references are classified (GC-SPEC.md §3.4-3.5). Written once: the collector carries it out,
/// and `inspect::explain` reports it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Verdict {
    /// Every owner is solid: nothing to do.
    Keep,
    /// Some owner is solid: remove the references to the dangling and waiting ones.
    RemoveReferences,
    /// The write would read the dependents set (or rest on it), complete only once synced.
    DeferUntilSynced,
    /// Delete it: in the foreground when some owner waits for its dependents' deletion and it
    /// has dependents of its own, else with the policy its own finalizers name.
    Delete {
        /// Some owner waits for its dependents and the item has dependents.
        foreground: bool,
    },
}

/// How many of an item's owner references fall in each class of `classifyReferences`.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct OwnerClasses {
    pub(crate) solid: usize,
    pub(crate) dangling: usize,
    pub(crate) waiting_for_dependents_deletion: usize,
}

impl OwnerClasses {
    /// The verdict on an item with at least one owner reference, `has_dependents` in the graph,
    /// carrying an `orphan` or `foregroundDeletion` finalizer or not, during warm-up or not.
    ///
    /// During warm-up only a background deletion of an item whose every owner a live read
    /// found absent goes ahead (early collection): it reads nothing of the graph. Removing
    /// references, waiting owners, and orphan or foreground propagation wait for the sync.
    pub(crate) fn verdict(
        self,
        has_dependents: bool,
        has_gc_finalizers: bool,
        warming_up: bool,
    ) -> Verdict {
        let waiting = self.waiting_for_dependents_deletion > 0;
        if self.solid > 0 {
            if self.dangling == 0 && !waiting {
                Verdict::Keep
            } else if warming_up {
                Verdict::DeferUntilSynced
            } else {
                Verdict::RemoveReferences
            }
        } else if warming_up && (waiting || has_gc_finalizers) {
            Verdict::DeferUntilSynced
        } else {
            Verdict::Delete { foreground: waiting && has_dependents }
        }
    }
}

/// The propagation policy of a garbage item without waiting owners: its own pre-existing
/// deletion preference, from its GC finalizers, else Background (upstream's
/// `attemptToDeleteItem`, GC-SPEC.md §3.5).
fn policy_for_finalizers(meta: &ObjectMeta) -> PropagationPolicy {
    if meta.has_finalizer(FINALIZER_ORPHAN) {
        PropagationPolicy::Orphan
    } else if meta.has_finalizer(FINALIZER_DELETE_DEPENDENTS) {
        PropagationPolicy::Foreground
    } else {
        PropagationPolicy::Background
    }
}

/// The object's owner references, read live, as the engine's references.
fn live_owner_refs(meta: &ObjectMeta) -> Result<Vec<OwnerRef>, ItemError> {
    meta.owner_references.iter().map(live_owner_ref).collect()
}

/// A live owner reference in the graph's form, interned as ingestion interns it
/// ([`patch::try_owner_ref_from_api`]): untrusted text, so past the caps on types and non-UUID
/// UIDs (see [`crate::identity`]) the decision stops and the item is kept and retried.
///
/// A refused type is one no discovered resource has (the controller interns each of those
/// without a cap before anything is decided, and none is longer than the length limit), so
/// upstream could not map it either: its classifyReferences fails on the same reference and
/// requeues the item, as [`ItemError::RestMapping`] does here. A refused UID is a departure:
/// upstream would look that owner up, where kube-gc keeps the item (the graph holds that
/// reference as unrepresentable, [`crate::identity::owner_coordinates`]).
fn live_owner_ref(r: &crate::meta::OwnerReference) -> Result<OwnerRef, ItemError> {
    patch::try_owner_ref_from_api(r).map_err(|e| match e {
        IngestError::TypeCapacity(e) => {
            ItemError::RestMapping(format!("{}/{}", e.api_version, e.kind))
        }
        other => ItemError::Other(other.to_string()),
    })
}

#[cfg(test)]
mod tests;
