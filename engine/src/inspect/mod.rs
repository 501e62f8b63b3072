//! Questions answered from the graph: the ownership tree around an object, what a delete of it
//! would take with it (its blast radius), and why it is where it is ([`explain()`]).
//!
//! Both read the graph as the collector knows it (watched objects and virtual owners), without
//! an API call, so they answer in milliseconds for any object; what they say is what the
//! collector would do if nothing else changed meanwhile.

mod explain;

use std::collections::{BTreeMap, HashSet, VecDeque};

pub use explain::{
    CHAIN_DEPTH, Decision, Evidence, Explanation, FinalizerExplained, MAX_LIVE_READS,
    OwnerExplained, OwnerState, Waiting, explain,
};

use crate::cluster::PropagationPolicy;
use crate::graph::{Graph, NodeView};
use crate::identity::{ObjectReference, Uid};

/// One object of a [`tree`], with its owners (up) or its dependents (down).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeNode {
    /// The object.
    pub identity: ObjectReference,
    /// Never observed by a watch: an owner some dependent names.
    pub is_virtual: bool,
    /// Has a deletionTimestamp.
    pub being_deleted: bool,
    /// Already shown elsewhere in the tree (a cycle, or a shared dependent): not expanded again.
    pub repeated: bool,
    /// Its owners (in the upward tree) or its dependents (in the downward tree).
    pub children: Vec<TreeNode>,
}

/// The ownership tree of the object `uid`: its owners up to the roots, and its dependents down
/// to the leaves, each side expanded at most `depth` levels. `None` if the graph does not hold
/// the object.
pub fn tree(graph: &Graph, uid: Uid, depth: usize) -> Option<(TreeNode, TreeNode)> {
    let node = graph.node(uid)?;
    let up = expand(graph, &node, depth, &mut HashSet::new(), Direction::Up);
    let down = expand(graph, &node, depth, &mut HashSet::new(), Direction::Down);
    Some((up, down))
}

#[derive(Clone, Copy)]
enum Direction {
    Up,
    Down,
}

fn expand(
    graph: &Graph,
    node: &NodeView,
    depth: usize,
    seen: &mut HashSet<Uid>,
    direction: Direction,
) -> TreeNode {
    let uid = node.identity.uid;
    let first = seen.insert(uid);
    let mut out = TreeNode {
        identity: node.identity.clone(),
        is_virtual: node.is_virtual,
        being_deleted: node.being_deleted,
        repeated: !first,
        children: Vec::new(),
    };
    if !first || depth == 0 {
        return out;
    }
    let next: Vec<Uid> = match direction {
        Direction::Up => node.owners.iter().map(|o| o.uid).collect(),
        Direction::Down => graph.dependents(uid).iter().map(|d| d.uid).collect(),
    };
    let mut distinct = HashSet::new();
    for n in next.into_iter().filter(|u| distinct.insert(*u)) {
        if let Some(child) = graph.node(n) {
            out.children.push(expand(graph, &child, depth - 1, seen, direction));
        }
    }
    out
}

/// What deleting an object with a propagation policy would remove, as the collector would
/// carry it out on the graph as it stands.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlastRadius {
    /// The objects deleted, the root first, then in the order the collection reaches them.
    pub deleted: Vec<ObjectReference>,
    /// Dependents kept because another owner of theirs stays: each with those owners (their
    /// reference to a deleted owner is removed instead).
    pub kept: Vec<(ObjectReference, Vec<ObjectReference>)>,
    /// Dependents orphaned: their reference to a deleted owner removed, the object kept (the
    /// root's dependents under `orphan`, and those of a deleted object whose own `orphan` or
    /// `foregroundDeletion` finalizer decides its propagation; see `own_policy`).
    pub orphaned: Vec<ObjectReference>,
    /// Deleted objects that carry a GC finalizer of their own: the collector deletes them with
    /// the policy it names, which the graph does not record, so their dependents are counted as
    /// orphaned rather than followed (the smaller radius; an upper bound would follow them).
    pub own_policy: Vec<ObjectReference>,
}

impl BlastRadius {
    /// Deleted objects by `apiVersion/kind`.
    pub fn deleted_by_kind(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for o in &self.deleted {
            *counts.entry(format!("{}/{}", o.ty.api_version(), o.ty.kind())).or_insert(0) += 1;
        }
        counts
    }
}

/// The blast radius of deleting `uid` with `policy` (see [`BlastRadius`]); `None` if the graph
/// does not hold the object, or holds it only as a virtual owner.
///
/// The collector's rules, applied transitively: a dependent is deleted when every owner it
/// names is deleted, absent from the graph, virtual, or itself being deleted (as the collector
/// finds each of those dangling, or soon will); one owner that stays keeps it. Background and
/// foreground remove the same objects (foreground waits for the blocking ones first); orphan
/// removes the root alone.
pub fn blast_radius(graph: &Graph, uid: Uid, policy: PropagationPolicy) -> Option<BlastRadius> {
    let root = graph.node(uid).filter(|n| !n.is_virtual)?;
    let mut radius = BlastRadius::default();
    let mut deleted: HashSet<Uid> = HashSet::from([uid]);
    radius.deleted.push(root.identity.clone());
    if policy == PropagationPolicy::Orphan {
        radius.orphaned = distinct_dependents(graph, uid)
            .into_iter()
            .filter_map(|d| graph.node(d).map(|n| n.identity))
            .collect();
        return Some(radius);
    }
    let mut frontier: VecDeque<Uid> = VecDeque::from([uid]);
    let mut settled: HashSet<Uid> = HashSet::new();
    while let Some(owner) = frontier.pop_front() {
        for d in distinct_dependents(graph, owner) {
            if deleted.contains(&d) {
                continue;
            }
            let Some(dep) = graph.node(d) else { continue };
            if !staying_owners(graph, &dep, &deleted).is_empty() {
                // May still go if a staying owner is deleted later in the walk: settle at the end.
                settled.insert(d);
                continue;
            }
            deleted.insert(d);
            settled.remove(&d);
            radius.deleted.push(dep.identity.clone());
            if dep.has_gc_finalizers && !dep.being_deleted {
                radius.own_policy.push(dep.identity.clone());
                for o in distinct_dependents(graph, d) {
                    if let Some(n) = graph.node(o) {
                        radius.orphaned.push(n.identity);
                    }
                }
            } else {
                frontier.push_back(d);
            }
        }
    }
    for d in settled {
        if deleted.contains(&d) {
            continue;
        }
        let Some(dep) = graph.node(d) else { continue };
        let staying = staying_owners(graph, &dep, &deleted);
        radius.kept.push((dep.identity, staying));
    }
    radius.kept.sort_by_key(|(o, _)| o.to_string());
    radius.orphaned.retain(|o| !deleted.contains(&o.uid));
    Some(radius)
}

/// The owners of `dep` that stay: observed, not being deleted, not in `deleted`.
fn staying_owners(graph: &Graph, dep: &NodeView, deleted: &HashSet<Uid>) -> Vec<ObjectReference> {
    dep.owners
        .iter()
        .filter(|o| !deleted.contains(&o.uid))
        .filter_map(|o| graph.node(o.uid))
        .filter(|o| !o.is_virtual && !o.being_deleted)
        .map(|o| o.identity)
        .collect()
}

/// The dependents of `uid`, each once (an object may name its owner twice).
fn distinct_dependents(graph: &Graph, uid: Uid) -> Vec<Uid> {
    let mut seen = HashSet::new();
    graph.dependents(uid).into_iter().map(|d| d.uid).filter(|u| seen.insert(*u)).collect()
}
