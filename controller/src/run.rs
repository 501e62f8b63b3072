//! Wiring: discovery → watchers → batcher → graph builder → queues → workers → cluster.
//!
//! Upstream: `garbagecollector.go` (`Run`, `Sync`) and `graph_builder.go` (`syncMonitors`,
//! `startMonitors`, `IsSynced`); GC-SPEC.md §6.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use kube::Client;
use kube_gc_engine::absent_owner_cache::AbsentOwnerCache;
use kube_gc_engine::cluster::Resource;
use kube_gc_engine::collector::{Collector, CollectorOptions, ProofWaits, panic_message};
use kube_gc_engine::graph::NodeKey;
use kube_gc_engine::queue::WorkQueue;
use kube_gc_engine::{Graph, GraphBuilder, GraphChanges, Ingester, WatchSource};
use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;

use crate::batcher::{Batcher, WatcherMsg};
use crate::discovery::{self, Discovered};
use crate::flags::Flags;
use crate::http::DebugState;
use crate::kube_cluster::KubeCluster;
use crate::metrics::Metrics;
use crate::watchers::{WatcherOptions, run_watcher, supervise};

/// Which watchers have delivered their initial list into the graph, and whether discovery is
/// behind the CustomResourceDefinitions seen.
#[derive(Debug, Default)]
pub struct SyncState {
    synced: std::sync::Mutex<HashSet<String>>,
    /// The run of each resource's watcher now wanted: a list of an older run does not count.
    current: std::sync::Mutex<HashMap<String, u64>>,
    changed: Notify,
    /// CustomResourceDefinition changes seen, and the wake-up of the resync loop for them.
    crd_changes: std::sync::atomic::AtomicU64,
    discovery_wanted: Notify,
}

/// The pseudo-resource that is "behind" (see `Collector::note_watch_behind`) from a change to a
/// CustomResourceDefinition until a discovery that began after it: a custom resource created
/// meanwhile has no watcher yet, so its objects are not in the graph, and an orphaning then
/// would leave them to be collected, a foreground deletion would not wait for them (upstream's
/// monitors lag the same way, for up to its resync period).
pub const DISCOVERY_BEHIND: &str = "discovery";

/// The least time between two discoveries that CustomResourceDefinition changes call for (the
/// first is at once): a cluster whose CRDs change all the time (an operator rewriting their CA
/// bundles) costs a discovery every 5 s at most, and an orphaning (or the end of a foreground
/// deletion) waits about that long after a change.
const CRD_DISCOVERY_INTERVAL: Duration = Duration::from_secs(5);

impl SyncState {
    /// A CustomResourceDefinition was added, changed or deleted (or their list ended): the
    /// resources served may have changed, and discovery should look again soon.
    pub(crate) fn crd_changed(&self) {
        self.crd_changes.fetch_add(1, Ordering::AcqRel);
        self.discovery_wanted.notify_one();
    }

    fn crd_changes(&self) -> u64 {
        self.crd_changes.load(Ordering::Acquire)
    }

    fn start(&self, source: &WatchSource) {
        let mut current = self.current.lock().expect("sync lock");
        current.insert(source.resource.clone(), source.generation);
    }

    pub(crate) fn mark(&self, source: &WatchSource) {
        let current = self.current.lock().expect("sync lock");
        if current.get(&source.resource) == Some(&source.generation) {
            self.synced.lock().expect("sync lock").insert(source.resource.clone());
            self.changed.notify_waiters();
        }
    }

    /// Forgets `key`'s watcher; returns the run it had.
    fn forget(&self, key: &str) -> u64 {
        self.synced.lock().expect("sync lock").remove(key);
        self.current.lock().expect("sync lock").remove(key).unwrap_or(0)
    }

