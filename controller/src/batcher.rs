//! The batcher: coalesces what all watchers sent, and the workers' virtual deletes, into one
//! batch, and hands each batch to the graph builder ([`ingest_loop`]).
//!
//! Watchers send [`WatcherMsg`]s on one bounded channel (its bound is the backpressure that
//! keeps a million-object list from piling up in memory ahead of the graph). Workers' virtual
//! deletes wait in the graph builder's own inbox ([`GraphChanges`]), which wakes the batcher.
//! [`Batcher::next`] waits for either, then takes what is already waiting, up to one batch:
//! under load batches are full, idle a single event goes through at once.

use std::sync::Arc;
use std::time::Instant;

use kube_gc_engine::{GraphBuilder, GraphChanges, WatchBatch, WatchSource};
use tokio::sync::{Notify, mpsc};

use crate::kube_cluster::KubeCluster;
use crate::metrics::Metrics;
use crate::run::SyncState;

/// What a watcher (or the controller, about a watcher) tells the graph builder.
#[derive(Debug)]
pub enum WatcherMsg {
    /// Notifications to apply, in order.
    Batch(WatchBatch),
    /// The watcher run of this source was stopped for good (its resource is gone).
    Stopped(WatchSource),
}

/// One batch of work for the graph builder.
#[derive(Debug, Default)]
pub struct Work {
    /// Watchers' notifications, in the order they arrived.
    pub batches: Vec<WatchBatch>,
    /// Watcher runs stopped for good, after their last notifications above.
    pub stopped: Vec<WatchSource>,
}

/// The batcher (see the module docs).
#[derive(Debug)]
pub struct Batcher {
    rx: mpsc::Receiver<WatcherMsg>,
    graph_changes: Arc<GraphChanges>,
    woken: Arc<Notify>,
    max_events: usize,
}

impl Batcher {
    /// A batcher of what arrives on `rx` and in `graph_changes`, at most `max_events`
    /// notifications a batch (a watcher's chunk is never split).
    pub fn new(
        rx: mpsc::Receiver<WatcherMsg>,
        graph_changes: Arc<GraphChanges>,
        max_events: usize,
    ) -> Batcher {
        let woken = Arc::new(Notify::new());
        let wake = woken.clone();
        graph_changes.on_push(move || wake.notify_one());
        Batcher { rx, graph_changes, woken, max_events: max_events.max(1) }
    }

    /// Waits for work and returns what is waiting, up to one batch; `None` once every sender
    /// is gone (shutting down).
    pub async fn next(&mut self) -> Option<Work> {
        let mut work = Work::default();
        if self.graph_changes.is_empty() {
            tokio::select! {
                biased;
                _ = self.woken.notified() => {}
                msg = self.rx.recv() => take(&mut work, msg?),
            }
        }
        let mut events: usize = work.batches.iter().map(|b| b.notifications.len()).sum();
        while events < self.max_events {
            let Ok(msg) = self.rx.try_recv() else { break };
            if let WatcherMsg::Batch(b) = &msg {
                events += b.notifications.len();
            }
            take(&mut work, msg);
        }
        Some(work)
    }
}

/// Whether `batch` may change which custom resources the API server serves: a
/// CustomResourceDefinition added, changed or deleted, or a list of them complete (a relist may
/// hold ones created while the watch was down).
fn changes_custom_resources(batch: &WatchBatch) -> bool {
    use kube_gc_engine::Notification::{Applied, Deleted, ListDone};
    let ty = batch.source.object_type;
    ty.kind() == "CustomResourceDefinition"
        && ty.api_version().starts_with("apiextensions.k8s.io/")
        && (batch.notifications.iter()).any(|n| matches!(n, Applied(_) | Deleted(_) | ListDone))
}

fn take(work: &mut Work, msg: WatcherMsg) {
    match msg {
        WatcherMsg::Batch(b) => work.batches.push(b),
        WatcherMsg::Stopped(s) => work.stopped.push(s),
    }
}

