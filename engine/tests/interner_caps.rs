//! The caps on what ingestion interns for the life of the process from untrusted text.
//!
//! Finding 6 of issue #11: non-UUID UIDs are interned for the life of the process, and anyone
//! who can write an object can put any string in an ownerReference. The interner is capped:
//! past the cap, an event naming a new non-UUID UID is rejected with a clear error, memory stops
//! growing, and UUIDs (every real object's own UID) are unaffected. An ownerReference's
//! apiVersion and kind are just as free, so the type interner is capped too: past its cap (or
//! past any served type's length) the reference is held under one unrepresentable type, and
//! its object stays in the graph.
//!
//! Its own test binary: the caps are process-wide. The type tests take turns ([`TYPE_CAP`]);
//! each test interns the strings the others use before it measures.

use std::sync::Arc;

use futures::executor::block_on;
use kube_gc_engine::collector::{CollectorOptions, ItemError, Outcome};
use kube_gc_engine::identity::{
    MAX_TYPE_STRING_LEN, interned_type_pairs, interned_type_strings, interned_uids,
    set_max_interned_type_strings, set_max_interned_uids, unrepresentable_owner_references,
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

/// Held by each test, one at a time: the caps and the unrepresentable count are process-wide.
static TYPE_CAP: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Interns what the other test of this binary uses, so that it cannot take room under a cap
/// this test set.
fn intern_shared_strings() {
    for (api_version, kind) in [("v1", "ConfigMap"), ("v1", "Pod"), ("example.com/v1", "Widget")] {
        ObjectType::new(api_version, kind);
    }
    ObjectType::unrepresentable();
}

/// The type the graph holds for the owner numbered `i` (see [`uuid`]).
fn owner_type(graph: &Graph, i: u64) -> ObjectType {
    graph.node(Uid::parse(&uuid(i))).expect("the owner's virtual node").identity.ty
}

fn uuid(i: u64) -> String {
    format!("00000000-0000-4000-8000-{i:012x}")
}

#[test]
fn hostile_non_uuid_uids_stop_at_the_cap_and_their_references_are_held_as_unrepresentable() {
    let _turn = TYPE_CAP.lock().unwrap_or_else(|e| e.into_inner());
    intern_shared_strings();
    let room = 100;
    set_max_interned_uids(interned_uids() + room);
    let graph = Arc::new(Graph::new(4).unwrap());
    let mut ingester = Ingester::new(graph.clone(), 2);
    let unrepresentable_before = unrepresentable_owner_references();
    let hostile: Vec<Event> =
        (0..1000u64).map(|i| pod(&uuid(i), &format!("not-a-uuid-{i}"))).collect();
    let out = ingester.ingest(&hostile);
    assert!(out.errors.is_empty(), "{:?}", out.errors.first());
    assert!((0..1000u64).all(|i| graph.node(Uid::parse(&uuid(i))).is_some()), "all observed");
    assert_eq!(unrepresentable_owner_references() - unrepresentable_before, 1000 - room);
    // The refused references all name the one unrepresentable owner, under its type.
    let shared = graph.node(Uid::unrepresentable()).expect("the unrepresentable owner");
    assert!(shared.is_virtual);
    assert_eq!(shared.identity.ty, ObjectType::unrepresentable());
    assert_eq!(graph.dependents_len(Uid::unrepresentable()), 1000 - room);
    let message = Uid::try_parse("not-a-uuid-new").unwrap_err().to_string();
    assert!(message.contains("not a UUID") && message.contains("cap"), "{message}");
    let held = interned_uids();
    // More of the same: nothing grows.
    let more: Vec<Event> =
        (0..1000u64).map(|i| pod(&uuid(10_000 + i), &format!("other-{i}"))).collect();
    assert!(ingester.ingest(&more).errors.is_empty());
    assert_eq!(graph.dependents_len(Uid::unrepresentable()), 2000 - room);
    assert_eq!(interned_uids(), held);
    // UUIDs, and non-UUID UIDs already held, still work: which ones were held first depends
    // on the ingest threads' order, so take one the graph holds as itself.
    let held_uid = (0..1000u64)
        .map(|i| format!("not-a-uuid-{i}"))
        .find(|u| Uid::lookup(u).is_some())
        .expect("room for some");
    let fine = [pod(&uuid(20_000), &uuid(20_001)), pod(&uuid(20_002), &held_uid)];
    assert!(ingester.ingest(&fine).errors.is_empty());
    assert_eq!(graph.dependents_len(Uid::parse(&held_uid)), 2, "its first pod and this one");
    assert_eq!(graph.dependents_len(Uid::unrepresentable()), 2000 - room);
    assert_eq!(interned_uids(), held);
    // An object's own UID past the cap is still refused (the API server generates UUIDs).
    let own = ingester.ingest(&[pod("not-a-uuid-own", &uuid(20_003))]);
    assert!(matches!(own.errors[..], [IngestError::UidCapacity(_)]), "{:?}", own.errors);
}

#[test]
fn hostile_owner_types_stop_at_the_cap_and_served_types_pass() {
    let _turn = TYPE_CAP.lock().unwrap_or_else(|e| e.into_inner());
    intern_shared_strings();
    let room = 100;
    set_max_interned_type_strings(interned_type_strings() + room);
    let graph = Arc::new(Graph::new(4).unwrap());
    let mut ingester = Ingester::new(graph.clone(), 2);
    let unrepresentable_before = unrepresentable_owner_references();
    // One new kind per object, under an apiVersion already held.
    let hostile: Vec<Event> = (0..1000u64)
        .map(|i| typed_pod(&uuid(i), &uuid(50_000 + i), "example.com/v1", &format!("Kind{i}")))
        .collect();
    let out = ingester.ingest(&hostile);
    assert!(out.errors.is_empty(), "{:?}", out.errors.first());
    assert!((0..1000u64).all(|i| graph.node(Uid::parse(&uuid(i))).is_some()), "all observed");
    // Past the cap, the reference is held under the unrepresentable type.
    let refused: Vec<u64> = (0..1000u64)
        .filter(|&i| owner_type(&graph, 50_000 + i) == ObjectType::unrepresentable())
        .collect();
    assert_eq!(refused.len(), 1000 - room);
    assert_eq!(unrepresentable_owner_references() - unrepresentable_before, 1000 - room);
    let message = ObjectType::try_new("example.com/v1", "KindNew").unwrap_err().to_string();
    assert!(message.contains("cap on types"), "{message}");
    let held = interned_type_strings();
    // More of the same, and a new apiVersion: nothing grows.
    let more: Vec<Event> = (0..1000u64)
        .map(|i| typed_pod(&uuid(10_000 + i), &uuid(60_000 + i), "other.io/v1", "Kind0"))
        .collect();
    assert!(ingester.ingest(&more).errors.is_empty());
    assert_eq!(owner_type(&graph, 60_000), ObjectType::unrepresentable());
    assert_eq!(interned_type_strings(), held);
    // New pairs of held strings stop at the cap too.
    set_max_interned_type_strings(interned_type_pairs() + 10);
    let pairs: Vec<Event> = (0..1000u64)
        .filter(|i| !refused.contains(i))
        .map(|i| typed_pod(&uuid(70_000 + i), &uuid(80_000 + i), "v1", &format!("Kind{i}")))
        .collect();
    assert_eq!(pairs.len(), room, "the held kinds");
    assert!(ingester.ingest(&pairs).errors.is_empty());
    let unrepresentable_pairs = (0..1000u64)
        .filter(|i| !refused.contains(i))
        .filter(|&i| owner_type(&graph, 80_000 + i) == ObjectType::unrepresentable())
        .count();
    assert_eq!(unrepresentable_pairs, room - 10);
    assert_eq!(interned_type_strings(), held);
    set_max_interned_type_strings(held);
    // A type the cluster serves, interned by discovery past the cap, passes; so do types held.
    let gadget = ObjectType::new("served.io/v1", "Gadget");
    let fine = [
        typed_pod(&uuid(20_000), &uuid(20_001), "served.io/v1", "Gadget"),
        typed_pod(&uuid(20_002), &uuid(20_003), "v1", "ConfigMap"),
    ];
    assert!(ingester.ingest(&fine).errors.is_empty());
    assert_eq!(owner_type(&graph, 20_001), gadget);
    assert_eq!(owner_type(&graph, 20_003), ObjectType::new("v1", "ConfigMap"));
    assert_eq!(interned_type_strings(), held + 2);
}

#[test]
fn owner_types_too_long_to_be_served_are_held_as_unrepresentable_and_interned_never() {
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
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    for (object, owner) in [(30_000, 30_001), (30_002, 30_003)] {
        assert!(graph.node(Uid::parse(&uuid(object))).is_some(), "observed");
        assert_eq!(owner_type(&graph, owner), ObjectType::unrepresentable());
    }
    assert_eq!(interned_type_strings(), before, "nothing refused is interned");
    let e = ObjectType::try_new("v1", &long_kind).unwrap_err();
    assert!(e.api_version.len() <= 64 && e.kind.len() <= 64, "cut in the error: {e:?}");
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

/// Past the UID cap, a Pod whose references are a blocking one to a ReplicaSet being deleted in
/// the foreground and one naming a new non-UUID UID stays in the graph: it blocks that
/// ReplicaSet, and no decision goes past its unrepresentable reference (read live or from the
/// graph's copy), nor verifies that reference's owner. (Its events were refused before: the
/// ReplicaSet's finalizer went at once.)
#[test]
fn a_dependent_past_the_uid_cap_still_blocks_its_owners_foreground_deletion() {
    let _turn = TYPE_CAP.lock().unwrap_or_else(|e| e.into_inner());
    intern_shared_strings();
    for read_items_from_graph in [false, true] {
        set_max_interned_uids(interned_uids());
        let options = CollectorOptions { read_items_from_graph, ..CollectorOptions::default() };
        let mut env = Env::new(MemoryCluster::with_test_resources(), options);
        let (pods, rs) = (support::pods(), support::replicasets());
        let owner = ObjectMeta {
            uid: uuid(90_000),
            name: "web".into(),
            namespace: "ns".into(),
            deletion_timestamp: true,
            finalizers: vec!["foregroundDeletion".into()],
            ..ObjectMeta::default()
        };
        let mut pod =
            typed_pod(&uuid(90_001), &format!("fresh-{read_items_from_graph}"), "v1", "ConfigMap")
                .object;
        pod.owner_references.push(support::blocking_owner("apps/v1", "ReplicaSet", "web", 0));
        pod.owner_references[1].uid = uuid(90_000);
        env.cluster.create(&rs, owner.clone()).unwrap();
        env.cluster.create(&pods, pod.clone()).unwrap();
        env.observe(EventType::Add, ObjectType::new("apps/v1", "ReplicaSet"), owner);
        env.observe(EventType::Add, ObjectType::new("v1", "Pod"), pod);
        assert!(env.graph.node(Uid::parse(&uuid(90_001))).is_some(), "the pod is observed");
        env.run_attempt_to_delete(20);
        let pod = env.cluster.object(&pods, "ns", &format!("p-{}", uuid(90_001)));
        assert!(pod.is_some(), "kept (from the graph: {read_items_from_graph})");
        let web = env.cluster.object(&rs, "ns", "web").expect("still waiting for its pod");
        assert_eq!(web.finalizers, ["foregroundDeletion"]);
        assert!(env.graph.node(Uid::unrepresentable()).is_some(), "never verified absent");
        set_max_interned_uids(usize::MAX);
    }
}

/// A reference to a type refused because the cap was full, whose resource is discovered
/// later (discovery interns it past the cap): the graph's copy still holds it as
/// unrepresentable, so the decision reads the object live, maps the type and decides as
/// upstream does once it knows the type (here: its owner absent, the Pod collected).
#[test]
fn a_type_refused_for_the_cap_and_served_later_is_decided_from_a_live_read() {
    let _turn = TYPE_CAP.lock().unwrap_or_else(|e| e.into_inner());
    intern_shared_strings();
    let options = CollectorOptions { read_items_from_graph: true, ..CollectorOptions::default() };
    let mut env = Env::new(MemoryCluster::with_test_resources(), options);
    let pods = resource("v1", "pods", "Pod", true);
    let pod = typed_pod(&uuid(95_000), &uuid(95_001), "later.io/v1", "Gizmo").object;
    env.cluster.create(&pods, pod.clone()).unwrap();
    let name = format!("p-{}", uuid(95_000));
    let stored = env.cluster.object(&pods, "ns", &name).unwrap(); // with its resourceVersion
    set_max_interned_type_strings(interned_type_strings());
    env.observe(EventType::Add, ObjectType::new("v1", "Pod"), stored);
    assert_eq!(owner_type(&env.graph, 95_001), ObjectType::unrepresentable());
    set_max_interned_type_strings(usize::MAX);
    // Discovery finds the resource.
    ObjectType::new("later.io/v1", "Gizmo");
    env.cluster.register(resource("later.io/v1", "gizmos", "Gizmo", true));
    let key = env.graph.key_of(Uid::parse(&uuid(95_000))).unwrap();
    assert_eq!(block_on(env.collector.attempt_to_delete_worker(key)), Outcome::Forget);
    assert!(env.cluster.object(&pods, "ns", &name).is_none(), "its owner is absent: garbage");
}

/// Objects whose own UIDs are past the cap, arriving from a watch through the graph builder:
/// their events are refused (counted), and the builder's per-resource store interns none of
/// them either (it used to, so the cap held for the graph but not for the process).
#[test]
fn a_watch_delivering_uids_past_the_cap_interns_none() {
    use kube_gc_engine::{GraphBuilder, Notification, WatchBatch, WatchSource};
    let _turn = TYPE_CAP.lock().unwrap_or_else(|e| e.into_inner());
    intern_shared_strings();
    set_max_interned_uids(interned_uids());
    let graph = Arc::new(Graph::new(4).unwrap());
    let cluster = Arc::new(MemoryCluster::with_test_resources());
    let (collector, changes) =
        support::immediate_collector(&graph, &cluster, CollectorOptions::default());
    let mut builder =
        GraphBuilder::new(Ingester::new(graph.clone(), 2), Arc::new(collector), changes);
    let source = WatchSource {
        resource: "v1/configmaps".into(),
        object_type: ObjectType::new("v1", "ConfigMap"),
        generation: 1,
    };
    let object = |i: u64| ObjectMeta {
        uid: format!("hostile-own-uid-{i}"),
        name: format!("cm-{i}"),
        namespace: "ns".into(),
        ..ObjectMeta::default()
    };
    let held = interned_uids();
    let mut notifications = vec![Notification::ListStarted];
    notifications.extend((0..100).map(|i| Notification::Listed(object(i))));
    notifications.push(Notification::ListDone);
    notifications.extend((100..200).map(|i| Notification::Applied(object(i))));
    notifications.extend((0..50).map(|i| Notification::Deleted(object(i))));
    let done = builder.ingest(vec![WatchBatch { source, notifications }]);
    assert_eq!(done.errors.len(), 250, "each refused, and counted");
    assert_eq!(interned_uids(), held, "interned past the cap");
    assert!(graph.is_empty());
}
