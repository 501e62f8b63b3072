//! One resource's store: what its watcher emitted, turned into graph events.
//!
//! Upstream: the informer's `DeltaFIFO` and indexer (client-go), and `graph_builder.go`'s
//! handlers; GC-SPEC.md §2.1.
//!
//! A metadata watcher gives less than an informer, and the store rebuilds the two things the
//! graph needs from it:
//! - **The old object of an update**, which processTransitions needs to tell whether deletion
//!   *started*. Only whether the old version was being deleted and which GC finalizers it had
//!   matter, so the store remembers exactly that, for the objects being deleted (few).
//! - **Deletes missed while disconnected.** After a relist (a 410 Gone, a restart of the
//!   watch), objects emitted before that the list did not return become delete events, as
//!   `DeltaFIFO.Replace` does against its known objects. The diff is against the store's own
//!   record of what it emitted (the UIDs, 16 bytes an object: see `emitted.rs`), never
//!   against the graph: the graph lags the watcher's channel, so an add still on its way
//!   would be missed and its object left in the graph for ever (issue #11, finding 3).
//!
//! The watcher must only ever relist consistently after its first list (the controller's
//! `watchers.rs` sees to it): a list served from a lagging watch cache could be older than
//! what was emitted, and fake deletes.

use super::emitted::{EmittedUids, Listing};
use crate::identity::{ObjectType, Uid, UidMap};
use crate::ingest::{Event, EventType};
use crate::meta::ObjectMeta;
use crate::meta::{FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN};

/// What a resource's watcher saw: kube-rs's `watcher::Event`, client-go's reflector calls.
#[derive(Clone, PartialEq, Debug)]
pub enum Notification {
    /// A list (the first, or a relist) starts.
    ListStarted,
    /// An object of the list.
    Listed(ObjectMeta),
    /// The list is complete: every object it returned came before. A watcher that has
    /// listed counts as behind (see [`ResourceStore::is_behind`]) until [`Self::Resumed`]:
    /// the watch it opens from the list's resourceVersion has still to deliver what changed
    /// since.
    ListDone,
    /// An object was added or changed (watch).
    Applied(ObjectMeta),
    /// An object was deleted (watch), in its last state.
    Deleted(ObjectMeta),
    /// The watch broke (a failed request, a cut stream): changes are missed until a watch
    /// (after a relist, if it came to one) has delivered them. No graph event; the watcher
    /// counts as behind (see [`ResourceStore::is_behind`]) until [`Self::Resumed`].
    Interrupted,
    /// After `Interrupted` or `ListDone`, a watch works, from the last resourceVersion sent,
    /// and has delivered what was missed: the watcher sends this after those events, once the
    /// new watch's stream has paused (or has run a while), not at its mere opening.
    Resumed,
}

/// What the store remembers of an object being deleted.
#[derive(Clone, Copy, Debug)]
struct Deleting {
    orphan: bool,
    foreground: bool,
}

/// One resource's store (see the module docs).
#[derive(Debug)]
pub struct ResourceStore {
    object_type: ObjectType,
    deleting: UidMap<Deleting>,
    /// Every object emitted and whose delete was not: what a relist is diffed against.
    emitted: EmittedUids,
    /// The list in progress, if any.
    list: Option<ListInProgress>,
    /// Whether a list completed (the watcher synced once).
    synced: bool,
    /// Whether the watcher, synced once, is behind the API server (see [`Self::is_behind`]).
    behind: bool,
}

/// A list under way.
#[derive(Debug)]
struct ListInProgress {
    /// The UIDs it returned so far.
    listing: Listing,
    /// Whether objects were emitted before it: then what it does not return is gone. A first
    /// list's objects are simply added.
    relist: bool,
}

impl ResourceStore {
    /// An empty store for objects of `object_type`.
    pub fn new(object_type: ObjectType) -> ResourceStore {
        ResourceStore {
            object_type,
            deleting: UidMap::default(),
            emitted: EmittedUids::new(),
            list: None,
            synced: false,
            behind: false,
        }
    }

    /// Whether the watcher synced once and is behind the API server since: its watch broke
    /// and has not resumed, it is relisting, or it has listed and the watch after the list has
    /// not yet delivered what changed since the list's resourceVersion. A watcher that never
    /// synced is not "behind": its first list is warm-up's business.
    pub fn is_behind(&self) -> bool {
        self.behind
    }

    /// How many objects the store holds. A list's objects count once it is complete.
    pub fn len(&self) -> usize {
        self.emitted.len()
    }

