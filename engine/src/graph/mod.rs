//! The dependency graph: every observed object and every virtual owner, sharded by UID.
//!
//! Upstream: `graph.go` (`node`, `concurrentUIDToNode`); GC-SPEC.md §1.2-1.3.
//!
//! The graph is `N` shards (`N` a power of two), each a `hashbrown` table of nodes (`node.rs`,
//! their dependents sets in `dependents.rs`)
//! and their names (`names.rs`) behind its own cache-padded readers-writer lock. A node's shard
//! is a function of its UID's hash; ingestion ([`crate::ingest`]) writes shards in parallel,
//! workers read them.
//!
//! # Invariants
//!
//! - At most one node per UID.
//! - For every node `d` and every owner reference `r` of `d`: if the owner node `o` with
//!   `r.uid` is in the graph and `d` was added to it since `o` was created, `o`'s dependents hold
//!   an entry for `d` whose references equal `d`'s references with that UID.
//!   (Upstream's graph is the same set of edges; see [`crate::ingest`] for the exceptions it
//!   shares, such as an owner re-created under a UID its dependents still name.)
//!
//! # Concurrency
//!
//! - **No code path ever holds two shard locks at once.** Every method here takes one shard's
//!   lock, copies out or writes what it needs, and releases it before touching another shard.
//!   Deadlock is therefore impossible by construction (and checked by the loom models).
//! - Ingestion is the only writer; workers are readers and copy out under a short read lock,
//!   so a worker always sees one consistent version of a node, never a half-applied event.
//!   Different nodes read one after the other may be from different moments; the collector
//!   re-reads the live object before acting, so this costs at most a retry.
//!
//! # Hash bits
//!
//! One 64-bit hash per UID ([`Uid::hash64`]) serves both the shard choice and the table:
//! hashbrown takes its bucket index from the low bits and its control-byte tag from the top 7
//! bits, so the shard is taken from bits 40.. (below the tag, far above any bucket index a
//! shard's table reaches), and the nodes of one shard still spread over all buckets and tags.

pub(crate) mod dependents;
pub(crate) mod names;
pub(crate) mod node;

use crossbeam_utils::CachePadded;
use hashbrown::HashTable;

use crate::identity::{ObjectReference, OwnerRef, Uid};
use crate::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use names::Names;
pub(crate) use node::Node;

/// The most shards a graph may have (the shard index comes from 16 hash bits).
pub const MAX_SHARDS: usize = 1 << 16;
/// Bits of [`Uid::hash64`] below the shard index.
const SHARD_SHIFT: u32 = 40;

/// A queue item: a node, as upstream's `*node` pointer identifies it.
///
/// Upstream queues hold node pointers, and when it re-identifies a virtual node it clones it
/// into a new pointer, so the old queued pointer stays virtual and is skipped by the worker.
/// kube-gc keeps one node per UID and counts those re-identifications instead: an item whose
/// `incarnation` is older than its node's stands for the old pointer.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct NodeKey {
    /// The node's UID.
    pub uid: Uid,
    /// The node's incarnation when the item was queued.
    pub incarnation: u32,
}

/// A copy of one node, taken under its shard's read lock.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct NodeView {
    /// The node's identity (upstream's objectReference).
    pub identity: ObjectReference,
    /// The node's incarnation (see [`NodeKey`]).
    pub incarnation: u32,
    /// Never observed through an informer.
    pub is_virtual: bool,
    /// Has a deletionTimestamp.
    pub being_deleted: bool,
    /// Has a deletionTimestamp and the `foregroundDeletion` finalizer.
    pub deleting_dependents: bool,
    /// The object's ownerReferences as last observed.
    pub owners: Vec<OwnerRef>,
    /// How many dependents the node has.
    pub dependents_len: usize,
    /// The object's `metadata.resourceVersion` as last observed, if known (a decimal below
    /// 2^56); `None` for virtual nodes.
    pub resource_version: Option<u64>,
    /// The last observed object had the `orphan` or `foregroundDeletion` finalizer.
    pub has_gc_finalizers: bool,
}

