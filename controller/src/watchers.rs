//! One metadata-only watcher per deletable resource, turning watch events into engine events.
//!
//! Upstream: `graph_builder.go` (`controllerFor`, the informer handlers); GC-SPEC.md §2.1.
//!
//! Each watcher is kube-rs's [`watcher`] over `Api<PartialObjectMeta<DynamicObject>>`, so only
//! `PartialObjectMetadata` travels. Its events become [`Event`]s and are sent to the ingest loop
//! in chunks ([`IngestMsg::Batch`]): the initial list's pages arrive together and are chunked as
//! they come, so each page is (about) one batch.
//!
//! Two things an informer gives upstream that a watcher does not, rebuilt here:
//! - **The old object of an update**, which processTransitions needs to tell whether deletion
//!   *started*. Only whether the old version was being deleted and which GC finalizers it had
//!   matter, so the watcher remembers exactly that, for the objects being deleted (few).
//! - **Deletes missed while disconnected.** After a relist (a 410 Gone, a restart), objects this
//!   watcher emitted that the relist did not return are turned into delete events, as client-go's
//!   `DeltaFIFO.Replace` does against its known objects. The diff is against the watcher's own
//!   record of what it emitted (the UIDs, about 20-40 bytes per object), never against the
//!   graph, which lags the watcher's channel: an add still on its way to the graph would be
//!   missed, and its object left in the graph for ever. And never from a list older than what
//!   was seen: with `--list-from-watch-cache`, only the first list is served from the watch
//!   cache (`resourceVersion=0`, which a lagging cache of an HA control plane may answer from the
//!   past, faking deletes); every relist is a consistent one.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event as WatchEvent, watcher};
use kube_gc_engine::cluster::Resource;
use kube_gc_engine::ingest::rules::{FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN};
use kube_gc_engine::{Event, EventType, ObjectMeta, ObjectType, Uid};
use tokio::sync::mpsc;

use crate::kube_cluster::object_meta;

/// What watchers (and workers) send to the ingest loop.
#[derive(Debug)]
pub enum IngestMsg {
    /// Events to apply, in order.
    Batch(Vec<Event>),
    /// Every event of the resource's initial list was sent before this.
    Synced(String),
}

/// What a watcher remembers of an object being deleted, to rebuild update events' old state.
#[derive(Clone, Copy, Debug)]
struct Deleting {
    orphan: bool,
    foreground: bool,
}

/// Builds engine events from one resource's watch events.
#[derive(Debug)]
pub struct EventBuilder {
    object_type: ObjectType,
    deleting: HashMap<Uid, Deleting>,
    /// Every object this builder emitted and has not emitted the delete of (its store, in
    /// client-go's terms): what a relist is diffed against.
    emitted: HashSet<Uid>,
    relist_seen: Option<HashSet<Uid>>,
}

impl EventBuilder {
    /// A builder for `resource`'s events.
    pub fn new(resource: &Resource) -> EventBuilder {
        let api_version = if resource.group.is_empty() {
            resource.version.clone()
        } else {
            format!("{}/{}", resource.group, resource.version)
        };
        EventBuilder {
            object_type: ObjectType::new(&api_version, &resource.kind),
            deleting: HashMap::new(),
            emitted: HashSet::new(),
            relist_seen: None,
        }
    }

    fn remember(&mut self, meta: &ObjectMeta) -> Option<ObjectMeta> {
        let uid = Uid::parse(&meta.uid);
        let old = self.deleting.get(&uid).map(|d| {
            let mut finalizers = Vec::new();
            if d.orphan {
                finalizers.push(FINALIZER_ORPHAN.to_owned());
            }
            if d.foreground {
                finalizers.push(FINALIZER_DELETE_DEPENDENTS.to_owned());
            }
            ObjectMeta {
                uid: meta.uid.clone(),
                deletion_timestamp: true,
                finalizers,
                ..Default::default()
            }
        });
        if meta.deletion_timestamp {
            self.deleting.insert(
                uid,
                Deleting {
                    orphan: meta.has_finalizer(FINALIZER_ORPHAN),
                    foreground: meta.has_finalizer(FINALIZER_DELETE_DEPENDENTS),
                },
            );
        }
        old
    }

