//! The collector's decisions: what the `attemptToDelete` and `attemptToOrphan` workers do.
//!
//! Upstream: `garbagecollector.go` (`GarbageCollector`, `attemptToDeleteWorker`,
//! `attemptToDeleteItem`, `processDeletingDependentsItem`, `attemptToOrphanWorker`,
//! `orphanDependents`) and `operations.go`; GC-SPEC.md §3-5.
//!
//! A [`Collector`] holds the graph (read only: ingestion is the sole writer), the two work
//! queues, the absent-owner cache, and a [`Cluster`]. Its workers never trust the graph for a
//! decision that deletes: before deleting an object they re-read it live and classify its live
//! owner references with live reads of each owner (modulo the absent-owner cache, which only
//! ever holds owners a live read found absent). What they learn that the graph does not know
//! yet (an object that is gone) goes back to the graph builder as a *virtual delete event*
//! through its [`GraphChanges`] inbox.
//!
//! # Freshness
//!
//! As upstream: the graph is at least as new as any queue item a worker receives, because the
//! [`GraphBuilder`](crate::GraphBuilder) queues an item only after applying the event that
//! called for it.

pub mod absence_proofs;
mod attempt_to_delete;
mod attempt_to_orphan;
mod classify;
pub mod lagging_watchers;
mod operations;
pub mod orphaned_owners;

use std::collections::HashMap;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use futures_util::FutureExt;

use crate::absent_owner_cache::AbsentOwnerCache;
use crate::builder::GraphChanges;
use crate::cluster::{Cluster, ClusterError};
use crate::graph::{Graph, NodeKey};
use crate::ingest::{Enqueue, Event, IngestOutput};
use crate::queue::WorkQueue;
use crate::sync::{Arc, Mutex};

pub use absence_proofs::{ProofRound, ProofWaits};
pub use attempt_to_delete::DeleteItemResult;
pub(crate) use attempt_to_delete::{OwnerClasses, Verdict};
pub use lagging_watchers::{Admission, HeldDecision, LaggingWatchers};
pub use orphaned_owners::{
    CREATED_AFTER_MARGIN_SECS, FinishingOrphaning, Judgement, OrphanedOwners, Orphaning,
};

/// What a worker does with an item after processing it (upstream's `forgetItem` /
/// `requeueItem`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Outcome {
    /// Done: reset the item's backoff.
    Forget,
    /// Try again later, with per-item exponential backoff.
    Requeue,
    /// Taken over by the absence prover, which queues the item again or proves it absent:
    /// done for now, its backoff kept, so that an owner the prover keeps handing back to a GET
    /// that keeps finding it unobserved backs off as upstream's requeued virtual node does.
    HandedOver,
}

/// Why processing an item did not complete.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum ItemError {
    /// A live read found the object absent and a virtual delete event was sent to the graph
    /// builder; nothing more to do with this item (forget).
    #[error("enqueued virtual delete event")]
    EnqueuedVirtualDeleteEvent,
    /// A cluster-scoped object names a namespaced owner: that can never resolve (forget).
    #[error("cluster-scoped objects cannot refer to namespaced owners")]
    NamespacedOwnerOfClusterScopedObject,
    /// The apiVersion/kind has no resource (requeue: a CRD may appear).
    #[error("unable to get REST mapping for {0}")]
    RestMapping(String),
    /// An API call failed (requeue).
    #[error("{context}: {source}")]
    Cluster {
        /// What was being done.
        context: String,
        /// The failure.
        #[source]
        source: ClusterError,
    },
    /// Any other failure (requeue), with upstream's message.
    #[error("{0}")]
    Other(String),
    /// The item's processing panicked (requeue).
    #[error("processing panicked: {0}")]
    Panicked(String),
    /// During warm-up with early collection, a decision that needs the full graph: the item is
    /// kept aside and queued again once every watcher has synced.
    #[error("deferred until the graph is synced")]
    DeferredUntilSynced,
}

impl ItemError {
    fn cluster(context: impl fmt::Display, source: ClusterError) -> ItemError {
        ItemError::Cluster { context: context.to_string(), source }
    }

