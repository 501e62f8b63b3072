//! The one-event-at-a-time reference: upstream's `processGraphChanges`, ported plainly.
//!
//! Upstream: `graph_builder.go` (`processGraphChanges`, `addDependentToOwners`,
//! `removeDependentFromOwners`, `processTransitions`, `insertNode`, `removeNode`);
//! GC-SPEC.md §2.2-2.7.
//!
//! This is the specification the parallel [`Ingester`](super::Ingester) is held to: one map
//! from UID to node, dependents as a set of UIDs whose references are read live from the
//! dependent's node (as upstream reads them through the `*node` pointer), every event applied
//! to completion before the next. A property test (`batch_equals_sequential_*`) applies random
//! event streams to both, in random batch splits, and requires equal graphs and a superset of
//! queued items.

use std::collections::HashMap;

use super::event::{Event, EventType};
use super::output::{Enqueue, IngestOutput, invalid_namespace_warning};
use super::prepare::Prepared;
use super::rules::{self, DepRefs, RefView, Transition};
use crate::graph::{GraphSnapshot, NodeKey, NodeSnapshot, NodeView};
use crate::identity::{ObjectReference, OwnerRef, Uid};

#[derive(Clone, Debug)]
struct SeqNode {
    identity: ObjectReference,
    incarnation: u32,
    is_virtual: bool,
    being_deleted: bool,
    deleting_dependents: bool,
    owners: Vec<OwnerRef>,
    /// A set, in insertion order.
    dependents: Vec<Uid>,
    resource_version: Option<u64>,
    has_gc_finalizers: bool,
}

/// The resourceVersion the graph keeps of an event (see `Node::set_observed_version`).
fn observed_version(ev: &Prepared<'_>) -> Option<u64> {
    Some(ev.resource_version).filter(|&rv| rv != 0 && rv < 1 << 56)
}

impl SeqNode {
    fn key(&self) -> NodeKey {
        NodeKey { uid: self.identity.uid, incarnation: self.incarnation }
    }
}

/// The sequential reference graph (see the module docs).
#[derive(Debug, Default)]
pub struct SequentialGraph {
    nodes: HashMap<Uid, SeqNode>,
}

impl SequentialGraph {
    /// An empty graph.
    pub fn new() -> SequentialGraph {
        SequentialGraph::default()
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph is empty.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Applies `events` one at a time, in order.
    pub fn apply_all(&mut self, events: &[Event]) -> IngestOutput {
        let mut out = IngestOutput::default();
        for e in events {
            self.apply(e, &mut out);
        }
        out
    }

    /// Applies one event (one `processGraphChanges` iteration), appending what it queues.
    pub fn apply(&mut self, event: &Event, out: &mut IngestOutput) {
        match Prepared::parse(event) {
            Ok(p) => {
                self.process(&p, out);
                out.applied += 1;
            }
            Err(e) => out.errors.push(e),
        }
    }

    /// A canonical copy, comparable with [`crate::Graph::snapshot`].
    pub fn snapshot(&self) -> GraphSnapshot {
        let mut snap = GraphSnapshot::default();
        for n in self.nodes.values() {
            let view = NodeView {
                identity: n.identity.clone(),
                incarnation: n.incarnation,
                is_virtual: n.is_virtual,
                being_deleted: n.being_deleted,
                deleting_dependents: n.deleting_dependents,
                owners: n.owners.clone(),
                dependents_len: n.dependents.len(),
                resource_version: n.resource_version,
                has_gc_finalizers: n.has_gc_finalizers,
            };
            snap.nodes
                .insert(n.identity.uid, NodeSnapshot::new(&view, n.dependents.iter().copied()));
        }
        snap
    }

    fn dep_refs(&self, node: &SeqNode, deps: &[Uid]) -> Vec<DepRefs<'_>> {
        deps.iter()
            .filter_map(|d| self.nodes.get(d))
            .map(|d| DepRefs {
                uid: d.identity.uid,
                namespace: d.identity.namespace,
                refs: d
                    .owners
                    .iter()
                    .filter(|r| r.uid == node.identity.uid)
                    .map(|r| (r.ty, r.name.as_str()))
                    .collect(),
            })
            .collect()
    }

    fn enqueue_delete(&self, uid: Uid, out: &mut IngestOutput) {
        if let Some(n) = self.nodes.get(&uid) {
            out.enqueued.push(Enqueue::AttemptToDelete(n.key()));
        }
    }

    fn enqueue_likely_garbage(&self, uid: Uid, out: &mut IngestOutput) {
        if let Some(n) = self.nodes.get(&uid) {
            out.enqueued.push(Enqueue::LikelyGarbage(n.key()));
        }
    }