    /// Turns one watch event into engine events (relist deletes included); returns whether the
    /// event ends a list.
    pub fn on_event(&mut self, event: WatchEvent<ObjectMeta>, out: &mut Vec<Event>) -> bool {
        let ty = self.object_type;
        match event {
            WatchEvent::Init => {
                self.relist_seen = Some(HashSet::new());
                false
            }
            WatchEvent::InitApply(meta) => {
                let uid = Uid::parse(&meta.uid);
                if let Some(seen) = self.relist_seen.as_mut() {
                    seen.insert(uid);
                }
                self.emitted.insert(uid);
                let old = self.remember(&meta);
                out.push(match old {
                    Some(old) => Event::update(ty, old, meta),
                    None => Event::new(EventType::Add, ty, meta),
                });
                false
            }
            WatchEvent::InitDone => {
                let seen = self.relist_seen.take().unwrap_or_default();
                // Objects emitted before that the list did not return were deleted while the
                // watch was down: the watcher emits no event for them. The graph needs only
                // the UID of a deleted object (it knows the rest).
                for uid in self.emitted.difference(&seen) {
                    self.deleting.remove(uid);
                    out.push(Event::new(
                        EventType::Delete,
                        ty,
                        ObjectMeta { uid: uid.to_string(), ..Default::default() },
                    ));
                }
                self.emitted = seen;
                true
            }
            WatchEvent::Apply(meta) => {
                self.emitted.insert(Uid::parse(&meta.uid));
                let old = self
                    .remember(&meta)
                    .unwrap_or_else(|| ObjectMeta { uid: meta.uid.clone(), ..Default::default() });
                out.push(Event::update(ty, old, meta));
                false
            }
            WatchEvent::Delete(meta) => {
                let uid = Uid::parse(&meta.uid);
                self.deleting.remove(&uid);
                self.emitted.remove(&uid);
                out.push(Event::new(EventType::Delete, ty, meta));
                false
            }
        }
    }
}