    /// Whether the store holds no object.
    pub fn is_empty(&self) -> bool {
        self.emitted.is_empty()
    }

    /// Turns one notification into graph events, appended to `out` (a relist's deletes
    /// included). Returns whether the notification ends a list.
    pub fn on_notification(&mut self, notification: Notification, out: &mut Vec<Event>) -> bool {
        let ty = self.object_type;
        match notification {
            Notification::ListStarted => {
                // A list restarted before its end: what it returned was emitted, but only a
                // whole list can tell what vanished.
                if let Some(list) = self.list.take() {
                    self.emitted.extend(list.listing.into_unmerged());
                }
                let relist = !self.emitted.is_empty();
                self.list = Some(ListInProgress { listing: Listing::default(), relist });
                self.behind = self.synced;
                false
            }
            Notification::Listed(meta) => {
                // A UID past the cap on non-UUID UIDs is not kept here either: ingestion
                // refuses its event (counted), and the object is never in the graph.
                let Ok(uid) = Uid::try_parse(&meta.uid) else {
                    out.push(Event::new(EventType::Add, ty, meta));
                    return false;
                };
                match self.list.as_mut() {
                    Some(list) => list.listing.push(uid),
                    None => self.emitted.insert(uid),
                }
                out.push(match self.remember(uid, &meta) {
                    Some(old) => Event::update(ty, old, meta),
                    None => Event::new(EventType::Add, ty, meta),
                });
                false
            }
            Notification::ListDone => {
                match self.list.take() {
                    Some(ListInProgress { listing, relist: true }) => {
                        // Deleted while the watch was down: the watcher emits no event for
                        // them. Only their UIDs are kept here; the graph builder completes
                        // each delete from the graph's node.
                        let deleting = &mut self.deleting;
                        self.emitted.replace(listing, |uid| {
                            deleting.remove(&uid);
                            let meta = ObjectMeta { uid: uid.to_string(), ..Default::default() };
                            out.push(Event::new(EventType::Delete, ty, meta));
                        });
                    }
                    Some(ListInProgress { listing, relist: false }) => {
                        self.emitted.extend(listing.into_unmerged())
                    }
                    None => {}
                }
                // Behind until the watch from the list's resourceVersion has delivered what
                // changed since (`Resumed`): until then a dependent written meanwhile is not
                // in the graph, for as long as the watch request takes to open (queued by the
                // server's priority and fairness, delayed, failing and backing off).
                self.synced = true;
                self.behind = true;
                true
            }
            Notification::Applied(meta) => {
                let Ok(uid) = Uid::try_parse(&meta.uid) else {
                    out.push(Event::new(EventType::Update, ty, meta));
                    return false;
                };
                self.emitted.insert(uid);
                let old = self
                    .remember(uid, &meta)
                    .unwrap_or_else(|| ObjectMeta { uid: meta.uid.clone(), ..Default::default() });
                out.push(Event::update(ty, old, meta));
                false
            }
            Notification::Deleted(meta) => {
                self.flush_list();
                if let Ok(uid) = Uid::try_parse(&meta.uid) {
                    self.deleting.remove(&uid);
                    self.emitted.remove(&uid);
                }
                out.push(Event::new(EventType::Delete, ty, meta));
                false
            }
            Notification::Interrupted => {
                self.behind = self.synced;
                false
            }
            Notification::Resumed => {
                // A relist under way is still behind until its end.
                self.behind &= self.list.is_some();
                false
            }
        }
    }

    /// Adds what the list in progress returned so far to `emitted`, as if each UID had been
    /// added when listed (a list's UIDs are otherwise added at its end, at once). Needed only
    /// before a removal, which does not commute with them; the list keeps its record, which a
    /// relist is diffed against.
    fn flush_list(&mut self) {
        if let Some(list) = self.list.as_mut() {
            self.emitted.extend(list.listing.copy_unmerged());
        }
    }

    /// The old state of `meta`'s object as far as transitions need it (if it was being
    /// deleted), and remembers `meta`'s.
    fn remember(&mut self, uid: Uid, meta: &ObjectMeta) -> Option<ObjectMeta> {
        let old = self.deleting.get(&uid).map(|d| {
            let mut finalizers = Vec::new();
            if d.orphan {
                finalizers.push(FINALIZER_ORPHAN.to_owned());
            }
            if d.foreground {
                finalizers.push(FINALIZER_DELETE_DEPENDENTS.to_owned());
            }
            ObjectMeta {
                uid: meta.uid.clone(),
                deletion_timestamp: true,
                finalizers,
                ..Default::default()
            }
        });
        if meta.deletion_timestamp {
            self.deleting.insert(
                uid,
                Deleting {
                    orphan: meta.has_finalizer(FINALIZER_ORPHAN),
                    foreground: meta.has_finalizer(FINALIZER_DELETE_DEPENDENTS),
                },
            );
        }
        old
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Graph, Ingester};
    use std::sync::Arc;