    fn report_invalid_namespace(&self, dep: Uid, owner: Uid, out: &mut IngestOutput) {
        let Some(d) = self.nodes.get(&dep) else { return };
        if let Some(r) = d.owners.iter().find(|r| r.uid == owner) {
            out.warnings.push(invalid_namespace_warning(&d.identity, r));
        }
    }

    fn process(&mut self, ev: &Prepared<'_>, out: &mut IngestOutput) {
        let uid = ev.uid;
        // 4. Virtual → observed promotion.
        if let Some(existing) = self.nodes.get(&uid)
            && !ev.is_virtual
            && existing.is_virtual
        {
            let observed = ev.identity();
            if existing.identity != observed {
                let deps = existing.dependents.clone();
                let dep_refs = self.dep_refs(existing, &deps);
                let (_, mismatched) = rules::partition_dependents(&dep_refs, &observed);
                let mismatched: Vec<_> = mismatched.iter().map(|d| (d.uid, d.namespace)).collect();
                for (dep, dep_ns) in mismatched {
                    if !observed.namespace.is_cluster() && dep_ns != observed.namespace {
                        self.report_invalid_namespace(dep, observed.uid, out);
                    }
                    self.enqueue_delete(dep, out);
                }
                // "clone": a new pointer, so earlier queue items stand for the old one.
                let n = self.nodes.get_mut(&uid).expect("present");
                n.identity = observed;
                n.incarnation += 1;
            }
            self.nodes.get_mut(&uid).expect("present").is_virtual = false;
        }

        match ev.event_type {
            EventType::Add | EventType::Update if !self.nodes.contains_key(&uid) => {
                // (a) A new node.
                let node = SeqNode {
                    identity: ev.identity(),
                    incarnation: 0,
                    is_virtual: false,
                    being_deleted: ev.state.deletion_timestamp,
                    deleting_dependents: ev.state.deletion_timestamp && ev.state.foreground,
                    owners: ev.owners.iter().map(|r| r.to_owner_ref()).collect(),
                    dependents: Vec::new(),
                    resource_version: observed_version(ev),
                    has_gc_finalizers: ev.state.has_gc_finalizers(),
                };
                self.nodes.insert(uid, node);
                self.add_dependent_to_owners(uid, &ev.owners, out);
                self.process_transitions(ev, out);
            }
            EventType::Add | EventType::Update => {
                // (b) An existing node.
                let existing = &self.nodes[&uid];
                if !ev.is_virtual && existing.identity.ty != ev.ty {
                    // #137036: follow the informer's apiVersion/kind.
                    self.nodes.get_mut(&uid).expect("present").identity.ty = ev.ty;
                }
                let existing = &self.nodes[&uid];
                let old: Vec<OwnerRef> = existing.owners.clone();
                let old_views: Vec<RefView<'_>> = old.iter().map(RefView::of).collect();
                let diff = rules::references_diffs(&old_views, &ev.owners);
                if diff.is_empty() && !old_views.iter().eq(ev.owners.iter()) {
                    // A changed list the diff does not see (repeated UIDs): the node still
                    // holds exactly the new list (kube-gc's divergence, see diff.rs).
                    self.nodes.get_mut(&uid).expect("present").owners =
                        ev.owners.iter().map(|r| r.to_owner_ref()).collect();
                }
                if !diff.is_empty() {
                    self.add_unblocked_owners_to_delete_queue(&diff, out);
                    self.nodes.get_mut(&uid).expect("present").owners =
                        ev.owners.iter().map(|r| r.to_owner_ref()).collect();
                    self.add_dependent_to_owners(uid, &diff.added, out);
                    for r in &diff.removed {
                        if let Some(owner) = self.nodes.get_mut(&r.uid) {
                            owner.dependents.retain(|d| *d != uid);
                        }
                    }
                }
                let node = self.nodes.get_mut(&uid).expect("present");
                if ev.state.deletion_timestamp {
                    node.being_deleted = true;
                }
                node.resource_version = observed_version(ev);
                node.has_gc_finalizers = ev.state.has_gc_finalizers();
                self.process_transitions(ev, out);
            }
            EventType::Delete => self.process_delete(ev, out),
        }
    }

    fn add_unblocked_owners_to_delete_queue(
        &self,
        diff: &rules::RefDiff<'_>,
        out: &mut IngestOutput,
    ) {
        for r in &diff.removed {
            if r.blocks() {
                self.enqueue_delete(r.uid, out);
            }
        }
        for (old, new) in &diff.changed {
            if old.blocks() && !new.blocks() {
                self.enqueue_delete(new.uid, out);
            }
        }
    }