    /// Whether the item should be dropped rather than retried.
    pub fn outcome(&self) -> Outcome {
        match self {
            ItemError::EnqueuedVirtualDeleteEvent
            | ItemError::NamespacedOwnerOfClusterScopedObject => Outcome::Forget,
            _ => Outcome::Requeue,
        }
    }
}

/// Behaviour beyond upstream's, each off by default (upstream's behaviour, which the
/// conformance tests pin) and turned on by the controller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CollectorOptions {
    /// Skip an item whose only reason to be queued was to verify a virtual node, when the
    /// informer has observed that node since, in place (same coordinates).
    ///
    /// Why nothing is lost: processing such an item would GET the now-observed object and
    /// classify its owners. But the object's own add event already ran addDependentToOwners on
    /// those owners: an owner missing from the graph became a virtual node queued for its own
    /// verification (whose absence then queues this object), and an owner that is deleted
    /// later queues this object through its delete event. Every other reason to process the
    /// object (its own deletion state, an owner's delete event, an ownerReference change, an
    /// invalid-reference check) queues it with another reason, which disables the skip.
    pub skip_observed_verification: bool,
    /// Collect during warm-up: before every watcher has synced, carry out only deletions that
    /// live reads prove safe without the graph (every live owner reference absent, background
    /// propagation); defer everything else until [`Collector::finish_warm_up`].
    pub early_collection: bool,
    /// Process likely garbage first: virtual-node verifications, dependents of owners just
    /// deleted or verified absent, and objects being deleted in the foreground go to the
    /// attemptToDelete queue's urgent lane ([`WorkQueue::add_urgent`], with its fairness
    /// bound), re-checks to the normal lane. Within the urgent lane the garbage found goes
    /// before the verifications still waiting ([`WorkQueue::add_urgent_first`]), newest first
    /// but with a turn for the oldest every few items, so that a steady flood of garbage
    /// starves none of it.
    pub garbage_first: bool,
    /// Decide on an observed item from the graph's copy of it (its ownerReferences,
    /// resourceVersion and GC finalizers, all from the same informer event) instead of a live
    /// GET, when it is not being deleted and carries no GC finalizer. Owners are still read
    /// live, as upstream reads them.
    ///
    /// Why this is as safe as the GET (DESIGN.md, "Stale views"): every write such a decision
    /// leads to is pinned to the copy's resourceVersion, so the server carries it out only if
    /// the object is still exactly the version the decision read. The DELETE carries it as a
    /// precondition; an ownerReference patch (dangling or waiting references, unblocking)
    /// carries it in its body, and its JSON merge fallback is built from the copy itself. Any
    /// change since (an adoption, a new owner, a user's own delete with `orphan`) fails the write
    /// with 409, and the item is decided again from a live read: the conflict path of
    /// `delete_object` decides afresh on the object it reads (never on the copy's policy), and
    /// the item's next attempt GETs it. A decision to keep the object writes nothing; a later
    /// change reaches the graph as an event and queues it again. Objects whose resourceVersion is
    /// not a number take the GET, as upstream.
    pub read_items_from_graph: bool,
    /// Verify virtual owners with one paged consistent LIST of their resource rather than a
    /// GET each: every owner the list does not hold is proven absent, as a GET's 404 proves it
    /// (see [`absence_proofs`] for the argument and for what still takes the GET). Owners wait
    /// for [`Collector::prove_absences`], which the caller runs.
    pub bulk_absence_proof: bool,
}

