//! `upstream_design`: upstream's graph builder rebuilt in Rust, the baseline of every graph
//! benchmark.
//!
//! Upstream: `graph.go` (`node`, `concurrentUIDToNode`) and `graph_builder.go`
//! (`processGraphChanges`, `addDependentToOwners`, `removeDependentFromOwners`,
//! `processTransitions`, `insertNode`, `removeNode`); GC-SPEC.md §1.2-1.5 and §2.2-2.7.
//!
//! One file on purpose (over 600 lines): it is read side by side with upstream's `graph.go`
//! and `graph_builder.go`, function for function, to check that the baseline is faithful.
//!
//! The point is to measure kube-gc against upstream's *design*, in the same language, in the
//! same process, on the same input, so that the ratio says what the design is worth and not
//! what Go versus Rust is worth. So the structure is upstream's, kept on purpose:
//!
//! - **One map, one lock.** `uidToNode` is one `RwLock` around one `HashMap` keyed by the
//!   36-character UID *string* (hashbrown's default hasher, foldhash, as fast as Go's map
//!   hash), each node behind an [`Arc`] (Go's `*node`).
//! - **Per-field locks.** A node's `dependents` (a set of node pointers, compared by pointer
//!   as Go's `map[*node]struct{}`), its `owners`, and each of the `virtual`, `beingDeleted`
//!   and `deletingDependents` flags have their own `RwLock`, as in `graph.go`.
//! - **One event at a time through a work queue.** The informer side ([`GraphBuilder::run`]'s
//!   caller thread) adds each event to `graphChanges`, a client-go-shaped queue (a mutex, a
//!   condition variable, a FIFO, *dirty* and *processing* sets keyed by event pointer); a
//!   single consumer thread runs `processGraphChanges` on one event at a time, `Get` … `Done`.
//! - **attemptToDelete and attemptToOrphan** are queues of the same shape keyed by node
//!   pointer; nothing drains them here (the GC workers are not part of warm-up), so their
//!   length after a warm-up is the number of distinct nodes queued.
//!
//! # Differences from upstream
//!
//! - Virtual delete events (which only GC workers produce) are handled as upstream, except
//!   that a virtual node whose dependents disagree on its identity is not given an alternate
//!   identity (`getAlternateOwnerIdentity` is left out); the warm-up never produces them.
//! - `reportInvalidNamespaceOwnerRef` counts the warnings instead of recording Events.
//! - The queues keep no metrics (client-go's call `time.Now()` on every add, get and done,
//!   which would only make the baseline slower) and have no rate limiter: the graph builder
//!   never uses `AddRateLimited` except for the alternate identity left out above.
//! - Go's nodes share their strings with the informer's cached objects; these nodes own
//!   copies, so the baseline's bytes per object count strings upstream would count in the
//!   informer cache instead. (The informer's cache is not part of either figure.)

use std::collections::{HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};

use hashbrown::DefaultHashBuilder;
use kube_gc_engine::graph::{GraphSnapshot, NodeSnapshot};
use kube_gc_engine::meta::{FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN};
use kube_gc_engine::{
    Event, EventType, ObjectMeta, ObjectReference, ObjectType, OwnerRef, OwnerReference, Uid,
};

/// The capacity of upstream's absent-owner cache (`NewReferenceCache(500)`).
const ABSENT_OWNER_CACHE_SIZE: usize = 500;

type Map<K, V> = std::collections::HashMap<K, V, DefaultHashBuilder>;
type Set<T> = HashSet<T, DefaultHashBuilder>;

