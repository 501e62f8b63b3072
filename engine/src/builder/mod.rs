//! The graph builder: the one writer of the graph, and the producer of the work queues.
//!
//! Upstream: `graph_builder.go` (`GraphBuilder`, `processGraphChanges`, the informers'
//! stores); GC-SPEC.md §2.
//!
//! [`GraphBuilder::ingest`] takes what the watchers saw since the last call, as
//! [`WatchBatch`]es of [`Notification`]s, and in one step:
//! 1. takes the virtual delete events workers left in the [`GraphChanges`] inbox;
//! 2. turns each watcher's notifications into graph events through that resource's
//!    [`ResourceStore`] (old states of updates, deletes missed while disconnected);
//! 3. applies them all with the [`Ingester`] (in parallel, by shard);
//! 4. hands what the batch found to the [`Collector`]: items for the attemptToDelete and
//!    attemptToOrphan queues, owners for the absent-owner cache, warning events to record.
//!
//! So the graph is always at least as new as any queue item (upstream's freshness rule), and
//! no caller can apply a batch and forget to enqueue what it found.
//!
//! # Watcher generations
//!
//! A store belongs to one run of one resource's watcher ([`WatchSource::generation`]): when
//! the controller replaces a watcher (its resource changed at re-discovery), the new one starts
//! with an empty store, as a new informer does. Notifications a replaced watcher sent before it
//! stopped are still applied, through a throwaway store, so that no delete it saw is lost.

mod emitted;
mod graph_changes;
mod store;

use std::collections::HashMap;
use std::fmt;
use std::sync::mpsc;

pub use graph_changes::GraphChanges;
pub use store::{Notification, ResourceStore};

use crate::cluster::Cluster;
use crate::collector::Collector;
use crate::error::IngestError;
use crate::graph::NodeView;
use crate::identity::{ObjectType, Uid};
use crate::ingest::{Event, Ingester};
use crate::sync::Arc;

/// Which watcher notifications come from.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct WatchSource {
    /// The resource's key (the controller's `group/version/resource`).
    pub resource: String,
    /// The apiVersion and kind of its objects.
    pub object_type: ObjectType,
    /// Which run of the resource's watcher: a later run has a larger number.
    pub generation: u64,
}

/// Notifications from one watcher, in the order it saw them.
#[derive(Clone, Debug)]
pub struct WatchBatch {
    /// The watcher that saw them.
    pub source: WatchSource,
    /// What it saw.
    pub notifications: Vec<Notification>,
}

/// What one [`GraphBuilder::ingest`] did.
#[derive(Debug, Default)]
pub struct Ingested {
    /// Graph events built (virtual deletes included).
    pub events: usize,
    /// Graph events applied.
    pub applied: usize,
    /// Events rejected as malformed; the rest of the batch was applied.
    pub errors: Vec<IngestError>,
    /// The watcher runs whose list (first or relist) is now wholly in the graph.
    pub listed: Vec<WatchSource>,
    /// Objects a relist found gone (no watch delivered their delete), each with its resource
    /// and as the graph held it before: only when
    /// [`GraphBuilder::report_relist_deletions`] asked for them (shadow mode judges them).
    pub relisted_away: Vec<(String, NodeView)>,
}

/// The graph builder (see the module docs).
pub struct GraphBuilder<C> {
    ingester: Ingester,
    collector: Arc<Collector<C>>,
    graph_changes: Arc<GraphChanges>,
    stores: HashMap<String, (u64, ResourceStore)>,
    /// Per resource, the latest watcher run stopped for good: a batch of that run or an
    /// earlier one, arriving after its store was dropped, must not make a store again (one
    /// no watcher feeds any more, which could stay "behind" and hold decisions).
    stopped: HashMap<String, u64>,
    /// The events of the batch being built, kept between batches (see [`RETAINED_EVENTS`]).
    events: Vec<Event>,
    /// The buffer of the batch before, while the ingester's pool clears it (see
    /// [`GraphBuilder::recycle`]).
    clearing: Option<mpsc::Receiver<Vec<Event>>>,
    /// Whether [`Ingested::relisted_away`] is filled.
    report_relist_deletions: bool,
}