/// Hands each batch to the graph builder, one at a time (it applies the batch and queues what
/// it found), and marks a watcher run synced once its list is wholly in the graph.
pub async fn ingest_loop(
    mut batcher: Batcher,
    mut builder: GraphBuilder<KubeCluster>,
    sync: Arc<SyncState>,
    metrics: Arc<Metrics>,
    shadow: Option<Arc<crate::shadow::Shadow>>,
) {
    while let Some(work) = batcher.next().await {
        // Shadow mode judges each deletion on the graph the batch leaves (see `shadow.rs`).
        let deletions: Vec<(String, kube_gc_engine::ObjectMeta)> = match &shadow {
            None => Vec::new(),
            Some(_) => work
                .batches
                .iter()
                .flat_map(|b| {
                    b.notifications.iter().filter_map(|n| match n {
                        kube_gc_engine::Notification::Deleted(meta) => {
                            Some((b.source.resource.clone(), meta.clone()))
                        }
                        _ => None,
                    })
                })
                .collect(),
        };
        if work.batches.iter().any(changes_custom_resources) {
            // Before the batch is applied: an orphaning it queues must already wait for the
            // discovery (see `run::DISCOVERY_BEHIND`).
            builder.collector().note_watch_behind(crate::run::DISCOVERY_BEHIND, true);
            sync.crd_changed();
        }
        let started = Instant::now();
        let Ok((back, done)) = tokio::task::spawn_blocking(move || {
            let done = builder.ingest(work.batches);
            for stopped in &work.stopped {
                builder.forget(stopped);
            }
            (builder, done)
        })
        .await
        else {
            // A batch half-applied leaves the graph unknown: like upstream's crash on a
            // graph-builder panic, stop the process and let the restart rebuild the graph
            // from a fresh list, rather than collect from a graph no longer trusted.
            tracing::error!(
                "ingesting a batch panicked; exiting so that a restart rebuilds the graph"
            );
            std::process::exit(1);
        };
        builder = back;
        if let Some(shadow) = &shadow {
            let collector = builder.collector();
            let synced = !collector.is_warming_up();
            for (resource, meta) in &deletions {
                shadow.observed_deletion(resource, meta, collector.graph(), synced);
            }
            for (resource, node) in &done.relisted_away {
                shadow.relisted_deletion(resource, node, collector.graph(), synced);
            }
            // Deletions judged with owners staying: their owners' own deletions (or foreground
            // deletions) may arrive in a later batch.
            shadow.settle(collector.graph(), synced);
        }
        if done.events != 0 {
            metrics.ingest_batches.inc();
            metrics.ingest_events.add(done.applied as u64);
            metrics.ingest_micros.add(started.elapsed().as_micros() as u64);
            metrics.ingest_rejected.add(done.errors.len() as u64);
            for e in &done.errors {
                tracing::warn!(error = %e, "rejected malformed event");
            }
            tracing::trace!(events = done.events, "applied batch");
        }
        for source in &done.listed {
            sync.mark(source);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_gc_engine::{Event, Notification, ObjectReference, ObjectType};

    #[test]
    fn custom_resources_change_with_a_crd_event_or_list() {
        let crds = |notifications| WatchBatch {
            source: WatchSource {
                resource: "apiextensions.k8s.io/v1/customresourcedefinitions".into(),
                object_type: ObjectType::new("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
                generation: 1,
            },
            notifications,
        };
        let meta = kube_gc_engine::ObjectMeta::default;
        assert!(changes_custom_resources(&crds(vec![Notification::Applied(meta())])));
        assert!(changes_custom_resources(&crds(vec![Notification::Deleted(meta())])));
        assert!(changes_custom_resources(&crds(vec![Notification::ListDone])));
        assert!(!changes_custom_resources(&crds(vec![Notification::Listed(meta())])));
        assert!(!changes_custom_resources(&crds(vec![Notification::Interrupted])));
        let WatcherMsg::Batch(pods) = batch(1) else { unreachable!() };
        assert!(!changes_custom_resources(&pods));
        let mut widgets = crds(vec![Notification::Applied(meta())]);
        widgets.source.object_type = ObjectType::new("example.com/v1", "CustomResourceDefinition");
        assert!(!changes_custom_resources(&widgets), "another group's kind of the same name");
    }

    fn batch(n: usize) -> WatcherMsg {
        let source = WatchSource {
            resource: "v1/pods".into(),
            object_type: ObjectType::new("v1", "Pod"),
            generation: 1,
        };
        WatcherMsg::Batch(WatchBatch { source, notifications: vec![Notification::ListDone; n] })
    }

    #[tokio::test]
    async fn coalesces_waiting_chunks_up_to_one_batch() {
        let (tx, rx) = mpsc::channel(16);
        let mut batcher = Batcher::new(rx, Arc::new(GraphChanges::new()), 5);
        for _ in 0..4 {
            tx.send(batch(2)).await.unwrap();
        }
        // 2 + 2 + 2 reaches the bound of 5; the fourth chunk waits for the next batch.
        assert_eq!(batcher.next().await.unwrap().batches.len(), 3);
        assert_eq!(batcher.next().await.unwrap().batches.len(), 1);
        drop(tx);
        assert!(batcher.next().await.is_none());
    }

    #[tokio::test]
    async fn a_virtual_delete_wakes_it() {
        let (_tx, rx) = mpsc::channel(16);
        let changes = Arc::new(GraphChanges::new());
        let mut batcher = Batcher::new(rx, changes.clone(), 5);
        let waiting = tokio::spawn(async move { batcher.next().await.map(|w| w.batches.len()) });
        tokio::task::yield_now().await;
        let identity = ObjectReference::new("v1", "Pod", "ns", "p", "u");
        changes.push(Event::virtual_delete(&identity));
        assert_eq!(waiting.await.unwrap(), Some(0), "woken with no watch batch");
        assert_eq!(changes.len(), 1, "the graph builder, not the batcher, takes it");
    }
}
