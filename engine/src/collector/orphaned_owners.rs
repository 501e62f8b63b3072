//! The owners the collector orphaned: a bounded memory of their UIDs.
//!
//! Upstream's `orphanDependents` removes an owner's reference from the dependents its graph
//! knows, then the owner's `orphan` finalizer, and the owner goes. A dependent the graph did not
//! know yet (its resource had not synced, or its add event was still in flight: upstream's known
//! race, #26120) keeps its reference to the owner, and once it is observed the collector finds
//! that owner absent and deletes it as garbage: the opposite of what the user asked for.
//!
//! kube-gc remembers the UIDs of the owners it orphaned (bounded, least recently used first
//! out). A dependent seen later with a reference to one of them, once that owner is gone, has
//! the reference removed, the very write upstream's `orphanDependents` would have made had the
//! dependent been in its graph, instead of being collected. UIDs are never reused, so a
//! reference to a remembered UID can only mean the owner that was orphaned. Forgetting
//! (eviction, a restart) falls back to upstream's behaviour, never to another write.
//!
//! Only once the owner is gone: an orphaned owner another finalizer still holds exists, and a
//! dependent naming it (created after the orphaning, say) is decided as upstream decides it,
//! with that owner solid. Removing its reference then would leave the dependent to its other
//! owners' verdict, and one dangling owner beside it would get it deleted while upstream keeps
//! it for as long as the orphaned owner stays.
//!
//! The orphaning and a dependent's decision run on different workers, so the order matters.
//! The orphaning remembers the owner as [`Orphaning::Finishing`] *before* it removes the
//! finalizer, marks it [`Orphaning::Done`] once its own patch removed it, and forgets it if the
//! removal fails or finds nothing to remove (someone else let the owner go first: the
//! orphaning did not end by the collector's hand, and the dependents the graph did not hold
//! are upstream's to collect). A dependent's decision checks the memory after it has
//! classified the owners, for those it found absent: a `Done` owner's reference is removed; a
//! `Finishing` one's decision waits (the item is retried), since which way the orphaning ends
//! is not known yet. An owner gone because its orphaning removed the finalizer was remembered
//! before it went, so before any read found it absent: the dependent is never collected for
//! it.
//!
//! Only for dependents that existed when the owner was deleted: each remembered owner carries
//! its `deletionTimestamp`, and a dependent created after it (its `creationTimestamp`, more
//! than [`CREATED_AFTER_MARGIN_SECS`] later, both to the second) came after the user deleted
//! the owner. It is decided as upstream decides it: its owners gone, it is garbage. (An
//! orphaning that ran later, held for a lagging watcher or queued, would have patched it had
//! it been seen, as upstream's would: the cut-off is the deletion, not the orphaning, and
//! such a dependent seen too late is collected, as upstream collects it. The
//! `deletionTimestamp` of an owner deleted with a grace period is the end of the grace:
//! dependents created during it are kept, where upstream would collect them. A skew past the
//! margin between the API servers' clocks moves the cut-off: with the owner's ahead,
//! dependents created just after the deletion are kept; with the dependent's ahead, ones
//! created just before are collected, upstream's verdict on a dependent its graph missed.) That delete is
//! upstream's own verdict on the live object, the one upstream makes whenever its graph missed
//! a dependent, so the narrowing adds no write upstream would not make. Within the margin (an
//! order the timestamps cannot tell: to the second, and from the clocks of possibly different
//! API servers) or with a timestamp not known, the memory's answer stands: keep the object,
//! remove the references. What the timestamps cannot tell either, and is kept too: a reference
//! added later to an object created before the deletion. What they tell wrongly: an owner
//! deleted first with another policy and then again with `orphan` (the API server keeps the
//! first deletionTimestamp), whose dependents created in between, seen too late, are collected
//! as upstream collects them in that race, although the user asked to orphan them.

use lru::LruCache;

use crate::identity::Uid;
use crate::sync::Mutex;

/// How many orphaned owners are remembered by default (about 4 MiB when full).
pub const DEFAULT_CAPACITY: usize = 1 << 16;

/// How many seconds past an owner's deletionTimestamp a dependent's creationTimestamp must be
/// for the memory to leave the dependent to upstream's decision. Both are to the second, and
/// may come from different API servers, whose clocks NTP keeps well within a second of each
/// other: two seconds more keeps every dependent whose order a skew could invert.
pub const CREATED_AFTER_MARGIN_SECS: i64 = 2;