    /// Whether every resource in `keys` has synced (upstream's `IsSynced`: false with none).
    pub fn all_synced<'a>(&self, keys: impl IntoIterator<Item = &'a String>) -> bool {
        let synced = self.synced.lock().expect("sync lock");
        let mut any = false;
        for k in keys {
            any = true;
            if !synced.contains(k) {
                return false;
            }
        }
        any
    }

    /// The resources in `keys` that have not synced.
    pub fn unsynced<'a>(&self, keys: impl IntoIterator<Item = &'a String>) -> Vec<String> {
        let synced = self.synced.lock().expect("sync lock");
        keys.into_iter().filter(|k| !synced.contains(*k)).cloned().collect()
    }
}

/// The running controller's parts.
pub struct Controller {
    flags: Flags,
    client: Client,
    /// The kube-rs `Cluster` the workers act on (its call counters, its REST mapper).
    pub cluster: KubeCluster,
    /// The dependency graph: read it freely, the graph builder is its only writer.
    pub graph: Arc<Graph>,
    /// The decisions, their queues and their statistics.
    pub collector: Arc<Collector<KubeCluster>>,
    /// What `/metrics` exports of the controller itself (ingestion, watches, sync).
    pub metrics: Arc<Metrics>,
    /// Set once synced (or after the initial sync timeout).
    pub ready: Arc<AtomicBool>,
    sync: Arc<SyncState>,
    tx: mpsc::Sender<WatcherMsg>,
    /// Each watcher: its resource, its task, and when it started (its own sync timeout counts
    /// from then).
    watchers: HashMap<String, (Resource, JoinHandle<()>, tokio::time::Instant)>,
    /// The number of the next watcher run (see `WatchSource::generation`).
    next_generation: u64,
    ignored: BTreeSet<String>,
    /// What the debug server reads (tests call `crate::http::router` on it directly).
    pub debug: DebugState,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller").field("watchers", &self.watchers.len()).finish_non_exhaustive()
    }
}

