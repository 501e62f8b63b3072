//! The caps on what ingestion interns for the life of the process from untrusted text.
//!
//! Finding 6 of issue #11: non-UUID UIDs are interned for the life of the process, and anyone
//! who can write an object can put any string in an ownerReference. The interner is capped:
//! past the cap, an event naming a new non-UUID UID is rejected with a clear error, memory stops
//! growing, and UUIDs (every real object's own UID) are unaffected. An ownerReference's
//! apiVersion and kind are just as free, so the type interner is capped the same way.
//!
//! Its own test binary: the caps are process-wide. The type tests take turns ([`TYPE_CAP`]);
//! each test interns the strings the others use before it measures.

use std::sync::Arc;

use futures::executor::block_on;
use kube_gc_engine::collector::{CollectorOptions, ItemError, Outcome};
use kube_gc_engine::identity::{
    MAX_TYPE_STRING_LEN, interned_type_pairs, interned_type_strings, interned_uids,
    set_max_interned_type_strings, set_max_interned_uids,
};
use kube_gc_engine::{
    Event, EventType, Graph, IngestError, Ingester, ObjectMeta, ObjectType, OwnerReference, Uid,
};
use kube_gc_testkit::MemoryCluster;
use kube_gc_testkit::memory_cluster::resource;

mod support;
use support::Env;

fn pod(uid: &str, owner_uid: &str) -> Event {
    typed_pod(uid, owner_uid, "v1", "ConfigMap")
}

fn typed_pod(uid: &str, owner_uid: &str, api_version: &str, kind: &str) -> Event {
    let meta = ObjectMeta {
        uid: uid.into(),
        name: format!("p-{uid}"),
        namespace: "ns".into(),
        owner_references: vec![OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: "owner".into(),
            uid: owner_uid.into(),
            ..OwnerReference::default()
        }],
        ..ObjectMeta::default()
    };
    Event::new(EventType::Add, ObjectType::new("v1", "Pod"), meta)
}

/// Held by each test that sets or relies on the type cap, one at a time.
static TYPE_CAP: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Interns what the other test of this binary uses, so that it cannot take room under a cap
/// this test set.
fn intern_shared_strings() {
    for (api_version, kind) in [("v1", "ConfigMap"), ("v1", "Pod"), ("example.com/v1", "Widget")] {
        ObjectType::new(api_version, kind);
    }
}

fn uuid(i: u64) -> String {
    format!("00000000-0000-4000-8000-{i:012x}")
}

