//! Phase two of a batch: apply, shard by shard, the shard's own events and the edge ops
//! addressed to it, merged in sequence order.
//!
//! Each step reads and writes only the shard it runs in, as of its own sequence number: the
//! owner's side of every edge carries what upstream reads through the dependent's pointer
//! (its namespace and its references to the owner), so partitionDependents,
//! getAlternateOwnerIdentity and blockingDependents need nothing from other shards.
//!
//! What a step decides about *other* nodes (queue a dependent, report an invalid reference,
//! "is any reference of this dependent potentially invalid") is emitted as an [`Out`] record
//! tagged with its position, and resolved after the batch by [`super::Ingester`], in order.

use super::diff::{EdgeKind, EdgeOp, SUB_END};
use super::event::EventType;
use super::output::Enqueue;
use super::prepare::{Prepared, PreparedBatch};
use super::rules::{self, DepRefs, RefView, Transition};
use crate::graph::names::Names;
use crate::graph::node::{Node, flags};
use crate::graph::{NodeKey, Shard};
use crate::identity::{ObjectReference, Uid};

/// Why addDependentToOwners found a reference potentially invalid.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum RefFlag {
    /// A namespaced owner in another namespace; `observed` says whether to report it.
    Namespace { observed: bool },
    /// The reference's coordinates differ from the owner's identity.
    Coordinates,
    /// A virtual, apparently cluster-scoped owner of a dependent in a namespace (#98040).
    ClusterScopedVirtual,
}

/// A record of phase two, ordered by (`order`, `index`).
#[derive(Clone, Debug)]
pub(crate) struct Out {
    pub(crate) order: u64,
    pub(crate) index: u32,
    pub(crate) kind: OutKind,
}

#[derive(Clone, Debug)]
pub(crate) enum OutKind {
    /// A node of this shard, with its key.
    Enqueue(Enqueue),
    /// A node of another shard, to attemptToDelete: its key is looked up after the batch.
    EnqueueUid(Uid),
    /// As `EnqueueUid`, for a node that is likely garbage.
    EnqueueUidLikelyGarbage(Uid),
    AbsentOwner(ObjectReference),
    /// reportInvalidNamespaceOwnerRef(dependent, owner).
    InvalidNamespace {
        dependent: Uid,
        owner: Uid,
    },
    /// One reference of event `seq`'s addDependentToOwners loop was found potentially invalid.
    RefCheck {
        seq: u32,
        post_sub: u32,
        dependent: Uid,
        owner: Uid,
        flag: RefFlag,
    },
}

/// One step of a shard's merged sequence.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step<'o> {
    /// The event's own node: promotion, create / update / delete.
    Main(u32),
    /// processTransitions of an add or update.
    End(u32),
    Edge(&'o EdgeOp),
}

impl Step<'_> {
    pub(crate) fn order(&self) -> u64 {
        match *self {
            Step::Main(seq) => u64::from(seq) << 32,
            Step::End(seq) => (u64::from(seq) << 32) | u64::from(SUB_END),
            Step::Edge(op) => op.order(),
        }
    }
}

/// Merges a shard's own steps (in order already) with its edge steps, each beside its order
/// and sorted by it, into one sequence in order; an own step goes first on a tie. The same
/// sequence as a stable sort of the own steps followed by the edges, without reading an op's
/// order through its pointer at every comparison: that sort of the whole had cost about 230
/// instructions an event (the edges' runs, one per shard a thread diffed, hold about one op
/// each in a large batch, so they are sorted for real either way).
pub(crate) fn merge_steps<'o>(
    own: impl IntoIterator<Item = Step<'o>>,
    edges: &[(u64, &'o EdgeOp)],
    steps: &mut Vec<Step<'o>>,
) {
    let mut edges = edges.iter().peekable();
    for step in own {
        let order = step.order();
        while let Some(&(_, op)) = edges.next_if(|&&(edge, _)| edge < order) {
            steps.push(Step::Edge(op));
        }
        steps.push(step);
    }
    steps.extend(edges.map(|&(_, op)| Step::Edge(op)));
}

struct Emitter<'a> {
    out: &'a mut Vec<Out>,
    order: u64,
    index: u32,
}

