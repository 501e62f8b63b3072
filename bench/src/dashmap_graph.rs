//! `dashmap`: a second baseline, the graph a straightforward concurrent port would build.
//!
//! One [`DashMap`] keyed by parsed [`Uid`] (with the same hasher as `upstream_design`,
//! hashbrown's default, foldhash), a plain node per entry (its strings owned, its owner
//! references as decoded, its dependents a hash set of UIDs, a `virtual` flag), and `T` threads
//! that each take a contiguous slice of the add events and apply them one at a time: the
//! object's own entry (create it, or promote a virtual node), then, for each owner reference,
//! the owner's entry (add the dependent, creating a virtual owner if absent), never holding two
//! entries at once.
//!
//! What it is not: a garbage collector's graph builder. Only add events are handled (updates
//! and deletes are not implemented); no invalid-reference checks, no transitions, no queue;
//! events of different threads are applied in no particular order, so where a virtual node is
//! created depends on the interleaving (the final graph does not: the same nodes and edges,
//! checked by a test). It answers "what would sharding one map by itself buy", beside
//! kube-gc's batched two-phase ingestion.

use dashmap::DashMap;
use dashmap::mapref::entry::Entry;
use hashbrown::DefaultHashBuilder;
use kube_gc_engine::{Event, EventType, ObjectType, OwnerReference, Uid};

/// A node of the dashmap graph.
#[derive(Debug)]
pub struct DashNode {
    /// apiVersion and kind (the informer's for observed nodes, the reference's for virtual).
    pub ty: ObjectType,
    /// The namespace (`""` if cluster-scoped; a virtual node takes its first dependent's).
    pub namespace: String,
    /// `metadata.name` (a virtual node's comes from the owner reference).
    pub name: String,
    /// Owner references as decoded.
    pub owners: Vec<OwnerReference>,
    /// UIDs of the dependents.
    pub dependents: hashbrown::HashSet<Uid, DefaultHashBuilder>,
    /// Created from a reference and not observed yet.
    pub is_virtual: bool,
}

/// The dashmap graph (see the module docs).
#[derive(Debug)]
pub struct DashGraph {
    nodes: DashMap<Uid, DashNode, DefaultHashBuilder>,
}

impl Default for DashGraph {
    fn default() -> Self {
        DashGraph::new()
    }
}

impl DashGraph {
    /// An empty graph with dashmap's default shard count.
    pub fn new() -> DashGraph {
        DashGraph { nodes: DashMap::with_hasher(DefaultHashBuilder::default()) }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph is empty.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Applies the add events of `events` on `threads` threads, each a contiguous slice.
    /// Returns how many virtual owners were created (each would be queued to
    /// attemptToDelete).
    pub fn ingest_adds(&self, events: &[Event], threads: usize) -> usize {
        let threads = threads.max(1);
        let chunk = events.len().div_ceil(threads).max(1);
        std::thread::scope(|s| {
            let handles: Vec<_> = events
                .chunks(chunk)
                .map(|part| s.spawn(move || part.iter().map(|e| self.add(e)).sum::<usize>()))
                .collect();
            handles.into_iter().map(|h| h.join().expect("dashmap ingest thread panicked")).sum()
        })
    }

    fn add(&self, e: &Event) -> usize {
        if e.event_type != EventType::Add {
            return 0;
        }
        let obj = &e.object;
        let uid = Uid::parse(&obj.uid);
        match self.nodes.entry(uid) {
            Entry::Occupied(mut o) => {
                let n = o.get_mut();
                if n.is_virtual {
                    n.is_virtual = false;
                    n.ty = e.object_type;
                    n.namespace = obj.namespace.clone();
                    n.name = obj.name.clone();
                    n.owners = obj.owner_references.clone();
                }
            }
            Entry::Vacant(v) => {
                v.insert(DashNode {
                    ty: e.object_type,
                    namespace: obj.namespace.clone(),
                    name: obj.name.clone(),
                    owners: obj.owner_references.clone(),
                    dependents: hashbrown::HashSet::with_hasher(DefaultHashBuilder::default()),
                    is_virtual: false,
                });
            }
        }
        let mut created = 0;
        for r in &obj.owner_references {
            match self.nodes.entry(Uid::parse(&r.uid)) {
                Entry::Occupied(mut o) => {
                    o.get_mut().dependents.insert(uid);
                }
                Entry::Vacant(v) => {
                    let mut dependents =
                        hashbrown::HashSet::with_hasher(DefaultHashBuilder::default());
                    dependents.insert(uid);
                    v.insert(DashNode {
                        ty: ObjectType::new(&r.api_version, &r.kind),
                        namespace: obj.namespace.clone(),
                        name: r.name.clone(),
                        owners: Vec::new(),
                        dependents,
                        is_virtual: true,
                    });
                    created += 1;
                }
            }
        }
        created
    }

    /// Calls `f` for every node: (uid, node).
    pub fn for_each(&self, mut f: impl FnMut(Uid, &DashNode)) {
        for r in self.nodes.iter() {
            f(*r.key(), r.value());
        }
    }
}
