//! Model 2: a node's dependents set (`engine/src/graph/dependents.rs`), which keeps up to 16
//! entries in a vector and switches to a hash table above that (and back at 8 or fewer).
//!
//! A reader copying the set while a batch makes it cross the limit, either way, sees the set
//! before the batch or after it, whole: the switch happens inside one write-locked step, and the
//! copy is taken under one read lock.

use std::collections::BTreeSet;

use kube_gc_engine::loom_support::dependents_are_hashed;
use kube_gc_engine::{Event, Graph, Ingester, Uid};
use loom::sync::Arc;
use loom::thread;

use crate::fixtures::{add, delete, meta, model, pod_type, rs_ref, rs_type, uid};

/// UID number of the owner; its dependents are 1..=17.
const OWNER: u64 = 1000;

/// An observed ReplicaSet and pods `dependents` owned by it.
fn owner_with(dependents: impl Iterator<Item = u64>) -> Vec<Event> {
    let owner = uid(OWNER);
    let mut events = vec![add(rs_type(), meta("web", &owner, vec![]))];
    events.extend(dependents.map(|i| pod(i, &owner)));
    events
}

fn pod(i: u64, owner: &str) -> Event {
    add(pod_type(), meta(&format!("web-{i}"), &uid(i), vec![rs_ref("web", owner)]))
}

fn uids(range: impl Iterator<Item = u64>) -> BTreeSet<Uid> {
    range.map(|i| Uid::parse(&uid(i))).collect()
}

/// Runs `batch` on a writer thread while this thread copies the owner's dependents; requires
/// the copy to be `before` or `after`, whole.
fn snapshot_while(
    graph: &Arc<Graph>,
    batch: Vec<Event>,
    before: &BTreeSet<Uid>,
    after: &BTreeSet<Uid>,
) {
    let owner = Uid::parse(&uid(OWNER));
    let writer = {
        let graph = Arc::clone(graph);
        thread::spawn(move || {
            Ingester::new(graph, 1).ingest(&batch);
        })
    };
    let copy = graph.dependents(owner);
    let seen: BTreeSet<Uid> = copy.iter().map(|d| d.uid).collect();
    assert_eq!(seen.len(), copy.len(), "a dependent copied twice: {copy:?}");
    assert!(
        seen == *before || seen == *after,
        "dependents copied half-way through the switch: {} entries {seen:?}",
        seen.len()
    );
    writer.join().unwrap();
    let end: BTreeSet<Uid> = graph.dependents(owner).iter().map(|d| d.uid).collect();
    assert_eq!(end, *after);
}

#[test]
pub(crate) fn a_copy_of_dependents_is_whole_while_the_set_grows_from_inline_to_hashed() {
    model(|| {
        let graph = Arc::new(Graph::new(1).unwrap());
        let owner = Uid::parse(&uid(OWNER));
        Ingester::new(Arc::clone(&graph), 1).ingest(&owner_with(1..=16));
        assert_eq!(dependents_are_hashed(&graph, owner), Some(false), "16 are kept inline");

        let batch = vec![pod(17, &uid(OWNER))];
        snapshot_while(&graph, batch, &uids(1..=16), &uids(1..=17));
        assert_eq!(dependents_are_hashed(&graph, owner), Some(true), "the 17th switched");
    });
}

#[test]
pub(crate) fn a_copy_of_dependents_is_whole_while_the_set_shrinks_from_hashed_to_inline() {
    model(|| {
        let graph = Arc::new(Graph::new(1).unwrap());
        let owner = Uid::parse(&uid(OWNER));
        Ingester::new(Arc::clone(&graph), 1).ingest(&owner_with(1..=17));
        assert_eq!(dependents_are_hashed(&graph, owner), Some(true));

        // Nine deletes in one batch leave 8: back to inline.
        let batch: Vec<Event> = (9..=17)
            .map(|i| {
                delete(
                    pod_type(),
                    meta(&format!("web-{i}"), &uid(i), vec![rs_ref("web", &uid(OWNER))]),
                )
            })
            .collect();
        snapshot_while(&graph, batch, &uids(1..=17), &uids(1..=8));
        assert_eq!(dependents_are_hashed(&graph, owner), Some(false), "8 are inline again");
    });
}
