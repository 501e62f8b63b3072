//! Upstream's pure helper rules, shared by the parallel ingester and the sequential reference.
//!
//! Upstream: `graph_builder.go` (`referencesDiffs`, `partitionDependents`,
//! `getAlternateOwnerIdentity`, `referenceLessThan`, `deletionStartsWithFinalizer`);
//! GC-SPEC.md §2.2 (b), §2.5-2.7.

use std::cmp::Ordering;

use crate::graph::Node;
use crate::graph::names::{NameId, Names};
use crate::graph::node::NodeOwnerRef;
use crate::identity::{Namespace, ObjectReference, ObjectType, OwnerRef, Uid};
use crate::meta::{FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN};

/// A borrowed owner reference, so that diffs compare graph and event references alike.
#[derive(Clone, Copy, Eq, Debug)]
pub(crate) struct RefView<'a> {
    pub(crate) ty: ObjectType,
    pub(crate) name: &'a str,
    pub(crate) uid: Uid,
    pub(crate) controller: Option<bool>,
    pub(crate) block_owner_deletion: Option<bool>,
}

/// Field by field, as derived, in the order that decides soonest: the UID first (references
/// to different owners part there), the name last, and not read at all when both borrow the
/// same string (a reference compared with its own copy, as phase one does to find an added
/// reference's position).
impl PartialEq for RefView<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.uid == other.uid
            && self.ty == other.ty
            && self.controller == other.controller
            && self.block_owner_deletion == other.block_owner_deletion
            && (std::ptr::eq(self.name, other.name) || self.name == other.name)
    }
}

