//! Model 1: the graph's shards (`engine/src/graph/mod.rs`). The ingester is the only writer;
//! workers read. Each shard is a readers-writer lock, and no code path holds two at once.
//!
//! - Two readers copying a node while the writer updates it (owners and both deletion flags)
//!   each see the node as it was before the update or after it, never a mix.
//! - Two readers walking two shards in opposite orders while the writer writes both never
//!   deadlock (loom fails a model on any deadlock), and each sees every shard whole.

use kube_gc_engine::{Event, Graph, Ingester, Uid};
use loom::sync::Arc;
use loom::thread;

use crate::fixtures::{
    add, assert_each_shard_whole, deleting_in_foreground, meta, model, pod_type, rs_ref,
    sequential, uid, uids_in_shard,
};

/// Owners and flags of a node, as a reader copied them.
type Seen = (Vec<Uid>, bool, bool);

/// Owners and flags of the node with `uid`, copied in one call.
fn read(graph: &Graph, uid: Uid) -> Seen {
    let view = graph.node(uid).expect("the pod is never removed");
    (view.owners.iter().map(|o| o.uid).collect(), view.being_deleted, view.deleting_dependents)
}

#[test]
pub(crate) fn readers_see_a_node_before_or_after_an_update_never_between() {
    model(|| {
        let graph = Arc::new(Graph::new(1).unwrap());
        let (pod, a, b) = (uid(1), uid(2), uid(3));
        let before = meta("web-1", &pod, vec![rs_ref("a", &a)]);
        // The update changes the owners and sets both deletion flags (beingDeleted in the
        // event's main step, deletingDependents in its transition step).
        let after = deleting_in_foreground(meta("web-1", &pod, vec![rs_ref("b", &b)]));
        Ingester::new(Arc::clone(&graph), 1).ingest(&[add(pod_type(), before.clone())]);
        let (pod, a, b) = (Uid::parse(&pod), Uid::parse(&a), Uid::parse(&b));
        let whole =
            move |seen: &Seen| *seen == (vec![a], false, false) || *seen == (vec![b], true, true);

        let writer = {
            let graph = Arc::clone(&graph);
            let update = Event::update(pod_type(), before, after);
            thread::spawn(move || {
                Ingester::new(graph, 1).ingest(&[update]);
            })
        };
        let reader = {
            let graph = Arc::clone(&graph);
            thread::spawn(move || read(&graph, pod))
        };
        for seen in [read(&graph, pod), reader.join().unwrap()] {
            assert!(whole(&seen), "torn node: owners and flags from different moments: {seen:?}");
        }
        writer.join().unwrap();
        assert_eq!(read(&graph, pod), (vec![b], true, true));
    });
}

#[test]
pub(crate) fn readers_in_opposite_shard_orders_and_a_writer_never_deadlock() {
    model(|| {
        let graph = Arc::new(Graph::new(2).unwrap());
        let pod = uids_in_shard(&graph, 0, 1, 1).remove(0);
        let [old_owner, new_owner]: [String; 2] =
            uids_in_shard(&graph, 1, 1, 2).try_into().unwrap();
        let setup = [add(pod_type(), meta("web-1", &pod, vec![rs_ref("old", &old_owner)]))];
        Ingester::new(Arc::clone(&graph), 1).ingest(&setup);
        // The pod (shard 0) moves from one owner to another (both shard 1, the new one virtual,
        // created by the move): the batch writes shard 0, then shard 1.
        let moved = meta("web-1", &pod, vec![rs_ref("new", &new_owner)]);
        let batch = [Event::update(pod_type(), setup[0].object.clone(), moved)];
        let before = graph.snapshot();
        let after = sequential(&[&setup[..], &batch[..]].concat());

        let writer = {
            let graph = Arc::clone(&graph);
            thread::spawn(move || {
                Ingester::new(graph, 1).ingest(&batch);
            })
        };
        let reader = {
            let graph = Arc::clone(&graph);
            let (pod, new_owner) = (Uid::parse(&pod), Uid::parse(&new_owner));
            // Shard 1, then shard 0.
            thread::spawn(move || {
                let dependents = graph.dependents(new_owner);
                let owners = graph.node(pod).expect("the pod stays").owners;
                (dependents.len(), owners.len())
            })
        };
        // Shard 0, then shard 1.
        let seen = graph.snapshot();
        assert_each_shard_whole(&graph, &seen, &before, &after);
        let (new_owner_dependents, pod_owners) = reader.join().unwrap();
        assert!(new_owner_dependents <= 1, "the new owner has the pod or nothing yet");
        assert_eq!(pod_owners, 1, "the pod always has exactly one owner");
        writer.join().unwrap();
        assert_eq!(graph.snapshot(), after);
    });
}
