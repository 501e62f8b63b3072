//! TestDependentsRace: one thread adds and removes dependents of an owner while another runs
//! the attemptToOrphan worker on that owner. Upstream relies on the race detector; here the
//! test must finish (no deadlock, no panic) and leave the graph consistent.
//!
//! <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/garbagecollector_test.go>; GC-SPEC.md §9.A, §4.

use std::sync::mpsc;
use std::time::Duration;

use super::*;

const UPDATES: usize = 100;

#[test]
fn test_dependents_race() {
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        race();
        done_tx.send(()).ok();
    });
    if let Err(e) = done_rx.recv_timeout(Duration::from_secs(120)) {
        panic!("the race did not finish in 120s (deadlock?): {e}");
    }
}

fn race() {
    let cluster = Arc::new(MemoryCluster::with_test_resources());
    let (graph, _, gc) = collector(cluster, 500);
    let mut ingester = Ingester::new(graph.clone(), 2);
    let owner = make_id("v1", "ConfigMap", "ns1", "owner", "owner");
    ingester.ingest(&[make_add_event(&owner, &[])]);
    let owner_key = graph.key_of(owner.uid).expect("owner ingested");

    std::thread::scope(|s| {
        s.spawn(|| {
            // addDependentToOwners then removeDependentFromOwners, as graph events.
            for i in 0..UPDATES {
                let dependent = make_id("v1", "Pod", "ns1", &format!("pod{i}"), &format!("dep{i}"));
                let with_owner = make_obj(&dependent, &[&owner]);
                let without = make_obj(&dependent, &[]);
                ingester.ingest(&[Event::new(EventType::Add, dependent.ty, with_owner.clone())]);
                ingester.ingest(&[Event::update(dependent.ty, with_owner, without.clone())]);
                ingester.ingest(&[Event::new(EventType::Delete, dependent.ty, without)]);
            }
        });
        s.spawn(|| {
            for _ in 0..UPDATES {
                gc.attempt_to_orphan_queue().add(owner_key);
                assert!(block_on(gc.process_attempt_to_orphan_worker()));
            }
        });
    });
    graph.check_edge_copies().unwrap();
    verify_graph_invariants(&graph.snapshot()).unwrap();
    assert_eq!(graph.len(), 1, "only the owner remains");
    assert_eq!(graph.dependents_len(owner.uid), 0);
}