impl<'a> RefView<'a> {
    /// `holder`'s reference `r`; `names` are its shard's.
    pub(crate) fn of_node(holder: &Node, r: &NodeOwnerRef, names: &'a Names) -> RefView<'a> {
        RefView {
            ty: r.ty(),
            name: holder.owner_name(r, names),
            uid: r.uid,
            controller: r.controller(),
            block_owner_deletion: r.block_owner_deletion(),
        }
    }

    pub(crate) fn of(r: &'a OwnerRef) -> RefView<'a> {
        RefView {
            ty: r.ty,
            name: &r.name,
            uid: r.uid,
            controller: r.controller,
            block_owner_deletion: r.block_owner_deletion,
        }
    }

    pub(crate) fn to_owner_ref(self) -> OwnerRef {
        OwnerRef {
            ty: self.ty,
            name: self.name.to_owned(),
            uid: self.uid,
            controller: self.controller,
            block_owner_deletion: self.block_owner_deletion,
        }
    }

    /// The reference as the node whose name is at `holder` keeps it, its name stored in
    /// `names` (the node's shard's) unless it is a prefix of the node's.
    pub(crate) fn to_node_owner_ref(self, holder: NameId, names: &mut Names) -> NodeOwnerRef {
        let name = names.store_relative(holder, self.name);
        NodeOwnerRef::new(self.ty, name, self.uid, self.controller, self.block_owner_deletion)
    }

    pub(crate) fn blocks(self) -> bool {
        self.block_owner_deletion == Some(true)
    }
}

/// The result of [`references_diffs`].
#[derive(Debug, Default)]
pub(crate) struct RefDiff<'a> {
    pub(crate) added: Vec<RefView<'a>>,
    pub(crate) removed: Vec<RefView<'a>>,
    /// (old, new) pairs with the same UID that are not equal in every field.
    pub(crate) changed: Vec<(RefView<'a>, RefView<'a>)>,
}

impl RefDiff<'_> {
    pub(crate) fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// Upstream's `referencesDiffs`, keyed by owner UID, with its map semantics kept: among
/// references with the same UID in `new` the last wins, and every entry of `old` is looked up
/// in turn.
///
/// Divergences from upstream:
/// - `added` comes out in `new`'s order (upstream's is Go map order, which is random), so that
///   both ingesters, and every run, agree.
/// - An `old` duplicate whose UID was already matched is neither removed nor changed when `new`
///   still names that UID. Upstream's map lookup no longer finds it and counts it removed, so
///   the dependent is dropped from the owner's dependents while it still refers to the owner:
///   the owner's deletion then never queues it (garbage kept for ever) and a foreground
///   deletion of the owner no longer waits for it although it blocks (found by the stale-view
///   property test). Only the owner side of the graph differs, and only for repeated UIDs.
///   If that duplicate blocked and no reference of `new` to its owner does, it is reported in
///   `changed` (blocking → not blocking, paired with the reference kept), so that the owner is
///   queued as upstream's removal would queue it: a foreground deletion waiting for it
///   would otherwise never finish.
pub(crate) fn references_diffs<'a>(old: &[RefView<'a>], new: &[RefView<'a>]) -> RefDiff<'a> {
    // Small lists (almost always 0 or 1 entries): linear scans beat hashing.
    let mut pending: Vec<Option<RefView<'a>>> = Vec::with_capacity(new.len());
    for (i, r) in new.iter().enumerate() {
        // Keep only the last reference of each UID, at the position of its first occurrence.
        if let Some(first) = new[..i].iter().position(|p| p.uid == r.uid) {
            pending[first] = Some(*r);
            pending.push(None);
        } else {
            pending.push(Some(*r));
        }
    }
    let mut diff = RefDiff::default();
    for o in old {
        match pending.iter_mut().find(|p| p.is_some_and(|p| p.uid == o.uid)) {
            Some(slot) => {
                let n = slot.take().expect("matched a present slot");
                if n != *o {
                    diff.changed.push((*o, n));
                }
            }
            None if new.iter().any(|n| n.uid == o.uid) => {
                // A repeat of a kept UID: not removed, the dependent still refers to the owner.
                // But if it blocked and no new reference to that owner does, the owner lost a
                // blocking dependent, and a foreground deletion waiting for it must be looked
                // at again (upstream queues the owner of a removed blocking reference).
                if o.blocks() && !new.iter().any(|n| n.uid == o.uid && n.blocks()) {
                    let n = new.iter().rev().find(|n| n.uid == o.uid).expect("checked above");
                    diff.changed.push((*o, *n));
                }
            }
            None => diff.removed.push(*o),
        }
    }
    diff.added = pending.into_iter().flatten().collect();
    diff
}

/// A dependent as the decisions about its owner see it: its UID, its namespace, and its
/// references that name the owner's UID.
#[derive(Clone, Debug)]
pub(crate) struct DepRefs<'a> {
    pub(crate) uid: Uid,
    pub(crate) namespace: Namespace,
    /// (type, name) of each of the dependent's references to the owner UID.
    pub(crate) refs: Vec<(ObjectType, &'a str)>,
}

fn coords_match(ty: ObjectType, name: &str, uid: Uid, identity: &ObjectReference) -> bool {
    identity.uid == uid && identity.ty == ty && identity.name == name
}

/// Upstream's `partitionDependents`: dependents whose references to `owner.uid` match its
/// coordinates, and those with a reference that does not (or in another namespace than a
/// namespaced owner). A dependent may land in both.
pub(crate) fn partition_dependents<'d, 'a>(
    deps: &'d [DepRefs<'a>],
    owner: &ObjectReference,
) -> (Vec<&'d DepRefs<'a>>, Vec<&'d DepRefs<'a>>) {
    let owner_namespaced = !owner.namespace.is_cluster();
    let (mut matching, mut nonmatching) = (Vec::new(), Vec::new());
    for dep in deps {
        let (mut found_match, mut found_mismatch) = (false, false);
        if owner_namespaced && owner.namespace != dep.namespace {
            found_mismatch = true;
        } else {
            for &(ty, name) in &dep.refs {
                if coords_match(ty, name, owner.uid, owner) {
                    found_match = true;
                } else {
                    found_mismatch = true;
                }
            }
        }
        if found_match {
            matching.push(dep);
        }
        if found_mismatch {
            nonmatching.push(dep);
        }
    }
    (matching, nonmatching)
}