impl NodeView {
    /// The queue key of this version of the node.
    pub fn key(&self) -> NodeKey {
        NodeKey { uid: self.identity.uid, incarnation: self.incarnation }
    }
}

/// A dependent as its owner's side of the edge records it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct DependentView {
    /// The dependent's UID.
    pub uid: Uid,
    /// The dependent's namespace.
    pub namespace: crate::identity::Namespace,
}

impl From<&dependents::DependentEntry> for DependentView {
    fn from(entry: &dependents::DependentEntry) -> DependentView {
        DependentView { uid: entry.uid, namespace: entry.namespace }
    }
}

/// Slots per slab chunk: chunks never move once allocated, and a shard over-allocates by at
/// most one chunk.
const SLAB_CHUNK: usize = 64;

/// One shard: its nodes in a slab of fixed-size chunks, found by UID through a hash table of
/// 4-byte slot numbers, and their names ([`names`]).
///
/// Keeping the nodes out of the table is what keeps the graph small: a hash table runs
/// between half and seven-eighths full, so a table of whole nodes pays up to twice their size
/// for every object and copies them all each time it grows; a table of slot numbers pays that
/// on 4 bytes, and the slab is full but for one chunk.
#[derive(Debug, Default)]
pub(crate) struct Shard {
    index: HashTable<u32>,
    chunks: Vec<Box<[Option<Node>]>>,
    /// Slots emptied by removals, reused first.
    free: Vec<u32>,
    /// Slots ever handed out (the next new slot's number).
    used: u32,
    /// The names of the nodes and of their owner references.
    names: Names,
}