impl Controller {
    /// Builds the controller and starts its ingest loop and debug server.
    pub async fn start(flags: Flags, client: Client) -> crate::Result<Controller> {
        kube_gc_engine::identity::set_max_interned_uids(flags.max_non_uuid_uids);
        kube_gc_engine::identity::set_max_interned_type_strings(flags.max_owner_types);
        let graph = Arc::new(Graph::new(flags.shards)?);
        let shadow = flags.dry_run.then(|| Arc::new(crate::shadow::Shadow::default()));
        let mut cluster =
            KubeCluster::new(client.clone(), flags.collector_qps(), flags.kube_api_burst);
        if let Some(shadow) = &shadow {
            tracing::warn!("--dry-run: shadow mode, nothing will be written to the cluster");
            cluster = cluster.with_shadow(shadow.clone());
        }
        let metrics = Arc::new(Metrics::default());
        if flags.dry_run {
            metrics.set_dry_run();
        }
        // Eight chunks of up to 500 notifications (a list page; watchers cut their batches
        // there, whatever `--batch-size`) keep the
        // graph builder fed while it applies a batch; a deeper queue only held more decoded
        // metadata in memory ahead of the graph (64 chunks: 270 → 246 B of peak RSS per object
        // at 1M objects, time and CPU unchanged; docs/performance-log.md, "A shorter queue ahead
        // of the graph").
        let (tx, rx) = mpsc::channel::<WatcherMsg>(8);
        let graph_changes = Arc::new(GraphChanges::new());
        let attempt_to_delete = Arc::new(WorkQueue::new("garbage_collector_attempt_to_delete"));
        let attempt_to_orphan = Arc::new(WorkQueue::new("garbage_collector_attempt_to_orphan"));
        let collector = Arc::new(
            Collector::new(
                graph.clone(),
                Arc::new(cluster.clone()),
                Arc::new(AbsentOwnerCache::new(flags.absent_owner_cache_size)),
                attempt_to_delete.clone(),
                attempt_to_orphan.clone(),
                graph_changes.clone(),
            )
            .with_options(CollectorOptions {
                skip_observed_verification: flags.skip_observed_verification,
                early_collection: flags.early_collection,
                garbage_first: flags.garbage_first,
                read_items_from_graph: flags.read_items_from_graph,
                bulk_absence_proof: flags.bulk_absence_proof,
            })
            .with_orphaned_owners_capacity(flags.orphaned_owners_memory)
            .with_catch_up_timeout(flags.watcher_catch_up_timeout),
        );
        let sync = Arc::new(SyncState::default());
        let ready = Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = flags.ingest_threads.unwrap_or(cores);
        if threads > cores {
            // Every batch waits for its slowest thread, and threads beyond the cores wait for
            // a core: 1024 threads on 2 cores took 18 s to sync 10,000 objects, 64 took 0.05 s.
            tracing::warn!(
                threads,
                cores,
                "--ingest-threads is above the cores this process may use: ingestion will be slower, not faster"
            );
        }
        let mut builder = GraphBuilder::new(
            Ingester::new(graph.clone(), threads),
            collector.clone(),
            graph_changes.clone(),
        );
        if shadow.is_some() {
            // Deletions a relist finds are judged too (see `shadow.rs`).
            builder.report_relist_deletions();
        }
        let batcher = Batcher::new(rx, graph_changes, flags.batch_size as usize);
        let mut tasks = vec![tokio::spawn(crate::batcher::ingest_loop(
            batcher,
            builder,
            sync.clone(),
            metrics.clone(),
            shadow.clone(),
        ))];
        if flags.bulk_absence_proof {
            tasks.push(tokio::spawn(proof_loop(collector.clone())));
        }
        for queue in [&attempt_to_delete, &attempt_to_orphan] {
            queue.set_durations(metrics.queue_durations(queue.name()));
        }
        let sources = crate::metrics::Sources {
            graph: graph.clone(),
            queues: [attempt_to_delete, attempt_to_orphan],
            calls: cluster.calls.clone(),
            collector: collector.clone(),
            events: cluster.event_counts().clone(),
        };
        let mut registry = crate::metrics::registry(metrics.clone(), sources);
        if let Some(shadow) = &shadow {
            shadow.register(&mut registry, graph.clone());
        }
        let debug = DebugState {
            shadow,
            inspection: cluster.for_inspection(),
            collector: collector.clone(),
            graph: graph.clone(),
            registry: Arc::new(registry),
            ready: ready.clone(),
        };
        let addr = flags.debug_addr;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| crate::Error::Bind { addr, source })?;
        // The port bound, not the one asked for (`:0` picks one).
        let bound = listener.local_addr().unwrap_or(addr);
        let router = crate::http::router(debug.clone());
        tasks.push(tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                tracing::error!(error = %e, "debug server failed");
            }
        }));
        tracing::info!(addr = %bound, "serving /healthz, /readyz, /metrics and the debug graph");
        if !bound.ip().is_loopback() {
            // Allowed by --debug-addr-any only: this listener has no authentication.
            tracing::warn!(addr = %bound, "the plain debug listener is not on loopback: anyone who reaches it reads the graph (object names and UIDs) and the metrics, unauthenticated");
        }
        match crate::serving::start(&flags, client.clone(), crate::http::router(debug.clone()))
            .await
        {
            Ok(secure) => tasks.extend(secure),
            Err(e) => {
                // Not started: stop what was (a caller that carries on, such as a test, would
                // otherwise keep an ingest loop and a debug server running for nothing).
                for task in &tasks {
                    task.abort();
                }
                return Err(e);
            }
        }
        let ignored = flags.gc_ignored_resources.iter().map(|s| s.trim().to_owned()).collect();
        Ok(Controller {
            flags,
            client,
            cluster,
            graph,
            collector,
            metrics,
            ready,
            sync,
            tx,
            watchers: HashMap::new(),
            next_generation: 1,
            ignored,
            debug,
            tasks,
        })
    }

    /// Runs discovery once and starts / stops watchers to match (upstream's `Sync` body).
    /// Returns whether discovery answered; a watcher added puts the collector back in warm-up
    /// until it has synced.
    pub async fn resync(&mut self) -> bool {
        let found = match discovery::discover(&self.client, &self.ignored).await {
            Ok(found) => found,
            Err(e) => {
                let error = crate::error::one_line(&e);
                tracing::warn!(%error, "failed to discover preferred resources");
                self.metrics.resources_sync_errors.inc();
                return false;
            }
        };
        if !found.failed.is_empty() {
            tracing::warn!(groups = ?found.failed, "failed to discover some groups");
        }

        if found.deletable.is_empty() {
            tracing::debug!("no resources reported by discovery, skipping garbage collector sync");
            self.metrics.resources_sync_errors.inc();
            return false;
        }
        // Aggregated first: a resource the new mapping brings is then judged by the new set.
        self.cluster.set_aggregated(found.aggregated.clone());
        self.cluster.set_mapper(found.mapper.clone(), &found.failed_group_versions());
        if self.sync_watchers(&found) {
            self.collector.begin_warm_up();
        }
        true
    }

    /// Returns whether a watcher was started.
    fn sync_watchers(&mut self, found: &Discovered) -> bool {
        let watched = self.watchers.iter().map(|(key, (resource, _, _))| (key, resource));
        let wanted = found.watchers_wanted(watched);
        let current: Vec<String> = self.watchers.keys().cloned().collect();
        let (mut added, mut removed) = (Vec::new(), Vec::new());
        for key in current {
            let keep = wanted.get(&key).is_some_and(|r| *r == self.watchers[&key].0);
            if !keep {
                let (resource, handle, _) = self.watchers.remove(&key).expect("present");
                handle.abort();
                // Behind the watcher's last batches: the graph builder drops its store (not a
                // later run's, should the resource come back meanwhile). Sent once the task has
                // ended: an abort takes effect at the task's next await, and a batch it was
                // sending meanwhile must not come after this.
                let stopped = WatchSource {
                    resource: key.clone(),
                    object_type: resource.object_type(),
                    generation: self.sync.forget(&key),
                };
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    let _ = handle.await;
                    tx.send(WatcherMsg::Stopped(stopped)).await
                });
                // Gone from discovery (not restarted at another version): its series goes too,
                // or every CRD ever removed would stay exported.
                if !wanted.contains_key(&key) {
                    self.metrics.forget_warmup_seconds(&key);
                }
                removed.push(key);
            }
        }
        for (key, resource) in wanted {
            if self.watchers.contains_key(&key) {
                continue;
            }
            let source = WatchSource {
                resource: key.clone(),
                object_type: resource.object_type(),
                generation: self.next_generation,
            };
            self.next_generation += 1;
            self.sync.start(&source);
            let options = WatcherOptions {
                batch_size: self.flags.batch_size as usize,
                list_from_watch_cache: self.flags.list_from_watch_cache,
                content_type: self.flags.kube_api_content_type,
            };
            let (client, tx, metrics) =
                (self.client.clone(), self.tx.clone(), self.metrics.clone());
            let watched = resource.clone();
            let handle = tokio::spawn(async move {
                let run = |options| {
                    let (client, resource, tx) = (client.clone(), watched.clone(), tx.clone());
                    run_watcher(client, resource, source.clone(), tx, metrics.clone(), options)
                };
                supervise(source.clone(), tx.clone(), &metrics, options, run).await
            });
            self.watchers.insert(key.clone(), (resource, handle, tokio::time::Instant::now()));
            added.push(key);
        }
        if !added.is_empty() || !removed.is_empty() {
            tracing::info!(?added, ?removed, "synced monitors");
        }
        !added.is_empty()
    }

    /// Whether every watcher has delivered its initial list.
    pub fn is_synced(&self) -> bool {
        self.sync.all_synced(self.watchers.keys())
    }

    /// Waits until every watcher has synced, at most `period`, and ends warm-up (every decision
    /// allowed again) as soon as either every watcher has synced, or every watcher still
    /// unsynced has had `--initial-sync-timeout` since it started. Returns whether every
    /// watcher has synced.
    ///
    /// Liveness (DESIGN.md): a resource that never syncs (a custom resource whose preferred
    /// version cannot be listed) delays the decisions that read the dependents set for that
    /// bounded time only, at start and for resources discovered later alike; then kube-gc
    /// proceeds as upstream >= v1.32 does after its sync timeout, and says which resources it
    /// proceeds without (log and `kube_gc_unsynced_resource`).
    pub async fn settle(&self, period: Duration) -> bool {
        let until = tokio::time::Instant::now() + period;
        loop {
            let notified = self.sync.changed.notified();
            if self.is_synced() {
                self.metrics.set_unsynced(&[]);
                self.collector.finish_warm_up();
                return true;
            }
            let unsynced = self.sync.unsynced(self.watchers.keys());
            // Every unsynced watcher's own deadline must have passed.
            let deadline = unsynced
                .iter()
                .filter_map(|k| self.watchers.get(k))
                .map(|(_, _, started)| *started + self.flags.initial_sync_timeout)
                .max()
                .unwrap_or(until);
            if tokio::time::Instant::now() >= deadline {
                if self.collector.is_warming_up() {
                    tracing::warn!(
                        ?unsynced,
                        timeout = ?self.flags.initial_sync_timeout,
                        "Garbage collector: not all resource monitors could be synced, proceeding anyways"
                    );
                    self.collector.finish_warm_up();
                }
                self.metrics.set_unsynced(&unsynced);
                return false;
            }
            if tokio::time::timeout_at(deadline.min(until), notified).await.is_err()
                && tokio::time::Instant::now() >= until
            {
                return self.is_synced();
            }
        }
    }

    /// Starts `--concurrent-gc-syncs` attemptToDelete workers.
    pub fn start_delete_workers(&mut self) {
        let workers =
            crate::workers::spawn_delete_workers(&self.collector, self.flags.concurrent_gc_syncs);
        self.tasks.extend(workers);
    }

    /// Starts `--concurrent-gc-syncs` attemptToOrphan workers (orphaning reads the dependents
    /// set, so never before sync).
    pub fn start_orphan_workers(&mut self) {
        let workers =
            crate::workers::spawn_orphan_workers(&self.collector, self.flags.concurrent_gc_syncs);
        self.tasks.extend(workers);
    }

    /// Upstream's `Run` + `Sync`: discover, watch, wait for sync (at most the initial sync
    /// timeout), collect, and re-discover every resync period, until `shutdown` resolves.
    pub async fn run(mut self, shutdown: impl std::future::Future<Output = ()>) {
        let started = Instant::now();
        self.metrics.start_collecting();
        let mut shutdown = std::pin::pin!(shutdown);
        // Nothing can be watched before discovery answers once: retry it (the API server may
        // not be up yet) rather than wait for the sync of an empty set of watchers.
        while !self.resync().await {
            tokio::select! {
                _ = &mut shutdown => return self.shut_down(),
                _ = tokio::time::sleep(Duration::from_secs(2)) => {}
            }
        }
        if self.flags.early_collection {
            tracing::info!("early collection: collecting proven garbage while warming up");
            self.start_delete_workers();
        }
        let synced = tokio::select! {
            _ = &mut shutdown => return self.shut_down(),
            synced = self.settle(self.flags.initial_sync_timeout) => synced,
        };
        if synced {
            tracing::info!(
                seconds = started.elapsed().as_secs_f64(),
                "Garbage collector: all resource monitors have synced"
            );
        }
        self.ready.store(true, Ordering::Release);
        tracing::info!("Proceeding to collect garbage");
        if !self.flags.early_collection {
            self.start_delete_workers();
        }
        self.start_orphan_workers();
        let mut tick = tokio::time::interval(self.flags.resync_period);
        tick.tick().await;
        let mut last_crd_sync: Option<tokio::time::Instant> = None;
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                _ = tick.tick() => {}
                // Not in upstream, which waits for its period: a CustomResourceDefinition
                // changed, so look again now, or at most every `CRD_DISCOVERY_INTERVAL` (see
                // `DISCOVERY_BEHIND`).
                _ = self.sync.discovery_wanted.notified() => {
                    if let Some(last) = last_crd_sync {
                        tokio::select! {
                            _ = &mut shutdown => break,
                            _ = tokio::time::sleep_until(last + CRD_DISCOVERY_INTERVAL) => {}
                        }
                    }
                    last_crd_sync = Some(tokio::time::Instant::now());
                }
            }
            // A stop asked for mid-sync (its settling may take a resync period) stops it.
            tokio::select! {
                _ = &mut shutdown => break,
                _ = self.sync_once() => {}
            }
        }
        self.shut_down();
    }

    /// One resync (upstream's `Sync` body) and its settling.
    async fn sync_once(&mut self) {
        let crd_changes = self.sync.crd_changes();
        // As `wait.Until`: a failing (even panicking) sync is logged and retried next period;
        // it never stops the loop.
        match AssertUnwindSafe(self.resync()).catch_unwind().await {
            Ok(true) if self.sync.crd_changes() == crd_changes => {
                // Every CustomResourceDefinition seen before this discovery has its watcher
                // now, in warm-up if new (which holds orphaning until it has synced). Not
                // waiting for groups that failed discovery: a cluster often has one down for
                // good (an aggregated API), and every orphaning would then wait the timeout.
                self.collector.note_watch_behind(DISCOVERY_BEHIND, false);
            }
            Ok(_) => {}
            Err(panic) => {
                tracing::error!(
                    panic = panic_message(&panic),
                    "garbage collector sync panicked; retrying next period"
                );
                self.metrics.resources_sync_errors.inc();
                return;
            }
        }
        if !self.settle(self.flags.resync_period).await {
            tracing::warn!("timed out waiting for dependency graph builder sync during GC sync");
            self.metrics.resources_sync_errors.inc();
        }
    }

    fn shut_down(mut self) {
        tracing::info!("Shutting down controller");
        self.collector.attempt_to_delete_queue().shut_down();
        self.collector.attempt_to_orphan_queue().shut_down();
        for (_, (_, h, _)) in self.watchers.drain() {
            h.abort();
        }
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }

    /// The attemptToDelete queue.
    pub fn attempt_to_delete(&self) -> &Arc<WorkQueue<NodeKey>> {
        self.collector.attempt_to_delete_queue()
    }
}

