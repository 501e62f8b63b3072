//! A node's dependents: the owner side of its edges.
//!
//! Upstream: `graph.go` (`addDependent`, `deleteDependent`, the `dependents` map); GC-SPEC.md
//! §1.2. Each node keeps a [`Dependents`] set; each entry is one dependent with what the owner
//! side needs of its references to the node ([`DependentEntry`], compact when it can be).
//! Reached, like the node, only under its shard's lock (see [`crate::graph::node`]).

use hashbrown::HashTable;
use smallvec::SmallVec;

use super::names::Names;
use super::node::{Node, NodeOwnerRef};
use crate::identity::{Namespace, ObjectType, Uid, UidMap};

/// What the owner side of an edge knows about one of the dependent's references to it: enough
/// to decide, inside the owner's shard, everything upstream decides by reading the dependent's
/// `owners` through its pointer (partitionDependents, getAlternateOwnerIdentity,
/// blockingDependents).
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct EdgeRef {
    /// apiVersion and kind the reference names.
    pub(crate) ty: ObjectType,
    /// The name the reference names.
    pub(crate) name: Box<str>,
    /// `blockOwnerDeletion == true`.
    pub(crate) blocks: bool,
}

impl EdgeRef {
    /// The edge copy of `holder`'s reference `owner`.
    pub(crate) fn from_owner(holder: &Node, owner: &NodeOwnerRef, names: &Names) -> EdgeRef {
        let name = holder.owner_name(owner, names).into();
        EdgeRef { ty: owner.ty(), name, blocks: owner.blocks() }
    }
}

/// One dependent of a node: its UID, its namespace, and every one of its owner references that
/// names this node's UID (almost always exactly one).
///
/// # The compact form
///
/// Almost every dependent has exactly one reference to its owner, naming the owner's own
/// apiVersion, kind and name. Such an entry keeps only whether that reference blocks: 24
/// bytes and no allocation, where a copy of the reference took 64 bytes and a copy of the
/// name. The reference is then read back from the owner node's identity
/// ([`Dependents::refs`] takes it), which is sound only while that identity stays what the
/// reference named. So every change of a node's type or name goes through [`Node::set_identity`]
/// or [`Node::set_type`], which first turn the node's compact entries back into explicit copies
/// of the identity they named ([`Dependents::expand`]). Explicit copies (the other entries)
/// live beside the entries, in their set's table of [`ExplicitRefs`], so that the common entry
/// does not carry a pointer for them. `Graph::check_edge_copies` compares every entry, read
/// back this way, with the dependent's own references.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct DependentEntry {
    pub(crate) uid: Uid,
    pub(crate) namespace: Namespace,
    /// Whether the one reference blocks, in the compact form (unused otherwise).
    blocks: bool,
    /// The references are in the set's [`ExplicitRefs`], under this entry's UID.
    explicit: bool,
}

/// An explicit entry's references (type, name, blocks), in order.
pub(crate) type ExplicitRefs = SmallVec<[EdgeRef; 1]>;

impl DependentEntry {
    /// The entry of dependent `uid` with `refs` (type, name, blocks) to the owner whose type and
    /// name are `owner_ty` and `owner_name` now: compact, without allocating, if it can be;
    /// else explicit, with the references to keep beside it.
    fn new<'r, I>(
        uid: Uid,
        namespace: Namespace,
        refs: I,
        owner_ty: ObjectType,
        owner_name: &str,
    ) -> (DependentEntry, Option<ExplicitRefs>)
    where
        I: IntoIterator<Item = (ObjectType, &'r str, bool)>,
        I::IntoIter: Clone,
    {
        let refs = refs.into_iter();
        let mut probe = refs.clone();
        if let (Some((ty, name, blocks)), None) = (probe.next(), probe.next())
            && ty == owner_ty
            && name == owner_name
        {
            return (DependentEntry { uid, namespace, blocks, explicit: false }, None);
        }
        let listed = refs.map(|(ty, name, blocks)| EdgeRef { ty, name: name.into(), blocks });
        (DependentEntry { uid, namespace, blocks: false, explicit: true }, Some(listed.collect()))
    }

    /// Whether the entry is in the compact form.
    #[cfg(test)]
    pub(crate) fn is_compact(&self) -> bool {
        !self.explicit
    }
}

/// The number of dependents kept in a plain vector before switching to a hash table. Linear
/// scans of this many entries are faster than hashing; a ReplicaSet with 50k Pods must still
/// add and remove a dependent in O(1), hence the table above it.
const INLINE_DEPENDENTS: usize = 16;