/// Asks the CPU to fetch the cache line at `p` into every level, without waiting for it.
#[inline(always)]
#[allow(unsafe_code)]
pub(crate) fn prefetch<T>(p: *const T) {
    // SAFETY: a prefetch reads nothing the program sees and never faults, whatever the
    // address; SSE is part of every x86_64 CPU.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

fn slot_of(chunks: &[Box<[Option<Node>]>], slot: u32) -> &Option<Node> {
    let slot = slot as usize;
    &chunks[slot / SLAB_CHUNK][slot % SLAB_CHUNK]
}

fn slot_mut(chunks: &mut [Box<[Option<Node>]>], slot: u32) -> &mut Option<Node> {
    let slot = slot as usize;
    &mut chunks[slot / SLAB_CHUNK][slot % SLAB_CHUNK]
}

fn node_in(chunks: &[Box<[Option<Node>]>], slot: u32) -> &Node {
    slot_of(chunks, slot).as_ref().expect("indexed slots hold a node")
}

impl Shard {
    fn find(&self, uid: Uid) -> Option<u32> {
        let chunks = &self.chunks;
        self.index.find(uid.hash64(), |&s| node_in(chunks, s).uid == uid).copied()
    }

    /// Looks up each of `uids`, one right after the other, and asks for what the next steps
    /// of a batch's walk will read (phase two warms a window of steps at a time): warms the
    /// caches with the index entries and nodes, then, for each node found, prefetches its
    /// name's bytes and its dependents set's header. A walk does an event's work between two
    /// lookups, so each lookup waits for its own cache misses (a few hundred nanoseconds each
    /// in a graph of millions); lookups with nothing between them are independent, and the CPU
    /// overlaps their misses. The name and the set are only known once the node has arrived,
    /// so they are prefetched, which does not wait: loading them here instead cost more than
    /// it saved (docs/performance-log.md).
    pub(crate) fn warm(&self, uids: impl Iterator<Item = Uid>) {
        for uid in uids {
            self.get_prefetching(uid);
        }
    }

    /// [`Shard::warm`] that also hands back what it found: the node of each of `uids`, in
    /// order, for a caller that reads them while the shard cannot change (under its read
    /// lock), so that each is looked up once rather than warmed and then found again.
    pub(crate) fn get_all(&self, uids: impl Iterator<Item = Option<Uid>>) -> Vec<Option<&Node>> {
        uids.map(|uid| self.get_prefetching(uid?)).collect()
    }

    /// The node with `uid`, its name and dependents set asked for (see [`Shard::warm`]).
    fn get_prefetching(&self, uid: Uid) -> Option<&Node> {
        let node = self.get(uid)?;
        self.names.prefetch(node.name);
        node.dependents.prefetch();
        Some(node)
    }

    /// The number of nodes.
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Every node, in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Node> {
        self.chunks.iter().flat_map(|c| c.iter()).flatten()
    }

    pub(crate) fn get(&self, uid: Uid) -> Option<&Node> {
        self.find(uid).map(|s| node_in(&self.chunks, s))
    }

    /// The node with `uid`, and the shard's names to read and write its own with.
    pub(crate) fn get_mut(&mut self, uid: Uid) -> Option<(&mut Node, &mut Names)> {
        let slot = self.find(uid)?;
        let node = slot_mut(&mut self.chunks, slot).as_mut()?;
        Some((node, &mut self.names))
    }

    /// The names of this shard's nodes (see [`names`]).
    pub(crate) fn names(&self) -> &Names {
        &self.names
    }

    /// The names, to store those of a node about to be inserted.
    pub(crate) fn names_mut(&mut self) -> &mut Names {
        &mut self.names
    }

    /// Inserts `node`, whose UID the shard does not hold (the caller has just looked it up
    /// under the same write lock, so a second lookup here would only repeat the answer); its
    /// names must be in this shard's [`Shard::names`].
    pub(crate) fn insert_absent(&mut self, node: Node) {
        debug_assert!(self.find(node.uid).is_none(), "{} is in the shard already", node.uid);
        let slot = self.index_new_slot(node.uid);
        *slot_mut(&mut self.chunks, slot) = Some(node);
    }

    /// A free slot, indexed under `uid` (still empty: the caller fills it).
    fn index_new_slot(&mut self, uid: Uid) -> u32 {
        let slot = self.free.pop().unwrap_or_else(|| {
            let slot = self.used;
            self.used += 1;
            if slot as usize / SLAB_CHUNK == self.chunks.len() {
                self.chunks.push((0..SLAB_CHUNK).map(|_| None).collect());
            }
            slot
        });
        if self.index.len() == self.index.capacity() {
            self.grow_index();
        }
        let chunks = &self.chunks;
        // The new slot is still empty: hash its node's UID from `uid` itself.
        self.index.insert_unique(uid.hash64(), slot, |&s| {
            slot_of(chunks, s).as_ref().map_or(uid.hash64(), |n| n.uid.hash64())
        });
        slot
    }

    /// Doubles the index, filled by walking the slab in slot order. Grown in place, the table
    /// would hash each entry again by reading its node's UID at a random place in the slab,
    /// a cache miss per node once a shard outgrows the caches; walked in order, the nodes
    /// stream in, and only the new table (5 bytes an entry) is written at random.
    fn grow_index(&mut self) {
        let chunks = &self.chunks;
        let hash = |&s: &u32| node_in(chunks, s).uid.hash64();
        let mut index = HashTable::with_capacity((self.index.capacity() * 2).max(SLAB_CHUNK));
        for (slot, node) in chunks.iter().flat_map(|c| c.iter()).enumerate() {
            if let Some(node) = node {
                index.insert_unique(node.uid.hash64(), slot as u32, hash);
            }
        }
        debug_assert_eq!(index.len(), self.index.len(), "every node, and only nodes, indexed");
        self.index = index;
    }

    /// Removes the node with `uid`. Its names stay readable in [`Shard::names`] until the
    /// shard next compacts them.
    pub(crate) fn remove(&mut self, uid: Uid) -> Option<Node> {
        let chunks = &self.chunks;
        let entry = self.index.find_entry(uid.hash64(), |&s| node_in(chunks, s).uid == uid).ok()?;
        let slot = entry.remove().0;
        self.free.push(slot);
        let removed = slot_mut(&mut self.chunks, slot).take()?;
        removed.release_names(&mut self.names);
        Some(removed)
    }

    /// Copies the names still in use into fresh chunks, and rewrites every id, once the
    /// released names outweigh them (see [`names`]). Invalidates every [`names::NameId`] of
    /// the shard not held by one of its nodes: call it between steps, never holding one.
    pub(crate) fn compact_names_if_wasteful(&mut self) {
        if !self.names.is_wasteful() {
            return;
        }
        let old = std::mem::take(&mut self.names);
        for node in self.chunks.iter_mut().flat_map(|c| c.iter_mut()).flatten() {
            node.name = self.names.store(old.get(node.name));
            for owner in node.owners.as_mut_slice() {
                // A prefix of the node's name stays one (the name's text is unchanged).
                if !owner.name.is_relative() {
                    owner.name = self.names.store(old.get(owner.name));
                }
            }
        }
    }
}

/// The sharded dependency graph.
///
/// # Examples
///
/// ```
/// use kube_gc_engine::{Event, EventType, Graph, Ingester, ObjectMeta, ObjectType, OwnerReference, Uid};
///
/// let graph = std::sync::Arc::new(Graph::new(16).unwrap());
/// let mut ingester = Ingester::new(graph.clone(), 2);
/// let pod = ObjectMeta {
///     uid: "00000000-0000-4000-8000-000000000002".into(),
///     name: "web-1".into(),
///     namespace: "default".into(),
///     owner_references: vec![OwnerReference {
///         api_version: "apps/v1".into(),
///         kind: "ReplicaSet".into(),
///         name: "web".into(),
///         uid: "00000000-0000-4000-8000-000000000001".into(),
///         controller: Some(true),
///         block_owner_deletion: Some(true),
///     }],
///     ..Default::default()
/// };
/// let out = ingester.ingest(&[Event::new(EventType::Add, ObjectType::new("v1", "Pod"), pod)]);
/// // The ReplicaSet was never observed: it is a virtual node, queued for verification.
/// let rs = Uid::parse("00000000-0000-4000-8000-000000000001");
/// assert!(graph.node(rs).unwrap().is_virtual);
/// assert_eq!(out.attempt_to_delete().count(), 1);
/// assert_eq!(graph.len(), 2);
/// ```
#[derive(Debug)]
pub struct Graph {
    shards: Box<[CachePadded<RwLock<Shard>>]>,
    mask: u64,
}

impl Graph {
    /// A graph of `shards` shards; `shards` must be a power of two between 1 and
    /// [`MAX_SHARDS`] (so that the shard is a mask of hash bits).
    pub fn new(shards: usize) -> crate::Result<Graph> {
        if !shards.is_power_of_two() || shards > MAX_SHARDS {
            return Err(crate::Error::Config(format!(
                "shards must be a power of two between 1 and {MAX_SHARDS}, got {shards}"
            )));
        }
        Ok(Graph {
            shards: (0..shards).map(|_| CachePadded::new(RwLock::new(Shard::default()))).collect(),
            mask: shards as u64 - 1,
        })
    }

    /// The number of shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The shard `uid` lives in.
    #[inline]
    pub fn shard_of(&self, uid: Uid) -> usize {
        ((uid.hash64() >> SHARD_SHIFT) & self.mask) as usize
    }

    pub(crate) fn read_shard(&self, shard: usize) -> RwLockReadGuard<'_, Shard> {
        self.shards[shard].read()
    }

    pub(crate) fn write_shard(&self, shard: usize) -> RwLockWriteGuard<'_, Shard> {
        self.shards[shard].write()
    }

    /// Runs `f` on the node with `uid`, and its shard's names, under the shard's read lock.
    pub(crate) fn with_node<R>(&self, uid: Uid, f: impl FnOnce(&Node, &Names) -> R) -> Option<R> {
        let shard = self.read_shard(self.shard_of(uid));
        shard.get(uid).map(|n| f(n, shard.names()))
    }

    /// The number of nodes (observed and virtual). Sums the shards one at a time, so under
    /// concurrent ingestion it is a close estimate, not a snapshot.
    pub fn len(&self) -> usize {
        (0..self.shards.len()).map(|s| self.read_shard(s).len()).sum()
    }

    /// Whether the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a node with `uid` exists.
    pub fn contains(&self, uid: Uid) -> bool {
        self.with_node(uid, |_, _| ()).is_some()
    }

    /// A copy of the node with `uid`.
    pub fn node(&self, uid: Uid) -> Option<NodeView> {
        // Seeded defect for loom-tests; never enabled in real builds: the owners are copied
        // under one read lock and the rest under another, so the copy can be torn.
        #[cfg(all(kube_gc_loom, feature = "loom-defects"))]
        if crate::loom_support::defect_active(crate::loom_support::Defect::ShardTornRead) {
            let owners = self.with_node(uid, |n, names| n.owner_refs(names))?;
            return self.with_node(uid, |n, names| NodeView { owners, ..n.view(names) });
        }
        self.with_node(uid, |n, names| n.view(names))
    }

    /// The current key of the node with `uid`.
    pub fn key_of(&self, uid: Uid) -> Option<NodeKey> {
        self.with_node(uid, |n, _| NodeKey { uid, incarnation: n.incarnation })
    }

    /// The UIDs of the node's dependents (upstream's `getDependents`), empty if absent.
    pub fn dependents(&self, uid: Uid) -> Vec<DependentView> {
        // Seeded defect for loom-tests; never enabled in real builds: the dependents are
        // counted under one read lock and that many are copied under another.
        #[cfg(all(kube_gc_loom, feature = "loom-defects"))]
        if crate::loom_support::defect_active(crate::loom_support::Defect::DependentsTornSnapshot) {
            let len = self.dependents_len(uid);
            let all = self.with_node(uid, |n, _| {
                let copy = n.dependents.iter().take(len);
                copy.map(DependentView::from).collect()
            });
            return all.unwrap_or_default();
        }
        self.with_node(uid, |n, _| n.dependents.iter().map(DependentView::from).collect())
            .unwrap_or_default()
    }

    /// How many dependents the node has (upstream's `dependentsLength`).
    pub fn dependents_len(&self, uid: Uid) -> usize {
        self.with_node(uid, |n, _| n.dependents.len()).unwrap_or(0)
    }

    /// Upstream's `blockingDependents`: the dependents whose reference to this node has
    /// `blockOwnerDeletion: true`, each once per such reference.
    pub fn blocking_dependents(&self, uid: Uid) -> Vec<Uid> {
        self.with_node(uid, |n, names| n.blocking_dependents(names)).unwrap_or_default()
    }

    /// Visits every node, one shard at a time, under that shard's read lock.
    pub fn for_each_node(&self, mut f: impl FnMut(&NodeView, &[DependentView])) {
        for s in 0..self.shards.len() {
            let shard = self.read_shard(s);
            let names = shard.names();
            for n in shard.iter() {
                let view = n.view(names);
                let deps: Vec<_> = n.dependents.iter().map(DependentView::from).collect();
                f(&view, &deps);
            }
        }
    }

    /// A canonical, comparable copy of the whole graph.
    pub fn snapshot(&self) -> GraphSnapshot {
        let mut snap = GraphSnapshot::default();
        self.for_each_node(|n, deps| {
            snap.nodes.insert(n.identity.uid, NodeSnapshot::new(n, deps.iter().map(|d| d.uid)));
        });
        snap
    }

    /// Checks that every dependent entry agrees with its dependent's own references (the edge
    /// copies ingestion keeps on the owner side). Returns the first disagreement found.
    pub fn check_edge_copies(&self) -> Result<(), String> {
        let mut entries = Vec::new();
        for s in 0..self.shards.len() {
            let shard = self.read_shard(s);
            for n in shard.iter() {
                for d in n.dependents.iter() {
                    // Read back as the collector reads it (compact entries from the owner's
                    // identity).
                    let copy: Vec<_> = n
                        .dependents
                        .refs(d, n.ty, n.name(shard.names()))
                        .map(|(ty, name, blocks)| dependents::EdgeRef {
                            ty,
                            name: name.into(),
                            blocks,
                        })
                        .collect();
                    entries.push((n.uid, d.uid, d.namespace, copy));
                }
            }
        }
        for (owner, uid, namespace, copy) in entries {
            let Some((ns, refs)) = self.with_node(uid, |d, names| {
                let refs: Vec<_> = d
                    .owners
                    .iter()
                    .filter(|r| r.uid == owner)
                    .map(|r| dependents::EdgeRef::from_owner(d, r, names))
                    .collect();
                (d.namespace, refs)
            }) else {
                return Err(format!("{owner:?} lists dependent {uid:?}, not in the graph"));
            };
            if ns != namespace || refs != copy {
                return Err(format!(
                    "{owner:?}'s copy of dependent {uid:?} is stale: {namespace:?} {copy:?} vs {ns:?} {refs:?}"
                ));
            }
        }
        Ok(())
    }
}