/// The capacity of the event buffer kept from one batch to the next. Built afresh, a batch's
/// buffer of a few thousand events (each a few hundred bytes) grew by reallocation and went
/// back to the allocator after every batch, and that copying and those fresh pages cost a
/// warm-up more CPU than its graph's lookups. A rare larger batch (a relist's deletes) gets a
/// buffer of its own, dropped after it.
const RETAINED_EVENTS: usize = 16 * 1024;

/// Batches with fewer events than this are cleared on the builder's thread: handing them to
/// the pool costs more than freeing them.
const CLEAR_IN_POOL_FROM: usize = 1024;

impl<C> fmt::Debug for GraphBuilder<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GraphBuilder")
            .field("resources", &self.stores.len())
            .field("pending_graph_changes", &self.graph_changes.len())
            .finish_non_exhaustive()
    }
}

impl<C: Cluster> GraphBuilder<C> {
    /// A builder applying batches with `ingester` (over the collector's graph) and feeding
    /// `collector`'s queues; `graph_changes` must be the inbox the collector was built with.
    pub fn new(
        ingester: Ingester,
        collector: Arc<Collector<C>>,
        graph_changes: Arc<GraphChanges>,
    ) -> GraphBuilder<C> {
        GraphBuilder {
            ingester,
            collector,
            graph_changes,
            stores: HashMap::new(),
            stopped: HashMap::new(),
            events: Vec::new(),
            clearing: None,
            report_relist_deletions: false,
        }
    }

    /// Makes [`ingest`](Self::ingest) report the objects relists find gone
    /// ([`Ingested::relisted_away`]), as the graph held them: one graph read per such object.
    pub fn report_relist_deletions(&mut self) {
        self.report_relist_deletions = true;
    }

    /// Applies the pending virtual deletes and `batches`, in order, and queues what they
    /// found (see the module docs).
    pub fn ingest(&mut self, batches: Vec<WatchBatch>) -> Ingested {
        let mut events = std::mem::take(&mut self.events);
        events.extend(self.graph_changes.drain(usize::MAX));
        events.reserve(batches.iter().map(|b| b.notifications.len()).sum());
        let mut listed = Vec::new();
        let mut lag_changes = Vec::new();
        let mut relisted_away = Vec::new();
        for batch in batches {
            let WatchBatch { source, notifications } = batch;
            let current = match self.stores.get(&source.resource) {
                Some((g, _)) => *g <= source.generation,
                None => self.stopped.get(&source.resource).is_none_or(|g| *g < source.generation),
            };
            let mut throwaway;
            let mut was_behind = false;
            let store = if current {
                let entry = self
                    .stores
                    .entry(source.resource.clone())
                    .or_insert_with(|| (source.generation, ResourceStore::new(source.object_type)));
                was_behind = entry.1.is_behind();
                if entry.0 != source.generation {
                    // A new run starts in warm-up: the old one's lag (if any) ends with it.
                    *entry = (source.generation, ResourceStore::new(source.object_type));
                }
                &mut entry.1
            } else {
                throwaway = ResourceStore::new(source.object_type);
                &mut throwaway
            };
            for n in notifications {
                let (ends_list, before) = (matches!(n, Notification::ListDone), events.len());
                if store.on_notification(n, &mut events) && current {
                    listed.push(source.clone());
                }
                if ends_list {
                    // What a list's end adds are the deletes it found, with only their UIDs
                    // (the store keeps no more). The graph, not yet given this batch, still
                    // holds those objects as last seen: their names and namespaces complete
                    // the deletes, as upstream's informer hands over the last object it
                    // stored (`DeletedFinalStateUnknown`), so that the owner the delete
                    // proves absent is cached under the coordinates its dependents name.
                    // Only from an observed node: a virtual one's name and namespace are
                    // what a dependent claimed (its namespace borrowed from the dependent),
                    // and the delete, not virtual, would re-identify the node by them first.
                    let graph = self.collector.graph();
                    for event in &mut events[before..] {
                        let Some(node) = graph.node(Uid::parse(&event.object.uid)) else {
                            continue;
                        };
                        if node.is_virtual {
                            continue;
                        }
                        event.object.name.clone_from(&node.identity.name);
                        event.object.namespace = node.identity.namespace.as_str().to_owned();
                        if self.report_relist_deletions {
                            relisted_away.push((source.resource.clone(), node));
                        }
                    }
                }
            }
            if current && store.is_behind() != was_behind {
                lag_changes.push((source.resource, store.is_behind()));
            }
        }
        let mut done = self.apply(&events);
        self.recycle(events);
        // After the apply: a watcher is back in step only once what it sent before is in the
        // graph (see `collector::lagging_watchers`).
        for (resource, behind) in lag_changes {
            self.collector.note_watch_behind(&resource, behind);
        }
        for source in &listed {
            // Now in the graph: its virtual owners may be proven absent by a list (warm-up
            // included), at a cost its size tells.
            let objects = self.stores.get(&source.resource).map_or(0, |(_, s)| s.len());
            self.collector.note_listed(source.object_type, objects);
        }
        done.listed = listed;
        done.relisted_away = relisted_away;
        done
    }