impl Emitter<'_> {
    fn emit(&mut self, kind: OutKind) {
        self.out.push(Out { order: self.order, index: self.index, kind });
        self.index += 1;
    }
}

fn key(n: &Node) -> NodeKey {
    NodeKey { uid: n.uid, incarnation: n.incarnation }
}

fn dep_refs<'a>(n: &'a Node, names: &'a Names) -> Vec<DepRefs<'a>> {
    n.dependents
        .iter()
        .map(|d| DepRefs {
            uid: d.uid,
            namespace: d.namespace,
            refs: n
                .dependents
                .refs(d, n.ty, n.name(names))
                .map(|(ty, name, _)| (ty, name))
                .collect(),
        })
        .collect()
}

/// Applies `steps` (sorted by order) to `shard`, appending records to `out`.
pub(crate) fn apply_shard(
    shard: &mut Shard,
    prepared: PreparedBatch<'_, '_>,
    steps: &[Step<'_>],
    out: &mut Vec<Out>,
) {
    for window in steps.chunks(WARM_WINDOW) {
        shard.warm(window.iter().filter_map(|step| match *step {
            Step::Main(seq) => prepared.get(seq).map(|ev| ev.uid),
            Step::End(_) => None, // its event's Main step came first
            Step::Edge(op) => Some(op.owner),
        }));
        for step in window {
            let mut em = Emitter { out, order: step.order(), index: 0 };
            match *step {
                Step::Main(seq) => {
                    let ev = prepared.get(seq).expect("steps are built from parsed events");
                    apply_main(shard, ev, &mut em);
                }
                Step::End(seq) => {
                    let ev = prepared.get(seq).expect("steps are built from parsed events");
                    apply_transitions(shard, ev, &mut em);
                }
                Step::Edge(op) => {
                    let ev = prepared.get(op.seq).expect("ops are built from parsed events");
                    apply_edge(shard, ev, op, &mut em);
                }
            }
        }
    }
    shard.compact_names_if_wasteful();
}

/// Steps warmed together, then walked ([`Shard::warm`]). Enough lookups in a row to overlap
/// their misses, few enough that what they bring in is still in the L1 cache when the walk
/// gets there: a batch gives a shard about 130 steps, and warmed all at once their nodes,
/// names and sets (about four lines a step) outgrew the L1, so the walk missed again on the
/// first ones (at 1M random, one thread, counted: 52.8 L1 data misses an event in
/// `Ingester::ingest`, 50.9 in windows of 64, 48.5 of 32, 47.7 of 16, 47.6 of 8).
const WARM_WINDOW: usize = 16;

fn apply_main(shard: &mut Shard, ev: &Prepared<'_>, em: &mut Emitter<'_>) {
    // One lookup of the event's UID serves the promotion and the step after it: the promotion
    // neither adds nor removes the node.
    let mut found = shard.get_mut(ev.uid);
    // 4. Virtual → observed promotion.
    if !ev.is_virtual
        && let Some((n, names)) = &mut found
        && n.is_virtual()
    {
        if !ev.identity_eq(n, names) {
            let observed = ev.identity();
            let deps = dep_refs(n, names);
            let (_, mismatched) = rules::partition_dependents(&deps, &observed);
            for d in mismatched {
                if !observed.namespace.is_cluster() && d.namespace != observed.namespace {
                    em.emit(OutKind::InvalidNamespace { dependent: d.uid, owner: observed.uid });
                }
                em.emit(OutKind::EnqueueUid(d.uid));
            }
            // Upstream clones the node here; queue items for the old pointer go stale.
            n.set_identity(observed, names);
            n.incarnation = n.incarnation.wrapping_add(1);
        }
        n.mark_observed();
    }

    match ev.event_type {
        EventType::Add | EventType::Update => match found {
            None => {
                let names = shard.names_mut();
                let mut node = Node::new_virtual(ev.ty, ev.namespace, ev.name, ev.uid, names);
                node.flags = 0;
                if ev.state.deletion_timestamp {
                    node.mark_being_deleted();
                    if ev.state.foreground {
                        node.mark_deleting_dependents();
                    }
                }
                node.owners = ev.node_owners(node.name, names);
                node.set_observed_version(ev.resource_version, ev.state.has_gc_finalizers());
                shard.insert_absent(node);
            }
            Some((n, names)) => {
                if !ev.is_virtual {
                    n.set_type(ev.ty, names); // #137036
                }
                // Exactly the event's list whenever it differs, repeated UIDs included (an
                // empty references diff does not mean an unchanged list; see diff.rs).
                let current = n.owners.iter().map(|r| RefView::of_node(n, r, names));
                let changed = !current.eq(ev.owners.iter().copied());
                if changed {
                    let owners = ev.node_owners(n.name, names);
                    n.replace_owners(owners, names);
                }
                if ev.state.deletion_timestamp {
                    n.mark_being_deleted();
                }
                n.set_observed_version(ev.resource_version, ev.state.has_gc_finalizers());
            }
        },
        EventType::Delete => apply_delete(shard, ev, em),
    }
}

fn apply_delete(shard: &mut Shard, ev: &Prepared<'_>, em: &mut Emitter<'_>) {
    let Some((n, names)) = shard.get_mut(ev.uid) else { return };
    let mut remove_existing = true;
    if ev.is_virtual {
        let deleted = ev.identity();
        if n.is_virtual() {
            let deps = dep_refs(n, names);
            let (matching, nonmatching) = rules::partition_dependents(&deps, &deleted);
            if !nonmatching.is_empty() {
                remove_existing = false;
                if !matching.is_empty() {
                    em.emit(OutKind::AbsentOwner(deleted.clone()));
                    for d in &matching {
                        em.emit(OutKind::EnqueueUidLikelyGarbage(d.uid));
                    }
                }
                if n.identity_eq(&deleted, names)
                    && let Some(alt) = rules::alternate_owner_identity(&nonmatching, &deleted)
                {
                    drop(deps);
                    n.set_identity(alt, names);
                    n.incarnation = n.incarnation.wrapping_add(1);
                    em.emit(OutKind::Enqueue(Enqueue::AttemptToDeleteRateLimited(key(n))));
                }
            }
        } else if !n.identity_eq(&deleted, names) {
            remove_existing = false;
            let deps = dep_refs(n, names);
            let (matching, _) = rules::partition_dependents(&deps, &deleted);
            if !matching.is_empty() {
                em.emit(OutKind::AbsentOwner(deleted.clone()));
                for d in &matching {
                    em.emit(OutKind::EnqueueUidLikelyGarbage(d.uid));
                }
            }
        }
    }
    if !remove_existing {
        return;
    }
    // removeNode; the owners' sides are edge ops of this event (phase one).
    let removed = shard.remove(ev.uid).expect("present");
    if removed.dependents.len() > 0 {
        em.emit(OutKind::AbsentOwner(ev.identity()));
    }
    for d in removed.dependents.iter() {
        em.emit(OutKind::EnqueueUidLikelyGarbage(d.uid));
    }
}

fn apply_transitions(shard: &mut Shard, ev: &Prepared<'_>, em: &mut Emitter<'_>) {
    let transition = rules::transition(ev.old_state, ev.state);
    if transition == Transition::None {
        return;
    }
    let Some((n, _)) = shard.get_mut(ev.uid) else { return };
    match transition {
        Transition::None => {}
        Transition::Orphan => em.emit(OutKind::Enqueue(Enqueue::AttemptToOrphan(key(n)))),
        Transition::Foreground => {
            n.mark_deleting_dependents();
            let deps: Vec<Uid> = n.dependents.iter().map(|d| d.uid).collect();
            let k = key(n);
            for d in deps {
                em.emit(OutKind::EnqueueUidLikelyGarbage(d));
            }
            em.emit(OutKind::Enqueue(Enqueue::LikelyGarbage(k)));
        }
    }
}

fn apply_edge(shard: &mut Shard, ev: &Prepared<'_>, op: &EdgeOp, em: &mut Emitter<'_>) {
    match op.kind {
        EdgeKind::Add { ref_index, dep_namespace, post_sub } => {
            let r = ev.owners[ref_index as usize];
            let refs = ev.edge_refs(r.uid);
            match shard.get_mut(r.uid) {
                None => {
                    let names = shard.names_mut();
                    let mut owner = Node::new_virtual(r.ty, dep_namespace, r.name, r.uid, names);
                    owner.insert_dependent(ev.uid, dep_namespace, refs, names);
                    em.emit(OutKind::Enqueue(Enqueue::VerifyVirtual(key(&owner))));
                    // Looked up just above, under the same write lock.
                    shard.insert_absent(owner);
                }
                Some((owner, names)) => {
                    owner.insert_dependent(ev.uid, dep_namespace, refs, names);
                    let observed = owner.flags & flags::VIRTUAL == 0;
                    let flag = if !owner.namespace.is_cluster() && owner.namespace != dep_namespace
                    {
                        Some(RefFlag::Namespace { observed })
                    } else if !(owner.ty == r.ty && owner.name(names) == r.name) {
                        Some(RefFlag::Coordinates)
                    } else if owner.namespace.is_cluster()
                        && owner.namespace != dep_namespace
                        && !observed
                    {
                        Some(RefFlag::ClusterScopedVirtual)
                    } else {
                        None
                    };
                    if let Some(flag) = flag {
                        em.emit(OutKind::RefCheck {
                            seq: op.seq,
                            post_sub,
                            dependent: ev.uid,
                            owner: r.uid,
                            flag,
                        });
                    }
                }
            }
        }
        EdgeKind::Remove { dependent, check_deleting_dependents } => {
            if let Some((owner, _)) = shard.get_mut(op.owner) {
                owner.dependents.remove(dependent);
                if check_deleting_dependents && owner.is_deleting_dependents() {
                    em.emit(OutKind::Enqueue(Enqueue::LikelyGarbage(key(owner))));
                }
            }
        }
        EdgeKind::UpdateRefs => {
            if let Some((owner, names)) = shard.get_mut(op.owner) {
                owner.update_dependent_refs(ev.uid, ev.edge_refs(op.owner), names);
            }
        }
        EdgeKind::EnqueueIfPresent => {
            if let Some(owner) = shard.get(op.owner) {
                em.emit(OutKind::Enqueue(Enqueue::AttemptToDelete(key(owner))));
            }
        }
    }
}

#[cfg(test)]
mod merge_tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The merge gives what the stable sort it replaced gave: own steps (each event's
        /// Main, maybe its End) then edges in a few ordered runs, sorted by order, own first
        /// on a tie.
        #[test]
        fn merging_equals_the_stable_sort(
            events in proptest::collection::btree_map(0u32..400, any::<bool>(), 0..40),
            runs in proptest::collection::vec(
                proptest::collection::btree_set((0u32..400, 0u32..6), 0..20),
                0..6,
            ),
        ) {
            let own: Vec<Step<'_>> = events
                .iter()
                .flat_map(|(&seq, &end)| {
                    std::iter::once(Step::Main(seq)).chain(end.then_some(Step::End(seq)))
                })
                .collect();
            let ops: Vec<EdgeOp> = runs
                .iter()
                .flatten()
                .map(|&(seq, sub)| {
                    EdgeOp { seq, sub, owner: Uid::from_u128(1), kind: EdgeKind::UpdateRefs }
                })
                .collect();
            let mut sorted: Vec<Step<'_>> = own.clone();
            sorted.extend(ops.iter().map(Step::Edge));
            sorted.sort_by_key(Step::order);
            let mut edges: Vec<(u64, &EdgeOp)> = ops.iter().map(|op| (op.order(), op)).collect();
            edges.sort_by_key(|&(order, _)| order);
            let mut merged = Vec::new();
            merge_steps(own.iter().copied(), &edges, &mut merged);
            let identity = |step: &Step<'_>| match *step {
                Step::Main(seq) => (0, u64::from(seq), 0),
                Step::End(seq) => (1, u64::from(seq), 0),
                Step::Edge(op) => (2, op.order(), op as *const EdgeOp as u64),
            };
            prop_assert_eq!(
                merged.iter().map(identity).collect::<Vec<_>>(),
                sorted.iter().map(identity).collect::<Vec<_>>()
            );
        }
    }
}
