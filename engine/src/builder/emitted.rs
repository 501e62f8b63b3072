//! The UIDs one resource's watcher emitted and saw no delete of: what a relist is diffed
//! against.
//!
//! A hash set was the obvious shape, but a list of millions of objects is millions of inserts
//! into a table far larger than the caches, each a miss or two, on the builder's one thread:
//! at 3M objects that was a seventh of kube-gc's warm-up CPU. A list's UIDs arrive together
//! and only matter once it is complete, so [`Listing`] appends them and sorts them once at the
//! end; the store keeps that sorted vector (16 bytes a UID, no table slack) and, in two small
//! hash sets, what the watch added and removed since. Those are folded back into the vector
//! once they grow past a quarter of it, so memory stays within a constant of the live count
//! and a UID costs O(log n) amortised.
//!
//! The set's contents are exactly those of the plain set it replaced; the property test below
//! holds it to one under any sequence of operations.

use crate::identity::{Uid, UidSet};

/// Below this many UIDs in the side sets, they are never folded into the vector.
const FOLD_FLOOR: usize = 4096;

/// A set of UIDs (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct EmittedUids {
    /// Sorted, without duplicates.
    sorted: Vec<Uid>,
    /// In the set but not in `sorted`.
    added: UidSet,
    /// In `sorted` but not in the set.
    removed: UidSet,
    /// See [`FOLD_FLOOR`]; lower in tests, to exercise folding.
    fold_floor: usize,
}

/// The UIDs a list returns, gathered in arrival order and sorted when it ends.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    uids: Vec<Uid>,
    /// How many of `uids` (a prefix) were already added to the set, ahead of the list's end.
    merged: usize,
}

impl Listing {
    /// Records a UID the list returned.
    pub(crate) fn push(&mut self, uid: Uid) {
        self.uids.push(uid);
    }

    /// The UIDs recorded since the last call, which count as merged from now on.
    pub(crate) fn copy_unmerged(&mut self) -> Listing {
        let unmerged = Listing { uids: self.uids[self.merged..].to_vec(), merged: 0 };
        self.merged = self.uids.len();
        unmerged
    }

    /// The UIDs recorded and not yet merged.
    pub(crate) fn into_unmerged(mut self) -> Listing {
        self.uids.drain(..self.merged);
        Listing { uids: self.uids, merged: 0 }
    }

    /// All the list's UIDs, sorted and without duplicates.
    fn into_sorted(self) -> Vec<Uid> {
        let mut uids = self.uids;
        uids.sort_unstable();
        uids.dedup();
        // Grown by doubling: up to half of it may be slack, kept for as long as the store.
        if uids.capacity() > uids.len() + uids.len() / 4 {
            uids.shrink_to_fit();
        }
        uids
    }
}

impl EmittedUids {
    /// An empty set.
    pub(crate) fn new() -> EmittedUids {
        EmittedUids { fold_floor: FOLD_FLOOR, ..Default::default() }
    }

    #[cfg(test)]
    fn with_fold_floor(fold_floor: usize) -> EmittedUids {
        EmittedUids { fold_floor, ..Default::default() }
    }

    /// How many UIDs the set holds.
    pub(crate) fn len(&self) -> usize {
        self.sorted.len() - self.removed.len() + self.added.len()
    }