/// A thread-safe LRU set of the UIDs of owners whose `orphan` finalizer the collector removed
/// (or is removing).
pub struct OrphanedOwners {
    capacity: usize,
    entries: Mutex<LruCache<Uid, Entry>>,
}

/// A remembered owner.
#[derive(Clone, Copy, Debug)]
struct Entry {
    state: Orphaning,
    /// The owner's `deletionTimestamp` (Unix seconds), if its live read gave one.
    deleted_at: Option<i64>,
    /// Orphanings of the owner under way ([`OrphanedOwners::begin`]; two incarnations of one
    /// UID can run at once): the last to end unconfirmed decides what is left.
    in_flight: u32,
}

/// What the memory says of an object whose owners a decision has classified
/// ([`OrphanedOwners::judge`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judgement {
    /// Nothing: upstream's decision stands.
    Upstream,
    /// An owner found gone is finishing its orphaning: decide again later.
    Wait,
    /// Every owner is one the collector orphaned, gone, and the object was created no later
    /// than their deletion (or when is not known): remove the references, the write their
    /// orphaning would have made.
    RemoveReferences,
    /// Every owner is one the collector orphaned, gone, but the object was created after one
    /// of them was deleted (past [`CREATED_AFTER_MARGIN_SECS`]): no orphaning was meant for
    /// it, and upstream's decision stands (it is garbage).
    CreatedAfterDeletion,
}

/// How far the collector's orphaning of a remembered owner has got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Orphaning {
    /// Its dependents were orphaned and the finalizer is being removed: whether by this
    /// orphaning or by someone else first is not known yet.
    Finishing,
    /// The collector's own patch removed the finalizer.
    Done,
}

/// An orphaning removing its owner's finalizer ([`OrphanedOwners::begin`]): the owner is
/// [`Orphaning::Finishing`] until [`FinishingOrphaning::confirm`]. Dropped unconfirmed, the
/// guard leaves the owner as it was before this orphaning began (an earlier orphaning of the
/// collector's own, [`Orphaning::Done`], stays done; otherwise forgotten), so that a removal
/// that fails, finds nothing to remove, panics or is cancelled never leaves the owner
/// finishing for ever (its dependents would wait on it), nor erases what an earlier orphaning
/// did: the owner deleted again with `orphan` after the collector removed the first `orphan`
/// (another finalizer held it), whose second removal someone else made.
#[must_use = "dropping the guard forgets the owner at once"]
#[derive(Debug)]
pub struct FinishingOrphaning<'a> {
    owners: &'a OrphanedOwners,
    uid: Uid,
    /// The owner's entry before this orphaning began.
    before: Option<Entry>,
    confirmed: bool,
}

impl FinishingOrphaning<'_> {
    /// The orphaning's own patch removed the finalizer: the owner is [`Orphaning::Done`].
    pub fn confirm(mut self) {
        self.owners.confirm(self.uid);
        self.confirmed = true;
    }
}

impl Drop for FinishingOrphaning<'_> {
    fn drop(&mut self) {
        if !self.confirmed {
            self.owners.unfinish(self.uid, self.before);
        }
    }
}

impl std::fmt::Debug for OrphanedOwners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrphanedOwners")
            .field("capacity", &self.capacity)
            .field("len", &self.len())
            .finish()
    }
}

impl OrphanedOwners {
    /// An empty set remembering at most `capacity` owners (0 remembers none).
    pub fn new(capacity: usize) -> OrphanedOwners {
        // Unbounded as far as `lru` knows (it would preallocate the whole capacity); `record`
        // evicts by hand.
        OrphanedOwners { capacity, entries: Mutex::new(LruCache::unbounded()) }
    }

    /// Remembers that the orphaning of the owner `uid`, whose `deletionTimestamp` is
    /// `deleted_at` (Unix seconds) if known, is removing its finalizer.
    pub fn record(&self, uid: Uid, deleted_at: Option<i64>) {
        self.put_finishing(uid, deleted_at, false);
    }

