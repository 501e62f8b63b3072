//! Phase one of a batch: diff each event's owner references, by the shard of its own UID.
//!
//! An object's owner list, its observed identity and whether it is observed at all change only
//! through its own events (other objects' events can only create it as a *virtual* node, which
//! has no owners). So the shard that holds a UID can compute, from the graph as it was before
//! the batch plus that UID's own earlier events in the batch, exactly which edges each event
//! adds, removes or changes, without reading any other shard and without writing anything.
//! Every such edge change becomes an [`EdgeOp`] addressed to the owner's shard, tagged with the
//! event's sequence number and its position inside upstream's processing of that event.
//!
//! The one thing this phase cannot know is whether a UID not yet observed exists as a virtual
//! node created earlier in the same batch. For the edges that only matters to an event whose
//! owner references repeat a UID (upstream's "insert" path then adds every reference, its
//! "update" path only the last per UID); [`super::Ingester`] applies such events in a batch of
//! their own, where the graph read here is exact.

use hashbrown::HashMap;

use smallvec::SmallVec;

use super::event::EventType;
use super::prepare::{Prepared, PreparedBatch};
use super::rules::{self, RefView};
use crate::graph::{Graph, Node, Shard};
use crate::identity::{Namespace, ObjectType, Uid};

/// Sub-step of the last part of an event's processing (processTransitions).
pub(crate) const SUB_END: u32 = u32::MAX;

/// A change to an owner's side of an edge, to apply in the owner's shard.
#[derive(Clone, Debug)]
pub(crate) struct EdgeOp {
    /// The event's position in the batch.
    pub(crate) seq: u32,
    /// The position inside upstream's processing of that event (0 is the event's own node).
    pub(crate) sub: u32,
    /// The owner UID (the shard this op goes to).
    pub(crate) owner: Uid,
    pub(crate) kind: EdgeKind,
}

impl EdgeOp {
    pub(crate) fn order(&self) -> u64 {
        (u64::from(self.seq) << 32) | u64::from(self.sub)
    }
}

#[derive(Clone, Debug)]
pub(crate) enum EdgeKind {
    /// addDependentToOwners for the event's `ref_index`-th reference: add the dependent
    /// (creating a virtual owner if absent) and check the reference against the owner.
    Add {
        ref_index: u32,
        /// The dependent's namespace (its identity's, which for an observed node is the one it
        /// was first observed with).
        dep_namespace: Namespace,
        /// Where upstream queues the dependent if some reference is potentially invalid.
        post_sub: u32,
    },
    /// removeDependentFromOwners / removeNode: drop the dependent; for a removed node, also
    /// queue the owner if it is deleting its dependents.
    Remove { dependent: Uid, check_deleting_dependents: bool },
    /// Keep the owner's copy of the dependent's references current (a changed reference).
    UpdateRefs,
    /// addUnblockedOwnersToDeleteQueue: queue the owner if it is in the graph.
    EnqueueIfPresent,
}

/// What phase one knows of a UID while walking a batch.
#[derive(Clone, Debug)]
enum Known<'x> {
    Absent,
    Virtual,
    Observed { ty: ObjectType, namespace: Namespace, name: &'x str, owners: KnownOwners<'x> },
}

/// An observed object's references as phase one knows them: read from the graph (converted
/// from the node's form), or its latest event's own list, borrowed rather than copied (in a
/// warm-up nearly every object is new, and the copy was most of what the phase did for it).
#[derive(Clone, Debug)]
enum KnownOwners<'x> {
    Graph(SmallVec<[RefView<'x>; 1]>),
    Event(&'x [RefView<'x>]),
}

