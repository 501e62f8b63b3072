//! A graph node: its identity, owner references, flags, and its dependents set (the set is in
//! `dependents.rs`).
//!
//! Upstream: `graph.go` (`node`, `addDependent`, `deleteDependent`, `blockingDependents`);
//! GC-SPEC.md §1.2.
//!
//! # Concurrency
//!
//! A node lives inside its shard's table and is only reached under that shard's lock: ingestion
//! writes it under the write lock, workers copy out what they need under the read lock (see
//! [`crate::graph`]). So, unlike upstream's per-field locks, a reader always sees one consistent
//! version of a node.

use super::dependents::Dependents;
use super::names::{NameId, Names};
use crate::identity::{Namespace, ObjectReference, ObjectType, OwnerRef, Uid};

/// An owner reference as a node keeps it: [`OwnerRef`] in 24 bytes, where an `OwnerRef`
/// takes 56 and an allocation. Its name is in the shard's [`Names`], relative to the holding
/// node's (read it with [`Node::owner_name`]); its `controller` and `blockOwnerDeletion` sit in
/// the bits above the type's id, which never reaches them ([`ObjectType::id`]).
#[derive(Clone, Debug)]
pub(crate) struct NodeOwnerRef {
    pub(crate) uid: Uid,
    /// The type's id, then two bits each of `controller` and `blockOwnerDeletion`.
    ty_and_flags: u32,
    /// In the [`Names`] of the shard of the node holding the reference.
    pub(crate) name: NameId,
}

const CONTROLLER_SHIFT: u32 = ObjectType::ID_BITS;
const BLOCK_SHIFT: u32 = ObjectType::ID_BITS + 2;

fn encode_flag(flag: Option<bool>) -> u32 {
    match flag {
        None => 0,
        Some(false) => 1,
        Some(true) => 2,
    }
}

fn decode_flag(bits: u32) -> Option<bool> {
    match bits & 3 {
        0 => None,
        1 => Some(false),
        _ => Some(true),
    }
}

impl NodeOwnerRef {
    pub(crate) fn new(
        ty: ObjectType,
        name: NameId,
        uid: Uid,
        controller: Option<bool>,
        block_owner_deletion: Option<bool>,
    ) -> NodeOwnerRef {
        debug_assert!(ty.id() < 1 << ObjectType::ID_BITS, "the type interner stops before");
        let ty_and_flags = ty.id()
            | encode_flag(controller) << CONTROLLER_SHIFT
            | encode_flag(block_owner_deletion) << BLOCK_SHIFT;
        NodeOwnerRef { uid, ty_and_flags, name }
    }

    pub(crate) fn ty(&self) -> ObjectType {
        ObjectType::from_id(self.ty_and_flags & ((1 << ObjectType::ID_BITS) - 1))
    }

    pub(crate) fn controller(&self) -> Option<bool> {
        decode_flag(self.ty_and_flags >> CONTROLLER_SHIFT)
    }

    pub(crate) fn block_owner_deletion(&self) -> Option<bool> {
        decode_flag(self.ty_and_flags >> BLOCK_SHIFT)
    }

    /// The public form, for what leaves the graph: `holder` is the node holding it.
    pub(crate) fn to_owner_ref(&self, holder: &Node, names: &Names) -> OwnerRef {
        OwnerRef {
            ty: self.ty(),
            name: holder.owner_name(self, names).to_owned(),
            uid: self.uid,
            controller: self.controller(),
            block_owner_deletion: self.block_owner_deletion(),
        }
    }

    /// Whether this reference blocks its owner's foreground deletion.
    pub(crate) fn blocks(&self) -> bool {
        self.block_owner_deletion() == Some(true)
    }
}

/// A node's owner references, in order: one inline (almost every object has at most one), or
/// none or several in one allocation of their exact number. 24 bytes in the node, the size of
/// one reference: the several sit behind two pointers, one of them thin, so that the variant
/// fits beside the reference's niche (its non-zero name) and needs no tag of its own.
#[derive(Clone, Debug)]
pub(crate) enum Owners {
    One(NodeOwnerRef),
    /// `None`: no references.
    Many(Option<Box<Box<[NodeOwnerRef]>>>),
}

impl Default for Owners {
    fn default() -> Owners {
        Owners::NONE
    }
}

impl Owners {
    /// No references.
    pub(crate) const NONE: Owners = Owners::Many(None);

