//! The workers: `--concurrent-gc-syncs` tasks per queue, each running the engine's decisions
//! one item at a time (upstream's `runAttemptToDeleteWorker`, `runAttemptToOrphanWorker`).
//!
//! A worker stops once its queue is shut down and drained. A panic in one item's processing is
//! caught by the collector and requeues the item; it never stops a worker. A panic outside an
//! item's processing (in the queue itself) ends the process, as upstream's `HandleCrash` does:
//! the item that worker held would stay in the queue's processing set, so its key would never
//! be handed out again, and a restart rebuilds the queues rather than stall that object.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use kube_gc_engine::Cluster;
use kube_gc_engine::collector::{Collector, panic_message};
use tokio::task::JoinHandle;

/// Starts `n` attemptToDelete workers.
pub fn spawn_delete_workers<C: Cluster + Send + Sync + 'static>(
    collector: &Arc<Collector<C>>,
    n: u32,
) -> Vec<JoinHandle<()>> {
    let worker =
        |c: Arc<Collector<C>>| async move { while c.process_attempt_to_delete_worker().await {} };
    spawn(collector, n, worker, exit_on_panic)
}

/// Starts `n` attemptToOrphan workers. Orphaning reads the dependents set: never start them
/// before the graph is synced (or the initial sync timeout has passed).
pub fn spawn_orphan_workers<C: Cluster + Send + Sync + 'static>(
    collector: &Arc<Collector<C>>,
    n: u32,
) -> Vec<JoinHandle<()>> {
    let worker =
        |c: Arc<Collector<C>>| async move { while c.process_attempt_to_orphan_worker().await {} };
    spawn(collector, n, worker, exit_on_panic)
}

/// What a worker's panic does in the process: log it and exit.
fn exit_on_panic(message: String) {
    tracing::error!(panic = message, "a garbage collector worker panicked; exiting");
    std::process::exit(1);
}

/// Spawns `n` tasks running `worker` on a clone of `shared`, each handing a panic that escapes
/// it to `on_panic`.
fn spawn<S, F, Fut>(shared: &S, n: u32, worker: F, on_panic: fn(String)) -> Vec<JoinHandle<()>>
where
    S: Clone,
    F: Fn(S) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let guarded = |shared| {
        AssertUnwindSafe(worker(shared)).catch_unwind().map(move |ended| {
            if let Err(panic) = ended {
                on_panic(panic_message(&panic));
            }
        })
    };
    (0..n).map(|_| tokio::spawn(guarded(shared.clone()))).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

    fn record(message: String) {
        PANICS.lock().unwrap().push(message);
    }

    /// A panic that escapes a worker's loop reaches the handler (in the process, an exit),
    /// not only the task's JoinHandle, which nobody awaits until shutdown.
    #[tokio::test]
    async fn a_panic_outside_an_item_reaches_the_handler() {
        let worker = |()| async { panic!("queue broke") };
        for handle in spawn(&(), 2, worker, record) {
            handle.await.expect("the panic is handled inside the task");
        }
        assert_eq!(*PANICS.lock().unwrap(), ["queue broke", "queue broke"]);
    }
}
