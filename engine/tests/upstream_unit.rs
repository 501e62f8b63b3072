//! Upstream's unit tests of the garbage collector, carried over to kube-gc.
//!
//! Source: <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/garbagecollector_test.go>
//! (v1.30-v1.33; GC-SPEC.md §9.A). One `mod` per Go test, snake-cased; TestConflictingData's
//! scripts are `conflicting_data::case_01_…` to `case_16_…`, step by step as upstream writes
//! them, with upstream's step numbers in the comments. TestGetAlternateOwnerIdentity
//! (graph_builder_test.go) lives beside the function it tests, in `src/ingest/rules.rs`, because
//! that function is crate-private.
//!
//! Where kube-gc's model differs from upstream's, the test says so:
//!
//! - Upstream queues `*node` pointers and clones a virtual node into a new pointer when it
//!   re-identifies it; kube-gc keeps one node per UID and bumps its incarnation instead. A
//!   queued pointer to the clone's predecessor is asserted as [`Queued::Old`] (its UID, and the
//!   fact that its incarnation is older than the node's), where upstream asserts the old
//!   pointer's identity and `virtual: true`.
//! - kube-gc rejects owner references without a kind or apiVersion at ingestion (the API
//!   server never stores one), so TestProcessEvent's UID-only references carry `v1`/`Pod`.
//! - Upstream's fake HTTP server answers a pod without a resourceVersion; [`MemoryCluster`]
//!   assigns one to every object, so deletes carry a resourceVersion precondition (§5.4).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::executor::block_on;
use kube_gc_engine::GraphChanges;
use kube_gc_engine::absent_owner_cache::AbsentOwnerCache;
use kube_gc_engine::cluster::{ClusterError, Resource};
use kube_gc_engine::collector::{Collector, DeleteItemResult, ItemError, Outcome};
use kube_gc_engine::graph::{GraphSnapshot, NodeKey, NodeView};
use kube_gc_engine::ingest::IngestOutput;
use kube_gc_engine::{
    Event, EventType, Graph, Ingester, ObjectMeta, ObjectReference, ObjectType, OwnerRef,
    OwnerReference, RateLimiterConfig, SequentialGraph, Uid, WorkQueue,
};
use kube_gc_testkit::MemoryCluster;
use kube_gc_testkit::memory_cluster::{Verb, resource};

// ---------------------------------------------------------------------------------------------
// Shared helpers (upstream's makeID, makeObj, makeAddEvent, verifyGraphInvariants, …)
// ---------------------------------------------------------------------------------------------

/// Upstream's `makeID(groupVersion, kind, namespace, name, uid)`.
fn make_id(
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
    uid: &str,
) -> ObjectReference {
    ObjectReference::new(api_version, kind, namespace, name, uid)
}

/// An identity's coordinates as an owner reference (no `controller`, no `blockOwnerDeletion`).
fn owner_reference(owner: &ObjectReference) -> OwnerReference {
    OwnerReference {
        api_version: owner.ty.api_version().to_owned(),
        kind: owner.ty.kind().to_owned(),
        name: owner.name.clone(),
        uid: owner.uid.to_string(),
        controller: None,
        block_owner_deletion: None,
    }
}

/// Upstream's `makeObj` / `makeMetadataObj`: namespace, name, UID and owner references only.
fn make_obj(identity: &ObjectReference, owners: &[&ObjectReference]) -> ObjectMeta {
    ObjectMeta {
        uid: identity.uid.to_string(),
        name: identity.name.clone(),
        namespace: identity.namespace.as_str().to_owned(),
        owner_references: owners.iter().map(|o| owner_reference(o)).collect(),
        ..ObjectMeta::default()
    }
}

/// Upstream's `makeAddEvent`: the event's type is the identity's (the monitor's GVK).
fn make_add_event(identity: &ObjectReference, owners: &[&ObjectReference]) -> Event {
    Event::new(EventType::Add, identity.ty, make_obj(identity, owners))
}

/// Upstream's `makeDeleteEvent`.
fn make_delete_event(identity: &ObjectReference, owners: &[&ObjectReference]) -> Event {
    Event::new(EventType::Delete, identity.ty, make_obj(identity, owners))
}

/// Upstream's `makeVirtualDeleteEvent` (what a worker sends when a live GET finds nothing).
fn make_virtual_delete_event(identity: &ObjectReference) -> Event {
    Event::virtual_delete(identity)
}

/// Upstream's `verifyGraphInvariants`: every dependent of a node lists the node's UID among its
/// owners, and every owner present in the graph lists the node among its dependents.
fn verify_graph_invariants(snapshot: &GraphSnapshot) -> Result<(), String> {
    for (uid, node) in &snapshot.nodes {
        for dependent in &node.dependents {
            let Some(d) = snapshot.nodes.get(dependent) else {
                return Err(format!(
                    "{uid:?} has dependent {dependent:?}, which is not in the graph"
                ));
            };
            if !d.owners.iter().any(|o| o.uid == *uid) {
                return Err(format!(
                    "{} has {} as a dependent, but it's not present in the latter node's owners list",
                    node.identity, d.identity
                ));
            }
        }
        for owner in &node.owners {
            if let Some(o) = snapshot.nodes.get(&owner.uid)
                && !o.dependents.contains(uid)
            {
                return Err(format!(
                    "{} has {} as an owner, but it's not present in the latter node's dependents list",
                    node.identity, o.identity
                ));
            }
        }
    }
    Ok(())
}

fn pods() -> Resource {
    resource("v1", "pods", "Pod", true)
}
fn nodes() -> Resource {
    resource("v1", "nodes", "Node", false)
}
fn deployments() -> Resource {
    resource("apps/v1", "deployments", "Deployment", true)
}
fn roles_v1() -> Resource {
    resource("rbac.authorization.k8s.io/v1", "roles", "Role", true)
}
fn roles_v1beta1() -> Resource {
    resource("rbac.authorization.k8s.io/v1beta1", "roles", "Role", true)
}

/// A collector over `cluster` with tracking queues (`add_rate_limited` == `add`), an empty
/// 4-shard graph, and the worker-generated events kept in a [`GraphChanges`].
fn collector(
    cluster: Arc<MemoryCluster>,
    absent_owner_cache_size: usize,
) -> (Arc<Graph>, Arc<GraphChanges>, Collector<MemoryCluster>) {
    let graph = Arc::new(Graph::new(4).expect("4 is a power of two"));
    let graph_changes = Arc::new(GraphChanges::new());
    let gc = Collector::new(
        graph.clone(),
        cluster,
        Arc::new(AbsentOwnerCache::new(absent_owner_cache_size)),
        Arc::new(WorkQueue::with_rate_limiter(
            "garbage_collector_attempt_to_delete",
            RateLimiterConfig::immediate(),
        )),
        Arc::new(WorkQueue::with_rate_limiter(
            "garbage_collector_attempt_to_orphan",
            RateLimiterConfig::immediate(),
        )),
        graph_changes.clone(),
    );
    (graph, graph_changes, gc)
}

/// Upstream's `podToGCNode` / TestAttemptToDeleteItem's item: the identity only, no owners (the
/// item's live owners are read from the server).
fn item(identity: &ObjectReference, is_virtual: bool) -> NodeView {
    NodeView {
        identity: identity.clone(),
        incarnation: 0,
        is_virtual,
        being_deleted: false,
        deleting_dependents: false,
        owners: Vec::new(),
        dependents_len: 0,
        resource_version: None,
        has_gc_finalizers: false,
    }
}

// ---------------------------------------------------------------------------------------------
// TestAttemptToDeleteItem
// ---------------------------------------------------------------------------------------------