    fn store() -> ResourceStore {
        ResourceStore::new(ObjectType::new("apps/v1", "ReplicaSet"))
    }

    fn meta(uid: &str, deleting: bool, finalizers: &[&str]) -> ObjectMeta {
        ObjectMeta {
            uid: uid.into(),
            name: format!("n-{uid}"),
            namespace: "ns".into(),
            deletion_timestamp: deleting,
            finalizers: finalizers.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn deletes(out: &[Event]) -> Vec<String> {
        out.iter()
            .filter(|e| e.event_type == EventType::Delete)
            .map(|e| e.object.uid.clone())
            .collect()
    }

    #[test]
    fn behind_from_a_list_a_break_or_a_relist_of_a_synced_watcher_until_its_watch_resumes() {
        use Notification::*;
        let mut s = store();
        let mut out = Vec::new();
        let mut step = |s: &mut ResourceStore, n: Notification| {
            s.on_notification(n, &mut out);
            s.is_behind()
        };
        // Before the first list ends, nothing is behind (warm-up's business).
        assert!(!step(&mut s, ListStarted));
        assert!(!step(&mut s, Interrupted));
        assert!(step(&mut s, ListDone), "listed: the watch after the list is still to come");
        assert!(step(&mut s, Applied(meta("a", false, &[]))), "an event alone is not a resume");
        assert!(!step(&mut s, Resumed));
        assert!(step(&mut s, Interrupted));
        assert!(!step(&mut s, Resumed));
        assert!(step(&mut s, ListStarted), "a relist");
        assert!(step(&mut s, Resumed), "a resume inside a relist does not end it");
        assert!(step(&mut s, ListDone), "nor does the relist's end, before its watch");
        assert!(!step(&mut s, Resumed));
    }

    #[test]
    fn update_events_carry_the_old_deletion_state() {
        let mut s = store();
        let mut out = Vec::new();
        s.on_notification(Notification::Applied(meta("a", true, &["orphan"])), &mut out);
        s.on_notification(Notification::Applied(meta("a", true, &["orphan"])), &mut out);
        // First sight: old has no deletionTimestamp (the transition starts); second: it had.
        assert!(!out[0].old_object.as_ref().unwrap().deletion_timestamp);
        let old = out[1].old_object.as_ref().unwrap();
        assert!(old.deletion_timestamp && old.has_finalizer("orphan"));
    }

    #[test]
    fn relist_turns_unseen_objects_into_deletes() {
        let graph = Arc::new(Graph::new(2).unwrap());
        let mut ingester = Ingester::new(graph.clone(), 1);
        let mut s = store();
        let mut out = Vec::new();
        s.on_notification(Notification::ListStarted, &mut out);
        s.on_notification(Notification::Listed(meta("a", false, &[])), &mut out);
        s.on_notification(Notification::Listed(meta("b", false, &[])), &mut out);
        assert!(s.on_notification(Notification::ListDone, &mut out));
        ingester.ingest(&out);
        assert_eq!(graph.len(), 2);
        // The watch broke; on the relist only "a" is still there.
        out.clear();
        s.on_notification(Notification::ListStarted, &mut out);
        s.on_notification(Notification::Listed(meta("a", false, &[])), &mut out);
        s.on_notification(Notification::ListDone, &mut out);
        assert_eq!(deletes(&out), ["b"]);
        ingester.ingest(&out);
        assert_eq!(graph.len(), 1);
    }

    /// Finding 3 of issue #11: the relist is diffed against what was emitted, not against the
    /// graph. An add emitted but not yet applied when the relist ends (still in the channel)
    /// used to be missed: the graph did not hold it, so no delete was synthesised, and once
    /// applied its object stayed in the graph for ever.
    #[test]
    fn relist_deletes_an_object_whose_add_is_still_in_flight() {
        let graph = Arc::new(Graph::new(2).unwrap());
        let mut ingester = Ingester::new(graph.clone(), 1);
        let mut s = store();
        let mut in_flight = Vec::new();
        s.on_notification(Notification::ListStarted, &mut in_flight);
        s.on_notification(Notification::ListDone, &mut in_flight);
        s.on_notification(Notification::Applied(meta("a", false, &[])), &mut in_flight);
        // The watch breaks and the relist no longer returns "a", before "a"'s add is applied.
        let mut relist = Vec::new();
        s.on_notification(Notification::ListStarted, &mut relist);
        assert!(s.on_notification(Notification::ListDone, &mut relist));
        ingester.ingest(&in_flight);
        ingester.ingest(&relist);
        assert!(graph.is_empty(), "a deleted object stays in the graph: {:?}", graph.snapshot());
    }

    /// A relist emits nothing for objects it returns, and deletes only once.
    #[test]
    fn relist_deletes_each_vanished_object_once() {
        let mut s = store();
        let mut out = Vec::new();
        s.on_notification(Notification::ListStarted, &mut out);
        for uid in ["a", "b", "c"] {
            s.on_notification(Notification::Listed(meta(uid, false, &[])), &mut out);
        }
        s.on_notification(Notification::ListDone, &mut out);
        s.on_notification(Notification::Deleted(meta("c", false, &[])), &mut out);
        assert_eq!(s.len(), 2);
        let relist = |s: &mut ResourceStore| {
            let mut out = Vec::new();
            s.on_notification(Notification::ListStarted, &mut out);
            s.on_notification(Notification::Listed(meta("a", false, &[])), &mut out);
            s.on_notification(Notification::ListDone, &mut out);
            deletes(&out)
        };
        // "c"'s delete was seen; "b" vanished while disconnected.
        assert_eq!(relist(&mut s), ["b"]);
        assert!(relist(&mut s).is_empty());
    }
    /// The store as it was written with two hash sets: the sorted representation must give
    /// the same deletes and the same count after any sequence of notifications, interleaved
    /// lists included (the watchers never interleave them, but a store must not depend on it).
    struct PlainStore {
        emitted: std::collections::HashSet<String>,
        relist_seen: Option<std::collections::HashSet<String>>,
    }

    impl PlainStore {
        fn deletes(&mut self, n: &Notification) -> Vec<String> {
            match n {
                Notification::ListStarted => {
                    self.relist_seen = (!self.emitted.is_empty()).then(Default::default);
                    vec![]
                }
                Notification::Listed(m) => {
                    if let Some(seen) = self.relist_seen.as_mut() {
                        seen.insert(m.uid.clone());
                    }
                    self.emitted.insert(m.uid.clone());
                    vec![]
                }
                Notification::ListDone => {
                    let Some(seen) = self.relist_seen.take() else { return vec![] };
                    let gone = self.emitted.difference(&seen).cloned().collect();
                    self.emitted = seen;
                    gone
                }
                Notification::Applied(m) => {
                    self.emitted.insert(m.uid.clone());
                    vec![]
                }
                Notification::Deleted(m) => {
                    self.emitted.remove(&m.uid);
                    vec![m.uid.clone()]
                }
                Notification::Interrupted | Notification::Resumed => vec![],
            }
        }
    }

    fn notification() -> impl proptest::strategy::Strategy<Value = Notification> {
        use proptest::prelude::*;
        let uid = || (0u8..12).prop_map(|n| meta(&format!("store-prop-{n}"), false, &[]));
        prop_oneof![
            1 => Just(Notification::ListStarted),
            1 => Just(Notification::ListDone),
            4 => uid().prop_map(Notification::Listed),
            2 => uid().prop_map(Notification::Applied),
            2 => uid().prop_map(Notification::Deleted),
            1 => Just(Notification::Interrupted),
            1 => Just(Notification::Resumed),
        ]
    }

    proptest::proptest! {
        #[test]
        fn deletes_what_the_plain_store_deleted(
            notifications in proptest::collection::vec(notification(), 0..60),
        ) {
            let mut s = store();
            let mut plain = PlainStore { emitted: Default::default(), relist_seen: None };
            for n in notifications {
                let mut out = Vec::new();
                s.on_notification(n.clone(), &mut out);
                let mut got = deletes(&out);
                got.sort();
                let mut expected = plain.deletes(&n);
                expected.sort();
                proptest::prop_assert_eq!(got, expected, "after {:?}", n);
                if s.list.is_none() {
                    proptest::prop_assert_eq!(s.len(), plain.emitted.len());
                }
            }
        }
    }
}
