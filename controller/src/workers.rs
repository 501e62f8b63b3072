//! The workers: `--concurrent-gc-syncs` tasks per queue, each running the engine's decisions
//! one item at a time (upstream's `runAttemptToDeleteWorker`, `runAttemptToOrphanWorker`).
//!
//! A worker stops once its queue is shut down and drained. A panic in one item's processing is
//! caught by the collector and requeues the item; it never stops a worker.

use std::sync::Arc;

use kube_gc_engine::Cluster;
use kube_gc_engine::collector::Collector;
use tokio::task::JoinHandle;

/// Starts `n` attemptToDelete workers.
pub fn spawn_delete_workers<C: Cluster + Send + Sync + 'static>(
    collector: &Arc<Collector<C>>,
    n: u32,
) -> Vec<JoinHandle<()>> {
    spawn(collector, n, |c| async move { while c.process_attempt_to_delete_worker().await {} })
}

/// Starts `n` attemptToOrphan workers. Orphaning reads the dependents set: never start them
/// before the graph is synced (or the initial sync timeout has passed).
pub fn spawn_orphan_workers<C: Cluster + Send + Sync + 'static>(
    collector: &Arc<Collector<C>>,
    n: u32,
) -> Vec<JoinHandle<()>> {
    spawn(collector, n, |c| async move { while c.process_attempt_to_orphan_worker().await {} })
}

fn spawn<C, F, Fut>(collector: &Arc<Collector<C>>, n: u32, worker: F) -> Vec<JoinHandle<()>>
where
    F: Fn(Arc<Collector<C>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    (0..n).map(|_| tokio::spawn(worker(collector.clone()))).collect()
}