fn convert(e: WatchEvent<PartialObjectMeta<DynamicObject>>) -> WatchEvent<ObjectMeta> {
    match e {
        WatchEvent::Init => WatchEvent::Init,
        WatchEvent::InitDone => WatchEvent::InitDone,
        WatchEvent::InitApply(o) => WatchEvent::InitApply(object_meta(&o.metadata)),
        WatchEvent::Apply(o) => WatchEvent::Apply(object_meta(&o.metadata)),
        WatchEvent::Delete(o) => WatchEvent::Delete(object_meta(&o.metadata)),
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
    event: &WatchEvent<ObjectMeta>,
    from_cache: bool,
    listed: bool,
) -> bool {
    from_cache && listed && matches!(event, WatchEvent::Init)
}

/// Runs the watcher of `resource` until the task is aborted, sending batches to `tx`.
pub async fn run_watcher(
    client: Client,
    resource: Resource,
    tx: mpsc::Sender<IngestMsg>,
    batch_size: usize,
    metrics: Arc<crate::metrics::Metrics>,
    list_from_watch_cache: bool,
) {
    let key = crate::discovery::resource_key(&resource);
    let ar = crate::kube_cluster::api_resource(&resource);
    // Metadata-only: lists and watches ask for PartialObjectMetadata.
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, &ar);
    let started = std::time::Instant::now();
    let mut builder = EventBuilder::new(&resource);
    let mut synced = false;
    let mut from_cache = list_from_watch_cache;
    'streams: loop {
        let config = watcher_config(from_cache);
        let mut stream =
            std::pin::pin!(watcher(api.clone(), config).default_backoff().ready_chunks(batch_size));
        while let Some(chunk) = stream.next().await {
            let mut events = Vec::with_capacity(chunk.len());
            let mut list_done = false;
            let mut switch = false;
            for item in chunk {
                match item.map(convert) {
                    Ok(e) if relist_needs_consistent_semantics(&e, from_cache, synced) => {
                        // The watch broke and kube-rs starts a relist, from the watch cache
                        // again: that list may be older than what this watcher has already
                        // emitted, and would fake deletes. Relist consistently instead.
                        switch = true;
                        break;
                    }
                    Ok(e) => list_done |= builder.on_event(e, &mut events),
                    Err(e) => {
                        tracing::warn!(resource = %key, error = %e, "watch failed, retrying with backoff");
                        metrics.watch_errors.inc();
                    }
                }
            }
            if !events.is_empty() && tx.send(IngestMsg::Batch(events)).await.is_err() {
                return; // the ingest loop is gone: shutting down
            }
            if list_done && !synced {
                synced = true;
                metrics.set_warmup_seconds(&key, started.elapsed().as_secs_f64());
                if tx.send(IngestMsg::Synced(key.clone())).await.is_err() {
                    return;
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

    fn rs() -> Resource {
        Resource {
            group: "apps".into(),
            version: "v1".into(),
            resource: "replicasets".into(),
            kind: "ReplicaSet".into(),
            namespaced: true,
        }
    }

    fn meta(uid: &str, deleting: bool, finalizers: &[&str]) -> ObjectMeta {
        ObjectMeta {
            uid: uid.into(),
            name: format!("n-{uid}"),
            namespace: "ns".into(),
            deletion_timestamp: deleting,
            finalizers: finalizers.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn update_events_carry_the_old_deletion_state() {
        let mut b = EventBuilder::new(&rs());
        let mut out = Vec::new();
        b.on_event(WatchEvent::Apply(meta("a", true, &["orphan"])), &mut out);
        b.on_event(WatchEvent::Apply(meta("a", true, &["orphan"])), &mut out);
        // First sight: old has no deletionTimestamp (the transition starts); second: it had.
        assert!(!out[0].old_object.as_ref().unwrap().deletion_timestamp);
        let old = out[1].old_object.as_ref().unwrap();
        assert!(old.deletion_timestamp && old.has_finalizer("orphan"));
    }

    #[test]
    fn relist_turns_unseen_objects_into_deletes() {
        let graph = std::sync::Arc::new(kube_gc_engine::Graph::new(2).unwrap());
        let mut ingester = kube_gc_engine::Ingester::new(graph.clone(), 1);
        let mut b = EventBuilder::new(&rs());
        let mut out = Vec::new();
        b.on_event(WatchEvent::Init, &mut out);
        b.on_event(WatchEvent::InitApply(meta("a", false, &[])), &mut out);
        b.on_event(WatchEvent::InitApply(meta("b", false, &[])), &mut out);
        assert!(b.on_event(WatchEvent::InitDone, &mut out));
        ingester.ingest(&out);
        assert_eq!(graph.len(), 2);
        // The watch broke; on the relist only "a" is still there.
        out.clear();
        b.on_event(WatchEvent::Init, &mut out);
        b.on_event(WatchEvent::InitApply(meta("a", false, &[])), &mut out);
        b.on_event(WatchEvent::InitDone, &mut out);
        let deletes: Vec<_> = out
            .iter()
            .filter(|e| e.event_type == EventType::Delete)
            .map(|e| e.object.uid.as_str())
            .collect();
        assert_eq!(deletes, ["b"]);
        ingester.ingest(&out);
        assert_eq!(graph.len(), 1);
    }

    /// Finding 3 of issue #11: the relist is diffed against what the watcher emitted, not
    /// against the graph. An add emitted but not yet applied when the relist ends (still in the
    /// ingest channel) used to be missed: the graph did not hold it, so no delete was
    /// synthesised, and once applied its object stayed in the graph for ever.
    #[test]
    fn relist_deletes_an_object_whose_add_is_still_in_flight() {
        let graph = std::sync::Arc::new(kube_gc_engine::Graph::new(2).unwrap());
        let mut ingester = kube_gc_engine::Ingester::new(graph.clone(), 1);
        let mut b = EventBuilder::new(&rs());
        let mut in_flight = Vec::new();
        b.on_event(WatchEvent::Init, &mut in_flight);
        b.on_event(WatchEvent::InitDone, &mut in_flight);
        b.on_event(WatchEvent::Apply(meta("a", false, &[])), &mut in_flight);
        // The watch breaks and the relist no longer returns "a", before "a"'s add is applied.
        let mut relist = Vec::new();
        b.on_event(WatchEvent::Init, &mut relist);
        assert!(b.on_event(WatchEvent::InitDone, &mut relist));
        ingester.ingest(&in_flight);
        ingester.ingest(&relist);
        assert!(graph.is_empty(), "a deleted object stays in the graph: {:?}", graph.snapshot());
    }

    /// A relist emits nothing for objects it returns, and deletes only once.
    #[test]
    fn relist_deletes_each_vanished_object_once() {
        let mut b = EventBuilder::new(&rs());
        let mut out = Vec::new();
        b.on_event(WatchEvent::Init, &mut out);
        for uid in ["a", "b", "c"] {
            b.on_event(WatchEvent::InitApply(meta(uid, false, &[])), &mut out);
        }
        b.on_event(WatchEvent::InitDone, &mut out);
        b.on_event(WatchEvent::Delete(meta("c", false, &[])), &mut out);
        let relist = |b: &mut EventBuilder| {
            let mut out = Vec::new();
            b.on_event(WatchEvent::Init, &mut out);
            b.on_event(WatchEvent::InitApply(meta("a", false, &[])), &mut out);
            b.on_event(WatchEvent::InitDone, &mut out);
            out.iter()
                .filter(|e| e.event_type == EventType::Delete)
                .map(|e| e.object.uid.clone())
                .collect::<Vec<_>>()
        };
        // "c"'s delete was seen; "b" vanished while disconnected.
        assert_eq!(relist(&mut b), ["b"]);
        assert!(relist(&mut b).is_empty());
    }

    /// Only the first list of a `--list-from-watch-cache` watcher may come from the cache.
    #[test]
    fn only_the_first_list_comes_from_the_watch_cache() {
        let init: WatchEvent<ObjectMeta> = WatchEvent::Init;
        let apply = WatchEvent::Apply(meta("a", false, &[]));
        assert!(!relist_needs_consistent_semantics(&init, true, false), "first list");
        assert!(relist_needs_consistent_semantics(&init, true, true), "relist from the cache");
        assert!(!relist_needs_consistent_semantics(&init, false, true), "consistent already");
        assert!(!relist_needs_consistent_semantics(&apply, true, true));
        assert!(watcher_config(true).page_size.is_none());
        assert_eq!(watcher_config(false).page_size, Some(500));
    }
}