/// TestAttemptToDeleteItem, plus the resourceVersion-precondition cases of PR #132632.
///
/// <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/garbagecollector_test.go>; GC-SPEC.md §9.A, §3.2, §5.4.
mod attempt_to_delete_item {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Upstream's `getPod`: a pod in ns1 with UID 456.
    fn get_pod(name: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            uid: "456".into(),
            name: name.into(),
            namespace: "ns1".into(),
            owner_references: owners,
            ..ObjectMeta::default()
        }
    }

    fn rc_owner(name: &str, uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "ReplicationController".into(),
            name: name.into(),
            uid: uid.into(),
            controller: None,
            block_owner_deletion: None,
        }
    }

    fn to_be_deleted_pod() -> ObjectReference {
        make_id("v1", "Pod", "ns1", "ToBeDeletedPod", "456")
    }

    /// The server of TestAttemptToDeleteItem: the pod exists, its owner rc `owner1` does not.
    fn setup() -> (Arc<MemoryCluster>, Arc<GraphChanges>, Collector<MemoryCluster>) {
        let cluster = Arc::new(MemoryCluster::with_test_resources());
        cluster
            .create(&pods(), get_pod("ToBeDeletedPod", vec![rc_owner("owner1", "123")]))
            .unwrap();
        let (_, graph_changes, gc) = collector(cluster.clone(), 500);
        (cluster, graph_changes, gc)
    }

    fn action_set(cluster: &MemoryCluster) -> BTreeSet<String> {
        cluster.take_actions().into_iter().collect()
    }

    #[test]
    fn test_attempt_to_delete_item() {
        let (cluster, _, gc) = setup();
        let item = item(&to_be_deleted_pod(), true);
        let got = block_on(gc.attempt_to_delete_item(&item));
        assert_eq!(got, Ok(DeleteItemResult::Deleted), "unexpected error");
        assert!(item.is_virtual, "attemptToDeleteItem changed virtual to false unexpectedly");
        let want: BTreeSet<String> = [
            "get /v1, Resource=replicationcontrollers ns=ns1 name=owner1",
            "delete /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
            "get /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
        ]
        .map(String::from)
        .into();
        assert_eq!(action_set(&cluster), want);
    }

    /// Makes the first DELETE find the object changed since its GET, by `change`.
    fn change_before_first_delete(
        cluster: &MemoryCluster,
        change: impl Fn(&MemoryCluster, &kube_gc_testkit::memory_cluster::Call) -> Option<ClusterError>
        + Send
        + Sync
        + 'static,
    ) {
        let deletes = AtomicUsize::new(0);
        cluster.on_call(move |cluster, call| {
            if call.verb() == Verb::Delete && deletes.fetch_add(1, Ordering::SeqCst) == 0 {
                return change(cluster, call);
            }
            None
        });
    }

    /// [reconstructed] #132632: the DELETE conflicts on the resourceVersion, but the object's
    /// owner references are unchanged since the GET: retried once without the resourceVersion,
    /// and it succeeds.
    #[test]
    fn conflict_with_owners_unchanged_is_retried_without_resource_version() {
        let (cluster, _, gc) = setup();
        change_before_first_delete(&cluster, |cluster, call| {
            cluster.update_object(&call.resource, &call.namespace, &call.name, |_| {});
            None
        });
        let got = block_on(gc.attempt_to_delete_item(&item(&to_be_deleted_pod(), false)));
        assert_eq!(got, Ok(DeleteItemResult::Deleted));
        let calls = cluster.take_calls();
        let actions: Vec<String> = calls.iter().map(|c| c.action()).collect();
        assert_eq!(
            actions,
            [
                "get /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
                "get /v1, Resource=replicationcontrollers ns=ns1 name=owner1",
                "delete /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
                "get /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
                "delete /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
            ]
        );
        let first = calls[2].delete_options().unwrap();
        let retry = calls[4].delete_options().unwrap();
        assert!(first.precondition_resource_version.is_some(), "first delete without RV");
        assert_eq!(retry.precondition_resource_version, None, "retry still carries the RV");
        assert_eq!(retry.precondition_uid.as_deref(), Some("456"), "retry lost the UID");
        assert!(cluster.object(&pods(), "ns1", "ToBeDeletedPod").is_none(), "pod not deleted");
    }

    /// [reconstructed] #132632 (#114603): the owner references changed between the GET and the
    /// DELETE (an adoption): the Conflict is returned and the item requeued; the pod is kept.
    #[test]
    fn conflict_with_owners_changed_returns_conflict() {
        let (cluster, _, gc) = setup();
        change_before_first_delete(&cluster, |cluster, call| {
            cluster.update_object(&call.resource, &call.namespace, &call.name, |meta| {
                meta.owner_references.push(rc_owner("adopter", "789"));
            });
            None
        });
        let err = block_on(gc.attempt_to_delete_item(&item(&to_be_deleted_pod(), false)))
            .expect_err("deleted despite an adoption");
        assert!(
            matches!(err, ItemError::Cluster { source: ClusterError::Conflict(_), .. }),
            "got {err:?}, want a Conflict"
        );
        assert_eq!(err.outcome(), Outcome::Requeue);
        assert_eq!(
            cluster.take_actions(),
            [
                "get /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
                "get /v1, Resource=replicationcontrollers ns=ns1 name=owner1",
                "delete /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
                "get /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
            ]
        );
        assert!(cluster.object(&pods(), "ns1", "ToBeDeletedPod").is_some(), "adopted pod deleted");
    }

    /// [reconstructed] #132632's follow-up: the DELETE conflicts and the object is gone by the
    /// re-GET: NotFound, which becomes a virtual delete event (forget).
    #[test]
    fn conflict_then_object_gone_generates_virtual_delete_event() {
        let (cluster, graph_changes, gc) = setup();
        change_before_first_delete(&cluster, |cluster, call| {
            cluster.delete_object(&call.resource, &call.namespace, &call.name);
            Some(ClusterError::Conflict("the object has been modified".into()))
        });
        let pod = to_be_deleted_pod();
        let err = block_on(gc.attempt_to_delete_item(&item(&pod, false))).unwrap_err();
        assert_eq!(err, ItemError::EnqueuedVirtualDeleteEvent);
        assert_eq!(err.outcome(), Outcome::Forget);
        assert_eq!(graph_changes.pending(), [make_virtual_delete_event(&pod)]);
        assert_eq!(
            cluster.take_actions(),
            [
                "get /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
                "get /v1, Resource=replicationcontrollers ns=ns1 name=owner1",
                "delete /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
                "get /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
            ]
        );
    }

    /// TestAbsentOwnerCache (below) uses the same pods.
    pub(super) fn pod(name: &str, owner: OwnerReference) -> ObjectMeta {
        get_pod(name, vec![owner])
    }
    pub(super) fn rc(name: &str, uid: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference { controller, ..rc_owner(name, uid) }
    }
}

// ---------------------------------------------------------------------------------------------
// TestProcessEvent
// ---------------------------------------------------------------------------------------------

/// TestProcessEvent: the graph invariants hold after every event, through both the parallel
/// ingester and the sequential reference (which must also agree with each other).
///
/// <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/garbagecollector_test.go>; GC-SPEC.md §9.A, §2.2.
mod process_event {
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
}

// ---------------------------------------------------------------------------------------------
// TestDependentsRace
// ---------------------------------------------------------------------------------------------

/// TestDependentsRace: one thread adds and removes dependents of an owner while another runs
/// the attemptToOrphan worker on that owner. Upstream relies on the race detector; here the
/// test must finish (no deadlock, no panic) and leave the graph consistent.
///
/// <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/garbagecollector_test.go>; GC-SPEC.md §9.A, §4.
mod dependents_race {
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
                    let dependent =
                        make_id("v1", "Pod", "ns1", &format!("pod{i}"), &format!("dep{i}"));
                    let with_owner = make_obj(&dependent, &[&owner]);
                    let without = make_obj(&dependent, &[]);
                    ingester.ingest(&[Event::new(
                        EventType::Add,
                        dependent.ty,
                        with_owner.clone(),
                    )]);
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
}

// ---------------------------------------------------------------------------------------------
// TestAbsentOwnerCache
// ---------------------------------------------------------------------------------------------

/// TestAbsentOwnerCache, the collector-level version: with a cache of 2, four
/// attemptToDeleteItem calls resolve rc1 once, promote it on the hit, and evict rc2.
///
/// <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/garbagecollector_test.go>; GC-SPEC.md §9.A, §1.4, §3.3.
mod absent_owner_cache {
    use super::attempt_to_delete_item::{pod, rc};
    use super::*;

    #[test]
    fn test_absent_owner_cache() {
        let cluster = Arc::new(MemoryCluster::with_test_resources());
        let objects = [
            pod("rc1Pod1", rc("rc1", "1", Some(true))),
            pod("rc1Pod2", rc("rc1", "1", Some(false))),
            pod("rc2Pod1", rc("rc2", "2", None)),
            pod("rc3Pod1", rc("rc3", "3", None)),
        ];
        for p in &objects {
            cluster.create(&pods(), p.clone()).unwrap();
        }
        // No replication controller exists: every GET of one is a 404.
        let (_, _, gc) = collector(cluster.clone(), 2);
        let node = |name: &str| item(&make_id("v1", "Pod", "ns1", name, "456"), false);
        for name in ["rc1Pod1", "rc2Pod1", "rc1Pod2", "rc3Pod1"] {
            // rc1Pod2: rc1 is cached, no request; the hit promotes rc1. rc3Pod1: evicts rc2.
            block_on(gc.attempt_to_delete_item(&node(name))).unwrap();
        }
        let rc_id =
            |name: &str, uid: &str| make_id("v1", "ReplicationController", "ns1", name, uid);
        let cached: BTreeSet<String> =
            gc.absent_owners().contents().iter().map(ToString::to_string).collect();
        let want: BTreeSet<String> =
            [rc_id("rc1", "1"), rc_id("rc3", "3")].iter().map(ToString::to_string).collect();
        assert_eq!(cached, want, "expected rc1 and rc3 in the cache, and not rc2");
        let rc1_gets = cluster
            .take_actions()
            .iter()
            .filter(|a| *a == "get /v1, Resource=replicationcontrollers ns=ns1 name=rc1")
            .count();
        assert_eq!(rc1_gets, 1, "expected only 1 GET rc1 request, got {rc1_gets}");
    }
}

// ---------------------------------------------------------------------------------------------
// TestOrphanDependentsFailure
// ---------------------------------------------------------------------------------------------

/// TestOrphanDependentsFailure: a dependent's PATCH conflicts, orphanDependents fails.
///
/// <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/garbagecollector_test.go>; GC-SPEC.md §9.A, §4.
mod orphan_dependents_failure {
    use super::*;

