//! One metadata-only watcher per deletable resource: it lists and watches, and sends what it
//! saw to the batcher. Nothing else: turning notifications into graph events (old states,
//! relist deletes) is the engine's graph builder's job (`kube_gc_engine::builder`).
//!
//! Upstream: `graph_builder.go` (`controllerFor`, the informers); GC-SPEC.md §2.1.
//!
//! By default each watcher is kube-gc's own list/watch loop (`list_watch.rs`), which reads
//! protobuf `PartialObjectMetadata` as upstream's metadata informers do; with
//! `--kube-api-content-type application/json` it is kube-rs's [`watcher()`] over
//! `Api<LeanObject>`. Either way only `PartialObjectMetadata` travels, and only what the engine
//! keeps of it is decoded (`kube_gc_wire`, `lean_meta.rs`). Its events become
//! [`Notification`]s, sent in chunks
//! ([`WatchBatch`]): the initial list's pages arrive together and are chunked as they come, so
//! each page is (about) one batch.
//!
//! One rule here keeps the graph builder's relist diff honest: a list older than what was
//! already seen must never be diffed, or it would fake deletes. With `--list-from-watch-cache`,
//! only the first list is served from the watch cache (`resourceVersion=0`, which a lagging
//! cache of an HA control plane may answer from the past); every relist is a consistent one.

use std::sync::Arc;

use futures::StreamExt;
use kube::Client;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event as WatchEvent, watcher};
use kube_gc_engine::cluster::Resource;
use kube_gc_engine::{Notification, WatchBatch, WatchSource};
use tokio::sync::mpsc;

use crate::batcher::WatcherMsg;
use crate::flags::ContentType;
use crate::lean_meta::LeanObject;

fn notification(e: WatchEvent<LeanObject>) -> Notification {
    match e {
        WatchEvent::Init => Notification::ListStarted,
        WatchEvent::InitDone => Notification::ListDone,
        WatchEvent::InitApply(o) => Notification::Listed(o.into_meta()),
        WatchEvent::Apply(o) => Notification::Applied(o.into_meta()),
        WatchEvent::Delete(o) => Notification::Deleted(o.into_meta()),
    }
}

/// The list semantics of a watcher's lists: consistent pages of 500 (client-go's page size),
/// or, for a first list with `--list-from-watch-cache`, `resourceVersion=0`, which the server
/// answers from its watch cache, whole (kube-rs sends `resourceVersion=0` only without a limit,
/// and the cache ignores limits anyway).
fn watcher_config(from_watch_cache: bool) -> watcher::Config {
    let config = watcher::Config::default().page_size(500);
    if from_watch_cache {
        let mut config = config.any_semantic();
        config.page_size = None;
        config
    } else {
        config
    }
}

/// Whether a watch event starts a relist that must not be served from the watch cache: any
/// list after the first, on a stream whose lists are served from it.
fn relist_needs_consistent_semantics(
    notification: &Notification,
    from_cache: bool,
    listed: bool,
) -> bool {
    from_cache && listed && matches!(notification, Notification::ListStarted)
}

/// How the watchers list and watch (from the flags).
#[derive(Clone, Copy, Debug)]
pub struct WatcherOptions {
    /// Notifications per batch sent to the ingest loop (`--batch-size`).
    pub batch_size: usize,
    /// The first list may come from the watch cache (`--list-from-watch-cache`).
    pub list_from_watch_cache: bool,
    /// JSON (kube-rs's watcher) or protobuf (`list_watch.rs`) (`--kube-api-content-type`).
    pub content_type: ContentType,
}