/// A set of dependents keyed by UID, small and flat while small, hashed when large.
///
/// One pointer inline in the node: most objects have no dependents, and a node's size is paid
/// for every object (the shard tables hold nodes inline, and copy them as they grow).
#[derive(Clone, Debug, Default)]
pub(crate) struct Dependents(Option<Box<DependentsSet>>);

#[derive(Clone, Debug)]
pub(crate) struct DependentsSet {
    entries: Entries,
    /// The references of the explicit entries (see [`DependentEntry`]), by dependent UID;
    /// `None` while there are none, which is almost always.
    explicit: Option<Box<UidMap<ExplicitRefs>>>,
}

#[derive(Clone, Debug)]
enum Entries {
    /// At most [`INLINE_DEPENDENTS`] entries, unordered.
    Small(Vec<DependentEntry>),
    /// More: a table keyed by the dependent's UID. Boxed, so that the small form (almost
    /// every set) decides the header's size: 24 bytes, the tag in the vector's niche.
    Large(Box<HashTable<DependentEntry>>),
}

fn hash_entry(e: &DependentEntry) -> u64 {
    e.uid.hash64()
}

impl Entries {
    fn len(&self) -> usize {
        match self {
            Entries::Small(v) => v.len(),
            Entries::Large(t) => t.len(),
        }
    }

    fn get_mut(&mut self, uid: Uid) -> Option<&mut DependentEntry> {
        match self {
            Entries::Small(v) => v.iter_mut().find(|e| e.uid == uid),
            Entries::Large(t) => t.find_mut(uid.hash64(), |e| e.uid == uid),
        }
    }
}

impl DependentsSet {
    /// Keeps (or drops) the explicit references of the entry of `uid`.
    fn set_explicit(&mut self, uid: Uid, refs: Option<ExplicitRefs>) {
        match refs {
            Some(refs) => {
                self.explicit.get_or_insert_default().insert(uid, refs);
            }
            None => self.drop_explicit(uid),
        }
    }

    fn drop_explicit(&mut self, uid: Uid) {
        if let Some(table) = self.explicit.as_mut() {
            table.remove(&uid);
            if table.is_empty() {
                self.explicit = None;
            }
        }
    }
}