    /// PATCH of the dependent answers 409: orphanDependents fails with the server's conflict.
    #[test]
    fn test_orphan_dependents_failure() {
        let cluster = Arc::new(MemoryCluster::with_test_resources());
        cluster.fail_next(Verb::Patch, "pods", "pod", ClusterError::Conflict(String::new()));
        let (_, _, gc) = collector(cluster, 500);
        let dependents = [make_id("v1", "Pod", "ns1", "pod", "")];
        let owner = make_id("", "", "", "", "");
        let expected = "the server reported a conflict";
        match block_on(gc.orphan_dependents(&owner, &dependents)) {
            Err(err) => assert!(
                err.to_string().contains(expected),
                "expected error contains text {expected:?}, got {:?}",
                err.to_string()
            ),
            Ok(()) => panic!("expected error contains text {expected:?}, got nil"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// TestConflictingData
// ---------------------------------------------------------------------------------------------

/// TestConflictingData: sixteen step scripts of conflicting owner references (cross-namespace,
/// cluster-scoped vs namespaced, wrong apiVersion/kind), each checking after every step the
/// exact graph, queues, API calls, absent-owner cache and recorded events.
///
/// <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/garbagecollector_test.go>; GC-SPEC.md §9.A (the scripts), §2.2-2.6 and §3.
mod conflicting_data {
    use super::*;

    /// The identities of upstream's test.
    struct Ids {
        pod1ns1: ObjectReference,
        pod2ns1: ObjectReference,
        pod2ns2: ObjectReference,
        node1: ObjectReference,
        role1v1beta1: ObjectReference,
        role1v1: ObjectReference,
        deployment1apps: ObjectReference,
        /// Not served, still referenced.
        deployment1extensions: ObjectReference,
        /// A reference to node1 from a namespaced resource makes a virtual node in its namespace.
        node1_with_namespace: ObjectReference,
        /// A reference to pod1 from a cluster-scoped resource makes a virtual node without one.
        pod1nonamespace: ObjectReference,
        bad_secret_reference_with_deployment_uid: ObjectReference,
        bad_child_pod: ObjectReference,
        good_child_pod: ObjectReference,
    }

    impl Ids {
        fn new() -> Ids {
            Ids {
                pod1ns1: make_id("v1", "Pod", "ns1", "podname1", "poduid1"),
                pod2ns1: make_id("v1", "Pod", "ns1", "podname2", "poduid2"),
                pod2ns2: make_id("v1", "Pod", "ns2", "podname2", "poduid2"),
                node1: make_id("v1", "Node", "", "nodename", "nodeuid1"),
                role1v1beta1: make_id(
                    "rbac.authorization.k8s.io/v1beta1",
                    "Role",
                    "ns1",
                    "role1",
                    "roleuid1",
                ),
                role1v1: make_id(
                    "rbac.authorization.k8s.io/v1",
                    "Role",
                    "ns1",
                    "role1",
                    "roleuid1",
                ),
                deployment1apps: make_id(
                    "apps/v1",
                    "Deployment",
                    "ns1",
                    "deployment1",
                    "deploymentuid1",
                ),
                deployment1extensions: make_id(
                    "extensions/v1beta1",
                    "Deployment",
                    "ns1",
                    "deployment1",
                    "deploymentuid1",
                ),
                node1_with_namespace: make_id("v1", "Node", "ns1", "nodename", "nodeuid1"),
                pod1nonamespace: make_id("v1", "Pod", "", "podname1", "poduid1"),
                bad_secret_reference_with_deployment_uid: make_id(
                    "v1",
                    "Secret",
                    "ns1",
                    "secretname",
                    "deploymentuid1",
                ),
                bad_child_pod: make_id("v1", "Pod", "ns1", "badpod", "badpoduid"),
                good_child_pod: make_id("v1", "Pod", "ns1", "goodpod", "goodpoduid"),
            }
        }
    }

    /// A graph node as upstream's assertState compares it: identity, virtual, owners.
    #[derive(Clone, PartialEq, Eq, Debug)]
    struct GraphNode {
        identity: ObjectReference,
        is_virtual: bool,
        owners: Vec<OwnerRef>,
    }

    /// Upstream's `makeNode(identity)`.
    fn make_node(identity: &ObjectReference) -> GraphNode {
        GraphNode { identity: identity.clone(), is_virtual: false, owners: Vec::new() }
    }

    impl GraphNode {
        /// Upstream's `virtual` tweak.
        fn marked_virtual(mut self) -> GraphNode {
            self.is_virtual = true;
            self
        }

        /// Upstream's `withOwners` tweak: coordinates only.
        fn with_owners(mut self, owners: &[&ObjectReference]) -> GraphNode {
            self.owners = owners
                .iter()
                .map(|o| OwnerRef {
                    ty: o.ty,
                    name: o.name.clone(),
                    uid: o.uid,
                    controller: None,
                    block_owner_deletion: None,
                })
                .collect();
            self
        }
    }

    /// A pending queue item, as upstream's assertState compares it (identity and virtual).
    #[derive(Clone, PartialEq, Eq, Debug)]
    enum Queued {
        /// An item for the node now in the graph under that UID, as the node is now.
        Node { identity: ObjectReference, is_virtual: bool },
        /// An item for a node re-identified (or removed) since it was queued.
        ///
        /// Upstream's queue holds the pointer to the virtual node that it cloned into a new one
        /// when it re-identified it, and asserts that pointer's old identity and `virtual`;
        /// kube-gc's item holds the UID and an incarnation older than the node's, and the
        /// worker drops it just as upstream's does ("item no longer virtual in the graph").
        Old { uid: Uid },
    }

    /// `makeNode(identity)` in a pending queue.
    fn queued(identity: &ObjectReference) -> Queued {
        Queued::Node { identity: identity.clone(), is_virtual: false }
    }

    /// `makeNode(identity, virtual)` in a pending queue.
    fn queued_virtual(identity: &ObjectReference) -> Queued {
        Queued::Node { identity: identity.clone(), is_virtual: true }
    }

    /// `makeNode(identity, virtual)` in a pending queue, where upstream's pointer is to the
    /// virtual node `identity` that has since been cloned (see [`Queued::Old`]).
    fn queued_old(identity: &ObjectReference) -> Queued {
        Queued::Old { uid: identity.uid }
    }

    /// Upstream's `state`: what `assert_state` checks. Empty fields mean empty.
    #[derive(Default)]
    struct State {
        events: Vec<&'static str>,
        client_actions: Vec<&'static str>,
        graph_nodes: Vec<GraphNode>,
        pending_graph_changes: Vec<Event>,
        pending_attempt_to_delete: Vec<Queued>,
        pending_attempt_to_orphan: Vec<Queued>,
        absent_owner_cache: Vec<ObjectReference>,
    }

    /// Upstream's test scaffolding: the graph builder (the parallel [`Ingester`], one event per
    /// `ingest` call, and the [`SequentialGraph`] in lockstep), the collector, the fake client
    /// and the tracking queues, driven step by step.
    struct Harness {
        name: &'static str,
        /// The step about to run (upstream's numbering: every step counts, asserts included).
        step: usize,
        graph: Arc<Graph>,
        ingester: Ingester,
        sequential: SequentialGraph,
        cluster: Arc<MemoryCluster>,
        graph_changes: Arc<GraphChanges>,
        gc: Collector<MemoryCluster>,
    }

    impl Harness {
        fn new(name: &'static str) -> Harness {
            let cluster = Arc::new(MemoryCluster::with_test_resources());
            let (graph, graph_changes, gc) = collector(cluster.clone(), 100);
            Harness {
                name,
                step: 0,
                ingester: Ingester::new(graph.clone(), 2),
                graph,
                sequential: SequentialGraph::new(),
                cluster,
                graph_changes,
                gc,
            }
        }

        fn at(&self) -> String {
            format!("{}: step {}", self.name, self.step)
        }

        /// Upstream checks its graph invariants after every step; so do we, plus the edge
        /// copies kube-gc keeps on the owner side, plus the sequential reference's agreement.
        fn end_step(&mut self) {
            let at = self.at();
            if let Err(e) = self.graph.check_edge_copies() {
                panic!("{at}: edge copies: {e}");
            }
            let snapshot = self.graph.snapshot();
            if let Err(e) = verify_graph_invariants(&snapshot) {
                panic!("{at}: graph invariants: {e}");
            }
            assert_eq!(snapshot, self.sequential.snapshot(), "{at}: ingester != sequential");
            self.step += 1;
        }

        /// Applies one event as one processGraphChanges iteration, to both graphs, and hands
        /// the ingester's output to the collector.
        fn ingest(&mut self, event: &Event) {
            let out = self.ingester.ingest(std::slice::from_ref(event));
            assert!(out.errors.is_empty(), "{}: {:?}", self.at(), out.errors);
            self.sequential.apply(event, &mut IngestOutput::default());
            self.gc.apply_ingest_output(out);
        }

        /// Upstream's `createObjectInClient`.
        fn create_object_in_client(&mut self, resource: Resource, object: ObjectMeta) {
            assert!(
                self.cluster.calls().is_empty(),
                "{}: cannot create with pending client actions, assert them first",
                self.at()
            );
            if let Err(e) = self.cluster.create(&resource, object) {
                panic!("{}: {e}", self.at());
            }
            self.end_step();
        }

        /// Upstream's `deleteObjectFromClient`.
        fn delete_object_from_client(&mut self, resource: Resource, namespace: &str, name: &str) {
            assert!(self.cluster.calls().is_empty(), "{}: pending client actions", self.at());
            assert!(
                self.cluster.delete_object(&resource, namespace, name).is_some(),
                "{}: no {name} to delete",
                self.at()
            );
            self.end_step();
        }

        /// Upstream's `processEvent`: one informer event, processed at once.
        fn process_event(&mut self, event: Event) {
            assert!(
                self.graph_changes.is_empty(),
                "{}: events present in graphChanges, must process pending graphChanges before calling processEvent",
                self.at()
            );
            self.ingest(&event);
            self.end_step();
        }

        /// Upstream's `insertEvent`: put `event` at the front of graphChanges.
        fn insert_event(&mut self, event: Event) {
            self.graph_changes.push_front(event);
            self.end_step();
        }

        /// Upstream's `processGraphChanges(count)`.
        fn process_pending_graph_changes(&mut self, count: usize) {
            for i in 0..count {
                let Some(event) = self.graph_changes.drain(1).pop() else {
                    panic!("{}: expected at least {count} pending changes, got {i}", self.at());
                };
                self.ingest(&event);
            }
            self.end_step();
        }

        /// Upstream's `processAttemptToDelete(count)`: `count` worker iterations.
        fn process_attempt_to_delete(&mut self, count: usize) {
            for i in 0..count {
                // Only ever called with an item pending, so the worker never blocks.
                assert!(
                    !self.gc.attempt_to_delete_queue().is_empty(),
                    "{}: expected at least {count} pending items, got {i}",
                    self.at()
                );
                assert!(block_on(self.gc.process_attempt_to_delete_worker()));
            }
            self.end_step();
        }

        fn resolve(&self, pending: Vec<NodeKey>) -> Vec<Queued> {
            pending
                .into_iter()
                .map(|key| match self.graph.node(key.uid) {
                    Some(n) if n.incarnation == key.incarnation => {
                        Queued::Node { identity: n.identity, is_virtual: n.is_virtual }
                    }
                    _ => Queued::Old { uid: key.uid },
                })
                .collect()
        }

        /// Upstream's `assertState`: checks everything, and clears the recorded events and
        /// client actions.
        fn assert_state(&mut self, s: State) {
            let at = self.at();

            let cached: BTreeSet<String> =
                self.gc.absent_owners().contents().iter().map(ToString::to_string).collect();
            let want: BTreeSet<String> =
                s.absent_owner_cache.iter().map(ToString::to_string).collect();
            assert_eq!(cached, want, "{at}: absentOwnerCache");

            let events = self.cluster.take_event_strings();
            assert_eq!(events, s.events, "{at}: did not get expected events");

            let actions = self.cluster.take_actions();
            assert_eq!(actions, s.client_actions, "{at}: did not get expected client actions");

            let graph: BTreeMap<Uid, GraphNode> = self
                .graph
                .snapshot()
                .nodes
                .into_iter()
                .map(|(uid, n)| {
                    let node = GraphNode {
                        identity: n.identity,
                        is_virtual: n.is_virtual,
                        owners: n.owners,
                    };
                    (uid, node)
                })
                .collect();
            let want: BTreeMap<Uid, GraphNode> =
                s.graph_nodes.into_iter().map(|n| (n.identity.uid, n)).collect();
            assert_eq!(graph, want, "{at}: graph nodes");

            assert_eq!(self.graph_changes.pending(), s.pending_graph_changes, "{at}: graphChanges");

            let pending = self.resolve(self.gc.attempt_to_delete_queue().pending());
            assert_eq!(pending, s.pending_attempt_to_delete, "{at}: attemptToDelete");

            let pending = self.resolve(self.gc.attempt_to_orphan_queue().pending());
            assert_eq!(pending, s.pending_attempt_to_orphan, "{at}: attemptToOrphan");

            self.end_step();
        }
    }

    const WARNING_POD1_REFERS_TO_POD2_IN_NS1: &str = r#"Warning OwnerRefInvalidNamespace ownerRef [v1/Pod, namespace: ns1, name: podname2, uid: poduid2] does not exist in namespace "ns1" involvedObject{kind=Pod,apiVersion=v1}"#;
    const WARNING_NODE1_REFERS_TO_POD1: &str = r#"Warning OwnerRefInvalidNamespace ownerRef [v1/Pod, namespace: , name: podname1, uid: poduid1] does not exist in namespace "" involvedObject{kind=Node,apiVersion=v1}"#;

    #[test]
    fn case_01_good_child_in_ns1_to_cluster_scoped_owner() {
        let Ids { pod1ns1, node1, node1_with_namespace, .. } = Ids::new();
        let mut h = Harness::new("good child in ns1 -> cluster-scoped owner");
        // setup
        h.create_object_in_client(nodes(), make_obj(&node1, &[]));
        h.create_object_in_client(pods(), make_obj(&pod1ns1, &[&node1]));
        // observe namespaced child with not-yet-observed cluster-scoped parent
        h.process_event(make_add_event(&pod1ns1, &[&node1]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&node1]),
                make_node(&node1_with_namespace).marked_virtual(), // matching child namespace
            ],
            pending_attempt_to_delete: vec![queued_virtual(&node1_with_namespace)],
            ..State::default()
        });
        // handle queued delete of virtual node
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec!["get /v1, Resource=nodes name=nodename"],
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&node1]),
                make_node(&node1_with_namespace).marked_virtual(),
            ],
            // virtual node1 still not observed, got requeued
            pending_attempt_to_delete: vec![queued_virtual(&node1_with_namespace)],
            ..State::default()
        });
        // observe cluster-scoped parent
        h.process_event(make_add_event(&node1, &[]));
        h.assert_state(State {
            // node1 switched to observed, fixed namespace coordinate
            graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&node1]), make_node(&node1)],
            // upstream: the old virtual node1WithNamespace pointer; here its stale incarnation
            pending_attempt_to_delete: vec![queued_old(&node1_with_namespace)],
            ..State::default()
        });
        // handle queued delete of virtual node
        // final state: child and parent present in graph, no queued actions
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&node1]), make_node(&node1)],
            ..State::default()
        });
    }

    /// Child in namespace A with an owner reference to a namespaced type in namespace B: deleted
    /// at once, with an event in namespace A on the bad child.
    #[test]
    fn case_02_bad_child_in_ns1_to_owner_in_ns2_child_first() {
        let Ids { pod1ns1, pod2ns1, pod2ns2, .. } = Ids::new();
        let mut h = Harness::new("bad child in ns1 -> owner in ns2 (child first)");
        // 0,1: setup
        h.create_object_in_client(pods(), make_obj(&pod1ns1, &[&pod2ns1]));
        h.create_object_in_client(pods(), make_obj(&pod2ns2, &[]));
        // 2,3: observe namespaced child with not-yet-observed namespace-scoped parent
        h.process_event(make_add_event(&pod1ns1, &[&pod2ns2]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&pod2ns2]),
                make_node(&pod2ns1).marked_virtual(), // virtual pod2 (matching child namespace)
            ],
            pending_attempt_to_delete: vec![queued_virtual(&pod2ns1)],
            ..State::default()
        });
        // 4,5: observe parent
        h.process_event(make_add_event(&pod2ns2, &[]));
        h.assert_state(State {
            // pod2 is no longer virtual, namespace coordinate is corrected
            graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&pod2ns2]), make_node(&pod2ns2)],
            // virtual pod2 still queued (stale), bad child pod1 queued because it disagreed
            // with the observed parent
            pending_attempt_to_delete: vec![queued_old(&pod2ns1), queued(&pod1ns1)],
            events: vec![WARNING_POD1_REFERS_TO_POD2_IN_NS1],
            ..State::default()
        });
        // 6,7: handle queued delete of virtual parent
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&pod2ns2]), make_node(&pod2ns2)],
            pending_attempt_to_delete: vec![queued(&pod1ns1)],
            ..State::default()
        });
        // 8,9: handle queued delete of bad child
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec![
                "get /v1, Resource=pods ns=ns1 name=podname1", // lookup of pod1 pre-delete
                "get /v1, Resource=pods ns=ns1 name=podname2", // bad parent reference is absent
                "delete /v1, Resource=pods ns=ns1 name=podname1", // pod1 delete
            ],
            graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&pod2ns2]), make_node(&pod2ns2)],
            absent_owner_cache: vec![pod2ns1.clone()], // cached absence of bad parent
            ..State::default()
        });
        // 10,11: observe delete issued in step 8
        // final state: parent present in graph, no queued actions
        h.process_event(make_delete_event(&pod1ns1, &[]));
        h.assert_state(State {
            graph_nodes: vec![make_node(&pod2ns2)], // only good parent remains
            absent_owner_cache: vec![pod2ns1.clone()],
            ..State::default()
        });
    }

    #[test]
    fn case_03_bad_child_in_ns1_to_owner_in_ns2_owner_first() {
        let Ids { pod1ns1, pod2ns1, pod2ns2, .. } = Ids::new();
        let mut h = Harness::new("bad child in ns1 -> owner in ns2 (owner first)");
        // 0,1: setup
        h.create_object_in_client(pods(), make_obj(&pod1ns1, &[&pod2ns1]));
        h.create_object_in_client(pods(), make_obj(&pod2ns2, &[]));
        // 2,3: observe parent
        h.process_event(make_add_event(&pod2ns2, &[]));
        h.assert_state(State { graph_nodes: vec![make_node(&pod2ns2)], ..State::default() });
        // 4,5: observe namespaced child with invalid cross-namespace reference to parent
        h.process_event(make_add_event(&pod1ns1, &[&pod2ns1]));
        h.assert_state(State {
            graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&pod2ns1]), make_node(&pod2ns2)],
            pending_attempt_to_delete: vec![queued(&pod1ns1)], // bad child queued
            events: vec![WARNING_POD1_REFERS_TO_POD2_IN_NS1],
            ..State::default()
        });
        // 6,7: handle queued delete of bad child
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec![
                "get /v1, Resource=pods ns=ns1 name=podname1", // lookup of pod1 pre-delete
                "get /v1, Resource=pods ns=ns1 name=podname2", // bad parent reference is absent
                "delete /v1, Resource=pods ns=ns1 name=podname1", // pod1 delete
            ],
            graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&pod2ns1]), make_node(&pod2ns2)],
            absent_owner_cache: vec![pod2ns1.clone()], // cached absence of bad parent
            ..State::default()
        });
        // 8,9: observe delete issued in step 6
        // final state: parent present in graph, no queued actions
        h.process_event(make_delete_event(&pod1ns1, &[]));
        h.assert_state(State {
            graph_nodes: vec![make_node(&pod2ns2)], // only good parent remains
            absent_owner_cache: vec![pod2ns1.clone()],
            ..State::default()
        });
    }

    /// Cluster-scoped child with an owner reference to a namespaced type: not deleted, and an
    /// event is recorded on the bad child.
    #[test]
    fn case_04_bad_cluster_scoped_child_to_owner_in_ns1_child_first() {
        let Ids { pod1ns1, node1, pod1nonamespace, .. } = Ids::new();
        let mut h = Harness::new("bad cluster-scoped child -> owner in ns1 (child first)");
        // setup
        h.create_object_in_client(nodes(), make_obj(&node1, &[&pod1ns1]));
        h.create_object_in_client(pods(), make_obj(&pod1ns1, &[]));
        // 2,3: observe cluster-scoped child with not-yet-observed namespaced parent
        h.process_event(make_add_event(&node1, &[&pod1ns1]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod1nonamespace).marked_virtual(), // virtual pod1 (with no namespace)
            ],
            pending_attempt_to_delete: vec![queued_virtual(&pod1nonamespace)],
            ..State::default()
        });
        // 4,5: handle queued delete of virtual pod1
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod1nonamespace).marked_virtual(),
            ],
            // namespace-scoped virtual object without a namespace coordinate not re-queued
            ..State::default()
        });
        // 6,7: observe namespace-scoped parent
        h.process_event(make_add_event(&pod1ns1, &[]));
        h.assert_state(State {
            // pod1 namespace coordinate corrected, made non-virtual
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod1ns1),
            ],
            events: vec![WARNING_NODE1_REFERS_TO_POD1],
            // bad cluster-scoped child added to attemptToDelete queue
            pending_attempt_to_delete: vec![queued(&node1)],
            ..State::default()
        });
        // 8,9: handle queued attempted delete of bad cluster-scoped child
        // final state: parent and child present in graph, no queued actions
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec!["get /v1, Resource=nodes name=nodename"], // lookup of node pre-delete
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod1ns1),
            ],
            ..State::default()
        });
    }

    #[test]
    fn case_05_bad_cluster_scoped_child_to_owner_in_ns1_owner_first() {
        let Ids { pod1ns1, node1, pod1nonamespace, .. } = Ids::new();
        let mut h = Harness::new("bad cluster-scoped child -> owner in ns1 (owner first)");
        // setup
        h.create_object_in_client(nodes(), make_obj(&node1, &[&pod1ns1]));
        h.create_object_in_client(pods(), make_obj(&pod1ns1, &[]));
        // 2,3: observe namespace-scoped parent
        h.process_event(make_add_event(&pod1ns1, &[]));
        h.assert_state(State { graph_nodes: vec![make_node(&pod1ns1)], ..State::default() });
        // 4,5: observe cluster-scoped child
        h.process_event(make_add_event(&node1, &[&pod1ns1]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod1ns1),
            ],
            events: vec![WARNING_NODE1_REFERS_TO_POD1],
            // bad cluster-scoped child added to attemptToDelete queue
            pending_attempt_to_delete: vec![queued(&node1)],
            ..State::default()
        });
        // 6,7: handle queued attempted delete of bad cluster-scoped child
        // final state: parent and child present in graph, no queued actions
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec!["get /v1, Resource=nodes name=nodename"], // lookup of node pre-delete
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod1ns1),
            ],
            ..State::default()
        });
    }

    /// Child pointing at a non-preferred, still-served apiVersion of its parent
    /// (rbac/v1beta1): not deleted prematurely, no repeated polling while waiting, deleted
    /// when the actual parent is deleted.
    #[test]
    fn case_06_good_child_to_existing_owner_with_non_preferred_accessible_api_version() {
        let Ids { pod1ns1, role1v1, role1v1beta1, .. } = Ids::new();
        let mut h =
            Harness::new("good child -> existing owner with non-preferred accessible API version");
        // setup
        h.create_object_in_client(roles_v1(), make_obj(&role1v1, &[]));
        h.create_object_in_client(roles_v1beta1(), make_obj(&role1v1beta1, &[]));
        h.create_object_in_client(pods(), make_obj(&pod1ns1, &[&role1v1beta1]));
        // 3,4: observe child
        h.process_event(make_add_event(&pod1ns1, &[&role1v1beta1]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&role1v1beta1]),
                make_node(&role1v1beta1).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![queued_virtual(&role1v1beta1)], // virtual parent
            ..State::default()
        });
        // 5,6: handle queued attempted delete of virtual parent
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec![
                "get rbac.authorization.k8s.io/v1beta1, Resource=roles ns=ns1 name=role1",
            ],
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&role1v1beta1]),
                make_node(&role1v1beta1).marked_virtual(),
            ],
            // not yet observed, still in the attemptToDelete queue
            pending_attempt_to_delete: vec![queued_virtual(&role1v1beta1)],
            ..State::default()
        });
        // 7,8: observe parent via v1
        h.process_event(make_add_event(&role1v1, &[]));
        h.assert_state(State {
            // parent version/virtual state gets corrected
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&role1v1beta1]),
                make_node(&role1v1),
            ],
            // virtual parent (stale) and mismatched child enqueued for delete attempt
            pending_attempt_to_delete: vec![queued_old(&role1v1beta1), queued(&pod1ns1)],
            ..State::default()
        });
        // 9,10: process attemptToDelete
        // virtual node dropped from attemptToDelete with no further action because the real
        // node has been observed now
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&role1v1beta1]),
                make_node(&role1v1),
            ],
            pending_attempt_to_delete: vec![queued(&pod1ns1)], // mismatched child
            ..State::default()
        });
        // 11,12: process attemptToDelete for mismatched parent
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec![
                "get /v1, Resource=pods ns=ns1 name=podname1", // lookup of child pre-delete
                "get rbac.authorization.k8s.io/v1beta1, Resource=roles ns=ns1 name=role1", // solid
            ],
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&role1v1beta1]),
                make_node(&role1v1),
            ],
            ..State::default()
        });
        // 13,14: teardown
        h.delete_object_from_client(roles_v1(), "ns1", "role1");
        h.delete_object_from_client(roles_v1beta1(), "ns1", "role1");
        // 15,16: observe delete via v1
        h.process_event(make_delete_event(&role1v1, &[]));
        h.assert_state(State {
            graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&role1v1beta1])], // only child
            absent_owner_cache: vec![role1v1.clone()], // cached absence of parent via v1
            pending_attempt_to_delete: vec![queued(&pod1ns1)],
            ..State::default()
        });
        // 17,18: process attemptToDelete for child
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec![
                "get /v1, Resource=pods ns=ns1 name=podname1", // lookup of child pre-delete
                "get rbac.authorization.k8s.io/v1beta1, Resource=roles ns=ns1 name=role1",
                "delete /v1, Resource=pods ns=ns1 name=podname1",
            ],
            // cached absence of v1beta1 role
            absent_owner_cache: vec![role1v1.clone(), role1v1beta1.clone()],
            graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&role1v1beta1])],
            ..State::default()
        });
        // 19,20: observe delete issued in step 17
        // final state: empty graph, no queued actions
        h.process_event(make_delete_event(&pod1ns1, &[]));
        h.assert_state(State {
            absent_owner_cache: vec![role1v1.clone(), role1v1beta1.clone()],
            ..State::default()
        });
    }

    /// Child pointing at a no-longer-served apiVersion of a still-existing parent
    /// (extensions/v1beta1 deployment): not deleted (indistinguishable from an unknown kind),
    /// and the virtual parent stops polling once the real parent is observed.
    #[test]
    fn case_07_child_to_existing_owner_with_inaccessible_api_version_child_first() {
        let Ids { pod1ns1, deployment1apps, deployment1extensions, .. } = Ids::new();
        let mut h =
            Harness::new("child -> existing owner with inaccessible API version (child first)");
        // setup
        h.create_object_in_client(deployments(), make_obj(&deployment1apps, &[]));
        h.create_object_in_client(pods(), make_obj(&pod1ns1, &[&deployment1extensions]));
        // 2,3: observe child
        h.process_event(make_add_event(&pod1ns1, &[&deployment1extensions]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                make_node(&deployment1extensions).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![queued_virtual(&deployment1extensions)],
            ..State::default()
        });
        // 4,5: handle queued attempted delete of virtual parent
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                make_node(&deployment1extensions).marked_virtual(),
            ],
            // requeued on restmapper error
            pending_attempt_to_delete: vec![queued_virtual(&deployment1extensions)],
            ..State::default()
        });
        // 6,7: observe parent via v1
        h.process_event(make_add_event(&deployment1apps, &[]));
        h.assert_state(State {
            // parent version/virtual state gets corrected
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                make_node(&deployment1apps),
            ],
            // virtual parent (stale) and mismatched child enqueued for delete attempt
            pending_attempt_to_delete: vec![queued_old(&deployment1extensions), queued(&pod1ns1)],
            ..State::default()
        });
        // 8,9: process attemptToDelete
        // virtual node dropped from attemptToDelete with no further action because the real
        // node has been observed now
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                make_node(&deployment1apps),
            ],
            pending_attempt_to_delete: vec![queued(&pod1ns1)], // mismatched child
            ..State::default()
        });
        // 10,11: process attemptToDelete for mismatched child
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec!["get /v1, Resource=pods ns=ns1 name=podname1"],
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                make_node(&deployment1apps),
            ],
            // mismatched child still enqueued - restmapper error
            pending_attempt_to_delete: vec![queued(&pod1ns1)],
            ..State::default()
        });
        // 12: teardown
        h.delete_object_from_client(deployments(), "ns1", "deployment1");
        // 13,14: observe delete via v1
        h.process_event(make_delete_event(&deployment1apps, &[]));
        h.assert_state(State {
            graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&deployment1extensions])],
            absent_owner_cache: vec![deployment1apps.clone()], // cached absence of parent via v1
            pending_attempt_to_delete: vec![queued(&pod1ns1)],
            ..State::default()
        });
        // 15,16 (upstream says 17,18): process attemptToDelete for child
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec!["get /v1, Resource=pods ns=ns1 name=podname1"],
            graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&deployment1extensions])],
            absent_owner_cache: vec![deployment1apps.clone()],
            // mismatched child still enqueued - restmapper error
            pending_attempt_to_delete: vec![queued(&pod1ns1)],
            ..State::default()
        });
    }

    #[test]
    fn case_08_child_to_existing_owner_with_inaccessible_api_version_owner_first() {
        let Ids { pod1ns1, deployment1apps, deployment1extensions, .. } = Ids::new();
        let mut h =
            Harness::new("child -> existing owner with inaccessible API version (owner first)");
        // setup
        h.create_object_in_client(deployments(), make_obj(&deployment1apps, &[]));
        h.create_object_in_client(pods(), make_obj(&pod1ns1, &[&deployment1extensions]));
        // 2,3: observe parent via v1
        h.process_event(make_add_event(&deployment1apps, &[]));
        h.assert_state(State {
            graph_nodes: vec![make_node(&deployment1apps)],
            ..State::default()
        });
        // 4,5: observe child
        h.process_event(make_add_event(&pod1ns1, &[&deployment1extensions]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                make_node(&deployment1apps),
            ],
            // mismatched child enqueued for delete attempt
            pending_attempt_to_delete: vec![queued(&pod1ns1)],
            ..State::default()
        });
        // 6,7: process attemptToDelete for mismatched child
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec!["get /v1, Resource=pods ns=ns1 name=podname1"],
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                make_node(&deployment1apps),
            ],
            // mismatched child still enqueued - restmapper error
            pending_attempt_to_delete: vec![queued(&pod1ns1)],
            ..State::default()
        });
        // 8: teardown
        h.delete_object_from_client(deployments(), "ns1", "deployment1");
        // 9,10: observe delete via v1
        h.process_event(make_delete_event(&deployment1apps, &[]));
        h.assert_state(State {
            graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&deployment1extensions])],
            absent_owner_cache: vec![deployment1apps.clone()], // cached absence of parent via v1
            pending_attempt_to_delete: vec![queued(&pod1ns1)],
            ..State::default()
        });
        // 11,12: process attemptToDelete for child
        // final state: child with unresolvable ownerRef remains, queued in attemptToDelete
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec!["get /v1, Resource=pods ns=ns1 name=podname1"],
            graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&deployment1extensions])],
            absent_owner_cache: vec![deployment1apps.clone()],
            pending_attempt_to_delete: vec![queued(&pod1ns1)], // restmapper error
            ..State::default()
        });
    }

    /// Child pointing at a no-longer-served apiVersion of a no-longer-existing parent: not
    /// deleted, polled again and again, and it does not block the deletion of the missing
    /// parent's legitimate children.
    #[test]
    fn case_09_child_to_non_existent_owner_with_inaccessible_api_version_inaccessible_parent_first()
    {
        let Ids { pod1ns1, pod2ns1, deployment1apps, deployment1extensions, .. } = Ids::new();
        let mut h = Harness::new(
            "child -> non-existent owner with inaccessible API version (inaccessible parent apiVersion first)",
        );
        // setup
        h.create_object_in_client(pods(), make_obj(&pod1ns1, &[&deployment1extensions]));
        h.create_object_in_client(pods(), make_obj(&pod2ns1, &[&deployment1apps]));
        // 2,3: observe child pointing at no-longer-served apiVersion
        h.process_event(make_add_event(&pod1ns1, &[&deployment1extensions]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                make_node(&deployment1extensions).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![queued_virtual(&deployment1extensions)],
            ..State::default()
        });
        // 4,5: observe child pointing at served apiVersion where owner does not exist
        h.process_event(make_add_event(&pod2ns1, &[&deployment1apps]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                make_node(&deployment1extensions).marked_virtual(),
                make_node(&pod2ns1).with_owners(&[&deployment1apps]),
            ],
            // mismatched child enqueued for delete attempt
            pending_attempt_to_delete: vec![
                queued_virtual(&deployment1extensions),
                queued(&pod2ns1),
            ],
            ..State::default()
        });
        // 6,7: handle attempt to delete virtual parent for inaccessible apiVersion
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                make_node(&deployment1extensions).marked_virtual(),
                make_node(&pod2ns1).with_owners(&[&deployment1apps]),
            ],
            // inaccessible parent requeued to end
            pending_attempt_to_delete: vec![
                queued(&pod2ns1),
                queued_virtual(&deployment1extensions),
            ],
            ..State::default()
        });
        // 8,9: handle attempt to delete mismatched child
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec![
                "get /v1, Resource=pods ns=ns1 name=podname2", // lookup of child pre-delete
                "get apps/v1, Resource=deployments ns=ns1 name=deployment1", // lookup of parent
                "delete /v1, Resource=pods ns=ns1 name=podname2", // delete child
            ],
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                make_node(&deployment1extensions).marked_virtual(),
                make_node(&pod2ns1).with_owners(&[&deployment1apps]),
            ],
            absent_owner_cache: vec![deployment1apps.clone()], // verifiably absent parent
            pending_attempt_to_delete: vec![queued_virtual(&deployment1extensions)],
            ..State::default()
        });
        // 10,11: observe delete issued in step 8
        h.process_event(make_delete_event(&pod2ns1, &[]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                make_node(&deployment1extensions).marked_virtual(),
            ],
            absent_owner_cache: vec![deployment1apps.clone()],
            pending_attempt_to_delete: vec![queued_virtual(&deployment1extensions)],
            ..State::default()
        });
        // 12,13: final state: inaccessible parent requeued in attemptToDelete
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                make_node(&deployment1extensions).marked_virtual(),
            ],
            absent_owner_cache: vec![deployment1apps.clone()],
            pending_attempt_to_delete: vec![queued_virtual(&deployment1extensions)],
            ..State::default()
        });
    }

    #[test]
    fn case_10_child_to_non_existent_owner_with_inaccessible_api_version_accessible_parent_first() {
        let Ids { pod1ns1, pod2ns1, deployment1apps, deployment1extensions, .. } = Ids::new();
        let mut h = Harness::new(
            "child -> non-existent owner with inaccessible API version (accessible parent apiVersion first)",
        );
        // setup
        h.create_object_in_client(pods(), make_obj(&pod1ns1, &[&deployment1extensions]));
        h.create_object_in_client(pods(), make_obj(&pod2ns1, &[&deployment1apps]));
        // 2,3: observe child pointing at served apiVersion where owner does not exist
        h.process_event(make_add_event(&pod2ns1, &[&deployment1apps]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                make_node(&deployment1apps).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![queued_virtual(&deployment1apps)],
            ..State::default()
        });
        // 4,5: observe child pointing at no-longer-served apiVersion
        h.process_event(make_add_event(&pod1ns1, &[&deployment1extensions]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                make_node(&deployment1apps).marked_virtual(),
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
            ],
            // mismatched child enqueued for delete attempt
            pending_attempt_to_delete: vec![queued_virtual(&deployment1apps), queued(&pod1ns1)],
            ..State::default()
        });
        // 6,7: handle attempt to delete virtual parent for accessible apiVersion
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            // lookup of parent, gets 404
            client_actions: vec!["get apps/v1, Resource=deployments ns=ns1 name=deployment1"],
            // virtual parent not found, queued virtual delete event
            pending_graph_changes: vec![make_virtual_delete_event(&deployment1apps)],
            graph_nodes: vec![
                make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                make_node(&deployment1apps).marked_virtual(),
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
            ],
            pending_attempt_to_delete: vec![queued(&pod1ns1)],
            ..State::default()
        });
        // 8,9: handle attempt to delete mismatched child
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec!["get /v1, Resource=pods ns=ns1 name=podname1"],
            pending_graph_changes: vec![make_virtual_delete_event(&deployment1apps)],
            graph_nodes: vec![
                make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                make_node(&deployment1apps).marked_virtual(),
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
            ],
            // restmapper on inaccessible parent, requeued
            pending_attempt_to_delete: vec![queued(&pod1ns1)],
            ..State::default()
        });
        // 10,11: handle queued virtual delete event
        h.process_pending_graph_changes(1);
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                // deployment node changed identity to alternative virtual identity
                make_node(&deployment1extensions).marked_virtual(),
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
            ],
            absent_owner_cache: vec![deployment1apps.clone()], // absent apps/v1 parent
            pending_attempt_to_delete: vec![
                queued(&pod1ns1),                       // child referencing inaccessible version
                queued(&pod2ns1),                       // children of absent apps/v1 parent
                queued_virtual(&deployment1extensions), // new virtual parent
            ],
            ..State::default()
        });
        // 12,13: handle attempt to delete child referencing inaccessible apiVersion
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec!["get /v1, Resource=pods ns=ns1 name=podname1"],
            graph_nodes: vec![
                make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                make_node(&deployment1extensions).marked_virtual(),
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
            ],
            absent_owner_cache: vec![deployment1apps.clone()],
            pending_attempt_to_delete: vec![
                queued(&pod2ns1),
                queued_virtual(&deployment1extensions),
                queued(&pod1ns1), // child referencing inaccessible apiVersion - requeued to end
            ],
            ..State::default()
        });
        // 14,15: handle attempt to delete child referencing accessible apiVersion
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec![
                "get /v1, Resource=pods ns=ns1 name=podname2", // lookup of child pre-delete
                "delete /v1, Resource=pods ns=ns1 name=podname2", // parent absent, delete
            ],
            graph_nodes: vec![
                make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                make_node(&deployment1extensions).marked_virtual(),
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
            ],
            absent_owner_cache: vec![deployment1apps.clone()],
            pending_attempt_to_delete: vec![
                queued_virtual(&deployment1extensions),
                queued(&pod1ns1),
            ],
            ..State::default()
        });
        // 16,17: handle attempt to delete virtual parent in inaccessible apiVersion
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                make_node(&deployment1extensions).marked_virtual(),
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
            ],
            absent_owner_cache: vec![deployment1apps.clone()],
            pending_attempt_to_delete: vec![
                queued(&pod1ns1),
                queued_virtual(&deployment1extensions), // requeued to end
            ],
            ..State::default()
        });
        // 18,19: observe delete of pod2 from step 14
        // final state: virtual parent for inaccessible apiVersion and child of that parent
        // remain in graph, queued for delete attempts with backoff
        h.process_event(make_delete_event(&pod2ns1, &[]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&deployment1extensions).marked_virtual(),
                make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
            ],
            absent_owner_cache: vec![deployment1apps.clone()],
            pending_attempt_to_delete: vec![
                queued(&pod1ns1),
                queued_virtual(&deployment1extensions),
            ],
            ..State::default()
        });
    }

    /// Child pointing at an incorrect apiVersion/kind of a still-existing parent (a core/v1
    /// Secret with the UID of an apps/v1 Deployment): deleted at once, without triggering the
    /// deletion of the parent's legitimate children.
    #[test]
    fn case_11_bad_child_good_child_bad_parent_delete_good_parent() {
        let Ids {
            deployment1apps,
            bad_secret_reference_with_deployment_uid: bad_secret,
            bad_child_pod,
            good_child_pod,
            ..
        } = Ids::new();
        let mut h = Harness::new(
            "bad child -> existing owner with incorrect API version (bad child, good child, bad parent delete, good parent)",
        );
        // setup
        h.create_object_in_client(deployments(), make_obj(&deployment1apps, &[]));
        h.create_object_in_client(pods(), make_obj(&bad_child_pod, &[&bad_secret]));
        h.create_object_in_client(pods(), make_obj(&good_child_pod, &[&deployment1apps]));
        // 3,4: observe bad child
        h.process_event(make_add_event(&bad_child_pod, &[&bad_secret]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                make_node(&bad_secret).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![queued_virtual(&bad_secret)], // virtual parent
            ..State::default()
        });
        // 5,6: observe good child
        h.process_event(make_add_event(&good_child_pod, &[&deployment1apps]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]), // good child added
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                make_node(&bad_secret).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![
                queued_virtual(&bad_secret), // virtual parent enqueued for delete attempt
                queued(&good_child_pod),     // good child enqueued for delete attempt
            ],
            ..State::default()
        });
        // 7,8: process pending delete of virtual parent
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            // lookup of bad parent reference
            client_actions: vec!["get /v1, Resource=secrets ns=ns1 name=secretname"],
            // bad virtual parent not found, queued virtual delete event
            pending_graph_changes: vec![make_virtual_delete_event(&bad_secret)],
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                make_node(&bad_secret).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![queued(&good_child_pod)],
            ..State::default()
        });
        // 9,10: process pending delete of good child, gets 200, remains
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec![
                "get /v1, Resource=pods ns=ns1 name=goodpod", // lookup of child pre-delete
                "get apps/v1, Resource=deployments ns=ns1 name=deployment1", // good parent: 200
            ],
            pending_graph_changes: vec![make_virtual_delete_event(&bad_secret)],
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                make_node(&bad_secret).marked_virtual(),
            ],
            ..State::default()
        });
        // 11,12: process virtual delete event of bad parent reference
        h.process_pending_graph_changes(1);
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                // parent node switched to alternate identity, still virtual
                make_node(&deployment1apps).marked_virtual(),
            ],
            absent_owner_cache: vec![bad_secret.clone()], // absence of bad parent coordinates
            pending_attempt_to_delete: vec![
                queued(&bad_child_pod),           // child of bad parent coordinates
                queued_virtual(&deployment1apps), // new alternate virtual parent identity
            ],
            ..State::default()
        });
        // 13,14: process pending delete of bad child
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec![
                "get /v1, Resource=pods ns=ns1 name=badpod", // lookup of child pre-delete
                "delete /v1, Resource=pods ns=ns1 name=badpod", // bad parent absence is cached
            ],
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                make_node(&deployment1apps).marked_virtual(),
            ],
            absent_owner_cache: vec![bad_secret.clone()],
            pending_attempt_to_delete: vec![queued_virtual(&deployment1apps)],
            ..State::default()
        });
        // 15,16: process pending delete of new virtual parent
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            // lookup of virtual parent, returns 200
            client_actions: vec!["get apps/v1, Resource=deployments ns=ns1 name=deployment1"],
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                make_node(&deployment1apps).marked_virtual(),
            ],
            absent_owner_cache: vec![bad_secret.clone()],
            // requeued, not yet observed
            pending_attempt_to_delete: vec![queued_virtual(&deployment1apps)],
            ..State::default()
        });
        // 17,18: observe good parent
        h.process_event(make_add_event(&deployment1apps, &[]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                make_node(&deployment1apps), // parent node made non-virtual
            ],
            absent_owner_cache: vec![bad_secret.clone()],
            // still queued, no longer virtual (same identity: marked observed in place, so the
            // queued item is the node's current incarnation)
            pending_attempt_to_delete: vec![queued(&deployment1apps)],
            ..State::default()
        });
        // 19,20: observe delete of bad child from step 13
        h.process_event(make_delete_event(&bad_child_pod, &[&bad_secret]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                // bad child node removed
                make_node(&deployment1apps),
            ],
            absent_owner_cache: vec![bad_secret.clone()],
            pending_attempt_to_delete: vec![queued(&deployment1apps)],
            ..State::default()
        });
        // 21,22: process pending delete of good parent
        // final state: good parent in graph with correct coordinates, good children remain, no
        // pending deletions
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec!["get apps/v1, Resource=deployments ns=ns1 name=deployment1"],
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&deployment1apps),
            ],
            absent_owner_cache: vec![bad_secret.clone()],
            ..State::default()
        });
    }

    #[test]
    fn case_12_bad_child_good_child_good_parent_bad_parent_delete() {
        let Ids {
            deployment1apps,
            bad_secret_reference_with_deployment_uid: bad_secret,
            bad_child_pod,
            good_child_pod,
            ..
        } = Ids::new();
        let mut h = Harness::new(
            "bad child -> existing owner with incorrect API version (bad child, good child, good parent, bad parent delete)",
        );
        // setup
        h.create_object_in_client(deployments(), make_obj(&deployment1apps, &[]));
        h.create_object_in_client(pods(), make_obj(&bad_child_pod, &[&bad_secret]));
        h.create_object_in_client(pods(), make_obj(&good_child_pod, &[&deployment1apps]));
        // 3,4: observe bad child
        h.process_event(make_add_event(&bad_child_pod, &[&bad_secret]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                make_node(&bad_secret).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![queued_virtual(&bad_secret)],
            ..State::default()
        });
        // 5,6: observe good child
        h.process_event(make_add_event(&good_child_pod, &[&deployment1apps]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                make_node(&bad_secret).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![queued_virtual(&bad_secret), queued(&good_child_pod)],
            ..State::default()
        });
        // 7,8: process pending delete of virtual parent
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec!["get /v1, Resource=secrets ns=ns1 name=secretname"],
            pending_graph_changes: vec![make_virtual_delete_event(&bad_secret)],
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                make_node(&bad_secret).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![queued(&good_child_pod)],
            ..State::default()
        });
        // 9,10: process pending delete of good child, gets 200, remains
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec![
                "get /v1, Resource=pods ns=ns1 name=goodpod",
                "get apps/v1, Resource=deployments ns=ns1 name=deployment1",
            ],
            pending_graph_changes: vec![make_virtual_delete_event(&bad_secret)],
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                make_node(&bad_secret).marked_virtual(),
            ],
            ..State::default()
        });
        // 11,12: good parent add event
        h.insert_event(make_add_event(&deployment1apps, &[]));
        h.assert_state(State {
            pending_graph_changes: vec![
                make_add_event(&deployment1apps, &[]), // good parent observation sneaked in
                make_virtual_delete_event(&bad_secret), // bad virtual parent not found
            ],
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                make_node(&bad_secret).marked_virtual(),
            ],
            ..State::default()
        });
        // 13,14: process good parent add
        h.process_pending_graph_changes(1);
        h.assert_state(State {
            pending_graph_changes: vec![make_virtual_delete_event(&bad_secret)], // still queued
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                make_node(&deployment1apps), // parent node gets fixed, no longer virtual
            ],
            // child of bad parent coordinates enqueued for delete attempt
            pending_attempt_to_delete: vec![queued(&bad_child_pod)],
            ..State::default()
        });
        // 15,16: process virtual delete event of bad parent reference
        h.process_pending_graph_changes(1);
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                make_node(&deployment1apps),
            ],
            absent_owner_cache: vec![bad_secret.clone()], // absence of bad parent coordinates
            pending_attempt_to_delete: vec![queued(&bad_child_pod)],
            ..State::default()
        });
        // 17,18: process pending delete of bad child
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec![
                "get /v1, Resource=pods ns=ns1 name=badpod", // lookup of child pre-delete
                "delete /v1, Resource=pods ns=ns1 name=badpod", // bad parent absence is cached
            ],
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                make_node(&deployment1apps),
            ],
            absent_owner_cache: vec![bad_secret.clone()],
            ..State::default()
        });
        // 19,20: observe delete of bad child from step 17
        // final state: good parent in graph with correct coordinates, good children remain, no
        // pending deletions
        h.process_event(make_delete_event(&bad_child_pod, &[&bad_secret]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&deployment1apps),
            ],
            absent_owner_cache: vec![bad_secret.clone()],
            ..State::default()
        });
    }

    #[test]
    fn case_13_good_child_bad_child_good_parent() {
        let Ids {
            deployment1apps,
            bad_secret_reference_with_deployment_uid: bad_secret,
            bad_child_pod,
            good_child_pod,
            ..
        } = Ids::new();
        let mut h = Harness::new(
            "bad child -> existing owner with incorrect API version (good child, bad child, good parent)",
        );
        // setup
        h.create_object_in_client(deployments(), make_obj(&deployment1apps, &[]));
        h.create_object_in_client(pods(), make_obj(&bad_child_pod, &[&bad_secret]));
        h.create_object_in_client(pods(), make_obj(&good_child_pod, &[&deployment1apps]));
        // 3,4: observe good child
        h.process_event(make_add_event(&good_child_pod, &[&deployment1apps]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]), // good child added
                make_node(&deployment1apps).marked_virtual(),                // virtual parent
            ],
            pending_attempt_to_delete: vec![queued_virtual(&deployment1apps)],
            ..State::default()
        });
        // 5,6: observe bad child
        h.process_event(make_add_event(&bad_child_pod, &[&bad_secret]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&deployment1apps).marked_virtual(),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]), // bad child added
            ],
            pending_attempt_to_delete: vec![
                queued_virtual(&deployment1apps), // virtual parent enqueued for delete attempt
                queued(&bad_child_pod),           // bad child enqueued for delete attempt
            ],
            ..State::default()
        });
        // 7,8: process pending delete of virtual parent
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            // lookup of good parent reference, returns 200
            client_actions: vec!["get apps/v1, Resource=deployments ns=ns1 name=deployment1"],
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&deployment1apps).marked_virtual(),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
            ],
            pending_attempt_to_delete: vec![
                queued(&bad_child_pod),
                queued_virtual(&deployment1apps), // requeued to end, still virtual
            ],
            ..State::default()
        });
        // 9,10: process pending delete of bad child
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec![
                "get /v1, Resource=pods ns=ns1 name=badpod", // lookup of child pre-delete
                "get /v1, Resource=secrets ns=ns1 name=secretname", // bad parent: 404
                "delete /v1, Resource=pods ns=ns1 name=badpod", // delete of bad child
            ],
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&deployment1apps).marked_virtual(),
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
            ],
            absent_owner_cache: vec![bad_secret.clone()], // remember absence of bad parent
            pending_attempt_to_delete: vec![queued_virtual(&deployment1apps)],
            ..State::default()
        });
        // 11,12: observe good parent
        h.process_event(make_add_event(&deployment1apps, &[]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&deployment1apps), // good parent no longer virtual
                make_node(&bad_child_pod).with_owners(&[&bad_secret]),
            ],
            absent_owner_cache: vec![bad_secret.clone()],
            // parent requeued to end, no longer virtual
            pending_attempt_to_delete: vec![queued(&deployment1apps)],
            ..State::default()
        });
        // 13,14: observe delete of bad child from step 9
        h.process_event(make_delete_event(&bad_child_pod, &[&bad_secret]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                // bad child node removed
                make_node(&deployment1apps),
            ],
            absent_owner_cache: vec![bad_secret.clone()],
            pending_attempt_to_delete: vec![queued(&deployment1apps)],
            ..State::default()
        });
        // 15,16: process pending delete of good parent
        // final state: good parent in graph with correct coordinates, good children remain, no
        // pending deletions
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec!["get apps/v1, Resource=deployments ns=ns1 name=deployment1"],
            graph_nodes: vec![
                make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                make_node(&deployment1apps),
            ],
            absent_owner_cache: vec![bad_secret.clone()],
            ..State::default()
        });
    }

    /// #98040: a cluster-scoped child's reference must not block the collection of the
    /// namespaced children of a missing parent.
    #[test]
    fn case_14_cluster_scoped_bad_child_namespaced_good_child_missing_parent() {
        let Ids { pod1ns1, pod2ns1, node1, pod1nonamespace, .. } = Ids::new();
        let mut h = Harness::new("cluster-scoped bad child, namespaced good child, missing parent");
        // setup
        h.create_object_in_client(pods(), make_obj(&pod2ns1, &[&pod1ns1])); // good child
        h.create_object_in_client(nodes(), make_obj(&node1, &[&pod1nonamespace])); // bad child
        // 2,3: observe bad child
        h.process_event(make_add_event(&node1, &[&pod1nonamespace]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod1nonamespace).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![queued_virtual(&pod1nonamespace)], // virtual parent
            ..State::default()
        });
        // 4,5: observe good child
        h.process_event(make_add_event(&pod2ns1, &[&pod1ns1]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                make_node(&pod1nonamespace).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![
                queued_virtual(&pod1nonamespace), // virtual parent queued for deletion
                queued(&pod2ns1),                 // mismatched child queued for deletion
            ],
            ..State::default()
        });
        // 6,7: process attemptToDelete of bad virtual parent coordinates
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                make_node(&pod1nonamespace).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![queued(&pod2ns1)], // mismatched child
            ..State::default()
        });
        // 8,9: process attemptToDelete of good child
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec![
                "get /v1, Resource=pods ns=ns1 name=podname2", // get good child, returns 200
                "get /v1, Resource=pods ns=ns1 name=podname1", // get missing parent, returns 404
                "delete /v1, Resource=pods ns=ns1 name=podname2", // delete good child
            ],
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                make_node(&pod1nonamespace).marked_virtual(),
            ],
            absent_owner_cache: vec![pod1ns1.clone()], // missing parent cached
            ..State::default()
        });
        // 10,11: observe deletion of good child
        // steady-state is bad cluster child and bad virtual parent coordinates, with no retries
        h.process_event(make_delete_event(&pod2ns1, &[&pod1ns1]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod1nonamespace).marked_virtual(),
            ],
            absent_owner_cache: vec![pod1ns1.clone()],
            ..State::default()
        });
    }

    #[test]
    fn case_15_cluster_scoped_bad_child_namespaced_good_child_late_observed_parent() {
        let Ids { pod1ns1, pod2ns1, node1, pod1nonamespace, .. } = Ids::new();
        let mut h =
            Harness::new("cluster-scoped bad child, namespaced good child, late observed parent");
        // setup
        h.create_object_in_client(pods(), make_obj(&pod1ns1, &[])); // good parent
        h.create_object_in_client(pods(), make_obj(&pod2ns1, &[&pod1ns1])); // good child
        h.create_object_in_client(nodes(), make_obj(&node1, &[&pod1nonamespace])); // bad child
        // 3,4: observe bad child
        h.process_event(make_add_event(&node1, &[&pod1nonamespace]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod1nonamespace).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![queued_virtual(&pod1nonamespace)],
            ..State::default()
        });
        // 5,6: observe good child
        h.process_event(make_add_event(&pod2ns1, &[&pod1ns1]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                make_node(&pod1nonamespace).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![queued_virtual(&pod1nonamespace), queued(&pod2ns1)],
            ..State::default()
        });
        // 7,8: process attemptToDelete of bad virtual parent coordinates
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                make_node(&pod1nonamespace).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![queued(&pod2ns1)],
            ..State::default()
        });
        // 9,10: process attemptToDelete of good child
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec![
                "get /v1, Resource=pods ns=ns1 name=podname2", // get good child, returns 200
                "get /v1, Resource=pods ns=ns1 name=podname1", // late-observed parent: 200
            ],
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                make_node(&pod1nonamespace).marked_virtual(),
            ],
            ..State::default()
        });
        // 11,12: late observe good parent
        h.process_event(make_add_event(&pod1ns1, &[]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                make_node(&pod1ns1),
            ],
            events: vec![WARNING_NODE1_REFERS_TO_POD1], // warn about bad node reference
            // queue bad cluster-scoped child for delete attempt
            pending_attempt_to_delete: vec![queued(&node1)],
            ..State::default()
        });
        // 13,14: process attemptToDelete of bad child
        // steady state is bad cluster-scoped child remaining with no retries, good parent and
        // good child in graph
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec!["get /v1, Resource=nodes name=nodename"], // bad child: 200
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                make_node(&pod1ns1),
            ],
            ..State::default()
        });
    }

    #[test]
    fn case_16_namespaced_good_child_cluster_scoped_bad_child_missing_parent() {
        let Ids { pod1ns1, pod2ns1, node1, pod1nonamespace, .. } = Ids::new();
        let mut h = Harness::new("namespaced good child, cluster-scoped bad child, missing parent");
        // setup
        h.create_object_in_client(pods(), make_obj(&pod2ns1, &[&pod1ns1])); // good child
        h.create_object_in_client(nodes(), make_obj(&node1, &[&pod1nonamespace])); // bad child
        // 2,3: observe good child
        h.process_event(make_add_event(&pod2ns1, &[&pod1ns1]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                make_node(&pod1ns1).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![queued_virtual(&pod1ns1)], // virtual parent
            ..State::default()
        });
        // 4,5: observe bad child
        h.process_event(make_add_event(&node1, &[&pod1nonamespace]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod1ns1).marked_virtual(),
            ],
            pending_attempt_to_delete: vec![
                queued_virtual(&pod1ns1), // virtual parent queued for deletion
                queued(&node1),           // mismatched child queued for deletion
            ],
            ..State::default()
        });
        // 6,7: process attemptToDelete of good virtual parent coordinates
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            // lookup of missing parent, returns 404
            client_actions: vec!["get /v1, Resource=pods ns=ns1 name=podname1"],
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                make_node(&pod1ns1).marked_virtual(),
            ],
            // virtual parent not found, queued virtual delete event
            pending_graph_changes: vec![make_virtual_delete_event(&pod1ns1)],
            pending_attempt_to_delete: vec![queued(&node1)], // mismatched child still queued
            ..State::default()
        });
        // 8,9: process attemptToDelete of bad cluster child
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec!["get /v1, Resource=nodes name=nodename"], // existing node
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                make_node(&pod1ns1).marked_virtual(),
            ],
            pending_graph_changes: vec![make_virtual_delete_event(&pod1ns1)],
            ..State::default()
        });
        // 10,11: process virtual delete event for good virtual parent coordinates
        h.process_pending_graph_changes(1);
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                // missing virtual parent replaced with alternate coordinates, still virtual
                make_node(&pod1nonamespace).marked_virtual(),
            ],
            absent_owner_cache: vec![pod1ns1.clone()], // cached absence of missing parent
            pending_attempt_to_delete: vec![
                queued(&pod2ns1),                 // good child of missing parent
                queued_virtual(&pod1nonamespace), // new virtual parent coordinates
            ],
            ..State::default()
        });
        // 12,13: process attemptToDelete of good child
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            client_actions: vec![
                "get /v1, Resource=pods ns=ns1 name=podname2", // lookup of good child
                "delete /v1, Resource=pods ns=ns1 name=podname2", // delete of good child
            ],
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                make_node(&pod1nonamespace).marked_virtual(),
            ],
            absent_owner_cache: vec![pod1ns1.clone()],
            pending_attempt_to_delete: vec![queued_virtual(&pod1nonamespace)],
            ..State::default()
        });
        // 14,15: observe deletion of good child
        h.process_event(make_delete_event(&pod2ns1, &[&pod1ns1]));
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod1nonamespace).marked_virtual(),
            ],
            absent_owner_cache: vec![pod1ns1.clone()],
            pending_attempt_to_delete: vec![queued_virtual(&pod1nonamespace)],
            ..State::default()
        });
        // 16,17: process attemptToDelete of bad virtual parent coordinates
        // steady-state is bad cluster child and bad virtual parent coordinates, with no retries
        h.process_attempt_to_delete(1);
        h.assert_state(State {
            graph_nodes: vec![
                make_node(&node1).with_owners(&[&pod1nonamespace]),
                make_node(&pod1nonamespace).marked_virtual(),
            ],
            absent_owner_cache: vec![pod1ns1.clone()],
            ..State::default()
        });
    }
}