    pub(crate) fn as_slice(&self) -> &[NodeOwnerRef] {
        match self {
            Owners::One(r) => std::slice::from_ref(r),
            Owners::Many(None) => &[],
            Owners::Many(Some(refs)) => refs,
        }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [NodeOwnerRef] {
        match self {
            Owners::One(r) => std::slice::from_mut(r),
            Owners::Many(None) => &mut [],
            Owners::Many(Some(refs)) => refs,
        }
    }

    pub(crate) fn iter(&self) -> std::slice::Iter<'_, NodeOwnerRef> {
        self.as_slice().iter()
    }
}

impl FromIterator<NodeOwnerRef> for Owners {
    fn from_iter<I: IntoIterator<Item = NodeOwnerRef>>(refs: I) -> Owners {
        let mut refs = refs.into_iter();
        match (refs.next(), refs.next()) {
            (None, _) => Owners::NONE,
            (Some(only), None) => Owners::One(only),
            (Some(first), Some(second)) => {
                let all: Box<[NodeOwnerRef]> = [first, second].into_iter().chain(refs).collect();
                Owners::Many(Some(Box::new(all)))
            }
        }
    }
}

/// Node flag bits.
pub(crate) mod flags {
    /// Created from an owner reference, never observed through an informer. Cleared once
    /// (`markObserved`), never set again.
    pub(crate) const VIRTUAL: u8 = 1;
    /// The object has a deletionTimestamp. One-way.
    pub(crate) const BEING_DELETED: u8 = 2;
    /// The object has a deletionTimestamp and the `foregroundDeletion` finalizer. One-way.
    pub(crate) const DELETING_DEPENDENTS: u8 = 4;
    /// The last observed object had the `orphan` or `foregroundDeletion` finalizer (with or
    /// without a deletionTimestamp). Follows every observed event.
    pub(crate) const GC_FINALIZERS: u8 = 8;
}

/// A node of the graph: an observed object, or a virtual owner known only from references.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    /// Set when the node is created; replaced only when a virtual node is re-identified
    /// (promotion to observed with other coordinates, or an alternate identity), which also
    /// bumps `incarnation`; the apiVersion/kind also follow the informer's (#137036).
    /// Written only by [`Node::set_identity`] and [`Node::set_type`]: compact dependent
    /// entries read it back (see [`DependentEntry`](super::dependents::DependentEntry)).
    pub(crate) ty: ObjectType,
    pub(crate) namespace: Namespace,
    /// Written only by [`Node::set_identity`], as `ty`. In the [`Names`] of the node's shard,
    /// as the names of `owners`.
    pub(crate) name: NameId,
    pub(crate) uid: Uid,
    /// Distinguishes the node from earlier versions of itself that upstream would have cloned
    /// into a new pointer: queue items carry it, and a worker skips an item whose node has
    /// been re-identified since (upstream's "item no longer virtual in the graph").
    pub(crate) incarnation: u32,
    /// See [`flags`].
    pub(crate) flags: u8,
    /// `metadata.resourceVersion` of the last observed event, when it is a decimal number
    /// below 2^56 (every etcd-backed server writes its revision); zero for virtual nodes and
    /// unknown versions. Lets the collector decide on an item from its observed state and
    /// delete it with this version as a precondition instead of reading it first
    /// (`CollectorOptions::read_items_from_graph`). Seven bytes: with `flags`, one word.
    pub(crate) resource_version: [u8; 7],
    /// The object's ownerReferences as last observed (empty for virtual nodes). Written only by
    /// the object's own events: set on the new node, then through [`Node::replace_owners`].
    pub(crate) owners: Owners,
    /// The objects whose ownerReferences name this node's UID, as of the last applied event.
    pub(crate) dependents: Dependents,
}

impl Node {
    /// A virtual node of this identity, its name stored in `names` (its shard's).
    pub(crate) fn new_virtual(
        ty: ObjectType,
        namespace: Namespace,
        name: &str,
        uid: Uid,
        names: &mut Names,
    ) -> Node {
        Node {
            ty,
            namespace,
            name: names.store(name),
            uid,
            incarnation: 0,
            flags: flags::VIRTUAL,
            resource_version: [0; 7],
            owners: Owners::NONE,
            dependents: Dependents::default(),
        }
    }