/// One node of a [`GraphSnapshot`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct NodeSnapshot {
    /// The object's (or, for a virtual node, its dependents' reference's) apiVersion, kind,
    /// namespace, name and UID.
    pub identity: ObjectReference,
    /// Never observed through a watch: only named by dependents (upstream's `virtual`).
    pub is_virtual: bool,
    /// Has a deletionTimestamp (upstream's `beingDeleted`).
    pub being_deleted: bool,
    /// Being deleted in the foreground: has a deletionTimestamp and the `foregroundDeletion`
    /// finalizer (upstream's `deletingDependents`).
    pub deleting_dependents: bool,
    /// Owner references, in order.
    pub owners: Vec<OwnerRef>,
    /// Dependents' UIDs, sorted.
    pub dependents: Vec<Uid>,
    /// The last observed resourceVersion, if known.
    pub resource_version: Option<u64>,
    /// The last observed object had a GC finalizer.
    pub has_gc_finalizers: bool,
}

impl NodeSnapshot {
    pub(crate) fn new(n: &NodeView, deps: impl Iterator<Item = Uid>) -> NodeSnapshot {
        let mut dependents: Vec<Uid> = deps.collect();
        dependents.sort_unstable();
        NodeSnapshot {
            identity: n.identity.clone(),
            is_virtual: n.is_virtual,
            being_deleted: n.being_deleted,
            deleting_dependents: n.deleting_dependents,
            owners: n.owners.clone(),
            dependents,
            resource_version: n.resource_version,
            has_gc_finalizers: n.has_gc_finalizers,
        }
    }
}

/// A canonical copy of a graph, ordered by UID, for comparing two graphs.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct GraphSnapshot {
    /// Nodes by UID.
    pub nodes: std::collections::BTreeMap<Uid, NodeSnapshot>,
}

impl GraphSnapshot {
    /// The snapshot without what only kube-gc's graph records of an object (its
    /// resourceVersion and GC finalizers): what upstream's graph holds, for comparing with a
    /// port of it.
    pub fn upstream_fields(mut self) -> GraphSnapshot {
        for n in self.nodes.values_mut() {
            n.resource_version = None;
            n.has_gc_finalizers = false;
        }
        self
    }
}

#[cfg(test)]
mod tests;