    /// Whether the set holds no UID.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn in_sorted(&self, uid: &Uid) -> bool {
        self.sorted.binary_search(uid).is_ok()
    }

    /// Adds `uid`.
    pub(crate) fn insert(&mut self, uid: Uid) {
        if self.in_sorted(&uid) {
            self.removed.remove(&uid);
        } else {
            self.added.insert(uid);
            self.fold_if_large();
        }
    }

    /// Removes `uid`, if held.
    pub(crate) fn remove(&mut self, uid: &Uid) {
        if self.in_sorted(uid) {
            self.removed.insert(*uid);
            self.fold_if_large();
        } else {
            self.added.remove(uid);
        }
    }

    /// Adds every UID of `listing` (a first list: nothing it lacks is gone).
    pub(crate) fn extend(&mut self, listing: Listing) {
        let listed = listing.into_sorted();
        if listed.is_empty() {
            return; // nothing to add: no rebuild of a vector of millions
        }
        if self.sorted.is_empty() && self.added.is_empty() {
            self.sorted = listed;
            return;
        }
        self.fold(listed);
    }

    /// Replaces the set with `listing`'s UIDs (a relist), calling `vanished` with each UID the
    /// set held that the list did not return, in no particular order.
    pub(crate) fn replace(&mut self, listing: Listing, mut vanished: impl FnMut(Uid)) {
        let listed = listing.into_sorted();
        let in_listed = |uid: &Uid| listed.binary_search(uid).is_ok();
        let mut listed_iter = listed.iter().peekable();
        for uid in &self.sorted {
            while listed_iter.next_if(|l| *l < uid).is_some() {}
            if listed_iter.peek() != Some(&uid) && !self.removed.contains(uid) {
                vanished(*uid);
            }
        }
        for uid in &self.added {
            if !in_listed(uid) {
                vanished(*uid);
            }
        }
        *self = EmittedUids { sorted: listed, fold_floor: self.fold_floor, ..Default::default() };
    }

    /// Folds the side sets into the vector once they outgrow a quarter of it.
    fn fold_if_large(&mut self) {
        let side = self.added.len() + self.removed.len();
        if side > self.fold_floor.max(self.sorted.len() / 4) {
            self.fold(Vec::new());
        }
    }

    /// Folds the side sets and `more` into the vector, which then holds the whole set.
    fn fold(&mut self, more: Vec<Uid>) {
        let removed = std::mem::take(&mut self.removed);
        self.sorted.retain(|uid| !removed.contains(uid));
        self.sorted.extend(self.added.drain());
        self.sorted.extend(more);
        self.sorted.sort_unstable();
        self.sorted.dedup();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8),
        Remove(u8),
        /// A first list (added to the set) of these UIDs.
        Extend(Vec<u8>),
        /// A relist of these UIDs.
        Replace(Vec<u8>),
    }

    fn uid(n: u8) -> Uid {
        Uid::parse(&format!("00000000-0000-4000-8000-0000000000{n:02x}"))
    }

    fn listing(uids: &[u8]) -> Listing {
        let mut l = Listing::default();
        uids.iter().for_each(|&n| l.push(uid(n)));
        l
    }

    fn op() -> impl Strategy<Value = Op> {
        let uids = || proptest::collection::vec(0u8..40, 0..30);
        prop_oneof![
            4 => (0u8..40).prop_map(Op::Insert),
            4 => (0u8..40).prop_map(Op::Remove),
            1 => uids().prop_map(Op::Extend),
            1 => uids().prop_map(Op::Replace),
        ]
    }

    proptest! {
        /// The set holds what a plain set would after the same operations, and a relist
        /// reports exactly what the plain set held that the list lacks, once each.
        #[test]
        fn behaves_as_a_plain_set(
            ops in proptest::collection::vec(op(), 0..80),
            floor in 0usize..6,
        ) {
            let mut set = EmittedUids::with_fold_floor(floor);
            let mut model = BTreeSet::new();
            for op in ops {
                match op {
                    Op::Insert(n) => { set.insert(uid(n)); model.insert(uid(n)); }
                    Op::Remove(n) => { set.remove(&uid(n)); model.remove(&uid(n)); }
                    Op::Extend(ns) => {
                        set.extend(listing(&ns));
                        model.extend(ns.iter().map(|&n| uid(n)));
                    }
                    Op::Replace(ns) => {
                        let mut vanished = Vec::new();
                        set.replace(listing(&ns), |u| vanished.push(u));
                        vanished.sort();
                        let listed: BTreeSet<Uid> = ns.iter().map(|&n| uid(n)).collect();
                        let expected: Vec<Uid> = model.difference(&listed).copied().collect();
                        prop_assert_eq!(vanished, expected);
                        model = listed;
                    }
                }
                prop_assert_eq!(set.len(), model.len());
                for n in 0..40 {
                    let held = (set.in_sorted(&uid(n)) && !set.removed.contains(&uid(n)))
                        || set.added.contains(&uid(n));
                    prop_assert_eq!(held, model.contains(&uid(n)), "uid {}", n);
                }
                // The representation's invariants.
                prop_assert!(set.sorted.windows(2).all(|w| w[0] < w[1]));
                prop_assert!(set.added.iter().all(|u| !set.in_sorted(u)));
                prop_assert!(set.removed.iter().all(|u| set.in_sorted(u)));
            }
        }
    }

    #[test]
    fn folding_keeps_the_side_sets_small() {
        let mut set = EmittedUids::with_fold_floor(2);
        set.extend(listing(&(0..20).collect::<Vec<_>>()));
        for n in 20..40 {
            set.insert(uid(n));
        }
        for n in 0..10 {
            set.remove(&uid(n));
        }
        assert_eq!(set.len(), 30);
        assert!(set.added.len() + set.removed.len() <= set.sorted.len() / 4 + 1, "{set:?}");
    }
}
