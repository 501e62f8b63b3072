//! Model 3: batched ingestion (`engine/src/ingest/`): phase one (diff) and phase two (apply)
//! each on two threads, phase one's edge ops handed to phase two across threads, over a graph of
//! two shards, one thread per shard.
//!
//! The batch: a pod changes owner (the old owner in the other shard, the new one created
//! virtual), a new pod names an owner in the other shard, a pod starts foreground deletion, and
//! an owner is deleted. Both directions of hand-off carry ops.
//!
//! - After the batch the graph equals what [`SequentialGraph`](kube_gc_engine::SequentialGraph)
//!   builds from the same events, and the batch queued every item the sequential reference
//!   queues, whatever the interleaving of the phase threads.
//! - A worker reading the graph during the batch sees each shard before or after its part of
//!   the batch, never half-way.

use std::collections::HashSet;

use kube_gc_engine::ingest::IngestOutput;
use kube_gc_engine::{Event, Graph, Ingester, SequentialGraph};
use loom::sync::Arc;
use loom::thread;

use crate::fixtures::{
    add, assert_each_shard_whole, delete, deleting_in_foreground, meta, model, pod_type, rs_ref,
    rs_type, sequential, uids_in_shard,
};

/// The setup (applied before the model's threads start) and the batch under test.
struct Stream {
    setup: Vec<Event>,
    batch: Vec<Event>,
}

/// Shard 0 holds pod `p` and the owner `d` it moves to; shard 1 holds ReplicaSet `r` and
/// pods `q` and `s`.
fn stream(graph: &Graph) -> Stream {
    let [p, d]: [String; 2] = uids_in_shard(graph, 0, 1, 2).try_into().unwrap();
    let [r, q, s]: [String; 3] = uids_in_shard(graph, 1, 1, 3).try_into().unwrap();
    let rs = meta("web", &r, vec![]);
    let p_old = meta("web-p", &p, vec![rs_ref("web", &r)]);
    let q_old = meta("web-q", &q, vec![rs_ref("web", &r)]);
    let setup = vec![
        add(rs_type(), rs.clone()),
        add(pod_type(), p_old.clone()),
        add(pod_type(), q_old.clone()),
    ];
    let batch = vec![
        // Owner change, across shards; the new owner is created virtual.
        Event::update(pod_type(), p_old, meta("web-p", &p, vec![rs_ref("web-v2", &d)])),
        // A dependent in shard 1 whose owner (the pod p, here) is in shard 0.
        add(pod_type(), meta("web-s", &s, vec![rs_ref("web-p", &p)])),
        // Foreground deletion starts: both deletion flags, in two steps of one event.
        Event::update(pod_type(), q_old.clone(), deleting_in_foreground(q_old)),
        // The owner goes: its remaining dependent q is queued.
        delete(rs_type(), rs),
    ];
    Stream { setup, batch }
}

/// Requires `got` to have queued every item the sequential reference queued.
fn assert_queued_superset(got: &IngestOutput, setup: &[Event], batch: &[Event]) {
    let mut reference = SequentialGraph::new();
    reference.apply_all(setup);
    let want = reference.apply_all(batch);
    let keys = |out: &IngestOutput| -> HashSet<_> {
        out.enqueued.iter().map(|e| (e.is_orphan(), e.key().uid)).collect()
    };
    let (got, want) = (keys(got), keys(&want));
    assert!(got.is_superset(&want), "items lost: {:?}", want.difference(&got).collect::<Vec<_>>());
}

#[test]
pub(crate) fn phase_one_output_reaches_phase_two_across_threads() {
    model(|| {
        let graph = Arc::new(Graph::new(2).unwrap());
        let Stream { setup, batch } = stream(&graph);
        Ingester::new(Arc::clone(&graph), 1).ingest(&setup);

        let out = Ingester::new(Arc::clone(&graph), 2).ingest(&batch);
        assert_eq!(
            graph.snapshot(),
            sequential(&[&setup[..], &batch[..]].concat()),
            "the batch left a graph the sequential reference does not"
        );
        assert_queued_superset(&out, &setup, &batch);
        graph.check_edge_copies().unwrap();
    });
}

#[test]
pub(crate) fn a_worker_reading_during_a_batch_sees_each_shard_before_or_after_it() {
    model(|| {
        let graph = Arc::new(Graph::new(2).unwrap());
        let Stream { setup, batch } = stream(&graph);
        Ingester::new(Arc::clone(&graph), 1).ingest(&setup);
        let before = graph.snapshot();
        let after = sequential(&[&setup[..], &batch[..]].concat());

        let worker = {
            let graph = Arc::clone(&graph);
            thread::spawn(move || graph.snapshot())
        };
        let out = Ingester::new(Arc::clone(&graph), 2).ingest(&batch);
        assert_each_shard_whole(&graph, &worker.join().unwrap(), &before, &after);
        assert_eq!(graph.snapshot(), after);
        assert_queued_superset(&out, &setup, &batch);
    });
}
