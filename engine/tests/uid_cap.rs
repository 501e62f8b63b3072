//! Finding 6 of issue #11: non-UUID UIDs are interned for the life of the process, and anyone
//! who can write an object can put any string in an ownerReference. The interner is capped:
//! past the cap, an event naming a new non-UUID UID is rejected with a clear error, memory stops
//! growing, and UUIDs (every real object's own UID) are unaffected.
//!
//! Its own test binary: the cap is process-wide.

use std::sync::Arc;

use kube_gc_engine::identity::{interned_uids, set_max_interned_uids};
use kube_gc_engine::{
    Event, EventType, Graph, IngestError, Ingester, ObjectMeta, ObjectType, OwnerReference, Uid,
};

fn pod(uid: &str, owner_uid: &str) -> Event {
    let meta = ObjectMeta {
        uid: uid.into(),
        name: format!("p-{uid}"),
        namespace: "ns".into(),
        owner_references: vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: owner_uid.into(),
            ..OwnerReference::default()
        }],
        ..ObjectMeta::default()
    };
    Event::new(EventType::Add, ObjectType::new("v1", "Pod"), meta)
}

fn uuid(i: u64) -> String {
    format!("00000000-0000-4000-8000-{i:012x}")
}

#[test]
fn hostile_non_uuid_uids_stop_at_the_cap_with_a_clear_error() {
    let room = 100;
    set_max_interned_uids(interned_uids() + room);
    let graph = Arc::new(Graph::new(4).unwrap());
    let mut ingester = Ingester::new(graph.clone(), 2);
    let hostile: Vec<Event> =
        (0..1000u64).map(|i| pod(&uuid(i), &format!("not-a-uuid-{i}"))).collect();
    let out = ingester.ingest(&hostile);
    assert_eq!(out.errors.len(), 1000 - room, "{:?}", out.errors.first());
    let message = out.errors[0].to_string();
    assert!(message.contains("not a UUID") && message.contains("cap"), "{message}");
    assert!(matches!(out.errors[0], IngestError::UidCapacity(_)));
    let held = interned_uids();
    // More of the same: nothing grows.
    let more: Vec<Event> =
        (0..1000u64).map(|i| pod(&uuid(10_000 + i), &format!("other-{i}"))).collect();
    assert_eq!(ingester.ingest(&more).errors.len(), 1000);
    assert_eq!(interned_uids(), held);
    // UUIDs, and non-UUID UIDs already held, still work. Which ones were held first depends
    // on the ingest threads' order: take one that was not refused.
    let refused: Vec<String> = out
        .errors
        .iter()
        .filter_map(|e| match e {
            IngestError::UidCapacity(e) => Some(e.uid.clone()),
            _ => None,
        })
        .collect();
    let held_uid = (0..1000u64)
        .map(|i| format!("not-a-uuid-{i}"))
        .find(|u| !refused.contains(u))
        .expect("room for some");
    let fine = [pod(&uuid(20_000), &uuid(20_001)), pod(&uuid(20_002), &held_uid)];
    assert!(ingester.ingest(&fine).errors.is_empty());
    assert!(graph.node(Uid::parse(&uuid(20_002))).is_some());
    assert_eq!(interned_uids(), held);
}