impl Dependents {
    /// Asks the CPU to fetch the set's header, without waiting for it.
    pub(crate) fn prefetch(&self) {
        if let Some(set) = self.0.as_deref() {
            crate::graph::prefetch(set);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.0.as_deref().map_or(0, |set| set.entries.len())
    }

    /// Whether the set is held in a hash table (it grew past the inline limit).
    #[cfg(any(test, kube_gc_loom))]
    pub(crate) fn is_hashed(&self) -> bool {
        matches!(self.0.as_deref(), Some(DependentsSet { entries: Entries::Large(_), .. }))
    }

    #[cfg(test)]
    pub(crate) fn get(&self, uid: Uid) -> Option<&DependentEntry> {
        match &self.0.as_deref()?.entries {
            Entries::Small(v) => v.iter().find(|e| e.uid == uid),
            Entries::Large(t) => t.find(uid.hash64(), |e| e.uid == uid),
        }
    }

    /// The references of `entry`, one of this set's, as (type, name, blocks), for the owner
    /// whose type and name are `owner_ty` and `owner_name` (the node holding this set: pass
    /// its own).
    pub(crate) fn refs<'a>(
        &'a self,
        entry: &'a DependentEntry,
        owner_ty: ObjectType,
        owner_name: &'a str,
    ) -> impl Iterator<Item = (ObjectType, &'a str, bool)> + 'a {
        let compact = (!entry.explicit).then_some((owner_ty, owner_name, entry.blocks));
        let listed = if entry.explicit {
            let table = self.0.as_deref().and_then(|set| set.explicit.as_deref());
            let refs = table.and_then(|t| t.get(&entry.uid));
            debug_assert!(refs.is_some(), "an explicit entry's references are kept beside it");
            refs
        } else {
            None
        };
        let listed = listed.into_iter().flat_map(|v| v.iter()).map(|r| (r.ty, &*r.name, r.blocks));
        compact.into_iter().chain(listed)
    }

    /// Adds the entry of dependent `uid`, which has `refs` (type, name, blocks) to the owner
    /// whose type and name are `owner_ty` and `owner_name` now, replacing an entry with the
    /// same UID (a set of dependents, as upstream's).
    pub(crate) fn insert<'r, I>(
        &mut self,
        uid: Uid,
        namespace: Namespace,
        refs: I,
        owner_ty: ObjectType,
        owner_name: &str,
    ) where
        I: IntoIterator<Item = (ObjectType, &'r str, bool)>,
        I::IntoIter: Clone,
    {
        let (entry, explicit) = DependentEntry::new(uid, namespace, refs, owner_ty, owner_name);
        let Some(set) = self.0.as_deref_mut() else {
            let mut set = DependentsSet { entries: Entries::Small(vec![entry]), explicit: None };
            set.set_explicit(uid, explicit);
            self.0 = Some(Box::new(set));
            return;
        };
        set.set_explicit(uid, explicit);
        if let Some(existing) = set.entries.get_mut(uid) {
            *existing = entry;
            return;
        }
        match &mut set.entries {
            Entries::Small(v) if v.len() < INLINE_DEPENDENTS => v.push(entry),
            Entries::Small(v) => {
                let mut table = HashTable::with_capacity(v.len() * 2);
                for e in v.drain(..).chain(std::iter::once(entry)) {
                    table.insert_unique(e.uid.hash64(), e, hash_entry);
                }
                set.entries = Entries::Large(Box::new(table));
            }
            Entries::Large(t) => {
                t.insert_unique(entry.uid.hash64(), entry, hash_entry);
            }
        }
    }

    /// Replaces the references of dependent `uid`'s entry, if it has one (see
    /// [`Dependents::insert`] for the arguments).
    pub(crate) fn update_refs<'r, I>(
        &mut self,
        uid: Uid,
        refs: I,
        owner_ty: ObjectType,
        owner_name: &str,
    ) where
        I: IntoIterator<Item = (ObjectType, &'r str, bool)>,
        I::IntoIter: Clone,
    {
        let Some(set) = self.0.as_deref_mut() else { return };
        let Some(existing) = set.entries.get_mut(uid) else { return };
        let (entry, explicit) =
            DependentEntry::new(uid, existing.namespace, refs, owner_ty, owner_name);
        *existing = entry;
        set.set_explicit(uid, explicit);
    }

    /// Removes the dependent with `uid`, if present.
    pub(crate) fn remove(&mut self, uid: Uid) -> Option<DependentEntry> {
        let set = self.0.as_deref_mut()?;
        let removed = match &mut set.entries {
            Entries::Small(v) => {
                let i = v.iter().position(|e| e.uid == uid)?;
                v.swap_remove(i)
            }
            Entries::Large(t) => {
                let removed = t.find_entry(uid.hash64(), |e| e.uid == uid).ok()?.remove().0;
                // Shrink back with hysteresis, so a set oscillating around the limit does not
                // convert on every change.
                if t.len() <= INLINE_DEPENDENTS / 2 {
                    let v: Vec<_> = std::mem::take(&mut **t).into_iter().collect();
                    set.entries = Entries::Small(v);
                }
                removed
            }
        };
        if removed.explicit {
            set.drop_explicit(uid);
        }
        if self.len() == 0 {
            self.0 = None;
        }
        Some(removed)
    }

    /// Expands every compact entry (see [`DependentEntry`]) with the owner's type and name as
    /// they are now, before they change.
    pub(crate) fn expand(&mut self, owner_ty: ObjectType, owner_name: &str) {
        let Some(set) = self.0.as_deref_mut() else { return };
        let mut expanded = Vec::new();
        let mut expand = |e: &mut DependentEntry| {
            if !e.explicit {
                e.explicit = true;
                let only = EdgeRef { ty: owner_ty, name: owner_name.into(), blocks: e.blocks };
                expanded.push((e.uid, SmallVec::from_elem(only, 1)));
            }
        };
        match &mut set.entries {
            Entries::Small(v) => v.iter_mut().for_each(&mut expand),
            Entries::Large(t) => t.iter_mut().for_each(&mut expand),
        }
        for (uid, refs) in expanded {
            set.set_explicit(uid, Some(refs));
        }
    }

    pub(crate) fn iter(&self) -> DependentsIter<'_> {
        match self.0.as_deref().map(|set| &set.entries) {
            None => DependentsIter::Slice([].iter()),
            Some(Entries::Small(v)) => DependentsIter::Slice(v.iter()),
            Some(Entries::Large(t)) => DependentsIter::Table(t.iter()),
        }
    }
}

