//! A watcher that panics is run again: without this, its task would end silently (tokio
//! catches the panic), and its resource's part of the graph would go stale for good while
//! looking current, so that orphaning would miss dependents created since (which are then
//! collected) and foreground deletions would not wait for them. Upstream's reflector runs
//! under `wait.Until`, whose `HandleCrash` logs a panic and panics again (`ReallyCrash`, true by
//! default): kube-controller-manager exits, is started again by its supervisor, and every
//! informer lists anew. kube-gc lists again only the resource whose watcher panicked, as after
//! a `410 Gone`, a path its relist diff already covers; the rest of the graph stays.
//!
//! Before the backoff, the watcher is said to be interrupted (`Notification::Interrupted`),
//! so that those decisions wait for the new run to catch up; the new run lists consistently
//! (never from the watch cache: its list could be older than what the first run sent).

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use kube_gc_engine::collector::panic_message;
use kube_gc_engine::{Notification, WatchBatch, WatchSource};
use tokio::sync::mpsc;

use super::{Backoff, WatcherOptions};
use crate::batcher::WatcherMsg;
use crate::metrics::Metrics;

/// Runs the watcher `run` makes from the options, and makes and runs it again, after a
/// backoff, each time it panics; returns when a run returns (the ingest loop is gone) or the
/// task is aborted.
pub async fn supervise<F, Fut>(
    source: WatchSource,
    tx: mpsc::Sender<WatcherMsg>,
    metrics: &Metrics,
    mut options: WatcherOptions,
    mut run: F,
) where
    F: FnMut(WatcherOptions) -> Fut,
    Fut: Future<Output = ()>,
{
    let mut backoff = Backoff::new();
    loop {
        let Err(panic) = AssertUnwindSafe(run(options)).catch_unwind().await else {
            return;
        };
        tracing::error!(resource = %source.resource, panic = panic_message(&panic), "watcher panicked; it lists again after a backoff");
        metrics.watch_errors.inc();
        let broke =
            WatchBatch { source: source.clone(), notifications: vec![Notification::Interrupted] };
        if tx.send(WatcherMsg::Batch(broke)).await.is_err() {
            return;
        }
        tokio::time::sleep(backoff.step()).await;
        options.list_from_watch_cache = false;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::flags::ContentType;
    use crate::test_server::watcher_options;

    fn source() -> WatchSource {
        WatchSource {
            resource: "configmaps".into(),
            object_type: kube_gc_engine::ObjectType::new("v1", "ConfigMap"),
            generation: 7,
        }
    }

    /// A run that panics twice (its first run from the watch cache) and then returns: each
    /// panic is counted and followed by `Interrupted` for the same run of the source, the runs
    /// after it list consistently, and a run that returns ends the supervision.
    #[tokio::test(start_paused = true)]
    async fn a_panicking_watcher_is_said_interrupted_and_runs_again() {
        let (tx, mut rx) = mpsc::channel(8);
        let metrics = Metrics::default();
        let mut options = watcher_options(ContentType::Json);
        options.list_from_watch_cache = true;
        let runs = Arc::new(AtomicUsize::new(0));
        let from_cache = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (r, c) = (runs.clone(), from_cache.clone());
        supervise(source(), tx, &metrics, options, move |options| {
            let n = r.fetch_add(1, Ordering::SeqCst);
            c.lock().unwrap().push(options.list_from_watch_cache);
            async move {
                if n < 2 {
                    panic!("decoder bug {n}");
                }
            }
        })
        .await;
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        assert_eq!(*from_cache.lock().unwrap(), [true, false, false]);
        assert_eq!(metrics.watch_errors.get(), 2);
        for _ in 0..2 {
            match rx.try_recv() {
                Ok(WatcherMsg::Batch(b)) => {
                    assert_eq!(b.source, source());
                    assert!(matches!(b.notifications[..], [Notification::Interrupted]));
                }
                other => panic!("expected an Interrupted batch, got {other:?}"),
            }
        }
        assert!(rx.try_recv().is_err(), "nothing else sent");
    }

    /// Once the ingest loop is gone, a panicking watcher is not run again.
    #[tokio::test(start_paused = true)]
    async fn a_panicking_watcher_is_not_run_again_once_nobody_listens() {
        let (tx, rx) = mpsc::channel(8);
        drop(rx);
        let runs = AtomicUsize::new(0);
        let options = watcher_options(ContentType::Json);
        supervise(source(), tx, &Metrics::default(), options, |_| {
            runs.fetch_add(1, Ordering::SeqCst);
            async { panic!("decoder bug") }
        })
        .await;
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}
