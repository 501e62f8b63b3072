//! Owner references that repeat a UID (the API allows it), found by the stale-view property
//! test and issue #11's finding 2. Upstream's `referencesDiffs` keeps one reference per UID, so
//! two of its answers are wrong for repeated UIDs, and kube-gc departs from both, in the
//! parallel ingester and in its sequential reference alike:
//!
//! - a changed list whose diff is empty was left in the node under the new resourceVersion:
//!   the collector, deciding from the graph's copy, would pin a write to a version whose owners
//!   it did not see (and the owner side kept a stale copy of which references block);
//! - a dropped duplicate counted as a removed owner, so the dependent left its owner's
//!   dependents while still referring to it: the owner's deletion then never queued it.

use std::sync::Arc;

use kube_gc_engine::{
    Event, EventType, Graph, Ingester, ObjectMeta, ObjectType, OwnerReference, SequentialGraph, Uid,
};

const OWNER: &str = "00000000-0000-4000-8000-000000000002";
const DEPENDENT: &str = "00000000-0000-4000-8000-000000000004";
const OTHER: &str = "00000000-0000-4000-8000-000000000009";

fn reference(uid: &str, block: Option<bool>) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: format!("n{uid}"),
        uid: uid.into(),
        controller: None,
        block_owner_deletion: block,
    }
}

fn pod(uid: &str, refs: Vec<OwnerReference>, rv: &str) -> ObjectMeta {
    ObjectMeta {
        uid: uid.into(),
        name: format!("n{uid}"),
        namespace: "ns".into(),
        owner_references: refs,
        resource_version: rv.into(),
        ..ObjectMeta::default()
    }
}

/// Applies the owner's add, the dependent's add with `before`, then its update to `after`, to
/// both ingesters; returns the parallel graph after checking it equals the sequential one.
fn ingest(before: Vec<OwnerReference>, after: Vec<OwnerReference>) -> Arc<Graph> {
    let ty = ObjectType::new("v1", "Pod");
    let (old, new) = (pod(DEPENDENT, before, "1"), pod(DEPENDENT, after, "2"));
    let events = [
        Event::new(EventType::Add, ty, pod(OWNER, vec![], "1")),
        Event::new(EventType::Add, ty, old.clone()),
        Event::update(ty, old, new),
    ];
    let graph = Arc::new(Graph::new(2).unwrap());
    let mut ingester = Ingester::new(graph.clone(), 2);
    let mut sequential = SequentialGraph::new();
    for e in &events {
        ingester.ingest(std::slice::from_ref(e));
        sequential.apply_all(std::slice::from_ref(e));
    }
    assert_eq!(graph.snapshot(), sequential.snapshot());
    graph
}

#[test]
fn the_node_holds_exactly_the_new_list_at_its_resource_version() {
    // The diff, one reference per UID (the last), sees no change.
    let before = vec![reference(OWNER, None), reference(OWNER, None)];
    let after = vec![reference(OWNER, Some(true)), reference(OWNER, None)];
    let graph = ingest(before, after.clone());
    let node = graph.node(Uid::parse(DEPENDENT)).unwrap();
    let owners: Vec<_> = node.owners.iter().map(kube_gc_engine::patch::owner_ref_to_api).collect();
    assert_eq!((owners, node.resource_version), (after, Some(2)));
    // The owner side knows the reference now blocks.
    assert_eq!(graph.blocking_dependents(Uid::parse(OWNER)), [Uid::parse(DEPENDENT)]);
}

#[test]
fn a_dropped_duplicate_keeps_the_dependent_under_its_owner() {
    let before = vec![reference(OWNER, Some(true)), reference(OWNER, None), reference(OTHER, None)];
    let after = vec![reference(OWNER, Some(true)), reference(OWNER, None)];
    let graph = ingest(before, after);
    let dependents: Vec<Uid> = graph.dependents(Uid::parse(OWNER)).iter().map(|d| d.uid).collect();
    assert_eq!(dependents, [Uid::parse(DEPENDENT)], "the dependent left its owner");
}