/// Runs the watcher of `source`'s resource until the task is aborted, sending batches to `tx`.
pub async fn run_watcher(
    client: Client,
    resource: Resource,
    source: WatchSource,
    tx: mpsc::Sender<WatcherMsg>,
    metrics: Arc<crate::metrics::Metrics>,
    options: WatcherOptions,
) {
    let WatcherOptions { batch_size, list_from_watch_cache, content_type } = options;
    let key = source.resource.clone();
    if content_type == ContentType::Protobuf {
        let started = std::time::Instant::now();
        let synced_metrics = metrics.clone();
        let synced_key = key.clone();
        let on_synced =
            move || synced_metrics.set_warmup_seconds(&synced_key, started.elapsed().as_secs_f64());
        crate::list_watch::run(client, resource, source, tx, metrics, options, on_synced).await;
        return;
    }
    let ar = crate::kube_cluster::api_resource(&resource);
    // Metadata-only: lists and watches ask for PartialObjectMetadata.
    let api: Api<LeanObject> = Api::all_with(client, &ar);
    let started = std::time::Instant::now();
    let mut listed = false;
    let mut from_cache = list_from_watch_cache;
    // Whether the watch broke and no event has come since. kube-rs's watcher says nothing when
    // its watch is open again, so on this path a watcher is back in step at its next event (or
    // its relist's end): an idle one holds orphanings (and foreground deletions) until the
    // catch-up timeout.
    let mut interrupted = false;
    'streams: loop {
        let config = watcher_config(from_cache);
        let mut stream =
            std::pin::pin!(watcher(api.clone(), config).default_backoff().ready_chunks(batch_size));
        while let Some(chunk) = stream.next().await {
            let mut notifications = Vec::with_capacity(chunk.len());
            let mut switch = false;
            for item in chunk {
                match item.map(notification) {
                    Ok(n) if relist_needs_consistent_semantics(&n, from_cache, listed) => {
                        // The watch broke and kube-rs starts a relist, from the watch cache
                        // again: that list may be older than what this watcher has already
                        // sent, and would fake deletes. Relist consistently instead.
                        switch = true;
                        break;
                    }
                    Ok(n) => {
                        if n == Notification::ListDone && !listed {
                            listed = true;
                            metrics.set_warmup_seconds(&key, started.elapsed().as_secs_f64());
                        }
                        let event =
                            matches!(n, Notification::Applied(_) | Notification::Deleted(_));
                        if std::mem::take(&mut interrupted) && event {
                            notifications.push(Notification::Resumed);
                        }
                        notifications.push(n);
                    }
                    Err(e) => {
                        tracing::warn!(resource = %key, error = %e, "watch failed, retrying with backoff");
                        metrics.watch_errors.inc();
                        if !interrupted {
                            interrupted = true;
                            notifications.push(Notification::Interrupted);
                        }
                    }
                }
            }
            if !notifications.is_empty() {
                let batch = WatchBatch { source: source.clone(), notifications };
                if tx.send(WatcherMsg::Batch(batch)).await.is_err() {
                    return; // the ingest loop is gone: shutting down
                }
            }
            if switch {
                tracing::debug!(resource = %key, "relisting consistently (not from the watch cache)");
                from_cache = false;
                continue 'streams;
            }
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_server::{
        Script, configmaps, failure_reply, json_object, list_reply, names_of, watch_reply,
        watcher_options,
    };

    /// kube-rs's watcher says nothing when its watch is open again: a broken watch is back at
    /// its next event, which comes after the resumption.
    #[tokio::test(start_paused = true)]
    async fn a_broken_kube_rs_watch_is_interrupted_until_its_next_event() {
        let replies = vec![
            list_reply("5", &["a"]),
            failure_reply(500),
            watch_reply(&[("ADDED", json_object("b", "6"))]),
        ];
        let client = Client::new(Script::new(replies), "default");
        let (tx, mut rx) = mpsc::channel(64);
        let (resource, source) = configmaps();
        let (options, metrics) = watcher_options(ContentType::Json);
        let task = tokio::spawn(run_watcher(client, resource, source, tx, metrics, options));
        let seen = names_of(&mut rx, 6).await;
        task.abort();
        assert_eq!(
            seen,
            ["ListStarted", "Listed", "ListDone", "Interrupted", "Resumed", "Applied"]
        );
    }

    /// Only the first list of a `--list-from-watch-cache` watcher may come from the cache.
    #[test]
    fn only_the_first_list_comes_from_the_watch_cache() {
        let start = Notification::ListStarted;
        let apply = Notification::Applied(Default::default());
        assert!(!relist_needs_consistent_semantics(&start, true, false), "first list");
        assert!(relist_needs_consistent_semantics(&start, true, true), "relist from the cache");
        assert!(!relist_needs_consistent_semantics(&start, false, true), "consistent already");
        assert!(!relist_needs_consistent_semantics(&apply, true, true));
        assert!(watcher_config(true).page_size.is_none());
        assert_eq!(watcher_config(false).page_size, Some(500));
    }
}