/// Upstream's `objectReference`: the owner reference's four coordinates plus a namespace,
/// compared field by field.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Identity {
    /// The apiVersion, as Go builds it per event (`apps/v1`).
    pub api_version: String,
    /// The kind (`ReplicaSet`).
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid`, as its text (Go's `types.UID` is a string).
    pub uid: String,
    /// Namespace (`""` if cluster-scoped).
    pub namespace: String,
}

impl Identity {
    /// `identityFromEvent`: the monitor's apiVersion and kind, the object's name, UID and
    /// namespace.
    fn from_event(ty: ObjectType, obj: &ObjectMeta) -> Identity {
        Identity {
            // Go builds this string per event (`gvk.GroupVersion().String()`).
            api_version: ty.api_version().to_owned(),
            kind: ty.kind().to_owned(),
            name: obj.name.clone(),
            uid: obj.uid.clone(),
            namespace: obj.namespace.clone(),
        }
    }

    /// An owner reference's coordinates, placed in `namespace`.
    fn from_owner(owner: &OwnerReference, namespace: &str) -> Identity {
        Identity {
            api_version: owner.api_version.clone(),
            kind: owner.kind.clone(),
            name: owner.name.clone(),
            uid: owner.uid.clone(),
            namespace: namespace.to_owned(),
        }
    }

    /// `ownerReferenceMatchesCoordinates`.
    fn matches_coordinates(&self, r: &OwnerReference) -> bool {
        self.uid == r.uid
            && self.name == r.name
            && self.kind == r.kind
            && self.api_version == r.api_version
    }
}

/// Upstream's `node`: every field that ingestion writes behind its own lock.
#[derive(Debug)]
pub struct BaselineNode {
    /// Replaced only by cloning the node into a new pointer (never mutated in place).
    identity: Identity,
    /// `dependentsLock` + `dependents`: the nodes whose owner references name this UID.
    dependents: RwLock<Set<NodeRef>>,
    /// `deletingDependentsLock` + `deletingDependents`.
    deleting_dependents: RwLock<bool>,
    /// `beingDeletedLock` + `beingDeleted`.
    being_deleted: RwLock<bool>,
    /// `virtualLock` + `virtual`.
    is_virtual: RwLock<bool>,
    /// `owners`: the object's ownerReferences as last observed.
    owners: RwLock<Vec<OwnerReference>>,
}

impl BaselineNode {
    fn new(identity: Identity, is_virtual: bool, owners: Vec<OwnerReference>) -> BaselineNode {
        BaselineNode {
            identity,
            dependents: RwLock::new(Set::default()),
            deleting_dependents: RwLock::new(false),
            being_deleted: RwLock::new(false),
            is_virtual: RwLock::new(is_virtual),
            owners: RwLock::new(owners),
        }
    }

    /// `clone()`: identity, flags, owners and the dependents set (same child pointers).
    fn clone_node(&self) -> BaselineNode {
        BaselineNode {
            identity: self.identity.clone(),
            dependents: RwLock::new(self.dependents.read().expect("lock").clone()),
            deleting_dependents: RwLock::new(self.is_deleting_dependents()),
            being_deleted: RwLock::new(self.is_being_deleted()),
            is_virtual: RwLock::new(!self.is_observed()),
            owners: RwLock::new(self.owners()),
        }
    }

    /// The node's identity.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }
    fn is_observed(&self) -> bool {
        !*self.is_virtual.read().expect("lock")
    }
    fn mark_observed(&self) {
        *self.is_virtual.write().expect("lock") = false;
    }
    fn is_being_deleted(&self) -> bool {
        *self.being_deleted.read().expect("lock")
    }
    fn mark_being_deleted(&self) {
        *self.being_deleted.write().expect("lock") = true;
    }
    fn is_deleting_dependents(&self) -> bool {
        *self.deleting_dependents.read().expect("lock")
    }
    fn mark_deleting_dependents(&self) {
        *self.deleting_dependents.write().expect("lock") = true;
    }
    fn owners(&self) -> Vec<OwnerReference> {
        self.owners.read().expect("lock").clone()
    }
    fn add_dependent(&self, dep: &NodeRef) {
        self.dependents.write().expect("lock").insert(dep.clone());
    }
    fn delete_dependent(&self, dep: &NodeRef) {
        self.dependents.write().expect("lock").remove(dep);
    }
    fn get_dependents(&self) -> Vec<NodeRef> {
        self.dependents.read().expect("lock").iter().cloned().collect()
    }
}

/// A node pointer, compared and hashed by address (Go's `*node`).
#[derive(Clone, Debug)]
pub struct NodeRef(Arc<BaselineNode>);

impl PartialEq for NodeRef {
    fn eq(&self, other: &NodeRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
impl Eq for NodeRef {}
impl Hash for NodeRef {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(Arc::as_ptr(&self.0), state);
    }
}

/// An event pointer, compared by address (Go's `*event`): each event is its own queue item.
#[derive(Clone, Copy, Debug)]
struct EventRef<'a>(&'a Event);

impl PartialEq for EventRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}
impl Eq for EventRef<'_> {}
impl Hash for EventRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0, state);
    }
}

/// client-go's work queue (`workqueue.Typed`), its shape without metrics or rate limiting:
/// one mutex over a FIFO, the *dirty* set (needs processing) and the *processing* set (a
/// worker holds it), and a condition variable for blocked getters.
#[derive(Debug)]
pub struct Queue<T> {
    state: Mutex<QueueState<T>>,
    cond: Condvar,
}

#[derive(Debug)]
struct QueueState<T> {
    fifo: VecDeque<T>,
    dirty: Set<T>,
    processing: Set<T>,
    shutting_down: bool,
    /// Getters blocked on the condition variable. Go's `sync.Cond.Signal` costs nothing when
    /// no one waits; std's `notify_one` always makes a futex call, so only call it then.
    waiters: usize,
}

impl<T: Clone + Eq + Hash> Default for Queue<T> {
    fn default() -> Self {
        Queue::new()
    }
}

impl<T: Clone + Eq + Hash> Queue<T> {
    /// An empty queue.
    pub fn new() -> Queue<T> {
        Queue {
            state: Mutex::new(QueueState {
                fifo: VecDeque::new(),
                dirty: Set::default(),
                processing: Set::default(),
                shutting_down: false,
                waiters: 0,
            }),
            cond: Condvar::new(),
        }
    }

    /// `Add`: ignored after shutdown or when already dirty; held back while processing.
    pub fn add(&self, item: T) {
        let mut s = self.state.lock().expect("queue lock");
        if s.shutting_down || s.dirty.contains(&item) {
            return;
        }
        s.dirty.insert(item.clone());
        if s.processing.contains(&item) {
            return;
        }
        s.fifo.push_back(item);
        if s.waiters > 0 {
            self.cond.notify_one();
        }
    }

    /// `Get`: blocks for an item; `None` once shut down and empty.
    pub fn get(&self) -> Option<T> {
        let mut s = self.state.lock().expect("queue lock");
        while s.fifo.is_empty() && !s.shutting_down {
            s.waiters += 1;
            s = self.cond.wait(s).expect("queue lock");
            s.waiters -= 1;
        }
        let item = s.fifo.pop_front()?;
        s.processing.insert(item.clone());
        s.dirty.remove(&item);
        Some(item)
    }

    /// `Done`: re-queues the item if it was added while processing.
    pub fn done(&self, item: &T) {
        let mut s = self.state.lock().expect("queue lock");
        s.processing.remove(item);
        if s.dirty.contains(item) {
            s.fifo.push_back(item.clone());
            if s.waiters > 0 {
                self.cond.notify_one();
            }
        }
    }

    /// `ShutDown`: later adds are ignored; getters drain the FIFO, then see `None`.
    pub fn shut_down(&self) {
        self.state.lock().expect("queue lock").shutting_down = true;
        self.cond.notify_all();
    }

    /// `Len`: items waiting in the FIFO.
    pub fn len(&self) -> usize {
        self.state.lock().expect("queue lock").fifo.len()
    }

    /// Whether the FIFO is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a [`GraphBuilder::run`] did besides building the graph.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct RunStats {
    /// Events processed.
    pub processed: usize,
    /// Virtual owner nodes created (each queued to attemptToDelete).
    pub virtual_owners_created: usize,
    /// `attemptToDelete.Add` calls (before the queue collapses duplicates).
    pub attempt_to_delete_adds: usize,
    /// `OwnerRefInvalidNamespace` warnings.
    pub warnings: usize,
}

/// Upstream's `GraphBuilder`, the graph half of it: `uidToNode`, the absent-owner cache and
/// the two output queues (see the module docs).
#[derive(Debug)]
pub struct GraphBuilder {
    uid_to_node: RwLock<Map<String, NodeRef>>,
    attempt_to_delete: Queue<NodeRef>,
    attempt_to_orphan: Queue<NodeRef>,
    absent_owner_cache: Mutex<lru::LruCache<Identity, ()>>,
    stats: Counters,
}

/// [`RunStats`] as relaxed atomics (upstream counts nothing; these cost one uncontended
/// atomic add each).
#[derive(Debug, Default)]
struct Counters {
    processed: AtomicUsize,
    virtual_owners_created: AtomicUsize,
    attempt_to_delete_adds: AtomicUsize,
    warnings: AtomicUsize,
}

impl Counters {
    fn load(&self) -> RunStats {
        RunStats {
            processed: self.processed.load(Ordering::Relaxed),
            virtual_owners_created: self.virtual_owners_created.load(Ordering::Relaxed),
            attempt_to_delete_adds: self.attempt_to_delete_adds.load(Ordering::Relaxed),
            warnings: self.warnings.load(Ordering::Relaxed),
        }
    }
}

fn bump(counter: &AtomicUsize) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl Default for GraphBuilder {
    fn default() -> Self {
        GraphBuilder::new()
    }
}

impl GraphBuilder {
    /// An empty graph builder.
    pub fn new() -> GraphBuilder {
        GraphBuilder {
            uid_to_node: RwLock::new(Map::default()),
            attempt_to_delete: Queue::new(),
            attempt_to_orphan: Queue::new(),
            absent_owner_cache: Mutex::new(lru::LruCache::new(
                NonZeroUsize::new(ABSENT_OWNER_CACHE_SIZE).expect("non-zero"),
            )),
            stats: Counters::default(),
        }
    }

    /// Delivers `events` the way upstream does: this thread plays the informers and adds each
    /// event to a `graphChanges` queue, one consumer thread runs `processGraphChanges` until the
    /// queue is drained. Returns once every event is processed.
    pub fn run(&self, events: &[Event]) -> RunStats {
        let graph_changes: Queue<EventRef<'_>> = Queue::new();
        let before = self.stats.load();
        std::thread::scope(|scope| {
            let consumer = scope.spawn(|| while self.process_graph_changes(&graph_changes) {});
            for e in events {
                graph_changes.add(EventRef(e));
            }
            graph_changes.shut_down();
            consumer.join().expect("processGraphChanges panicked");
        });
        let after = self.stats.load();
        RunStats {
            processed: after.processed - before.processed,
            virtual_owners_created: after.virtual_owners_created - before.virtual_owners_created,
            attempt_to_delete_adds: after.attempt_to_delete_adds - before.attempt_to_delete_adds,
            warnings: after.warnings - before.warnings,
        }
    }

    /// Applies `events` one at a time on this thread, with no queue (for tests).
    pub fn apply_all(&self, events: &[Event]) {
        for e in events {
            self.process_event(e);
        }
    }

    /// Number of nodes in `uidToNode`.
    pub fn len(&self) -> usize {
        self.uid_to_node.read().expect("lock").len()
    }

    /// Whether the graph is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Length of the attemptToDelete queue (distinct nodes queued and not taken).
    pub fn attempt_to_delete_len(&self) -> usize {
        self.attempt_to_delete.len()
    }

    /// Length of the attemptToOrphan queue.
    pub fn attempt_to_orphan_len(&self) -> usize {
        self.attempt_to_orphan.len()
    }

    /// Counters since the builder was made.
    pub fn stats(&self) -> RunStats {
        self.stats.load()
    }

    /// The graph in the engine's canonical, comparable form (upstream's fields only: compare
    /// it with [`GraphSnapshot::upstream_fields`] of the engine's).
    pub fn snapshot(&self) -> GraphSnapshot {
        let mut snap = GraphSnapshot::default();
        for n in self.uid_to_node.read().expect("lock").values() {
            let n = &n.0;
            let id = &n.identity;
            let identity =
                ObjectReference::new(&id.api_version, &id.kind, &id.namespace, &id.name, &id.uid);
            let owners = n
                .owners()
                .iter()
                .map(|r| OwnerRef {
                    ty: ObjectType::new(&r.api_version, &r.kind),
                    name: r.name.clone(),
                    uid: Uid::parse(&r.uid),
                    controller: r.controller,
                    block_owner_deletion: r.block_owner_deletion,
                })
                .collect();
            let mut dependents: Vec<Uid> =
                n.get_dependents().iter().map(|d| Uid::parse(&d.0.identity.uid)).collect();
            dependents.sort_unstable();
            snap.nodes.insert(
                identity.uid,
                NodeSnapshot {
                    identity,
                    is_virtual: !n.is_observed(),
                    being_deleted: n.is_being_deleted(),
                    deleting_dependents: n.is_deleting_dependents(),
                    owners,
                    dependents,
                    resource_version: None,
                    has_gc_finalizers: false,
                },
            );
        }
        snap
    }

    // --- concurrentUIDToNode ---

    fn read(&self, uid: &str) -> Option<NodeRef> {
        self.uid_to_node.read().expect("lock").get(uid).cloned()
    }

    fn write(&self, node: &NodeRef) {
        self.uid_to_node.write().expect("lock").insert(node.0.identity.uid.clone(), node.clone());
    }

    fn delete(&self, uid: &str) {
        self.uid_to_node.write().expect("lock").remove(uid);
    }

    fn enqueue_delete(&self, node: &NodeRef) {
        bump(&self.stats.attempt_to_delete_adds);
        self.attempt_to_delete.add(node.clone());
    }

    // --- graph_builder.go ---

    /// `processGraphChanges`: one `Get`, one event, one `Done`. False once shut down.
    fn process_graph_changes(&self, graph_changes: &Queue<EventRef<'_>>) -> bool {
        let Some(item) = graph_changes.get() else { return false };
        self.process_event(item.0);
        graph_changes.done(&item);
        true
    }

    fn process_event(&self, event: &Event) {
        bump(&self.stats.processed);
        let obj = &event.object;
        let mut existing = self.read(&obj.uid);
        // Virtual → observed promotion.
        if let Some(node) = &existing
            && !event.is_virtual
            && !node.0.is_observed()
        {
            let observed = Identity::from_event(event.object_type, obj);
            if observed != node.0.identity {
                let (_, mismatched) = partition_dependents(&node.0.get_dependents(), &observed);
                for dep in mismatched {
                    if !observed.namespace.is_empty()
                        && dep.0.identity.namespace != observed.namespace
                    {
                        self.report_invalid_namespace_owner_ref(&dep, &observed.uid);
                    }
                    self.enqueue_delete(&dep);
                }
                let mut clone = node.0.clone_node();
                clone.identity = observed;
                let clone = NodeRef(Arc::new(clone));
                self.write(&clone);
                existing = Some(clone);
            }
            existing.as_ref().expect("set above").0.mark_observed();
        }

        match (event.event_type, existing) {
            (EventType::Add | EventType::Update, None) => {
                let being_deleted = obj.deletion_timestamp;
                let node = BaselineNode::new(
                    Identity::from_event(event.object_type, obj),
                    false,
                    obj.owner_references.clone(),
                );
                *node.being_deleted.write().expect("lock") = being_deleted;
                *node.deleting_dependents.write().expect("lock") =
                    being_deleted && obj.has_finalizer(FINALIZER_DELETE_DEPENDENTS);
                let node = NodeRef(Arc::new(node));
                self.insert_node(&node);
                self.process_transitions(event.old_object.as_deref(), obj, &node);
            }
            (EventType::Add | EventType::Update, Some(mut node)) => {
                // #137036: follow the informer's apiVersion/kind.
                if !event.is_virtual
                    && (node.0.identity.api_version != event.object_type.api_version()
                        || node.0.identity.kind != event.object_type.kind())
                {
                    let mut clone = node.0.clone_node();
                    clone.identity.api_version = event.object_type.api_version().to_owned();
                    clone.identity.kind = event.object_type.kind().to_owned();
                    let clone = NodeRef(Arc::new(clone));
                    self.write(&clone);
                    for owner in node.0.owners() {
                        if let Some(o) = self.read(&owner.uid) {
                            let mut deps = o.0.dependents.write().expect("lock");
                            if deps.remove(&node) {
                                deps.insert(clone.clone());
                            }
                        }
                    }
                    node = clone;
                }
                let old = node.0.owners();
                let diff = references_diffs(&old, &obj.owner_references);
                if !diff.is_empty() {
                    self.add_unblocked_owners_to_delete_queue(&diff);
                    *node.0.owners.write().expect("lock") = obj.owner_references.clone();
                    self.add_dependent_to_owners(&node, &diff.added);
                    self.remove_dependent_from_owners(&node, &diff.removed);
                }
                if obj.deletion_timestamp {
                    node.0.mark_being_deleted();
                }
                self.process_transitions(event.old_object.as_deref(), obj, &node);
            }
            (EventType::Delete, None) => {} // "item doesn't exist in the graph"
            (EventType::Delete, Some(node)) => self.process_delete(event, node),
        }
    }

    fn process_delete(&self, event: &Event, node: NodeRef) {
        let obj = &event.object;
        let mut remove_existing = true;
        if event.is_virtual {
            let deleted = Identity::from_event(event.object_type, obj);
            let deps = node.0.get_dependents();
            let (matching, nonmatching) = partition_dependents(&deps, &deleted);
            if !node.0.is_observed() {
                if !nonmatching.is_empty() {
                    remove_existing = false;
                    if !matching.is_empty() {
                        self.absent_owner_cache.lock().expect("cache").put(deleted.clone(), ());
                        for d in &matching {
                            self.enqueue_delete(d);
                        }
                    }
                    // Left out: getAlternateOwnerIdentity (see the module docs).
                }
            } else if node.0.identity != deleted {
                remove_existing = false;
                if !matching.is_empty() {
                    self.absent_owner_cache.lock().expect("cache").put(deleted, ());
                    for d in &matching {
                        self.enqueue_delete(d);
                    }
                }
            }
        }
        if !remove_existing {
            return;
        }
        self.remove_node(&node);
        let deps = node.0.dependents.read().expect("lock");
        if !deps.is_empty() {
            let id = Identity::from_event(event.object_type, obj);
            self.absent_owner_cache.lock().expect("cache").put(id, ());
        }
        for d in deps.iter() {
            self.enqueue_delete(d);
        }
        drop(deps);
        for owner in node.0.owners() {
            if let Some(o) = self.read(&owner.uid)
                && o.0.is_deleting_dependents()
            {
                self.enqueue_delete(&o);
            }
        }
    }

    /// `insertNode`.
    fn insert_node(&self, n: &NodeRef) {
        self.write(n);
        let owners = n.0.owners();
        let owners: Vec<&OwnerReference> = owners.iter().collect();
        self.add_dependent_to_owners(n, &owners);
    }

    /// `removeNode`.
    fn remove_node(&self, n: &NodeRef) {
        self.delete(&n.0.identity.uid);
        let owners = n.0.owners();
        let owners: Vec<&OwnerReference> = owners.iter().collect();
        self.remove_dependent_from_owners(n, &owners);
    }

    /// `addDependentToOwners`.
    fn add_dependent_to_owners(&self, n: &NodeRef, owners: &[&OwnerReference]) {
        let mut potentially_invalid = false;
        for owner in owners {
            let found = self.read(&owner.uid);
            let owner_node = match &found {
                Some(o) => o.clone(),
                None => {
                    let identity = Identity::from_owner(owner, &n.0.identity.namespace);
                    let v = NodeRef(Arc::new(BaselineNode::new(identity, true, Vec::new())));
                    self.write(&v);
                    v
                }
            };
            owner_node.0.add_dependent(n);
            if found.is_none() {
                bump(&self.stats.virtual_owners_created);
                self.enqueue_delete(&owner_node);
            } else if !potentially_invalid {
                let o = &owner_node.0.identity;
                let owner_namespaced = !o.namespace.is_empty();
                if owner_namespaced && o.namespace != n.0.identity.namespace {
                    if owner_node.0.is_observed() {
                        self.report_invalid_namespace_owner_ref(n, &owner.uid);
                    }
                    potentially_invalid = true;
                } else if !o.matches_coordinates(owner) {
                    potentially_invalid = true;
                } else if !owner_namespaced
                    && o.namespace != n.0.identity.namespace
                    && !owner_node.0.is_observed()
                {
                    potentially_invalid = true; // #98040
                }
            }
        }
        if potentially_invalid {
            self.enqueue_delete(n);
        }
    }

    /// `removeDependentFromOwners`: owners not in the graph are skipped.
    fn remove_dependent_from_owners(&self, n: &NodeRef, owners: &[&OwnerReference]) {
        for owner in owners {
            if let Some(o) = self.read(&owner.uid) {
                o.0.delete_dependent(n);
            }
        }
    }

    /// `addUnblockedOwnersToDeleteQueue`.
    fn add_unblocked_owners_to_delete_queue(&self, diff: &RefDiff<'_>) {
        for r in &diff.removed {
            if r.block_owner_deletion == Some(true)
                && let Some(o) = self.read(&r.uid)
            {
                self.enqueue_delete(&o);
            }
        }
        for (old, new) in &diff.changed {
            if old.block_owner_deletion == Some(true)
                && new.block_owner_deletion != Some(true)
                && let Some(o) = self.read(&new.uid)
            {
                self.enqueue_delete(&o);
            }
        }
    }

    /// `processTransitions`.
    fn process_transitions(&self, old: Option<&ObjectMeta>, new: &ObjectMeta, n: &NodeRef) {
        if deletion_starts_with_finalizer(old, new, FINALIZER_ORPHAN) {
            self.attempt_to_orphan.add(n.clone());
            return;
        }
        if deletion_starts_with_finalizer(old, new, FINALIZER_DELETE_DEPENDENTS) {
            n.0.mark_deleting_dependents();
            for dep in n.0.get_dependents() {
                self.enqueue_delete(&dep);
            }
            self.enqueue_delete(n);
        }
    }

    /// `reportInvalidNamespaceOwnerRef`: counted, not recorded.
    fn report_invalid_namespace_owner_ref(&self, n: &NodeRef, owner_uid: &str) {
        if n.0.owners.read().expect("lock").iter().any(|r| r.uid == owner_uid) {
            bump(&self.stats.warnings);
        }
    }
}

/// `deletionStartsWithFinalizer`.
fn deletion_starts_with_finalizer(old: Option<&ObjectMeta>, new: &ObjectMeta, f: &str) -> bool {
    if !new.deletion_timestamp || !new.has_finalizer(f) {
        return false;
    }
    match old {
        None => true,
        Some(old) => !old.deletion_timestamp || !old.has_finalizer(f),
    }
}

/// `partitionDependents`: (matching, nonmatching) dependents of the owner `owner`.
fn partition_dependents(deps: &[NodeRef], owner: &Identity) -> (Vec<NodeRef>, Vec<NodeRef>) {
    let owner_namespaced = !owner.namespace.is_empty();
    let (mut matching, mut nonmatching) = (Vec::new(), Vec::new());
    for dep in deps {
        let (mut found_match, mut found_mismatch) = (false, false);
        if owner_namespaced && dep.0.identity.namespace != owner.namespace {
            found_mismatch = true;
        } else {
            for r in dep.0.owners.read().expect("lock").iter() {
                if r.uid != owner.uid {
                    continue;
                }
                if owner.matches_coordinates(r) {
                    found_match = true;
                } else {
                    found_mismatch = true;
                }
            }
        }
        if found_match {
            matching.push(dep.clone());
        }
        if found_mismatch {
            nonmatching.push(dep.clone());
        }
    }
    (matching, nonmatching)
}

/// The result of [`references_diffs`].
#[derive(Debug, Default)]
pub struct RefDiff<'a> {
    /// References whose UID is only in the new list (Go map order; here, the new list's).
    pub added: Vec<&'a OwnerReference>,
    /// References whose UID is only in the old list.
    pub removed: Vec<&'a OwnerReference>,
    /// (old, new) with the same UID that differ in some field.
    pub changed: Vec<(&'a OwnerReference, &'a OwnerReference)>,
}

impl RefDiff<'_> {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// Upstream's `referencesDiffs`, ported as written: a map of the new references by UID (the
/// last of a repeated UID wins), each old reference looked up and deleted from it, what is
/// left is added.
pub fn references_diffs<'a>(old: &'a [OwnerReference], new: &'a [OwnerReference]) -> RefDiff<'a> {
    let mut new_uid_to_ref: Map<&str, &OwnerReference> = Map::default();
    let mut order: Vec<&str> = Vec::with_capacity(new.len());
    for r in new {
        if new_uid_to_ref.insert(&r.uid, r).is_none() {
            order.push(&r.uid);
        }
    }
    let mut diff = RefDiff::default();
    for o in old {
        match new_uid_to_ref.remove(o.uid.as_str()) {
            Some(n) => {
                if n != o {
                    diff.changed.push((o, n));
                }
            }
            None => diff.removed.push(o),
        }
    }
    diff.added = order.into_iter().filter_map(|uid| new_uid_to_ref.get(uid).copied()).collect();
    diff
}