/// How often the proof loop looks for owners waiting for a list.
const PROOF_TICK: Duration = Duration::from_millis(50);

/// Runs the collector's absence proofs (`--bulk-absence-proof`): lists the resources whose
/// virtual owners the workers handed over, when a list is worth it.
///
/// Each round runs beside the ones before it, so that one long list (millions of Pods, minutes
/// of pages at the API budget) holds only its own resource's owners; a resource is never
/// listed twice at once (the collector's rounds skip a resource whose list is under way).
/// Aborting the loop aborts the rounds.
async fn proof_loop(collector: Arc<Collector<KubeCluster>>) {
    let mut rounds = tokio::task::JoinSet::new();
    loop {
        while rounds.try_join_next().is_some() {}
        if collector.pending_proofs() != 0 {
            let collector = Arc::clone(&collector);
            rounds.spawn(async move {
                // As the resync loop: a panicking round is logged and the loop goes on, so
                // that owners offered later are still proven (or sent to the GET).
                match AssertUnwindSafe(collector.prove_absences(ProofWaits::default()))
                    .catch_unwind()
                    .await
                {
                    Ok(round) if round.lists != 0 || round.handed_back != 0 => {
                        tracing::debug!(?round, "absence proofs");
                    }
                    Ok(_) => {}
                    Err(panic) => {
                        tracing::error!(
                            panic = panic_message(&panic),
                            "a round of absence proofs panicked"
                        )
                    }
                }
            });
        }
        tokio::time::sleep(PROOF_TICK).await;
    }
}
