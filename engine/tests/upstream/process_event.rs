//! TestProcessEvent: the graph invariants hold after every event, through both the parallel
//! ingester and the sequential reference (which must also agree with each other).
//!
//! <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/garbagecollector_test.go>; GC-SPEC.md §9.A, §2.2.

use super::*;

/// Upstream's `createEvent(type, uid, owners)`: an object with a UID and owner UIDs only.
///
/// Divergence from upstream: the owner references name `v1`/`Pod`, because kube-gc rejects
/// references without a kind or apiVersion (see the module docs).
fn create_event(event_type: EventType, self_uid: &str, owners: &[&str]) -> Event {
    let object = ObjectMeta {
        uid: self_uid.into(),
        owner_references: owners
            .iter()
            .map(|uid| OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                uid: (*uid).into(),
                ..OwnerReference::default()
            })
            .collect(),
        ..ObjectMeta::default()
    };
    Event::new(event_type, ObjectType::new("v1", "Pod"), object)
}

#[test]
fn test_process_event() {
    use EventType::{Add, Delete, Update};
    let scenarios: [(&str, Vec<Event>); 4] = [
        (
            "test1",
            vec![
                create_event(Add, "1", &[]),
                create_event(Add, "2", &["1"]),
                create_event(Add, "3", &["1", "2"]),
            ],
        ),
        (
            "test2",
            vec![
                create_event(Add, "1", &[]),
                create_event(Add, "2", &["1"]),
                create_event(Add, "3", &["1", "2"]),
                create_event(Add, "4", &["2"]),
                create_event(Delete, "2", &["doesn't matter"]),
            ],
        ),
        (
            "test3",
            vec![
                create_event(Add, "1", &[]),
                create_event(Add, "2", &["1"]),
                create_event(Add, "3", &["1", "2"]),
                create_event(Add, "4", &["3"]),
                create_event(Update, "2", &["4"]),
            ],
        ),
        (
            "reverse test2",
            vec![
                create_event(Add, "4", &["2"]),
                create_event(Add, "3", &["1", "2"]),
                create_event(Add, "2", &["1"]),
                create_event(Add, "1", &[]),
                create_event(Delete, "2", &["doesn't matter"]),
            ],
        ),
    ];
    for (name, events) in &scenarios {
        let graph = Arc::new(Graph::new(4).unwrap());
        let mut ingester = Ingester::new(graph.clone(), 2);
        let mut sequential = SequentialGraph::new();
        for (i, e) in events.iter().enumerate() {
            let out = ingester.ingest(std::slice::from_ref(e));
            assert!(out.errors.is_empty(), "{name} #{i}: {:?}", out.errors);
            sequential.apply(e, &mut IngestOutput::default());
            let snapshot = graph.snapshot();
            if let Err(e) = verify_graph_invariants(&snapshot) {
                panic!("{name} #{i}: ingester: {e}");
            }
            if let Err(e) = verify_graph_invariants(&sequential.snapshot()) {
                panic!("{name} #{i}: sequential: {e}");
            }
            if let Err(e) = graph.check_edge_copies() {
                panic!("{name} #{i}: {e}");
            }
            assert_eq!(snapshot, sequential.snapshot(), "{name} #{i}: ingester != sequential");
        }
    }
}