    /// Remembers the owner `uid` (deleted at `deleted_at`, see [`Self::record`]) as
    /// [`Orphaning::Finishing`] for as long as the returned guard lives (see
    /// [`FinishingOrphaning`]).
    pub fn begin(&self, uid: Uid, deleted_at: Option<i64>) -> FinishingOrphaning<'_> {
        let before = self.put_finishing(uid, deleted_at, true);
        FinishingOrphaning { owners: self, uid, before, confirmed: false }
    }

    /// Puts `uid` as finishing, under one lock, and returns its entry from before; `guarded`
    /// counts one more orphaning under way (a guard's), besides those already finishing.
    fn put_finishing(&self, uid: Uid, deleted_at: Option<i64>, guarded: bool) -> Option<Entry> {
        if self.capacity == 0 {
            return None;
        }
        let mut entries = self.entries.lock();
        let before = entries.peek(&uid).copied();
        let under_way =
            before.filter(|e| e.state == Orphaning::Finishing).map_or(0, |e| e.in_flight);
        let in_flight = if guarded { under_way + 1 } else { 0 };
        entries.put(uid, Entry { state: Orphaning::Finishing, deleted_at, in_flight });
        while entries.len() > self.capacity {
            entries.pop_lru();
        }
        before
    }

    /// An orphaning of `uid` ended unconfirmed: unless another one confirmed it meanwhile, the
    /// owner goes back to `before` if that was done, else is forgotten.
    fn unfinish(&self, uid: Uid, before: Option<Entry>) {
        let mut entries = self.entries.lock();
        let Some(entry) = entries.peek_mut(&uid) else { return };
        entry.in_flight = entry.in_flight.saturating_sub(1);
        match before {
            _ if entry.state == Orphaning::Done || entry.in_flight > 0 => {}
            Some(done) if done.state == Orphaning::Done => *entry = done,
            _ => {
                entries.pop(&uid);
            }
        }
    }

    /// The orphaning of the owner `uid` removed its finalizer (if still remembered).
    pub fn confirm(&self, uid: Uid) {
        if let Some(entry) = self.entries.lock().get_mut(&uid) {
            entry.state = Orphaning::Done;
        }
    }

    /// Stops remembering the owner `uid` (its orphaning did not finish by the collector's hand).
    pub fn forget(&self, uid: Uid) {
        self.entries.lock().pop(&uid);
    }

    /// How far the collector's orphaning of the owner `uid` has got, if it is remembered.
    pub fn state(&self, uid: Uid) -> Option<Orphaning> {
        self.entries.lock().get(&uid).map(|e| e.state)
    }

    /// What the memory says of an object created at `created` (Unix seconds, if known) whose
    /// owner references name `owners` (their UIDs), `dangling` those a read found absent (see
    /// [`Judgement`]): [`Judgement::Wait`] if one of those is finishing its orphaning; when
    /// every owner is one the collector orphaned, gone, [`Judgement::CreatedAfterDeletion`] if
    /// the object was created more than [`CREATED_AFTER_MARGIN_SECS`] after one of them was
    /// deleted, else
    /// [`Judgement::RemoveReferences`]; [`Judgement::Upstream`] otherwise. attemptToDelete asks
    /// it, making the owners it finds recently used.
    pub fn judge(
        &self,
        owners: impl IntoIterator<Item = Uid>,
        dangling: &[Uid],
        created: Option<i64>,
    ) -> Judgement {
        Self::judge_entries(owners, dangling, &self.entries_of(dangling, true), created)
    }

    /// [`judge`](Self::judge), leaving the memory's order alone: for `explain`, whose questions
    /// must not decide which owner the memory forgets first.
    pub fn peek_judgement(
        &self,
        owners: impl IntoIterator<Item = Uid>,
        dangling: &[Uid],
        created: Option<i64>,
    ) -> Judgement {
        Self::judge_entries(owners, dangling, &self.entries_of(dangling, false), created)
    }

    /// The entries of `uids`, in order, under one lock; with `touch`, made recently used.
    fn entries_of(&self, uids: &[Uid], touch: bool) -> Vec<Option<Entry>> {
        let mut memory = self.entries.lock();
        let mut entry = |uid| if touch { memory.get(uid) } else { memory.peek(uid) }.copied();
        uids.iter().map(&mut entry).collect()
    }

    /// The judgement, from the entries of `dangling` (in its order).
    fn judge_entries(
        owners: impl IntoIterator<Item = Uid>,
        dangling: &[Uid],
        entries: &[Option<Entry>],
        created: Option<i64>,
    ) -> Judgement {
        if entries.iter().flatten().any(|e| e.state == Orphaning::Finishing) {
            return Judgement::Wait;
        }
        let done = |uid: &Uid| {
            let i = dangling.iter().position(|d| d == uid)?;
            entries[i].filter(|e| e.state == Orphaning::Done)
        };
        let mut owners = owners.into_iter().peekable();
        if owners.peek().is_none() {
            return Judgement::Upstream;
        }
        let mut created_after = false;
        for uid in owners {
            let Some(entry) = done(&uid) else { return Judgement::Upstream };
            if let (Some(created), Some(deleted)) = (created, entry.deleted_at) {
                created_after |= created > deleted.saturating_add(CREATED_AFTER_MARGIN_SECS);
            }
        }
        if created_after { Judgement::CreatedAfterDeletion } else { Judgement::RemoveReferences }
    }

    /// Whether any of `uids` is remembered, under one lock and without making it recently
    /// used: a check on the path of every item decided from the graph's copy, and of explain,
    /// neither of which uses the memory.
    pub fn remembers_any(&self, uids: impl IntoIterator<Item = Uid>) -> bool {
        let entries = self.entries.lock();
        !entries.is_empty() && uids.into_iter().any(|uid| entries.peek(&uid).is_some())
    }

    /// Whether the owner `uid` is remembered (finishing or done).
    pub fn contains(&self, uid: Uid) -> bool {
        self.state(uid).is_some()
    }

    /// How many owners are remembered.
    pub fn len(&self) -> usize {
        self.entries.lock().len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_at_most_its_capacity_least_recently_used_out() {
        let set = OrphanedOwners::new(2);
        let (a, b, c) = (Uid::from_u128(1), Uid::from_u128(2), Uid::from_u128(3));
        set.record(a, None);
        set.record(b, None);
        assert!(set.contains(a)); // a is now the most recently used
        set.record(c, None);
        assert!(set.contains(a) && set.contains(c) && !set.contains(b));
        assert_eq!(set.len(), 2);
        assert!(set.remembers_any([b, c]) && !set.remembers_any([b]));
        let none = OrphanedOwners::new(0);
        none.record(a, None);
        assert!(none.is_empty());
    }

    /// An owner the collector orphaned once (another finalizer kept it), deleted again with
    /// `orphan`, whose second removal someone else made: still done, as the first left it. An
    /// owner whose only orphaning ends unconfirmed is forgotten.
    #[test]
    fn an_unconfirmed_orphaning_leaves_an_earlier_one_done() {
        let set = OrphanedOwners::new(8);
        let (a, b) = (Uid::from_u128(1), Uid::from_u128(2));
        set.begin(a, Some(100)).confirm();
        drop(set.begin(a, Some(200)));
        assert_eq!(set.state(a), Some(Orphaning::Done));
        assert_eq!(set.judge([a], &[a], Some(150)), Judgement::CreatedAfterDeletion, "t 100 kept");
        drop(set.begin(b, None));
        assert_eq!(set.state(b), None);
        // Two orphanings at once: one confirms, the other's end leaves it done.
        let first = set.begin(b, None);
        let second = set.begin(b, None);
        first.confirm();
        drop(second);
        assert_eq!(set.state(b), Some(Orphaning::Done));
        // The other way round: the first to end unconfirmed leaves the other finishing.
        let c = Uid::from_u128(3);
        let first = set.begin(c, None);
        let second = set.begin(c, None);
        drop(second);
        assert_eq!(set.state(c), Some(Orphaning::Finishing), "the other one is still under way");
        first.confirm();
        assert_eq!(set.state(c), Some(Orphaning::Done));
    }

    /// attemptToDelete's judgement makes the owners it finds recently used; explain's peek
    /// leaves the order alone, so asking about an object cannot make the memory forget another.
    #[test]
    fn only_the_collectors_judgement_makes_an_owner_recently_used() {
        for peek in [false, true] {
            let set = OrphanedOwners::new(2);
            let (a, b, c) = (Uid::from_u128(1), Uid::from_u128(2), Uid::from_u128(3));
            set.record(a, None);
            set.record(b, None);
            let judged =
                if peek { set.peek_judgement([a], &[a], None) } else { set.judge([a], &[a], None) };
            assert_eq!(judged, Judgement::Wait, "a found: recorded, still finishing");
            set.record(c, None);
            let forgotten = if peek { a } else { b };
            assert!(!set.remembers_any([forgotten]), "peek {peek}: the wrong owner went");
        }
    }

    /// Wait whenever a dangling owner is finishing; the references go only when every owner
    /// is a dangling, done one; nothing for an object with no owner or any other owner.
    #[test]
    fn judge_removes_references_only_when_every_owner_is_an_orphaned_owner_gone() {
        let set = OrphanedOwners::new(8);
        let (a, b, other) = (Uid::from_u128(1), Uid::from_u128(2), Uid::from_u128(3));
        set.record(a, None);
        set.record(b, None);
        set.confirm(a);
        assert_eq!(set.judge([a, b], &[a, b], None), Judgement::Wait);
        set.confirm(b);
        assert_eq!(set.judge([a, b, a], &[a, b, a], None), Judgement::RemoveReferences);
        let upstream = Judgement::Upstream;
        assert_eq!(set.judge([a, other], &[a, other], None), upstream, "another dangling owner");
        assert_eq!(set.judge([a, other], &[a], None), upstream, "a solid owner");
        assert_eq!(set.judge([a], &[], None), upstream, "the orphaned owner still exists");
        assert_eq!(set.judge([], &[], None), upstream);
    }

    /// An object created past the margin after an owner's deletion was never the orphaning's
    /// to keep; within it, earlier, or at a time not known on either side, it is.
    #[test]
    fn judge_leaves_an_object_created_after_its_owners_deletion_to_upstream() {
        let set = OrphanedOwners::new(8);
        let (a, b, unknown) = (Uid::from_u128(1), Uid::from_u128(2), Uid::from_u128(3));
        for (uid, deleted_at) in [(a, Some(100)), (b, Some(200)), (unknown, None)] {
            set.begin(uid, deleted_at).confirm();
        }
        let judge = |owners: &[Uid], created| set.judge(owners.iter().copied(), owners, created);
        let margin = CREATED_AFTER_MARGIN_SECS;
        assert_eq!(judge(&[a], Some(101 + margin)), Judgement::CreatedAfterDeletion);
        assert_eq!(judge(&[a], Some(100 + margin)), Judgement::RemoveReferences, "the margin");
        assert_eq!(judge(&[a], Some(100)), Judgement::RemoveReferences, "the same second");
        assert_eq!(judge(&[a], Some(99)), Judgement::RemoveReferences);
        assert_eq!(judge(&[a], None), Judgement::RemoveReferences, "creation not known");
        assert_eq!(judge(&[unknown], Some(i64::MAX)), Judgement::RemoveReferences);
        let between = Some(150);
        assert_eq!(judge(&[a, b], between), Judgement::CreatedAfterDeletion, "after a's");
        assert_eq!(judge(&[b, a], between), Judgement::CreatedAfterDeletion, "in any order");
        assert_eq!(judge(&[a, b], Some(100)), Judgement::RemoveReferences);
        assert_eq!(judge(&[a, unknown], between), Judgement::CreatedAfterDeletion);
        let last = OrphanedOwners::new(1);
        last.begin(a, Some(i64::MAX)).confirm();
        assert_eq!(last.judge([a], &[a], Some(i64::MAX)), Judgement::RemoveReferences);
    }

    #[test]
    fn an_orphaning_is_finishing_until_confirmed() {
        let set = OrphanedOwners::new(4);
        let (a, b) = (Uid::from_u128(1), Uid::from_u128(2));
        set.record(a, None);
        assert_eq!(set.state(a), Some(Orphaning::Finishing));
        set.confirm(a);
        assert_eq!(set.state(a), Some(Orphaning::Done));
        set.confirm(b);
        assert_eq!(set.state(b), None, "confirming what is not remembered remembers nothing");
        set.forget(a);
        assert_eq!(set.state(a), None);
    }

    #[test]
    fn an_orphaning_guard_forgets_its_owner_unless_confirmed() {
        let set = OrphanedOwners::new(4);
        let (a, b) = (Uid::from_u128(1), Uid::from_u128(2));
        let orphaning = set.begin(a, None);
        assert_eq!(set.state(a), Some(Orphaning::Finishing));
        orphaning.confirm();
        assert_eq!(set.state(a), Some(Orphaning::Done));
        let abandoned = set.begin(b, None);
        assert_eq!(set.state(b), Some(Orphaning::Finishing));
        drop(abandoned);
        assert_eq!(set.state(b), None, "an unconfirmed orphaning stays finishing");
    }
}