/// Counters of what the collector did, beyond the work queues' own.
#[derive(Debug, Default)]
pub struct CollectorStats {
    /// Items skipped by [`CollectorOptions::skip_observed_verification`].
    pub verifications_skipped: AtomicU64,
    /// References to owners this collector orphaned, removed from dependents seen too late
    /// to be orphaned with the others ([`OrphanedOwners`]).
    pub late_orphans: AtomicU64,
    /// Objects seen too late to be orphaned whose owners were all orphaned by this collector,
    /// but created after one of those owners was deleted: decided as upstream decides them
    /// ([`Judgement::CreatedAfterDeletion`]).
    pub created_after_orphaning: AtomicU64,
    /// Items deferred until synced ([`CollectorOptions::early_collection`]).
    pub deferred_until_synced: AtomicU64,
    /// Orphanings held while a watcher was behind ([`LaggingWatchers`]).
    pub orphans_held_for_watchers: AtomicU64,
    /// Orphanings that went ahead although a watcher had been behind for longer than the
    /// catch-up timeout.
    pub orphans_past_catch_up_timeout: AtomicU64,
    /// Steps of a foreground deletion held while a watcher was behind
    /// ([`HeldDecision::ForegroundDeletion`]).
    pub foreground_deletions_held_for_watchers: AtomicU64,
    /// Steps of a foreground deletion that went ahead although a watcher had been behind for
    /// longer than the catch-up timeout.
    pub foreground_deletions_past_catch_up_timeout: AtomicU64,
    /// Item GETs saved by [`CollectorOptions::read_items_from_graph`].
    pub item_reads_saved: AtomicU64,
    /// Writes decided from the graph's copy of an object that the API server refused because
    /// the object had changed (409) or gone (404) since: each was decided again from a live
    /// read.
    pub stale_view_conflicts: AtomicU64,
    /// GETs made to show an owner absent or present (of a virtual node, or of an owner in
    /// classification); the other GETs read items.
    pub proof_gets: AtomicU64,
    /// LIST pages read to prove owners absent.
    pub proof_pages: AtomicU64,
    /// Proof lists that failed (their owners went to the GET).
    pub proof_lists_failed: AtomicU64,
    /// Owners a proof list showed absent.
    pub proven_absent: AtomicU64,
    /// Objects deleted (or whose deletion started).
    pub deleted: AtomicU64,
    /// When the first and the latest deletion happened.
    pub deletion_times: std::sync::Mutex<Option<(Instant, Instant)>>,
}

impl CollectorStats {
    fn record_deletion(&self) {
        self.deleted.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut t = self.deletion_times.lock().unwrap_or_else(|e| e.into_inner());
        *t = Some(t.map_or((now, now), |(first, _)| (first, now)));
    }
}

/// The version of an object a decision was taken on: what every write that decision leads to
/// must be pinned to (see the safety model in DESIGN.md).
#[derive(Clone, Copy, Debug)]
pub(crate) struct View<'a> {
    /// The object as the decision read it.
    pub(crate) meta: &'a crate::meta::ObjectMeta,
    /// Whether `meta` is the graph's copy of the object ([`CollectorOptions::read_items_from_graph`]),
    /// which may lag the API server, rather than a live GET.
    pub(crate) from_graph: bool,
}

impl View<'_> {
    /// Whether a decision taken on this view still stands on `live`, a newer version of the
    /// same object (its UID checked by the caller): not being deleted, and with exactly the
    /// view's owner references, all a decision reads of the object beside what a caller
    /// checks more (a DELETE, the policy its finalizers call for).
    pub(crate) fn stands_on(&self, live: &crate::meta::ObjectMeta) -> bool {
        live.resource_version != self.meta.resource_version
            && live.owner_references == self.meta.owner_references
            && !live.deletion_timestamp
    }
}

/// Why an item was queued: a pure virtual-node verification, or anything else.
const REASON_VERIFY: u8 = 1;
const REASON_OTHER: u8 = 2;

/// The garbage collector's workers' side (see the module docs).
pub struct Collector<C> {
    graph: Arc<Graph>,
    cluster: Arc<C>,
    absent_owners: Arc<AbsentOwnerCache>,
    attempt_to_delete: Arc<WorkQueue<NodeKey>>,
    attempt_to_orphan: Arc<WorkQueue<NodeKey>>,
    graph_changes: Arc<GraphChanges>,
    options: CollectorOptions,
    /// Reasons each queued item was queued for, OR-ed, taken when processing starts (only
    /// kept with `skip_observed_verification`).
    reasons: Mutex<HashMap<NodeKey, u8>>,
    warming_up: AtomicBool,
    deferred: Mutex<Vec<NodeKey>>,
    deferred_orphans: Mutex<Vec<NodeKey>>,
    /// Items whose graph copy a write found stale (409, or 404): their next decision reads
    /// them live.
    /// Bounded: an item pushed out decides from the copy again, and a write pinned to a stale
    /// copy is refused again (one 409 more, never a wrong write).
    stale_copies: Mutex<lru::LruCache<NodeKey, ()>>,
    /// Owners this collector orphaned, whose late-seen dependents keep living.
    orphaned: Arc<OrphanedOwners>,
    /// Watchers behind the API server, and the decisions waiting for them.
    lagging: LaggingWatchers,
    /// Virtual owners waiting for a proof list.
    proofs: Mutex<absence_proofs::Proofs>,
    /// The last error of each item being retried (bounded), for `inspect::explain`.
    last_errors: Mutex<lru::LruCache<crate::Uid, String>>,
    stats: CollectorStats,
}