impl<'x> std::ops::Deref for KnownOwners<'x> {
    type Target = [RefView<'x>];

    fn deref(&self) -> &[RefView<'x>] {
        match self {
            KnownOwners::Graph(owners) => owners,
            KnownOwners::Event(owners) => owners,
        }
    }
}

/// What the graph says of a UID whose node (if any) is `node`.
fn known_from_graph<'x>(shard: &'x Shard, node: Option<&'x Node>) -> Known<'x> {
    match node {
        None => Known::Absent,
        Some(n) if n.is_virtual() => Known::Virtual,
        Some(n) => Known::Observed {
            ty: n.ty,
            namespace: n.namespace,
            name: n.name(shard.names()),
            owners: KnownOwners::Graph(
                n.owners.iter().map(|r| RefView::of_node(n, r, shard.names())).collect(),
            ),
        },
    }
}

/// Runs phase one for `shard`: `own` are the batch positions of the events whose UID lives in
/// it, in order. Pushes each edge op to `out[owner shard]`.
pub(crate) fn diff_shard<'x, 'e: 'x>(
    graph: &Graph,
    shard: &'x Shard,
    prepared: PreparedBatch<'x, 'e>,
    own: &[u32],
    out: &mut [Vec<EdgeOp>],
) {
    // The shard does not change in this phase: what the lookups find now holds for the walk.
    let nodes = shard.get_all(own.iter().map(|&seq| prepared.get(seq).map(|ev| ev.uid)));
    let mut known: HashMap<Uid, Known<'x>> = HashMap::with_capacity(own.len());
    for (&seq, &node) in own.iter().zip(&nodes) {
        let Some(ev) = prepared.get(seq) else { continue };
        let state = known.remove(&ev.uid).unwrap_or_else(|| known_from_graph(shard, node));
        let mut sub = 0u32;
        let mut push = |owner: Uid, kind: EdgeKind, sub: &mut u32| {
            *sub += 1;
            out[graph.shard_of(owner)].push(EdgeOp { seq, sub: *sub, owner, kind });
        };
        let next = match (ev.event_type, state) {
            (
                EventType::Add | EventType::Update,
                Known::Observed { ty, namespace, name, owners },
            ) => {
                // (b) on an observed node: the diff against its current owners.
                let ty = if ev.is_virtual { ty } else { ev.ty };
                let diff = rules::references_diffs(&owners, &ev.owners);
                // An empty diff can hide a changed list when a UID repeats (the diff keeps one
                // reference per UID): the node must still hold exactly the new list, since the
                // collector decides from it at the node's resourceVersion, and the owner side
                // its new copy of the references (which of them block).
                if diff.is_empty() && owners.iter().eq(ev.owners.iter()) {
                    Known::Observed { ty, namespace, name, owners }
                } else {
                    for r in &diff.removed {
                        if r.blocks() {
                            push(r.uid, EdgeKind::EnqueueIfPresent, &mut sub);
                        }
                    }
                    for (old, new) in &diff.changed {
                        if old.blocks() && !new.blocks() {
                            push(new.uid, EdgeKind::EnqueueIfPresent, &mut sub);
                        }
                    }
                    // The owner side keeps a copy of the references naming it: refresh every
                    // kept owner whose list of references changed (with repeated UIDs that is
                    // more than `changed`, whose map keeps one reference per UID).
                    for (i, r) in ev.owners.iter().enumerate() {
                        let first = ev.owners[..i].iter().all(|p| p.uid != r.uid);
                        let kept = owners.iter().any(|o| o.uid == r.uid)
                            && !diff.added.iter().any(|a| a.uid == r.uid);
                        let same = owners
                            .iter()
                            .filter(|o| o.uid == r.uid)
                            .eq(ev.owners.iter().filter(|o| o.uid == r.uid));
                        if first && kept && !same {
                            push(r.uid, EdgeKind::UpdateRefs, &mut sub);
                        }
                    }
                    add_ops(ev, &diff.added, namespace, &mut sub, &mut push);
                    for r in &diff.removed {
                        let kind = EdgeKind::Remove {
                            dependent: ev.uid,
                            check_deleting_dependents: false,
                        };
                        push(r.uid, kind, &mut sub);
                    }
                    Known::Observed { ty, namespace, name, owners: KnownOwners::Event(&ev.owners) }
                }
            }
            (EventType::Add | EventType::Update, state) => {
                // (a) a new node, or (b) on a virtual node (which has no owners): every
                // reference is added. On the (b) path upstream adds only the last reference of
                // each UID; the two differ only for repeated UIDs, applied alone (module docs).
                if matches!(state, Known::Virtual) {
                    let added = rules::references_diffs(&[], &ev.owners).added;
                    add_ops(ev, &added, ev.namespace, &mut sub, &mut push);
                } else {
                    add_ops(ev, &ev.owners, ev.namespace, &mut sub, &mut push);
                }
                Known::Observed {
                    ty: ev.ty,
                    namespace: ev.namespace,
                    name: ev.name,
                    owners: KnownOwners::Event(&ev.owners),
                }
            }
            (EventType::Delete, Known::Observed { ty, namespace, name, owners }) => {
                let removed =
                    !ev.is_virtual || (ty == ev.ty && namespace == ev.namespace && name == ev.name);
                if removed {
                    for r in owners.iter() {
                        let kind =
                            EdgeKind::Remove { dependent: ev.uid, check_deleting_dependents: true };
                        push(r.uid, kind, &mut sub);
                    }
                    Known::Absent
                } else {
                    Known::Observed { ty, namespace, name, owners }
                }
            }
            (EventType::Delete, Known::Absent) => Known::Absent,
            (EventType::Delete, Known::Virtual) => {
                if ev.is_virtual {
                    Known::Virtual
                } else {
                    Known::Absent
                }
            }
        };
        known.insert(ev.uid, next);
    }
}

fn add_ops(
    ev: &Prepared<'_>,
    added: &[RefView<'_>],
    dep_namespace: Namespace,
    sub: &mut u32,
    push: &mut impl FnMut(Uid, EdgeKind, &mut u32),
) {
    if added.is_empty() {
        return;
    }
    // Upstream queues the dependent after the loop over its added references.
    let post_sub = *sub + added.len() as u32 + 1;
    for r in added {
        // The position of this reference among the event's own (its last occurrence, as the
        // diff keeps the last reference of a repeated UID).
        let ref_index =
            ev.owners.iter().rposition(|o| o == r).expect("added refs come from the event") as u32;
        push(r.uid, EdgeKind::Add { ref_index, dep_namespace, post_sub }, sub);
    }
    *sub = post_sub;
}