    /// The node's name; `names` are its shard's, as for every method that takes them.
    pub(crate) fn name<'n>(&self, names: &'n Names) -> &'n str {
        names.get(self.name)
    }

    /// The name of `owner`, one of this node's references.
    pub(crate) fn owner_name<'n>(&self, owner: &NodeOwnerRef, names: &'n Names) -> &'n str {
        names.get_relative(self.name, owner.name)
    }

    /// This node's owner references in their public form.
    pub(crate) fn owner_refs(&self, names: &Names) -> Vec<OwnerRef> {
        self.owners.iter().map(|r| r.to_owner_ref(self, names)).collect()
    }

    /// A copy of the node as it leaves the graph (`names` are its shard's).
    pub(crate) fn view(&self, names: &Names) -> super::NodeView {
        super::NodeView {
            identity: self.identity(names),
            incarnation: self.incarnation,
            is_virtual: self.is_virtual(),
            being_deleted: self.is_being_deleted(),
            deleting_dependents: self.is_deleting_dependents(),
            owners: self.owner_refs(names),
            dependents_len: self.dependents.len(),
            resource_version: self.resource_version(),
            has_gc_finalizers: self.has_gc_finalizers(),
        }
    }

    pub(crate) fn identity(&self, names: &Names) -> ObjectReference {
        ObjectReference {
            ty: self.ty,
            namespace: self.namespace,
            name: self.name(names).to_owned(),
            uid: self.uid,
        }
    }

    /// Whether the node's identity equals `other` (all five fields).
    pub(crate) fn identity_eq(&self, other: &ObjectReference, names: &Names) -> bool {
        self.uid == other.uid
            && self.ty == other.ty
            && self.namespace == other.namespace
            && self.name(names) == other.name
    }

    /// Replaces the node's identity. Compact dependent entries named the old type and name,
    /// so they are expanded first (see [`DependentEntry`](super::dependents::DependentEntry)).
    pub(crate) fn set_identity(&mut self, identity: ObjectReference, names: &mut Names) {
        let renamed = self.name(names) != identity.name;
        if self.ty != identity.ty || renamed {
            self.dependents.expand(self.ty, self.name(names));
        }
        self.ty = identity.ty;
        self.namespace = identity.namespace;
        if renamed {
            // References stored as a prefix of the old name get copies of their own first.
            for owner in self.owners.as_mut_slice() {
                if owner.name.is_relative() {
                    let text = names.get_relative(self.name, owner.name).to_owned();
                    owner.name = names.store(&text);
                }
            }
            names.release(self.name);
            self.name = names.store(&identity.name);
        }
    }

    /// Replaces the node's type (upstream #137036), expanding compact entries first.
    pub(crate) fn set_type(&mut self, ty: ObjectType, names: &Names) {
        if self.ty != ty {
            self.dependents.expand(self.ty, self.name(names));
            self.ty = ty;
        }
    }

    /// Replaces the node's owner references with `owners` (whose names are in `names`),
    /// releasing the names of the ones replaced.
    pub(crate) fn replace_owners(&mut self, owners: Owners, names: &mut Names) {
        self.release_owner_names(names);
        self.owners = owners;
    }

    /// Releases the names this node holds in `names`: before it leaves the graph.
    pub(crate) fn release_names(&self, names: &mut Names) {
        names.release(self.name);
        self.release_owner_names(names);
    }

    fn release_owner_names(&self, names: &mut Names) {
        self.owners.iter().for_each(|r| names.release(r.name));
    }

    /// Adds (or replaces) the entry of dependent `uid`, which has `refs` (type, name, blocks)
    /// to this node.
    pub(crate) fn insert_dependent<'r, I>(
        &mut self,
        uid: Uid,
        namespace: Namespace,
        refs: I,
        names: &Names,
    ) where
        I: IntoIterator<Item = (ObjectType, &'r str, bool)>,
        I::IntoIter: Clone,
    {
        self.dependents.insert(uid, namespace, refs, self.ty, self.name(names));
    }

    /// Replaces the references of dependent `uid`'s entry, if it has one.
    pub(crate) fn update_dependent_refs<'r, I>(&mut self, uid: Uid, refs: I, names: &Names)
    where
        I: IntoIterator<Item = (ObjectType, &'r str, bool)>,
        I::IntoIter: Clone,
    {
        self.dependents.update_refs(uid, refs, self.ty, self.name(names));
    }

    pub(crate) fn is_virtual(&self) -> bool {
        self.flags & flags::VIRTUAL != 0
    }
    pub(crate) fn is_being_deleted(&self) -> bool {
        self.flags & flags::BEING_DELETED != 0
    }
    pub(crate) fn is_deleting_dependents(&self) -> bool {
        self.flags & flags::DELETING_DEPENDENTS != 0
    }
    /// The last observed resourceVersion, if known.
    pub(crate) fn resource_version(&self) -> Option<u64> {
        let mut bytes = [0u8; 8];
        bytes[..7].copy_from_slice(&self.resource_version);
        Some(u64::from_le_bytes(bytes)).filter(|&rv| rv != 0)
    }
    /// Records the observed resourceVersion (zero, or one that does not fit: unknown) and
    /// whether the object carries a garbage collector finalizer.
    pub(crate) fn set_observed_version(&mut self, resource_version: u64, gc_finalizers: bool) {
        let rv = if resource_version < 1 << 56 { resource_version } else { 0 };
        self.resource_version.copy_from_slice(&rv.to_le_bytes()[..7]);
        if gc_finalizers {
            self.flags |= flags::GC_FINALIZERS;
        } else {
            self.flags &= !flags::GC_FINALIZERS;
        }
    }
    /// Whether the last observed object had the `orphan` or `foregroundDeletion` finalizer.
    pub(crate) fn has_gc_finalizers(&self) -> bool {
        self.flags & flags::GC_FINALIZERS != 0
    }
    pub(crate) fn mark_observed(&mut self) {
        self.flags &= !flags::VIRTUAL;
    }
    pub(crate) fn mark_being_deleted(&mut self) {
        self.flags |= flags::BEING_DELETED;
    }
    pub(crate) fn mark_deleting_dependents(&mut self) {
        self.flags |= flags::DELETING_DEPENDENTS;
    }

    /// Upstream's `blockingDependents`: each dependent once per blocking reference to this node.
    pub(crate) fn blocking_dependents(&self, names: &Names) -> Vec<Uid> {
        let mut out = Vec::new();
        for d in self.dependents.iter() {
            for (_, _, blocks) in self.dependents.refs(d, self.ty, self.name(names)) {
                if blocks {
                    out.push(d.uid);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod observed_state_tests {
    use super::*;
    use crate::graph::dependents::{DependentEntry, DependentsSet};

    fn node(names: &mut Names) -> Node {
        let uid = Uid::parse("00000000-0000-4000-8000-000000000001");
        Node::new_virtual(ObjectType::new("v1", "Pod"), Namespace::new("ns"), "p", uid, names)
    }

    fn reference(name: &str, blocks: bool) -> [(ObjectType, &str, bool); 1] {
        [(ObjectType::new("v1", "Pod"), name, blocks)]
    }

    fn read_back(n: &Node, uid: Uid, names: &Names) -> Vec<(ObjectType, String, bool)> {
        let entry = n.dependents.iter().find(|d| d.uid == uid).expect("entry");
        let refs = n.dependents.refs(entry, n.ty, n.name(names));
        refs.map(|(ty, name, b)| (ty, name.to_owned(), b)).collect()
    }

    #[test]
    fn a_compact_entry_keeps_naming_what_it_named_when_the_owner_identity_changes() {
        let dep = Uid::from_u128(7);
        let pod = ObjectType::new("v1", "Pod");
        let names = &mut Names::default();
        let mut n = node(names);
        n.insert_dependent(dep, Namespace::new("ns"), reference("p", true), names);
        assert!(n.dependents.iter().all(DependentEntry::is_compact), "names the owner: compact");
        let other = n.dependents.iter().next().unwrap().clone();
        n.insert_dependent(Uid::from_u128(8), Namespace::new("ns"), reference("q", false), names);
        assert_eq!(read_back(&n, Uid::from_u128(8), names), vec![(pod, "q".to_owned(), false)]);
        // The owner turns out to be named otherwise: the entry still names "p".
        let renamed = ObjectReference { name: "renamed".into(), ..n.identity(names) };
        n.set_identity(renamed, names);
        assert_eq!(n.name(names), "renamed");
        assert_eq!(read_back(&n, dep, names), vec![(pod, "p".to_owned(), true)]);
        assert_ne!(n.dependents.iter().find(|d| d.uid == dep), Some(&other), "expanded");
        // And a type change (#137036) likewise.
        let mut n = node(names);
        n.insert_dependent(dep, Namespace::new("ns"), reference("p", false), names);
        n.set_type(ObjectType::new("v1", "ConfigMap"), names);
        assert_eq!(read_back(&n, dep, names), vec![(pod, "p".to_owned(), false)]);
        // Updating the references re-compacts against the identity as it is now.
        n.update_dependent_refs(dep, [(ObjectType::new("v1", "ConfigMap"), "p", true)], names);
        assert!(n.dependents.iter().all(DependentEntry::is_compact));
        assert_eq!(
            read_back(&n, dep, names),
            vec![(ObjectType::new("v1", "ConfigMap"), "p".to_owned(), true)]
        );
    }

    #[test]
    fn a_dependent_entry_should_stay_within_24_bytes() {
        // A set's header is one allocation per owner: 32 bytes, a size class of its own.
        assert!(
            std::mem::size_of::<DependentsSet>() <= 32,
            "{}",
            std::mem::size_of::<DependentsSet>()
        );
        assert!(
            std::mem::size_of::<DependentEntry>() <= 24,
            "{}",
            std::mem::size_of::<DependentEntry>()
        );
    }

    #[test]
    fn node_should_stay_within_72_bytes() {
        // The graph's memory per object is mostly this; the names live in the shard's arena,
        // and a slot of the shard's slab (`Option<Node>`) takes no more than the node.
        assert!(std::mem::size_of::<Node>() <= 72, "{}", std::mem::size_of::<Node>());
        assert_eq!(std::mem::size_of::<Option<Node>>(), std::mem::size_of::<Node>());
        assert!(std::mem::size_of::<NodeOwnerRef>() <= 24);
        assert_eq!(std::mem::size_of::<Owners>(), std::mem::size_of::<NodeOwnerRef>());
    }

    #[test]
    fn an_owner_reference_keeps_its_type_and_both_flags() {
        let names = &mut Names::default();
        let flags = [None, Some(false), Some(true)];
        let types = [ObjectType::default(), ObjectType::new("apps/v1", "ReplicaSet")];
        for ty in types {
            for controller in flags {
                for block in flags {
                    let name = names.store("o");
                    let r = NodeOwnerRef::new(ty, name, Uid::from_u128(1), controller, block);
                    assert_eq!(
                        (r.ty(), r.controller(), r.block_owner_deletion(), r.blocks()),
                        (ty, controller, block, block == Some(true))
                    );
                }
            }
        }
    }

    #[test]
    fn owners_keep_their_order_inline_or_not() {
        let names = &mut Names::default();
        let refs = |n: u128, names: &mut Names| -> Vec<NodeOwnerRef> {
            (0..n)
                .map(|i| {
                    let name = names.store(&format!("owner-{i}"));
                    let ty = ObjectType::new("v1", "Pod");
                    NodeOwnerRef::new(ty, name, Uid::from_u128(i), Some(i == 0), None)
                })
                .collect()
        };
        for n in 0..4 {
            let owners: Owners = refs(n, names).into_iter().collect();
            assert!(matches!(
                (n, &owners),
                (0, Owners::Many(None)) | (1, Owners::One(_)) | (2.., Owners::Many(Some(_)))
            ));
            let uids: Vec<Uid> = owners.iter().map(|r| r.uid).collect();
            assert_eq!(uids, (0..n).map(Uid::from_u128).collect::<Vec<_>>());
            let read: Vec<&str> = owners.iter().map(|r| names.get(r.name)).collect();
            assert_eq!(read, (0..n).map(|i| format!("owner-{i}")).collect::<Vec<_>>());
        }
    }

    #[test]
    fn references_named_by_a_prefix_of_the_node_name_survive_a_rename() {
        let names = &mut Names::default();
        let mut n = node(names);
        n.set_identity(
            ObjectReference { name: "web-5d8f-x2k4p".into(), ..n.identity(names) },
            names,
        );
        let owner = |name: &str, names: &mut Names, holder: NameId| {
            let ty = ObjectType::new("apps/v1", "ReplicaSet");
            let name = names.store_relative(holder, name);
            NodeOwnerRef::new(ty, name, Uid::from_u128(9), Some(true), None)
        };
        let refs = [owner("web-5d8f", names, n.name), owner("db-1", names, n.name)];
        n.replace_owners(refs.into_iter().collect(), names);
        assert!(n.owners.as_slice()[0].name.is_relative());
        let read = |n: &Node, names: &Names| -> Vec<String> {
            n.owner_refs(names).into_iter().map(|r| r.name).collect()
        };
        assert_eq!(read(&n, names), ["web-5d8f", "db-1"]);
        n.set_identity(ObjectReference { name: "renamed".into(), ..n.identity(names) }, names);
        assert_eq!(read(&n, names), ["web-5d8f", "db-1"], "the prefix was copied out first");
        assert!(!n.owners.as_slice()[0].name.is_relative());
    }

    #[test]
    fn observed_version_should_round_trip_and_treat_unrepresentable_as_unknown() {
        let mut n = node(&mut Names::default());
        assert_eq!(n.resource_version(), None);
        n.set_observed_version(1_234_567_890_123, true);
        assert_eq!(n.resource_version(), Some(1_234_567_890_123));
        assert!(n.has_gc_finalizers());
        n.set_observed_version((1 << 56) - 1, false);
        assert_eq!(n.resource_version(), Some((1 << 56) - 1));
        assert!(!n.has_gc_finalizers());
        n.set_observed_version(1 << 56, false);
        assert_eq!(n.resource_version(), None);
        n.set_observed_version(0, false);
        assert_eq!(n.resource_version(), None);
        assert!(n.is_virtual(), "the other flags are left alone");
    }
}