/// Most items whose last error is remembered.
const LAST_ERRORS: usize = 4096;
/// Most items remembered to have a stale graph copy.
const STALE_COPIES: usize = 4096;

impl<C> fmt::Debug for Collector<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Collector")
            .field("graph_nodes", &self.graph.len())
            .field("attempt_to_delete", &self.attempt_to_delete.len())
            .field("attempt_to_orphan", &self.attempt_to_orphan.len())
            .finish_non_exhaustive()
    }
}

impl<C: Cluster> Collector<C> {
    /// A collector over `graph`, reaching the API through `cluster`.
    pub fn new(
        graph: Arc<Graph>,
        cluster: Arc<C>,
        absent_owners: Arc<AbsentOwnerCache>,
        attempt_to_delete: Arc<WorkQueue<NodeKey>>,
        attempt_to_orphan: Arc<WorkQueue<NodeKey>>,
        graph_changes: Arc<GraphChanges>,
    ) -> Collector<C> {
        Collector {
            graph,
            cluster,
            absent_owners,
            attempt_to_delete,
            attempt_to_orphan,
            graph_changes,
            options: CollectorOptions::default(),
            reasons: Mutex::default(),
            warming_up: AtomicBool::new(false),
            deferred: Mutex::default(),
            deferred_orphans: Mutex::default(),
            stale_copies: Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(STALE_COPIES).expect("non-zero"),
            )),
            orphaned: Arc::new(OrphanedOwners::new(orphaned_owners::DEFAULT_CAPACITY)),
            lagging: LaggingWatchers::new(lagging_watchers::DEFAULT_CATCH_UP_TIMEOUT),
            proofs: Mutex::new(absence_proofs::Proofs::new()),
            last_errors: Mutex::new(lru::LruCache::new(
                std::num::NonZeroUsize::new(LAST_ERRORS).expect("non-zero"),
            )),
            stats: CollectorStats::default(),
        }
    }

    /// Turns on behaviour beyond upstream's (see [`CollectorOptions`]). With
    /// `early_collection`, the collector starts in warm-up until
    /// [`finish_warm_up`](Self::finish_warm_up).
    #[must_use]
    pub fn with_options(mut self, options: CollectorOptions) -> Self {
        self.options = options;
        self.warming_up = AtomicBool::new(options.early_collection);
        self
    }

    /// Sets how many orphaned owners are remembered (see [`OrphanedOwners`]; default
    /// [`orphaned_owners::DEFAULT_CAPACITY`], 0 for upstream's behaviour).
    #[must_use]
    pub fn with_orphaned_owners_capacity(mut self, capacity: usize) -> Self {
        self.orphaned = Arc::new(OrphanedOwners::new(capacity));
        self
    }

    /// Sets how long orphaning, or a step of a foreground deletion
    /// ([`HeldDecision::ForegroundDeletion`]), waits for a watcher that fell behind (see
    /// [`LaggingWatchers`]; default [`lagging_watchers::DEFAULT_CATCH_UP_TIMEOUT`], zero for
    /// upstream's behaviour: no wait).
    #[must_use]
    pub fn with_catch_up_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.lagging = LaggingWatchers::new(timeout);
        self
    }

    /// Why the last attempt on the object `uid` failed, while it is being retried (the most
    /// recent `LAST_ERRORS` items).
    pub fn last_error(&self, uid: crate::Uid) -> Option<String> {
        self.last_errors.lock().peek(&uid).cloned()
    }

    /// The owners this collector orphaned (shared: a test's cluster can look at it while a
    /// call is being served).
    pub fn orphaned_owners(&self) -> &Arc<OrphanedOwners> {
        &self.orphaned
    }

    /// The options in force.
    pub fn options(&self) -> CollectorOptions {
        self.options
    }

    /// What the collector did so far.
    pub fn stats(&self) -> &CollectorStats {
        &self.stats
    }

    /// Whether the collector is still in warm-up (early collection only).
    pub fn is_warming_up(&self) -> bool {
        self.warming_up.load(Ordering::Acquire)
    }

    /// Enters warm-up: some watcher has not delivered its initial list, so the graph's
    /// dependents sets may be incomplete. Until [`finish_warm_up`](Self::finish_warm_up), only
    /// deletions that live reads prove are carried out; orphaning, removing a
    /// `foregroundDeletion` finalizer and any other decision that reads the dependents set is
    /// deferred.
    pub fn begin_warm_up(&self) {
        self.warming_up.store(true, Ordering::Release);
    }

    /// Ends warm-up: every watcher has synced and the graph is complete, so every decision is
    /// allowed again; items deferred meanwhile are queued again.
    pub fn finish_warm_up(&self) {
        self.warming_up.store(false, Ordering::Release);
        let deferred = std::mem::take(&mut *self.deferred.lock());
        for key in deferred {
            self.enqueue_delete(key, REASON_OTHER, false);
        }
        let deferred = std::mem::take(&mut *self.deferred_orphans.lock());
        for key in deferred {
            self.attempt_to_orphan.add(key);
        }
    }

    /// Queues `key` to attemptToDelete, remembering why.
    fn enqueue_delete(&self, key: NodeKey, reason: u8, rate_limited: bool) {
        if self.options.skip_observed_verification {
            *self.reasons.lock().entry(key).or_insert(0) |= reason;
        }
        if rate_limited {
            self.attempt_to_delete.add_rate_limited(key);
        } else {
            self.attempt_to_delete.add(key);
        }
    }

    /// Queues `key` to attemptToDelete after `delay` (an item held for watchers: see
    /// [`LaggingWatchers`]).
    fn enqueue_delete_after(&self, key: NodeKey, delay: std::time::Duration) {
        if self.options.skip_observed_verification {
            *self.reasons.lock().entry(key).or_insert(0) |= REASON_OTHER;
        }
        self.attempt_to_delete.add_after(key, delay);
    }

    /// Queues likely garbage: urgently with `garbage_first`.
    fn enqueue_likely_garbage(&self, key: NodeKey, reason: u8) {
        if !self.options.garbage_first {
            return self.enqueue_delete(key, reason, false);
        }
        if self.options.skip_observed_verification {
            *self.reasons.lock().entry(key).or_insert(0) |= reason;
        }
        if reason == REASON_VERIFY && !self.options.bulk_absence_proof {
            self.attempt_to_delete.add_urgent(key);
        } else {
            // Garbage found (a dependent of an owner just deleted or found absent, a
            // foreground deletion): before the next verification, so that collection starts
            // with the first absent owner rather than after every verification (at 20 qps,
            // 1,000 virtual owners are 50 s of GETs). With bulk proofs a verification costs
            // no call when it runs (the prover takes it), so it goes first too: every owner
            // waiting for a list is known at once, and one list proves them together instead
            // of several lists the few that trickle out from behind the deletions.
            self.attempt_to_delete.add_urgent_first(key);
        }
    }

    /// Takes the reasons `key` was queued for since its processing last started.
    fn take_reasons(&self, key: NodeKey) -> u8 {
        if !self.options.skip_observed_verification {
            return REASON_OTHER;
        }
        self.reasons.lock().remove(&key).unwrap_or(REASON_OTHER)
    }

    /// Puts back reasons of an item that will be processed again.
    fn restore_reasons(&self, key: NodeKey, reasons: u8) {
        if self.options.skip_observed_verification {
            *self.reasons.lock().entry(key).or_insert(0) |= reasons;
        }
    }

    /// The graph the decisions read (the graph builder is its only writer).
    pub fn graph(&self) -> &Arc<Graph> {
        &self.graph
    }

    /// The API the decisions' reads and writes go to.
    pub fn cluster(&self) -> &Arc<C> {
        &self.cluster
    }

    /// Owners a live read found absent (upstream's `absentOwnerCache`).
    pub fn absent_owners(&self) -> &Arc<AbsentOwnerCache> {
        &self.absent_owners
    }

    /// The attemptToDelete queue.
    pub fn attempt_to_delete_queue(&self) -> &Arc<WorkQueue<NodeKey>> {
        &self.attempt_to_delete
    }

    /// The attemptToOrphan queue.
    pub fn attempt_to_orphan_queue(&self) -> &Arc<WorkQueue<NodeKey>> {
        &self.attempt_to_orphan
    }

    /// Carries out what a batch's ingestion decided: queue its items, cache its absent
    /// owners, record its warnings. The [`GraphBuilder`](crate::GraphBuilder) calls it after
    /// each batch; tests that drive an [`Ingester`](crate::Ingester) by hand call it too.
    pub fn apply_ingest_output(&self, output: IngestOutput) {
        for owner in output.absent_owners {
            self.absent_owners.add(owner);
        }
        for e in output.enqueued {
            match e {
                Enqueue::AttemptToDelete(k) => self.enqueue_delete(k, REASON_OTHER, false),
                Enqueue::VerifyVirtual(k) => self.enqueue_likely_garbage(k, REASON_VERIFY),
                Enqueue::LikelyGarbage(k) => self.enqueue_likely_garbage(k, REASON_OTHER),
                // A re-identified virtual node: verifying its new identity is its only purpose.
                Enqueue::AttemptToDeleteRateLimited(k) => {
                    self.enqueue_delete(k, REASON_VERIFY, true)
                }
                Enqueue::AttemptToOrphan(k) => self.attempt_to_orphan.add(k),
            }
        }
        for w in output.warnings {
            self.cluster.record_event(w);
        }
    }

    /// One iteration of an attemptToDelete worker (upstream's
    /// `processAttemptToDeleteWorker`): takes an item, processes it, forgets or requeues it,
    /// marks it done. Returns `false` once the queue is shut down and empty.
    ///
    /// A panic while processing is caught, logged and treated as a failure (requeue), as
    /// Kubernetes' `HandleCrash` habit keeps one bad item from stopping the worker.
    pub async fn process_attempt_to_delete_worker(&self) -> bool {
        let Some(key) = self.attempt_to_delete.get_async().await else { return false };
        let outcome =
            self.catching_panics("attemptToDelete", key, self.attempt_to_delete_worker(key));
        self.finish(&self.attempt_to_delete, key, outcome.await);
        true
    }

    /// One iteration of an attemptToOrphan worker (upstream's `processAttemptToOrphanWorker`).
    pub async fn process_attempt_to_orphan_worker(&self) -> bool {
        let Some(key) = self.attempt_to_orphan.get_async().await else { return false };
        let outcome =
            self.catching_panics("attemptToOrphan", key, self.attempt_to_orphan_worker(key));
        self.finish(&self.attempt_to_orphan, key, outcome.await);
        true
    }

    /// Runs one item's processing; a panic is logged and becomes a requeue.
    async fn catching_panics(
        &self,
        queue: &str,
        key: NodeKey,
        work: impl std::future::Future<Output = Outcome>,
    ) -> Outcome {
        AssertUnwindSafe(work).catch_unwind().await.unwrap_or_else(|panic| {
            tracing::error!(item = ?key, panic = panic_message(&panic), "{queue} panicked");
            Outcome::Requeue
        })
    }

    fn finish(&self, queue: &WorkQueue<NodeKey>, key: NodeKey, outcome: Outcome) {
        match outcome {
            Outcome::Forget => queue.forget(&key),
            Outcome::Requeue => queue.add_rate_limited(key),
            Outcome::HandedOver => {}
        }
        queue.done(&key);
    }

    fn enqueue_virtual_delete_event(&self, identity: &crate::ObjectReference) {
        self.graph_changes.push(Event::virtual_delete(identity));
    }
}

/// The message of a caught panic (its payload, when a string), for a log line.
pub fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".to_owned())
}