    /// Frees a batch's events and keeps their buffer for a later batch.
    ///
    /// A batch's events hold the strings the watchers decoded, allocated on the watchers'
    /// threads; freeing them from this one is the allocator's slow path (a free into another
    /// thread's page), and at 10M objects it took more than a third of the builder's thread,
    /// on the path of every batch. So a large batch is cleared on a thread of the ingester's
    /// pool, idle while this thread turns the next batch's notifications into events, and its
    /// buffer comes back for a later batch. At most one buffer is being cleared: the next
    /// batch waits for it before handing its own over (it has had a whole batch's time),
    /// which bounds the memory held to one batch more. Only when memory is freed changes: the
    /// graph and the queues were written before.
    fn recycle(&mut self, mut events: Vec<Event>) {
        if let Some(cleared) = self.clearing.take() {
            // Sent once, by a job that cannot panic before it sends.
            self.events = cleared.recv().unwrap_or_default();
        }
        if events.len() < CLEAR_IN_POOL_FROM {
            events.clear();
            if events.capacity() <= RETAINED_EVENTS && events.capacity() > self.events.capacity() {
                self.events = events;
            }
            return;
        }
        let (tx, rx) = mpsc::sync_channel(1);
        self.ingester.spawn(move || {
            events.clear();
            if events.capacity() > RETAINED_EVENTS {
                events = Vec::new(); // a rare large batch's buffer is not kept
            }
            let _ = tx.send(events);
        });
        self.clearing = Some(rx);
    }

    /// Applies graph events already built (tests, and upstream's test scripts, drive the graph
    /// with these) and queues what they found.
    pub fn apply(&mut self, events: &[Event]) -> Ingested {
        if events.is_empty() {
            return Ingested::default();
        }
        let mut out = self.ingester.ingest(events);
        let errors = std::mem::take(&mut out.errors);
        let applied = out.applied;
        self.collector.apply_ingest_output(out);
        Ingested { events: events.len(), applied, errors, ..Ingested::default() }
    }

    /// Drops the store of `source`, a watcher run stopped for good (not a later run's).
    pub fn forget(&mut self, source: &WatchSource) {
        let stopped = self.stopped.entry(source.resource.clone()).or_default();
        *stopped = (*stopped).max(source.generation);
        if self.stores.get(&source.resource).is_some_and(|(g, _)| *g <= source.generation) {
            self.stores.remove(&source.resource);
            self.collector.note_unlisted(source.object_type);
            // A stopped watcher holds no decision (its resource is gone, or a new run of it
            // starts in warm-up).
            self.collector.note_watch_behind(&source.resource, false);
        }
    }

    /// The inbox workers send virtual deletes to.
    pub fn graph_changes(&self) -> &Arc<GraphChanges> {
        &self.graph_changes
    }

    /// The collector whose queues this builder feeds.
    pub fn collector(&self) -> &Arc<Collector<C>> {
        &self.collector
    }
}