/// Iterator over a [`Dependents`] set.
pub(crate) enum DependentsIter<'a> {
    Slice(std::slice::Iter<'a, DependentEntry>),
    Table(hashbrown::hash_table::Iter<'a, DependentEntry>),
}

impl<'a> Iterator for DependentsIter<'a> {
    type Item = &'a DependentEntry;
    fn next(&mut self) -> Option<Self::Item> {
        match self {
            DependentsIter::Slice(i) => i.next(),
            DependentsIter::Table(i) => i.next(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inserts dependent `i`: explicit (its reference names "other") when `i` is a multiple
    /// of 3, else compact.
    fn insert(d: &mut Dependents, i: u128) {
        let name = if i % 3 == 0 { "other" } else { "o" };
        let only = (ObjectType::default(), name, i % 2 == 0);
        d.insert(Uid::from_u128(i), Namespace::CLUSTER, [only], ObjectType::default(), "o");
    }

    /// What `d` holds for dependent `i`, read back as the collector reads it.
    fn read(d: &Dependents, i: u128) -> Option<Vec<(String, bool)>> {
        let e = d.get(Uid::from_u128(i))?;
        Some(d.refs(e, ObjectType::default(), "o").map(|(_, n, b)| (n.to_owned(), b)).collect())
    }

    fn explicit_held(d: &Dependents) -> usize {
        d.0.as_deref().and_then(|set| set.explicit.as_deref()).map_or(0, |t| t.len())
    }

    #[test]
    fn dependents_set_should_cross_its_inline_limit_and_back() {
        let mut d = Dependents::default();
        let n = (INLINE_DEPENDENTS * 4) as u128;
        let want =
            |i: u128| vec![((if i % 3 == 0 { "other" } else { "o" }).to_owned(), i % 2 == 0)];
        for i in 0..n {
            insert(&mut d, i);
            assert_eq!(d.len(), i as usize + 1);
        }
        assert!(d.is_hashed());
        // Re-inserting replaces, never duplicates.
        insert(&mut d, 3);
        assert_eq!(d.len(), n as usize);
        assert_eq!(explicit_held(&d), (0..n).filter(|i| i % 3 == 0).count());
        for i in 0..n {
            assert_eq!(read(&d, i), Some(want(i)), "#{i}");
        }
        for i in 0..n {
            assert_eq!(d.remove(Uid::from_u128(i)).map(|e| e.uid), Some(Uid::from_u128(i)));
            assert!(d.get(Uid::from_u128(i)).is_none());
            assert_eq!(d.len(), (n - i - 1) as usize);
            assert_eq!(d.iter().count(), d.len());
            assert_eq!(explicit_held(&d), (i + 1..n).filter(|j| j % 3 == 0).count());
            for j in i + 1..n {
                assert_eq!(read(&d, j), Some(want(j)), "#{j} after removing #{i}");
            }
        }
        assert_eq!(d.len(), 0);
        assert!(d.0.is_none(), "an empty set keeps no allocation");
        assert!(d.remove(Uid::from_u128(1)).is_none());
    }

    #[test]
    fn a_hashed_set_expands_every_compact_entry_and_keeps_them_through_shrinking() {
        let mut d = Dependents::default();
        let n = (INLINE_DEPENDENTS * 2) as u128;
        (0..n).for_each(|i| insert(&mut d, i));
        assert!(d.is_hashed());
        // The owner is about to be renamed: every entry names "o" or "other" explicitly now.
        d.expand(ObjectType::default(), "o");
        assert_eq!(explicit_held(&d), n as usize);
        let renamed = |d: &Dependents, i: u128| -> Vec<String> {
            let e = d.get(Uid::from_u128(i)).expect("entry");
            d.refs(e, ObjectType::default(), "renamed").map(|(_, n, _)| n.to_owned()).collect()
        };
        let want = |i: u128| vec![(if i % 3 == 0 { "other" } else { "o" }).to_owned()];
        for i in 0..n {
            assert_eq!(renamed(&d, i), want(i), "#{i}");
        }
        // Back below the limit: the vector form keeps the copies.
        for i in 0..n - 4 {
            d.remove(Uid::from_u128(i));
        }
        assert!(!d.is_hashed());
        assert_eq!(explicit_held(&d), 4);
        for i in n - 4..n {
            assert_eq!(renamed(&d, i), want(i), "#{i}");
        }
    }

    #[test]
    fn an_entry_turning_compact_drops_its_explicit_references() {
        let mut d = Dependents::default();
        insert(&mut d, 3);
        insert(&mut d, 4);
        assert_eq!(explicit_held(&d), 1);
        d.update_refs(
            Uid::from_u128(3),
            [(ObjectType::default(), "o", true)],
            ObjectType::default(),
            "o",
        );
        assert_eq!(read(&d, 3), Some(vec![("o".to_owned(), true)]));
        assert!(d.0.as_deref().unwrap().explicit.is_none(), "no table without explicit entries");
        d.expand(ObjectType::default(), "o");
        assert_eq!(explicit_held(&d), 2);
        assert_eq!(read(&d, 4), Some(vec![("o".to_owned(), true)]));
    }
}