/// Upstream's `referenceLessThan`: by kind, apiVersion, namespace, name, then UID, as strings.
pub(crate) fn reference_cmp(a: &ObjectReference, b: &ObjectReference) -> Ordering {
    a.ty.kind()
        .cmp(b.ty.kind())
        .then_with(|| a.ty.api_version().cmp(b.ty.api_version()))
        .then_with(|| a.namespace.as_str().cmp(b.namespace.as_str()))
        .then_with(|| a.name.cmp(&b.name))
        .then_with(|| a.uid.to_string().cmp(&b.uid.to_string()))
}

/// Upstream's `getAlternateOwnerIdentity`: after `verified_absent` was confirmed absent, the
/// next identity (in [`reference_cmp`] order, wrapping around) that some dependent's reference
/// to the same UID gives the owner, or `None`.
pub(crate) fn alternate_owner_identity(
    deps: &[&DepRefs<'_>],
    verified_absent: &ObjectReference,
) -> Option<ObjectReference> {
    let absent_cluster = verified_absent.namespace.is_cluster();
    let mut seen: Vec<ObjectReference> = vec![verified_absent.clone()];
    let mut first: Option<ObjectReference> = None;
    let mut first_following: Option<ObjectReference> = None;
    for dep in deps {
        for &(ty, name) in &dep.refs {
            if coords_match(ty, name, verified_absent.uid, verified_absent)
                && (absent_cluster || dep.namespace == verified_absent.namespace)
            {
                continue; // exactly the identity just verified absent
            }
            let mut candidate = ObjectReference {
                ty,
                namespace: dep.namespace,
                name: name.to_owned(),
                uid: verified_absent.uid,
            };
            if absent_cluster && candidate.ty == verified_absent.ty {
                // The verified identity was cluster-scoped and this reference names the same
                // apiVersion/kind: that kind is cluster-scoped, keep it so.
                candidate.namespace = Namespace::CLUSTER;
            }
            if seen.contains(&candidate) {
                continue;
            }
            seen.push(candidate.clone());
            if first.as_ref().is_none_or(|f| reference_cmp(&candidate, f).is_lt()) {
                first = Some(candidate.clone());
            }
            if reference_cmp(verified_absent, &candidate).is_lt()
                && first_following.as_ref().is_none_or(|f| reference_cmp(&candidate, f).is_lt())
            {
                first_following = Some(candidate);
            }
        }
    }
    first_following.or(first)
}

/// What processTransitions needs of one version of an object.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub(crate) struct DeletionState {
    pub(crate) deletion_timestamp: bool,
    pub(crate) orphan: bool,
    pub(crate) foreground: bool,
}

impl DeletionState {
    pub(crate) fn of(meta: &crate::meta::ObjectMeta) -> DeletionState {
        DeletionState {
            deletion_timestamp: meta.deletion_timestamp,
            orphan: meta.has_finalizer(FINALIZER_ORPHAN),
            foreground: meta.has_finalizer(FINALIZER_DELETE_DEPENDENTS),
        }
    }

    /// Whether the object has the `orphan` or `foregroundDeletion` finalizer.
    pub(crate) fn has_gc_finalizers(self) -> bool {
        self.orphan || self.foreground
    }

    fn has(self, foreground: bool) -> bool {
        if foreground { self.foreground } else { self.orphan }
    }
}

/// The transition processTransitions takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Transition {
    None,
    /// Deletion started with the `orphan` finalizer: queue the node to attemptToOrphan.
    Orphan,
    /// Deletion started with `foregroundDeletion`: mark deletingDependents, queue the
    /// dependents and the node to attemptToDelete.
    Foreground,
}

/// Upstream's `processTransitions` decision, from `deletionStartsWithFinalizer`.
pub(crate) fn transition(old: Option<DeletionState>, new: DeletionState) -> Transition {
    let starts = |foreground: bool| {
        new.deletion_timestamp
            && new.has(foreground)
            && old.is_none_or(|o| !o.deletion_timestamp || !o.has(foreground))
    };
    if starts(false) {
        Transition::Orphan
    } else if starts(true) {
        Transition::Foreground
    } else {
        Transition::None
    }
}

#[cfg(test)]
mod tests;
