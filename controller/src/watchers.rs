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
//! - **Deletes missed while disconnected.** After a relist (a 410 Gone, a restart), objects of
//!   this resource in the graph that the relist did not return are turned into delete events.

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
use kube_gc_engine::{Event, EventType, Graph, ObjectMeta, ObjectType, Uid};
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

    /// Turns one watch event into engine events (relist deletes included, from `graph`).
    pub fn on_event(
        &mut self,
        event: WatchEvent<ObjectMeta>,
        graph: &Graph,
        out: &mut Vec<Event>,
    ) -> bool {
        let ty = self.object_type;
        match event {
            WatchEvent::Init => {
                self.relist_seen = Some(HashSet::new());
                false
            }
            WatchEvent::InitApply(meta) => {
                if let Some(seen) = self.relist_seen.as_mut() {
                    seen.insert(Uid::parse(&meta.uid));
                }
                let old = self.remember(&meta);
                out.push(match old {
                    Some(old) => Event::update(ty, old, meta),
                    None => Event::new(EventType::Add, ty, meta),
                });
                false
            }
            WatchEvent::InitDone => {
                let seen = self.relist_seen.take().unwrap_or_default();
                // Objects of this resource the graph holds but the relist did not return were
                // deleted while the watch was down: the watcher emits no event for them.
                graph.for_each_node(|n, _| {
                    if !n.is_virtual && n.identity.ty == ty && !seen.contains(&n.identity.uid) {
                        out.push(Event::new(
                            EventType::Delete,
                            ty,
                            ObjectMeta {
                                uid: n.identity.uid.to_string(),
                                name: n.identity.name.clone(),
                                namespace: n.identity.namespace.as_str().to_owned(),
                                owner_references: n
                                    .owners
                                    .iter()
                                    .map(kube_gc_engine::patch::owner_ref_to_api)
                                    .collect(),
                                ..Default::default()
                            },
                        ));
                    }
                });
                true
            }
            WatchEvent::Apply(meta) => {
                let old = self
                    .remember(&meta)
                    .unwrap_or_else(|| ObjectMeta { uid: meta.uid.clone(), ..Default::default() });
                out.push(Event::update(ty, old, meta));
                false
            }
            WatchEvent::Delete(meta) => {
                self.deleting.remove(&Uid::parse(&meta.uid));
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

/// Runs the watcher of `resource` until the task is aborted, sending batches to `tx`.
pub async fn run_watcher(
    client: Client,
    resource: Resource,
    graph: Arc<Graph>,
    tx: mpsc::Sender<IngestMsg>,
    batch_size: usize,
    metrics: Arc<crate::metrics::Metrics>,
    list_from_watch_cache: bool,
) {
    let key = crate::discovery::resource_key(&resource);
    let ar = crate::kube_cluster::api_resource(&resource);
    // Metadata-only: lists and watches ask for PartialObjectMetadata.
    let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(client, &ar);
    // client-go's page size for informer lists.
    let mut config = watcher::Config::default().page_size(500);
    if list_from_watch_cache {
        // resourceVersion=0, as client-go's reflectors: the server answers from its watch
        // cache, whole, instead of paged consistent reads from etcd. (kube-rs sends
        // resourceVersion=0 only without a limit, and the cache ignores limits anyway.)
        config = config.any_semantic();
        config.page_size = None;
    }
    let started = std::time::Instant::now();
    let mut builder = EventBuilder::new(&resource);
    let mut synced = false;
    let mut stream =
        std::pin::pin!(watcher(api, config).default_backoff().ready_chunks(batch_size));
    while let Some(chunk) = stream.next().await {
        let mut events = Vec::with_capacity(chunk.len());
        let mut list_done = false;
        for item in chunk {
            match item {
                Ok(e) => list_done |= builder.on_event(convert(e), &graph, &mut events),
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
        let graph = Graph::new(1).unwrap();
        let mut b = EventBuilder::new(&rs());
        let mut out = Vec::new();
        b.on_event(WatchEvent::Apply(meta("a", true, &["orphan"])), &graph, &mut out);
        b.on_event(WatchEvent::Apply(meta("a", true, &["orphan"])), &graph, &mut out);
        // First sight: old has no deletionTimestamp (the transition starts); second: it had.
        assert!(!out[0].old_object.as_ref().unwrap().deletion_timestamp);
        let old = out[1].old_object.as_ref().unwrap();
        assert!(old.deletion_timestamp && old.has_finalizer("orphan"));
    }

    #[test]
    fn relist_turns_unseen_objects_into_deletes() {
        let graph = std::sync::Arc::new(Graph::new(2).unwrap());
        let mut ingester = kube_gc_engine::Ingester::new(graph.clone(), 1);
        let mut b = EventBuilder::new(&rs());
        let mut out = Vec::new();
        b.on_event(WatchEvent::Init, &graph, &mut out);
        b.on_event(WatchEvent::InitApply(meta("a", false, &[])), &graph, &mut out);
        b.on_event(WatchEvent::InitApply(meta("b", false, &[])), &graph, &mut out);
        assert!(b.on_event(WatchEvent::InitDone, &graph, &mut out));
        ingester.ingest(&out);
        assert_eq!(graph.len(), 2);
        // The watch broke; on the relist only "a" is still there.
        out.clear();
        b.on_event(WatchEvent::Init, &graph, &mut out);
        b.on_event(WatchEvent::InitApply(meta("a", false, &[])), &graph, &mut out);
        b.on_event(WatchEvent::InitDone, &graph, &mut out);
        let deletes: Vec<_> = out
            .iter()
            .filter(|e| e.event_type == EventType::Delete)
            .map(|e| e.object.uid.as_str())
            .collect();
        assert_eq!(deletes, ["b"]);
        ingester.ingest(&out);
        assert_eq!(graph.len(), 1);
    }
}