    /// Upstream's `addDependentToOwners`.
    fn add_dependent_to_owners(
        &mut self,
        dep: Uid,
        owners: &[RefView<'_>],
        out: &mut IngestOutput,
    ) {
        let dep_ns = self.nodes[&dep].identity.namespace;
        let mut potentially_invalid = false;
        for r in owners {
            match self.nodes.get_mut(&r.uid) {
                None => {
                    let mut v = SeqNode {
                        identity: ObjectReference {
                            ty: r.ty,
                            namespace: dep_ns,
                            name: r.name.to_owned(),
                            uid: r.uid,
                        },
                        incarnation: 0,
                        is_virtual: true,
                        being_deleted: false,
                        deleting_dependents: false,
                        owners: Vec::new(),
                        dependents: Vec::new(),
                        resource_version: None,
                        has_gc_finalizers: false,
                    };
                    v.dependents.push(dep);
                    out.enqueued.push(Enqueue::VerifyVirtual(v.key()));
                    self.nodes.insert(r.uid, v);
                }
                Some(owner) => {
                    if !owner.dependents.contains(&dep) {
                        owner.dependents.push(dep);
                    }
                    if potentially_invalid {
                        continue;
                    }
                    let o = &owner.identity;
                    if !o.namespace.is_cluster() && o.namespace != dep_ns {
                        potentially_invalid = true;
                        if !owner.is_virtual {
                            self.report_invalid_namespace(dep, r.uid, out);
                        }
                    } else if !(o.uid == r.uid && o.ty == r.ty && o.name == r.name) {
                        potentially_invalid = true;
                    } else if o.namespace.is_cluster() && o.namespace != dep_ns && owner.is_virtual
                    {
                        // #98040: a virtual "cluster-scoped" owner may really be namespaced.
                        potentially_invalid = true;
                    }
                }
            }
        }
        if potentially_invalid {
            self.enqueue_delete(dep, out);
        }
    }

    fn process_transitions(&mut self, ev: &Prepared<'_>, out: &mut IngestOutput) {
        match rules::transition(ev.old_state, ev.state) {
            Transition::None => {}
            Transition::Orphan => {
                out.enqueued.push(Enqueue::AttemptToOrphan(self.nodes[&ev.uid].key()));
            }
            Transition::Foreground => {
                let n = self.nodes.get_mut(&ev.uid).expect("present");
                n.deleting_dependents = true;
                let deps = n.dependents.clone();
                let key = n.key();
                for d in deps {
                    self.enqueue_likely_garbage(d, out);
                }
                out.enqueued.push(Enqueue::LikelyGarbage(key));
            }
        }
    }

    fn process_delete(&mut self, ev: &Prepared<'_>, out: &mut IngestOutput) {
        let uid = ev.uid;
        let Some(existing) = self.nodes.get(&uid) else { return };
        let mut remove_existing = true;
        if ev.is_virtual {
            let deleted = ev.identity();
            let deps = existing.dependents.clone();
            let dep_refs = self.dep_refs(existing, &deps);
            if existing.is_virtual {
                let (matching, nonmatching) = rules::partition_dependents(&dep_refs, &deleted);
                if !nonmatching.is_empty() {
                    remove_existing = false;
                    if !matching.is_empty() {
                        out.absent_owners.push(deleted.clone());
                        for d in &matching {
                            self.enqueue_likely_garbage(d.uid, out);
                        }
                    }
                    if existing.identity == deleted
                        && let Some(alt) = rules::alternate_owner_identity(&nonmatching, &deleted)
                    {
                        let n = self.nodes.get_mut(&uid).expect("present");
                        n.identity = alt;
                        n.incarnation += 1;
                        out.enqueued.push(Enqueue::AttemptToDeleteRateLimited(n.key()));
                    }
                }
            } else if existing.identity != deleted {
                remove_existing = false;
                let (matching, _) = rules::partition_dependents(&dep_refs, &deleted);
                if !matching.is_empty() {
                    out.absent_owners.push(deleted.clone());
                    for d in &matching {
                        self.enqueue_likely_garbage(d.uid, out);
                    }
                }
            }
        }
        if !remove_existing {
            return;
        }
        // removeNode: drop the node, then take it out of its owners' dependents.
        let removed = self.nodes.remove(&uid).expect("present");
        for r in &removed.owners {
            if let Some(owner) = self.nodes.get_mut(&r.uid) {
                owner.dependents.retain(|d| *d != uid);
            }
        }
        if !removed.dependents.is_empty() {
            out.absent_owners.push(ev.identity());
        }
        for d in &removed.dependents {
            self.enqueue_likely_garbage(*d, out);
        }
        for r in &removed.owners {
            if let Some(owner) = self.nodes.get(&r.uid)
                && owner.deleting_dependents
            {
                out.enqueued.push(Enqueue::LikelyGarbage(owner.key()));
            }
        }
    }
}