#[test]
fn hostile_non_uuid_uids_stop_at_the_cap_with_a_clear_error() {
    intern_shared_strings();
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

#[test]
fn hostile_owner_types_stop_at_the_cap_and_served_types_pass() {
    let _turn = TYPE_CAP.lock().unwrap_or_else(|e| e.into_inner());
    intern_shared_strings();
    let room = 100;
    set_max_interned_type_strings(interned_type_strings() + room);
    let graph = Arc::new(Graph::new(4).unwrap());
    let mut ingester = Ingester::new(graph.clone(), 2);
    // One new kind per object, under an apiVersion already held.
    let hostile: Vec<Event> = (0..1000u64)
        .map(|i| typed_pod(&uuid(i), &uuid(50_000 + i), "example.com/v1", &format!("Kind{i}")))
        .collect();
    let out = ingester.ingest(&hostile);
    assert_eq!(out.errors.len(), 1000 - room, "{:?}", out.errors.first());
    assert!(out.errors.iter().all(|e| matches!(e, IngestError::TypeCapacity(_))));
    let message = out.errors[0].to_string();
    assert!(message.contains("cap on types"), "{message}");
    let refused: Vec<Uid> = (0..1000u64)
        .map(|i| Uid::parse(&uuid(i)))
        .filter(|&uid| graph.node(uid).is_none())
        .collect();
    assert_eq!(refused.len(), 1000 - room, "a refused object stays out of the graph");
    let held = interned_type_strings();
    // More of the same, and a new apiVersion: nothing grows.
    let more: Vec<Event> = (0..1000u64)
        .map(|i| typed_pod(&uuid(10_000 + i), &uuid(60_000 + i), "other.io/v1", "Kind0"))
        .collect();
    assert_eq!(ingester.ingest(&more).errors.len(), 1000);
    assert_eq!(interned_type_strings(), held);
    // New pairs of held strings stop at the cap too.
    set_max_interned_type_strings(interned_type_pairs() + 10);
    let pairs: Vec<Event> = (0..1000u64)
        .filter(|&i| graph.node(Uid::parse(&uuid(i))).is_some())
        .map(|i| typed_pod(&uuid(70_000 + i), &uuid(80_000 + i), "v1", &format!("Kind{i}")))
        .collect();
    assert_eq!(pairs.len(), room, "the held kinds");
    assert_eq!(ingester.ingest(&pairs).errors.len(), room - 10);
    assert_eq!(interned_type_strings(), held);
    set_max_interned_type_strings(held);
    // A type the cluster serves, interned by discovery past the cap, passes; so do types held.
    ObjectType::new("served.io/v1", "Gadget");
    let fine = [
        typed_pod(&uuid(20_000), &uuid(20_001), "served.io/v1", "Gadget"),
        typed_pod(&uuid(20_002), &uuid(20_003), "v1", "ConfigMap"),
    ];
    assert!(ingester.ingest(&fine).errors.is_empty());
    assert!(graph.node(Uid::parse(&uuid(20_002))).is_some());
    assert_eq!(interned_type_strings(), held + 2);
}

#[test]
fn owner_types_too_long_to_be_served_are_refused_under_the_cap_and_cut_in_the_error() {
    let _turn = TYPE_CAP.lock().unwrap_or_else(|e| e.into_inner());
    intern_shared_strings();
    set_max_interned_type_strings(usize::MAX);
    let graph = Arc::new(Graph::new(4).unwrap());
    let mut ingester = Ingester::new(graph.clone(), 2);
    let long_kind = "K".repeat(MAX_TYPE_STRING_LEN + 1);
    let long_group = format!("{}/v1", "g".repeat(MAX_TYPE_STRING_LEN));
    let longest = format!("{}/{}", "g".repeat(253), "v".repeat(63));
    assert_eq!(longest.len(), MAX_TYPE_STRING_LEN);
    let before = interned_type_strings();
    let out = ingester.ingest(&[
        typed_pod(&uuid(30_000), &uuid(30_001), "v1", &long_kind),
        typed_pod(&uuid(30_002), &uuid(30_003), &long_group, "ConfigMap"),
    ]);
    assert_eq!(out.errors.len(), 2, "{:?}", out.errors);
    for e in &out.errors {
        let IngestError::TypeCapacity(e) = e else { panic!("{e:?}") };
        assert!(e.api_version.len() <= 64 && e.kind.len() <= 64, "{e:?}");
    }
    assert_eq!(interned_type_strings(), before, "nothing refused is interned");
    assert!(ObjectType::try_new(&longest, "ConfigMap").is_ok(), "the longest servable passes");
}

#[test]
fn a_live_owner_reference_past_the_type_cap_keeps_the_item_and_interns_nothing() {
    let _turn = TYPE_CAP.lock().unwrap_or_else(|e| e.into_inner());
    intern_shared_strings();
    set_max_interned_type_strings(usize::MAX);
    let mut env = Env::new(MemoryCluster::with_test_resources(), CollectorOptions::default());
    let pods = resource("v1", "pods", "Pod", true);
    // A pod the graph holds with a Widget owner; live, it also names a type never held.
    let observed = typed_pod(&uuid(40_000), &uuid(40_001), "example.com/v1", "Widget").object;
    let mut live = observed.clone();
    live.owner_references.push(OwnerReference {
        api_version: "hostile.io/v1".into(),
        kind: "Unheld".into(),
        name: "x".into(),
        uid: uuid(40_002),
        ..OwnerReference::default()
    });
    env.cluster.create(&pods, live).unwrap();
    env.observe(EventType::Add, ObjectType::new("v1", "Pod"), observed);
    set_max_interned_type_strings(interned_type_strings());
    let held = interned_type_strings();
    let node = env.graph.node(Uid::parse(&uuid(40_000))).expect("observed");
    let err = block_on(env.collector.attempt_to_delete_item(&node)).unwrap_err();
    assert!(matches!(&err, ItemError::RestMapping(t) if t.contains("Unheld")), "{err:?}");
    assert_eq!(block_on(env.collector.attempt_to_delete_worker(node.key())), Outcome::Requeue);
    assert!(env.cluster.object(&pods, "ns", &format!("p-{}", uuid(40_000))).is_some(), "kept");
    assert_eq!(interned_type_strings(), held);
}
