//! The collector's error paths and deletion modes, beyond upstream's unit tests: what each
//! failure does to an item (forget or requeue), foreground deletion, cycle breaking, orphaning,
//! the JSON merge patch fallback, finalizer removal retries, and panics.
//!
//! GC-SPEC.md §3 (attemptToDelete), §4 (attemptToOrphan), §5 (API operations). Each test drives
//! the real [`Collector`] over a [`MemoryCluster`], with the graph fed by the [`Ingester`] from
//! the same objects the cluster holds, as informers would.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::executor::block_on;
use kube_gc_engine::GraphChanges;
use kube_gc_engine::absent_owner_cache::AbsentOwnerCache;
use kube_gc_engine::cluster::{
    ClusterError, DeleteOptions, PatchType, PropagationPolicy, Resource,
};
use kube_gc_engine::collector::{
    CREATED_AFTER_MARGIN_SECS, Collector, CollectorOptions, DeleteItemResult, ItemError, Outcome,
};
use kube_gc_engine::graph::NodeKey;
use kube_gc_engine::{
    Event, EventType, Graph, Ingester, ObjectMeta, ObjectReference, OwnerReference,
    RateLimiterConfig, Uid, WorkQueue,
};
use kube_gc_testkit::MemoryCluster;
use kube_gc_testkit::memory_cluster::{Verb, resource};

mod support;
use support::pods;

fn nodes() -> Resource {
    resource("v1", "nodes", "Node", false)
}
fn configmaps() -> Resource {
    resource("v1", "configmaps", "ConfigMap", true)
}
fn deployments() -> Resource {
    resource("apps/v1", "deployments", "Deployment", true)
}
fn replication_controllers() -> Resource {
    resource("v1", "replicationcontrollers", "ReplicationController", true)
}
fn widgets() -> Resource {
    resource("example.com/v1", "widgets", "Widget", true)
}

/// A reference to the object `name` (UID `uid`) of `owner`'s resource.
fn owner_ref(owner: &Resource, name: &str, uid: &str, blocks: Option<bool>) -> OwnerReference {
    OwnerReference {
        api_version: owner.api_version(),
        kind: owner.kind.clone(),
        name: name.into(),
        uid: uid.into(),
        controller: None,
        block_owner_deletion: blocks,
    }
}

/// An object in ns1 (or cluster-scoped, for cluster-scoped resources).
fn object(r: &Resource, name: &str, uid: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
    ObjectMeta {
        uid: uid.into(),
        name: name.into(),
        namespace: if r.namespaced { "ns1".into() } else { String::new() },
        owner_references: owners,
        ..ObjectMeta::default()
    }
}

/// `object`, being deleted and held by `finalizers`.
fn deleting(mut meta: ObjectMeta, finalizers: &[&str]) -> ObjectMeta {
    meta.deletion_timestamp = true;
    meta.finalizers = finalizers.iter().map(|f| (*f).to_owned()).collect();
    meta
}

/// A cluster, a graph fed from it, and a collector with immediate requeues.
struct Env {
    cluster: Arc<MemoryCluster>,
    graph: Arc<Graph>,
    ingester: Ingester,
    graph_changes: Arc<GraphChanges>,
    gc: Collector<MemoryCluster>,
}

impl Env {
    fn new() -> Env {
        let cluster = Arc::new(MemoryCluster::with_test_resources());
        let graph = Arc::new(Graph::new(4).unwrap());
        let graph_changes = Arc::new(GraphChanges::new());
        let queue = |name: &str| {
            Arc::new(WorkQueue::with_rate_limiter(name, RateLimiterConfig::immediate()))
        };
        let gc = Collector::new(
            graph.clone(),
            cluster.clone(),
            Arc::new(AbsentOwnerCache::new(100)),
            queue("garbage_collector_attempt_to_delete"),
            queue("garbage_collector_attempt_to_orphan"),
            graph_changes.clone(),
        );
        Env { ingester: Ingester::new(graph.clone(), 2), cluster, graph, graph_changes, gc }
    }

    /// The environment with the collector deciding on observed items from the graph's copy.
    fn reading_items_from_graph(mut self) -> Env {
        let options = CollectorOptions { read_items_from_graph: true, ..self.gc.options() };
        self.gc = self.gc.with_options(options);
        self
    }

    /// Creates `meta` in the cluster (not recorded) and ingests its add event.
    fn create(&mut self, r: &Resource, meta: ObjectMeta) {
        self.cluster.create(r, meta.clone()).unwrap();
        self.observe(EventType::Add, r, meta);
    }

    /// Ingests an informer event for `meta`, and hands the output to the collector.
    fn observe(&mut self, event_type: EventType, r: &Resource, meta: ObjectMeta) {
        let ty = kube_gc_engine::ObjectType::new(&r.api_version(), &r.kind);
        let out = self.ingester.ingest(&[Event::new(event_type, ty, meta)]);
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        self.gc.apply_ingest_output(out);
    }

    /// Ingests the object's current state from the cluster as an update.
    fn observe_update(&mut self, r: &Resource, name: &str) {
        let meta = self.cluster.object(r, if r.namespaced { "ns1" } else { "" }, name).unwrap();
        self.observe(EventType::Update, r, meta);
    }

    fn key(&self, uid: &str) -> NodeKey {
        self.graph.key_of(Uid::parse(uid)).expect("node in the graph")
    }

    /// The attemptToDelete worker's decision for the node `uid`.
    fn work(&self, uid: &str) -> Outcome {
        block_on(self.gc.attempt_to_delete_worker(self.key(uid)))
    }

    fn pending_delete(&self) -> Vec<NodeKey> {
        self.gc.attempt_to_delete_queue().pending()
    }

    /// Empties the attemptToDelete queue without processing (items a test does not care about).
    fn clear_attempt_to_delete(&self) {
        let queue = self.gc.attempt_to_delete_queue();
        while !queue.is_empty() {
            let key = queue.get().unwrap();
            queue.forget(&key);
            queue.done(&key);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Outcomes
// ---------------------------------------------------------------------------------------------

#[test]
fn item_errors_forget_only_what_can_never_succeed() {
    let conflict = ClusterError::Conflict("x".into());
    let cases = [
        (ItemError::EnqueuedVirtualDeleteEvent, Outcome::Forget),
        (ItemError::NamespacedOwnerOfClusterScopedObject, Outcome::Forget),
        (ItemError::RestMapping("extensions/v1beta1/Deployment".into()), Outcome::Requeue),
        (ItemError::Cluster { context: "get".into(), source: conflict }, Outcome::Requeue),
        (ItemError::Other("failed to orphan".into()), Outcome::Requeue),
        (ItemError::Panicked("boom".into()), Outcome::Requeue),
    ];
    for (i, (err, want)) in cases.iter().enumerate() {
        let got = err.outcome();
        assert_eq!(got, *want, "#{i}: {err}: got {got:?}, want {want:?}");
    }
}

#[test]
fn owner_not_found_generates_virtual_delete_event_and_is_forgotten() {
    let mut env = Env::new();
    // The pod's owner was never created: its virtual node is verified absent.
    env.create(
        &pods(),
        object(&pods(), "p", "pu", vec![owner_ref(&deployments(), "d", "du", None)]),
    );
    assert_eq!(env.work("du"), Outcome::Forget);
    let absent = ObjectReference::new("apps/v1", "Deployment", "ns1", "d", "du");
    assert_eq!(env.graph_changes.pending(), [Event::virtual_delete(&absent)]);
    assert_eq!(env.cluster.take_actions(), ["get apps/v1, Resource=deployments ns=ns1 name=d"]);
}

#[test]
fn uid_mismatch_generates_virtual_delete_event_and_is_forgotten() {
    let mut env = Env::new();
    env.create(
        &pods(),
        object(&pods(), "p", "pu", vec![owner_ref(&deployments(), "d", "du", None)]),
    );
    // Another deployment of that name exists, with another UID.
    env.cluster.create(&deployments(), object(&deployments(), "d", "other", vec![])).unwrap();
    assert_eq!(env.work("du"), Outcome::Forget);
    assert_eq!(env.graph_changes.len(), 1);
}

#[test]
fn rest_mapping_error_is_requeued_without_an_api_call() {
    let mut env = Env::new();
    let unmapped = OwnerReference {
        api_version: "extensions/v1beta1".into(),
        kind: "Deployment".into(),
        name: "d".into(),
        uid: "du".into(),
        ..OwnerReference::default()
    };
    env.create(&pods(), object(&pods(), "p", "pu", vec![unmapped]));
    // The virtual owner itself: no mapping, no call.
    assert_eq!(env.work("du"), Outcome::Requeue);
    assert!(env.cluster.take_actions().is_empty());
    // The dependent: read live, then its owner cannot be mapped.
    let err = block_on(env.gc.attempt_to_delete_item(&env.graph.node(Uid::parse("pu")).unwrap()))
        .unwrap_err();
    assert!(matches!(err, ItemError::RestMapping(_)), "{err:?}");
    assert_eq!(env.work("pu"), Outcome::Requeue);
    assert!(env.cluster.object(&pods(), "ns1", "p").is_some());
}

#[test]
fn virtual_namespaced_owner_of_cluster_scoped_object_is_forgotten_without_an_api_call() {
    let mut env = Env::new();
    env.create(&nodes(), object(&nodes(), "n", "nu", vec![owner_ref(&pods(), "p", "pu", None)]));
    env.cluster.take_actions();
    // The virtual pod has no namespace: it cannot be looked up.
    assert_eq!(env.work("pu"), Outcome::Forget);
    assert!(env.cluster.take_actions().is_empty(), "looked up a namespaced kind without namespace");
}

#[test]
fn cluster_scoped_object_with_namespaced_owner_is_forgotten_and_kept() {
    let mut env = Env::new();
    env.create(&nodes(), object(&nodes(), "n", "nu", vec![owner_ref(&pods(), "p", "pu", None)]));
    assert_eq!(env.work("nu"), Outcome::Forget);
    // Only the node itself is read; its owner is never looked up, and it is not deleted.
    assert_eq!(env.cluster.take_actions(), ["get /v1, Resource=nodes name=n"]);
    assert!(env.cluster.object(&nodes(), "", "n").is_some());
}

#[test]
fn server_error_on_get_is_requeued() {
    let mut env = Env::new();
    env.create(
        &pods(),
        object(&pods(), "p", "pu", vec![owner_ref(&deployments(), "d", "du", None)]),
    );
    env.cluster.fail_next(
        Verb::Get,
        "pods",
        "p",
        ClusterError::Other { code: 500, message: "etcd unavailable".into() },
    );
    assert_eq!(env.work("pu"), Outcome::Requeue);
    assert_eq!(env.cluster.take_actions(), ["get /v1, Resource=pods ns=ns1 name=p"]);
    // The next attempt succeeds: the owner is absent, the pod is collected.
    assert_eq!(env.work("pu"), Outcome::Forget);
    assert!(env.cluster.object(&pods(), "ns1", "p").is_none());
}

#[test]
fn server_error_on_owner_get_is_requeued() {
    let mut env = Env::new();
    env.create(
        &pods(),
        object(&pods(), "p", "pu", vec![owner_ref(&deployments(), "d", "du", None)]),
    );
    env.cluster.fail_next(
        Verb::Get,
        "deployments",
        "d",
        ClusterError::Other { code: 500, message: "etcd unavailable".into() },
    );
    assert_eq!(env.work("pu"), Outcome::Requeue);
    assert!(env.cluster.object(&pods(), "ns1", "p").is_some(), "deleted on an unknown owner");
    assert!(env.gc.absent_owners().is_empty(), "a 500 is not an absence");
}

#[test]
fn worker_requeues_a_failed_item_through_the_queue() {
    let mut env = Env::new();
    env.create(
        &pods(),
        object(&pods(), "p", "pu", vec![owner_ref(&deployments(), "d", "du", None)]),
    );
    env.clear_attempt_to_delete();
    let key = env.key("pu");
    env.gc.attempt_to_delete_queue().add(key);
    env.cluster.fail_next(
        Verb::Get,
        "pods",
        "p",
        ClusterError::Other { code: 500, message: String::new() },
    );
    assert!(block_on(env.gc.process_attempt_to_delete_worker()));
    assert_eq!(env.pending_delete(), [key]);
    assert_eq!(env.gc.attempt_to_delete_queue().num_requeues(&key), 1);
    assert!(block_on(env.gc.process_attempt_to_delete_worker()));
    assert!(env.pending_delete().is_empty());
    assert_eq!(env.gc.attempt_to_delete_queue().num_requeues(&key), 0, "success forgets");
}

#[test]
fn panic_inside_processing_is_caught_and_requeued() {
    let mut env = Env::new();
    env.create(
        &pods(),
        object(&pods(), "boom", "pu", vec![owner_ref(&deployments(), "d", "du", None)]),
    );
    env.clear_attempt_to_delete();
    env.cluster.on_call(|_, call| {
        if call.name == "boom" {
            panic!("injected panic while serving {}", call.action());
        }
        None
    });
    let key = env.key("pu");
    env.gc.attempt_to_delete_queue().add(key);
    assert!(block_on(env.gc.process_attempt_to_delete_worker()), "the worker survives");
    assert_eq!(env.pending_delete(), [key], "requeued");
    assert_eq!(env.gc.attempt_to_delete_queue().stats().processing, 0, "marked done");
    env.cluster.clear_faults();
    assert!(block_on(env.gc.process_attempt_to_delete_worker()));
    assert!(env.cluster.object(&pods(), "ns1", "boom").is_none(), "collected once healthy");
}

// ---------------------------------------------------------------------------------------------
// Foreground deletion
// ---------------------------------------------------------------------------------------------

#[test]
fn foreground_deletion_queues_blocking_dependents_and_waits_only_for_them() {
    let mut env = Env::new();
    let owner = || vec![owner_ref(&deployments(), "owner", "ou", Some(true))];
    let non_blocking = vec![owner_ref(&deployments(), "owner", "ou", Some(false))];
    env.create(
        &deployments(),
        deleting(object(&deployments(), "owner", "ou", vec![]), &["foregroundDeletion"]),
    );
    env.create(&pods(), object(&pods(), "blocking", "pa", owner()));
    env.create(&pods(), object(&pods(), "non-blocking", "pb", non_blocking));
    assert!(env.graph.node(Uid::parse("ou")).unwrap().deleting_dependents);
    assert_eq!(env.pending_delete(), [env.key("ou")]);
    env.clear_attempt_to_delete();

    // The owner waits: its blocking dependent is queued, the other one is not.
    assert_eq!(env.work("ou"), Outcome::Forget);
    assert_eq!(env.pending_delete(), [env.key("pa")]);
    assert_eq!(env.cluster.take_actions(), ["get apps/v1, Resource=deployments ns=ns1 name=owner"]);
    assert!(env.cluster.object(&deployments(), "ns1", "owner").is_some());

    // The blocking dependent's owner is waiting for its dependents: the dependent is deleted.
    env.clear_attempt_to_delete();
    assert_eq!(env.work("pa"), Outcome::Forget);
    assert_eq!(
        env.cluster.take_actions(),
        [
            "get /v1, Resource=pods ns=ns1 name=blocking",
            "get apps/v1, Resource=deployments ns=ns1 name=owner",
            "delete /v1, Resource=pods ns=ns1 name=blocking",
        ]
    );
    assert!(env.cluster.object(&pods(), "ns1", "blocking").is_none());

    // Its delete event requeues the owner, which has no blocking dependent left: its
    // finalizer goes, and with it the owner, while the non-blocking dependent still exists.
    env.observe(EventType::Delete, &pods(), object(&pods(), "blocking", "pa", owner()));
    assert_eq!(env.pending_delete(), [env.key("ou")]);
    assert_eq!(env.work("ou"), Outcome::Forget);
    assert_eq!(
        env.cluster.take_actions(),
        [
            "get apps/v1, Resource=deployments ns=ns1 name=owner",
            "get apps/v1, Resource=deployments ns=ns1 name=owner",
            "patch apps/v1, Resource=deployments ns=ns1 name=owner",
        ]
    );
    assert!(env.cluster.object(&deployments(), "ns1", "owner").is_none(), "finalizer kept");
    assert!(env.cluster.object(&pods(), "ns1", "non-blocking").is_some(), "not waited for");
}

/// Upstream reads an item's dependents after its owners' GETs (`dependentsLength()` in the
/// verdict): a dependent that arrives while those GETs are out makes the item go in the
/// foreground, so the waiting owner outlives that dependent too.
#[test]
fn a_dependent_observed_during_the_owner_lookups_makes_the_deletion_foreground() {
    let mut env = Env::new();
    let cm = configmaps();
    env.create(
        &deployments(),
        deleting(object(&deployments(), "owner", "ou", vec![]), &["foregroundDeletion"]),
    );
    env.create(
        &cm,
        object(&cm, "mid", "mu", vec![owner_ref(&deployments(), "owner", "ou", Some(true))]),
    );
    let late = object(&pods(), "late", "lu", vec![owner_ref(&cm, "mid", "mu", Some(true))]);
    let graph = env.graph.clone();
    let arrived = std::sync::atomic::AtomicBool::new(false);
    env.cluster.on_call(move |cluster, call| {
        let owner_get = call.verb() == Verb::Get && call.name == "owner";
        if owner_get && !arrived.swap(true, Ordering::SeqCst) {
            cluster.create(&pods(), late.clone()).unwrap();
            let ty = kube_gc_engine::ObjectType::new("v1", "Pod");
            let event = Event::new(EventType::Add, ty, late.clone());
            Ingester::new(graph.clone(), 1).ingest(&[event]);
        }
        None
    });
    assert_eq!(env.work("mu"), Outcome::Forget);
    let mid = env.cluster.object(&cm, "ns1", "mid").expect("deleted in the foreground, held");
    assert_eq!(mid.finalizers, ["foregroundDeletion"]);
    let calls = env.cluster.take_calls();
    let delete = calls.iter().find(|c| c.verb() == Verb::Delete).expect("mid deleted");
    assert_eq!(delete.name, "mid");
}

/// An ownerReference whose kind is longer than any served type's (the API server does not
/// limit it) to the object numbered `uid`.
fn unservable_ref(uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "K".repeat(kube_gc_engine::identity::MAX_TYPE_STRING_LEN + 1),
        name: "x".into(),
        uid: uid.into(),
        ..OwnerReference::default()
    }
}

/// A dependent that also names a type no server can serve still blocks its owner's
/// foreground deletion, as in upstream's graph; and no decision goes past that reference (it
/// cannot be mapped, as upstream cannot map it): the dependent is kept and retried, the owner
/// waits. (Its events were refused before: the owner's finalizer went at once.)
#[test]
fn a_dependent_naming_an_unservable_type_still_blocks_a_foreground_deletion() {
    for from_graph in [false, true] {
        dependent_naming_an_unservable_type_blocks(from_graph);
    }
}

fn dependent_naming_an_unservable_type_blocks(from_graph: bool) {
    let mut env = if from_graph { Env::new().reading_items_from_graph() } else { Env::new() };
    env.create(
        &deployments(),
        deleting(object(&deployments(), "owner", "ou", vec![]), &["foregroundDeletion"]),
    );
    let owners = vec![owner_ref(&deployments(), "owner", "ou", Some(true)), unservable_ref("xu")];
    env.create(&pods(), object(&pods(), "p", "pu", owners));
    env.clear_attempt_to_delete();

    assert_eq!(env.work("ou"), Outcome::Forget);
    assert_eq!(env.pending_delete(), [env.key("pu")], "the blocking dependent is queued");
    let decided = env.work("pu");
    assert_eq!(decided, Outcome::Requeue, "unservable reference mapped (from graph: {from_graph})");
    assert!(env.cluster.object(&pods(), "ns1", "p").is_some(), "kept");
    let owner = env.cluster.object(&deployments(), "ns1", "owner").expect("still waiting");
    assert_eq!(owner.finalizers, ["foregroundDeletion"]);
}

/// An owner that names a type no server can serve is in the graph: its foreground deletion
/// is seen and finishes once its blocking dependent is gone.
#[test]
fn an_owner_naming_an_unservable_type_finishes_its_foreground_deletion() {
    let mut env = Env::new();
    let cm = configmaps();
    env.create(
        &cm,
        deleting(object(&cm, "owner", "ou", vec![unservable_ref("xu")]), &["foregroundDeletion"]),
    );
    env.create(
        &pods(),
        object(&pods(), "p", "pu", vec![owner_ref(&cm, "owner", "ou", Some(true))]),
    );
    assert!(env.graph.node(Uid::parse("ou")).unwrap().deleting_dependents);
    env.clear_attempt_to_delete();
    assert_eq!(env.work("ou"), Outcome::Forget);
    assert_eq!(env.work("pu"), Outcome::Forget);
    assert!(env.cluster.object(&pods(), "ns1", "p").is_none(), "the dependent goes first");
    env.observe(EventType::Delete, &pods(), object(&pods(), "p", "pu", vec![]));
    assert_eq!(env.work("ou"), Outcome::Forget);
    assert!(env.cluster.object(&cm, "ns1", "owner").is_none(), "then the owner");
}

#[test]
fn dependent_with_a_solid_owner_and_a_waiting_owner_is_patched_not_deleted() {
    let mut env = Env::new();
    env.create(
        &deployments(),
        deleting(object(&deployments(), "waiting", "wu", vec![]), &["foregroundDeletion"]),
    );
    env.create(&deployments(), object(&deployments(), "solid", "su", vec![]));
    let owners = vec![
        owner_ref(&deployments(), "waiting", "wu", Some(true)),
        owner_ref(&deployments(), "solid", "su", None),
    ];
    env.create(&pods(), object(&pods(), "p", "pu", owners));
    assert_eq!(env.work("pu"), Outcome::Forget);
    let pod = env.cluster.object(&pods(), "ns1", "p").expect("kept");
    assert_eq!(pod.owner_references, [owner_ref(&deployments(), "solid", "su", None)]);
}

/// GC-SPEC §3.6: a dependent of a foreground-deleting owner, with a dependent of its own that is
/// also deleting in the foreground, is a cycle. The item unblocks its references, then deletes
/// itself with the resourceVersion read before that patch: the delete conflicts (its owners
/// changed, so no retry without the resourceVersion) and the item is requeued; the next attempt
/// deletes it. Its unblocked reference then lets the owner finish.
#[test]
fn cycle_under_foreground_deletion_unblocks_then_deletes() {
    let mut env = Env::new();
    let cm = configmaps();
    // a is deleting in the foreground and owned by b; b is owned by a, blocking.
    env.create(
        &cm,
        deleting(
            object(&cm, "a", "au", vec![owner_ref(&cm, "b", "bu", Some(true))]),
            &["foregroundDeletion"],
        ),
    );
    env.create(&cm, object(&cm, "b", "bu", vec![owner_ref(&cm, "a", "au", Some(true))]));
    env.clear_attempt_to_delete();
    env.cluster.take_actions();

    assert_eq!(env.work("bu"), Outcome::Requeue, "the stale resourceVersion should conflict");
    let calls = env.cluster.take_calls();
    let actions: Vec<String> = calls.iter().map(|c| c.action()).collect();
    assert_eq!(
        actions,
        [
            "get /v1, Resource=configmaps ns=ns1 name=b",
            "get /v1, Resource=configmaps ns=ns1 name=a",
            "patch /v1, Resource=configmaps ns=ns1 name=b",
            "delete /v1, Resource=configmaps ns=ns1 name=b",
            "get /v1, Resource=configmaps ns=ns1 name=b",
        ]
    );
    assert_eq!(calls[2].patch().unwrap().patch_type, PatchType::StrategicMerge);
    let b = env.cluster.object(&cm, "ns1", "b").unwrap();
    assert_eq!(b.owner_references, [owner_ref(&cm, "a", "au", Some(false))], "unblocked");
    assert!(!b.deletion_timestamp, "deleted with a stale resourceVersion");

    // Second attempt: deleted in the foreground (b has a dependent of its own).
    assert_eq!(env.work("bu"), Outcome::Forget);
    let b = env.cluster.object(&cm, "ns1", "b").expect("held by its foregroundDeletion finalizer");
    assert!(b.deletion_timestamp);
    assert_eq!(b.finalizers, ["foregroundDeletion"]);
    let delete = env.cluster.take_calls().pop().unwrap();
    assert_eq!(
        delete.delete_options().and_then(|o| o.propagation_policy),
        Some(kube_gc_engine::cluster::PropagationPolicy::Foreground)
    );

    // The graph learns that b no longer blocks a: a is requeued, and, with no blocking
    // dependent left, loses its finalizer.
    env.observe_update(&cm, "b");
    assert!(env.pending_delete().contains(&env.key("au")));
    assert_eq!(env.work("au"), Outcome::Forget);
    assert!(env.cluster.object(&cm, "ns1", "a").is_none(), "a still held");
}

// ---------------------------------------------------------------------------------------------
// Finalizers, orphaning, patches
// ---------------------------------------------------------------------------------------------

/// An environment holding the ReplicationController `rc1` (UID `rcu`), deleted with the `orphan`
/// finalizer, and its Pod `pod` (UID `uid`).
fn env_with_an_rc_being_orphaned(pod: &str, uid: &str) -> Env {
    let mut env = Env::new();
    let rcs = replication_controllers();
    env.create(&pods(), object(&pods(), pod, uid, vec![owner_ref(&rcs, "rc1", "rcu", None)]));
    env.create(&rcs, deleting(object(&rcs, "rc1", "rcu", vec![]), &["orphan"]));
    env
}

#[test]
fn orphaning_removes_owner_references_then_the_orphan_finalizer() {
    let mut env = Env::new();
    let rcs = replication_controllers();
    let owned = || vec![owner_ref(&rcs, "rc1", "rcu", Some(true))];
    env.create(&pods(), object(&pods(), "pa", "pau", owned()));
    env.create(&pods(), object(&pods(), "pb", "pbu", owned()));
    env.create(&rcs, deleting(object(&rcs, "rc1", "rcu", vec![]), &["orphan"]));
    let key = env.key("rcu");
    assert_eq!(env.gc.attempt_to_orphan_queue().pending(), [key]);
    env.cluster.take_actions();

    assert!(block_on(env.gc.process_attempt_to_orphan_worker()));
    let actions = env.cluster.take_actions();
    assert_eq!(actions.len(), 5, "{actions:?}");
    // The owner is read live first: it still asks for orphaning.
    assert_eq!(actions[0], "get /v1, Resource=replicationcontrollers ns=ns1 name=rc1");
    let mut patches = actions[1..3].to_vec();
    patches.sort();
    assert_eq!(
        patches,
        ["patch /v1, Resource=pods ns=ns1 name=pa", "patch /v1, Resource=pods ns=ns1 name=pb"]
    );
    assert_eq!(
        actions[3..],
        [
            "get /v1, Resource=replicationcontrollers ns=ns1 name=rc1",
            "patch /v1, Resource=replicationcontrollers ns=ns1 name=rc1",
        ]
    );
    for name in ["pa", "pb"] {
        let pod = env.cluster.object(&pods(), "ns1", name).expect("orphans are kept");
        assert!(pod.owner_references.is_empty(), "{name} still owned");
    }
    assert!(env.cluster.object(&rcs, "ns1", "rc1").is_none(), "orphan finalizer kept");
    assert!(env.gc.attempt_to_orphan_queue().pending().is_empty());
    assert_eq!(env.gc.attempt_to_orphan_queue().num_requeues(&key), 0);
}

/// The graph still shows the owner being orphaned, but the user has since deleted it again
/// with Background propagation (the API server dropped `orphan` and removed it): orphaning its
/// dependents now would be a write no decision on the live state makes. The owner is read
/// first, and nothing is written.
#[test]
fn orphaning_skips_an_owner_no_longer_asking_for_it() {
    let env = env_with_an_rc_being_orphaned("pa", "pau");
    let rcs = replication_controllers();
    env.cluster.delete_object(&rcs, "ns1", "rc1").unwrap();
    env.cluster.take_actions();
    assert!(block_on(env.gc.process_attempt_to_orphan_worker()));
    assert_eq!(
        env.cluster.take_actions(),
        ["get /v1, Resource=replicationcontrollers ns=ns1 name=rc1"]
    );
    let pod = env.cluster.object(&pods(), "ns1", "pa").unwrap();
    assert_eq!(pod.owner_references.len(), 1, "orphaned on a stale graph");
}

/// The ReplicationController `rc1` (UID `rcu`) queued for orphaning, then gone (its user let
/// it go: its delete event removed its node), and named since by `named_by`'s object `name`:
/// the graph holds a virtual node under the item's UID. Returns the item's key.
fn env_with_an_orphaning_owner_gone_and_named(named_by: &Resource, name: &str) -> (Env, NodeKey) {
    let mut env = Env::new();
    let rcs = replication_controllers();
    env.create(&rcs, deleting(object(&rcs, "rc1", "rcu", vec![]), &["orphan"]));
    let key = env.key("rcu");
    assert_eq!(env.gc.attempt_to_orphan_queue().pending(), [key]);
    let last_seen = env.cluster.object(&rcs, "ns1", "rc1").unwrap();
    env.cluster.delete_object(&rcs, "ns1", "rc1").unwrap();
    env.observe(EventType::Delete, &rcs, last_seen);
    let named = vec![owner_ref(&rcs, "rc1", "rcu", None)];
    env.create(named_by, object(named_by, name, &format!("{name}u"), named));
    let virtual_owner = env.graph.node(Uid::parse("rcu")).expect("a virtual node for the UID");
    assert!(virtual_owner.is_virtual, "{virtual_owner:?}");
    env.cluster.take_actions();
    (env, key)
}

/// A cluster-scoped object names the gone owner: its virtual node has no namespace. The item
/// is dropped without a call. Read under the virtual identity, a namespaced kind with no
/// namespace was an error no retry resolves, and the item came back for ever (found by
/// `stale_view_log`'s liveness check).
#[test]
fn an_owner_gone_and_named_by_a_cluster_scoped_object_is_not_retried_for_ever() {
    let (env, key) = env_with_an_orphaning_owner_gone_and_named(&nodes(), "n1");
    let virtual_owner = env.graph.node(key.uid).unwrap();
    assert!(virtual_owner.identity.namespace.is_cluster(), "{virtual_owner:?}");
    assert!(block_on(env.gc.process_attempt_to_orphan_worker()));
    assert_eq!(env.cluster.take_actions(), Vec::<String>::new());
    let queue = env.gc.attempt_to_orphan_queue();
    assert!(queue.is_empty(), "the item came back: {:?}", queue.pending());
    assert_eq!(queue.num_requeues(&key), 0);
}

/// A namespaced object names the gone owner: the virtual node has the owner's coordinates, and
/// the item still ends without reading them (the owner's delete event said it is gone).
#[test]
fn an_owner_gone_and_named_again_is_not_read_for_its_orphaning() {
    let (env, key) = env_with_an_orphaning_owner_gone_and_named(&pods(), "late");
    assert_eq!(block_on(env.gc.attempt_to_orphan_worker(key)), Outcome::Forget);
    assert_eq!(env.cluster.take_actions(), Vec::<String>::new());
}

#[test]
fn orphaning_failure_keeps_the_finalizer_and_requeues() {
    let env = env_with_an_rc_being_orphaned("pa", "pau");
    let rcs = replication_controllers();
    env.cluster.fail_next(
        Verb::Patch,
        "pods",
        "pa",
        ClusterError::Other { code: 500, message: String::new() },
    );
    assert_eq!(block_on(env.gc.attempt_to_orphan_worker(env.key("rcu"))), Outcome::Requeue);
    assert_eq!(env.cluster.object(&rcs, "ns1", "rc1").unwrap().finalizers, ["orphan"]);
    // A dependent already gone is not a failure.
    env.cluster.delete_object(&pods(), "ns1", "pa");
    assert_eq!(block_on(env.gc.attempt_to_orphan_worker(env.key("rcu"))), Outcome::Forget);
    assert!(env.cluster.object(&rcs, "ns1", "rc1").is_none());
}

/// Beyond upstream (see `OrphanedOwners`): the owner is remembered as orphaned before the patch
/// that removes its `orphan` finalizer is served, since the API server may delete it the moment
/// the patch applies; and forgotten when the patch fails (the owner stays).
#[test]
fn an_orphaned_owner_is_remembered_before_its_finalizer_goes_and_forgotten_if_it_stays() {
    let env = env_with_an_rc_being_orphaned("pa", "pau");
    let rcs = replication_controllers();
    let orphaned = Arc::clone(env.gc.orphaned_owners());
    let removals = Arc::new(AtomicUsize::new(0));
    let remembered_at_removal = Arc::new(AtomicUsize::new(0));
    let (count, remembered) = (removals.clone(), remembered_at_removal.clone());
    env.cluster.on_call(move |_, call| {
        if call.verb() != Verb::Patch || call.name != "rc1" {
            return None;
        }
        remembered.fetch_add(usize::from(orphaned.contains(Uid::parse("rcu"))), Ordering::SeqCst);
        // The first removal fails.
        (count.fetch_add(1, Ordering::SeqCst) == 0)
            .then(|| ClusterError::Other { code: 500, message: String::new() })
    });
    assert_eq!(block_on(env.gc.attempt_to_orphan_worker(env.key("rcu"))), Outcome::Requeue);
    assert_eq!(remembered_at_removal.load(Ordering::SeqCst), 1, "not remembered before the patch");
    assert!(!env.gc.orphaned_owners().contains(Uid::parse("rcu")), "remembered, yet it stays");
    assert_eq!(env.cluster.object(&rcs, "ns1", "rc1").unwrap().finalizers, ["orphan"]);

    assert_eq!(block_on(env.gc.attempt_to_orphan_worker(env.key("rcu"))), Outcome::Forget);
    assert_eq!(removals.load(Ordering::SeqCst), 2);
    assert_eq!(remembered_at_removal.load(Ordering::SeqCst), 2, "not remembered before the patch");
    assert!(env.gc.orphaned_owners().contains(Uid::parse("rcu")));
    assert!(env.cluster.object(&rcs, "ns1", "rc1").is_none());
}

/// The user lets the owner go (removes `orphan` itself) while its orphaning runs, just before
/// the orphaning's removal reads it: the orphaning did not end by the collector's hand, so the
/// owner is not remembered as orphaned, and a dependent the graph never held is upstream's to
/// collect, not one whose reference is removed (found by `stale_view_log` at a million
/// histories).
#[test]
fn an_owner_let_go_by_its_user_during_the_orphaning_is_not_remembered() {
    let env = env_with_an_rc_being_orphaned("pa", "pau");
    let rcs = replication_controllers();
    let gets = Arc::new(AtomicUsize::new(0));
    let count = gets.clone();
    env.cluster.on_call(move |cluster, call| {
        // The owner's second GET is the removal's: the user's change lands just before it.
        if call.verb() == Verb::Get
            && call.name == "rc1"
            && count.fetch_add(1, Ordering::SeqCst) == 1
        {
            cluster.update_object(&replication_controllers(), "ns1", "rc1", |m| {
                m.finalizers.clear();
            });
        }
        None
    });
    assert_eq!(block_on(env.gc.attempt_to_orphan_worker(env.key("rcu"))), Outcome::Forget);
    assert_eq!(gets.load(Ordering::SeqCst), 2);
    assert!(env.cluster.object(&rcs, "ns1", "rc1").is_none(), "the user let it go");
    assert!(!env.gc.orphaned_owners().contains(Uid::parse("rcu")), "remembered as orphaned");
    let pod = env.cluster.object(&pods(), "ns1", "pa").expect("orphaned before the user's change");
    assert!(pod.owner_references.is_empty(), "{pod:?}");
}

/// A dependent decided while its owner's orphaning finishes (the orphaning remembers the owner,
/// then the API server deletes it, both inside the dependent's GET of that owner) finds the
/// owner absent and its orphaning not yet confirmed: it is decided again later, not collected.
/// Once the orphaning's own removal is confirmed, its reference is removed, the dependent never
/// collected.
#[test]
fn an_owner_orphaned_while_its_dependent_is_decided_leaves_the_dependent_orphaned() {
    let env = env_with_an_rc_being_orphaned("pb", "pbu");
    let orphaned = Arc::clone(env.gc.orphaned_owners());
    let during_the_get = Arc::clone(&orphaned);
    env.cluster.on_call(move |cluster, call| {
        let rcu = Uid::parse("rcu");
        if call.verb() == Verb::Get && call.name == "rc1" && !during_the_get.contains(rcu) {
            during_the_get.record(rcu, None);
            cluster.delete_object(&replication_controllers(), "ns1", "rc1");
        }
        None
    });
    assert_eq!(env.work("pbu"), Outcome::Requeue);
    let pb =
        env.cluster.object(&pods(), "ns1", "pb").expect("collected while the orphaning finishes");
    assert_eq!(pb.owner_references.len(), 1, "orphaned before the orphaning was confirmed");

    orphaned.confirm(Uid::parse("rcu"));
    assert_eq!(env.work("pbu"), Outcome::Forget);
    let pb = env.cluster.object(&pods(), "ns1", "pb").expect("collected, not orphaned");
    assert!(pb.owner_references.is_empty(), "{pb:?}");
}

/// Beyond upstream, bounded by it: the memory of orphaned owners removes a reference only once
/// its owner is gone. An owner orphaned and still held by another controller's finalizer is a
/// solid owner, as upstream classifies it: a Pod created afterwards with a reference to it and
/// one to an owner that never existed loses only the dangling reference, and stays. (Removing
/// the orphaned owner's reference first would have left the dangling one alone, and the Pod
/// deleted.) Once that owner goes, the Pod is orphaned, not collected: it was created in the
/// second its owner's deletion began, which the timestamps cannot tell apart from before.
#[test]
fn an_orphaned_owner_that_still_exists_keeps_a_new_dependent() {
    let mut env = Env::new();
    let rcs = replication_controllers();
    let rc = deleting(object(&rcs, "rc1", "rcu", vec![]), &["orphan", "example.com/keep"]);
    env.create(&rcs, rc);
    assert_eq!(block_on(env.gc.attempt_to_orphan_worker(env.key("rcu"))), Outcome::Forget);
    assert!(env.gc.orphaned_owners().contains(Uid::parse("rcu")));
    assert_eq!(env.cluster.object(&rcs, "ns1", "rc1").unwrap().finalizers, ["example.com/keep"]);

    let owners = vec![owner_ref(&rcs, "rc1", "rcu", None), owner_ref(&rcs, "never", "nu", None)];
    env.create(&pods(), object(&pods(), "late", "lu", owners));
    assert_eq!(env.work("lu"), Outcome::Forget);
    let late = env.cluster.object(&pods(), "ns1", "late").expect("deleted beside a live owner");
    assert_eq!(late.owner_references, [owner_ref(&rcs, "rc1", "rcu", None)]);

    // The other controller lets the owner go: the Pod is orphaned.
    env.cluster.delete_object(&rcs, "ns1", "rc1");
    assert_eq!(env.work("lu"), Outcome::Forget);
    let late = env.cluster.object(&pods(), "ns1", "late").expect("collected, not orphaned");
    assert!(late.owner_references.is_empty(), "{late:?}");
    assert_eq!(env.gc.stats().late_orphans.load(Ordering::Relaxed), 1);
}

/// The memory of orphaned owners keeps only what the orphaning was meant for: a Pod created
/// past the margin after its owner's deletion began (the user asked to orphan what existed
/// then) is
/// decided as upstream decides it once the owner is gone, and collected. Read live, not from
/// the graph's copy, which has no creationTimestamp.
#[test]
fn a_dependent_created_after_its_orphaned_owners_deletion_is_collected() {
    let mut env = Env::new().reading_items_from_graph();
    let rcs = replication_controllers();
    env.create(&rcs, deleting(object(&rcs, "rc1", "rcu", vec![]), &["orphan"]));
    assert_eq!(block_on(env.gc.attempt_to_orphan_worker(env.key("rcu"))), Outcome::Forget);
    assert!(env.cluster.object(&rcs, "ns1", "rc1").is_none(), "orphaned, and gone");

    env.cluster.advance_clock(CREATED_AFTER_MARGIN_SECS + 1);
    let owners = vec![owner_ref(&rcs, "rc1", "rcu", None)];
    let later = env.cluster.create(&pods(), object(&pods(), "later", "lu", owners)).unwrap();
    env.observe(EventType::Add, &pods(), later);
    env.cluster.take_calls();
    assert_eq!(env.work("lu"), Outcome::Forget);
    assert!(env.cluster.object(&pods(), "ns1", "later").is_none(), "orphaned, not collected");
    let calls: Vec<String> = (env.cluster.take_calls().iter())
        .filter(|c| c.name == "later")
        .map(|c| c.action())
        .collect();
    assert!(calls.first().is_some_and(|c| c.starts_with("get")), "not read live: {calls:?}");
    assert!(calls.iter().all(|c| !c.starts_with("patch")), "{calls:?}");
    assert_eq!(env.gc.stats().late_orphans.load(Ordering::Relaxed), 0);
    assert_eq!(env.gc.stats().created_after_orphaning.load(Ordering::Relaxed), 1);
}

/// A Pod created before its owner's deletion began, seen only after the orphaning (upstream's
/// race, #26120), is orphaned: the later second of its decision does not matter, its
/// creation does.
#[test]
fn a_dependent_created_before_its_orphaned_owners_deletion_is_orphaned_when_seen_late() {
    let mut env = Env::new();
    let rcs = replication_controllers();
    let owners = vec![owner_ref(&rcs, "rc1", "rcu", None)];
    env.cluster.create(&pods(), object(&pods(), "early", "eu", owners)).unwrap();
    env.cluster.advance_clock(1);
    env.create(&rcs, deleting(object(&rcs, "rc1", "rcu", vec![]), &["orphan"]));
    assert_eq!(block_on(env.gc.attempt_to_orphan_worker(env.key("rcu"))), Outcome::Forget);
    assert!(env.cluster.object(&rcs, "ns1", "rc1").is_none(), "orphaned, and gone");

    env.cluster.advance_clock(5);
    let early = env.cluster.object(&pods(), "ns1", "early").unwrap();
    env.observe(EventType::Add, &pods(), early);
    assert_eq!(env.work("eu"), Outcome::Forget);
    let early = env.cluster.object(&pods(), "ns1", "early").expect("collected, not orphaned");
    assert!(early.owner_references.is_empty(), "{early:?}");
    assert_eq!(env.gc.stats().late_orphans.load(Ordering::Relaxed), 1);
    assert_eq!(env.gc.stats().created_after_orphaning.load(Ordering::Relaxed), 0);
}

/// In a dry run (shadow mode answers a patch with the object as it is), a dependent seen too
/// late to be orphaned has its would-be patch made once and is done: not decided again and
/// again on an answer that still names its orphaned owner.
#[test]
fn a_late_orphan_in_a_dry_run_is_patched_once() {
    let mut env = Env::new();
    let rcs = replication_controllers();
    let owners = vec![owner_ref(&rcs, "rc1", "rcu", None)];
    env.cluster.create(&pods(), object(&pods(), "early", "eu", owners)).unwrap();
    env.create(&rcs, deleting(object(&rcs, "rc1", "rcu", vec![]), &["orphan"]));
    assert_eq!(block_on(env.gc.attempt_to_orphan_worker(env.key("rcu"))), Outcome::Forget);
    assert!(env.cluster.object(&rcs, "ns1", "rc1").is_none(), "orphaned, and gone");

    env.cluster.set_dry_run(true);
    let early = env.cluster.object(&pods(), "ns1", "early").unwrap();
    env.observe(EventType::Add, &pods(), early);
    env.cluster.take_calls();
    assert_eq!(env.work("eu"), Outcome::Forget);
    let patches = (env.cluster.take_calls().iter()).filter(|c| c.verb() == Verb::Patch).count();
    assert_eq!(patches, 1);
    let early = env.cluster.object(&pods(), "ns1", "early").unwrap();
    assert_eq!(early.owner_references.len(), 1, "a dry run applied a patch");
}

/// The memory of orphaned owners removes references only when they are all the object's: a
/// Pod naming an orphaned owner that is gone and an owner that never existed is garbage either
/// way, as upstream finds it, and is deleted with one call, no patch first.
#[test]
fn a_late_orphan_beside_another_dangling_owner_is_deleted_without_a_patch() {
    let mut env = Env::new();
    let rcs = replication_controllers();
    env.create(&rcs, deleting(object(&rcs, "rc1", "rcu", vec![]), &["orphan"]));
    assert_eq!(block_on(env.gc.attempt_to_orphan_worker(env.key("rcu"))), Outcome::Forget);
    assert!(env.cluster.object(&rcs, "ns1", "rc1").is_none(), "orphaned, and gone");

    let owners = vec![owner_ref(&rcs, "rc1", "rcu", None), owner_ref(&rcs, "never", "nu", None)];
    env.create(&pods(), object(&pods(), "late", "lu", owners));
    env.cluster.take_calls();
    assert_eq!(env.work("lu"), Outcome::Forget);
    assert!(env.cluster.object(&pods(), "ns1", "late").is_none(), "garbage");
    let writes: Vec<String> = (env.cluster.take_calls().iter())
        .filter(|c| matches!(c.verb(), Verb::Patch | Verb::Delete))
        .map(|c| c.action())
        .collect();
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert!(writes[0].starts_with("delete"), "{writes:?}");
    assert_eq!(env.gc.stats().late_orphans.load(Ordering::Relaxed), 0);
}

/// Beyond upstream: the owner goes while its dependents are being orphaned (someone removed its
/// finalizer), and a new owner of the same name is deleted with `orphan` too. The `orphan`
/// finalizer the orphaning then removes is the first owner's, not the successor's: the
/// successor keeps it until its own dependents are orphaned, which the successor's own
/// orphaning does.
#[test]
fn orphaning_leaves_the_finalizer_of_a_successor_of_the_same_name() {
    let env = env_with_an_rc_being_orphaned("pd", "pdu");
    let rcs = replication_controllers();
    env.cluster.on_call(move |cluster, call| {
        if call.verb() == Verb::Patch && call.name == "pd" {
            cluster.delete_object(&replication_controllers(), "ns1", "rc1");
            let successor = deleting(object(&rcs, "rc1", "rc2u", vec![]), &["orphan"]);
            cluster.create(&replication_controllers(), successor).unwrap();
        }
        None
    });
    assert_eq!(block_on(env.gc.attempt_to_orphan_worker(env.key("rcu"))), Outcome::Forget);
    let successor = env.cluster.object(&replication_controllers(), "ns1", "rc1").unwrap();
    assert_eq!(successor.uid, "rc2u");
    assert_eq!(successor.finalizers, ["orphan"], "the successor's finalizer was removed");
    let pd = env.cluster.object(&pods(), "ns1", "pd").unwrap();
    assert!(pd.owner_references.is_empty(), "the first owner's dependent not orphaned: {pd:?}");
}

/// Beyond upstream: a Pod names its ReplicaSet twice, with an owner that never existed
/// between, and the ReplicaSet's foreground deletion begins after its first read (before the
/// second owner's). Read once, the ReplicaSet is solid for both of its references: only the
/// dangling one goes, and the Pod stays in the ReplicaSet's foreground deletion. (Upstream
/// reads it again for its second reference, finds it waiting, and removes its UID: the Pod
/// would lose the owner just found solid.)
#[test]
fn a_repeated_owner_is_read_once_and_kept() {
    let mut env = Env::new();
    let rss = resource("apps/v1", "replicasets", "ReplicaSet", true);
    env.cluster.register(rss.clone());
    env.create(&rss, object(&rss, "rs1", "rsu", vec![]));
    let rs_ref = owner_ref(&rss, "rs1", "rsu", Some(true));
    let owners = vec![rs_ref.clone(), owner_ref(&rss, "never", "nu", None), rs_ref.clone()];
    env.create(&pods(), object(&pods(), "p", "pu", owners));
    let reads = Arc::new(AtomicUsize::new(0));
    let seen = reads.clone();
    env.cluster.on_call(move |cluster, call| {
        if call.verb() == Verb::Get && call.name == "rs1" {
            seen.fetch_add(1, Ordering::SeqCst);
        }
        if call.verb() == Verb::Get && call.name == "never" {
            let options = DeleteOptions {
                propagation_policy: Some(PropagationPolicy::Foreground),
                ..DeleteOptions::default()
            };
            cluster.delete_as_client(&call.resource, "ns1", "rs1", &options).unwrap();
        }
        None
    });
    env.work("pu");
    let rs1 = env.cluster.object(&rss, "ns1", "rs1").unwrap();
    assert!(rs1.deletion_timestamp, "the ReplicaSet's deletion did not begin: {rs1:?}");
    assert_eq!(reads.load(Ordering::SeqCst), 1, "the ReplicaSet was read once");
    let pod = env.cluster.object(&pods(), "ns1", "p").unwrap();
    assert_eq!(pod.owner_references, [rs_ref.clone(), rs_ref], "{pod:?}");
}

/// Custom resources do not support strategic merge patches (415): the reference removal falls
/// back to a JSON merge patch of the remaining references, built from the version the decision
/// read (owners and resourceVersion together), without reading the object again.
#[test]
fn json_merge_fallback_on_unsupported_media_type_for_a_custom_resource() {
    let mut env = Env::new();
    let w = widgets();
    env.cluster.register_custom(w.clone());
    env.create(&w, object(&w, "keeper", "ku", vec![]));
    let owners = vec![owner_ref(&w, "gone", "gu", None), owner_ref(&w, "keeper", "ku", None)];
    env.create(&w, object(&w, "child", "cu", owners));
    env.cluster.take_actions();
    let rv = env.cluster.object(&w, "ns1", "child").unwrap().resource_version;

    assert_eq!(env.work("cu"), Outcome::Forget);
    let calls = env.cluster.take_calls();
    let actions: Vec<String> = calls.iter().map(|c| c.action()).collect();
    assert_eq!(
        actions,
        [
            "get example.com/v1, Resource=widgets ns=ns1 name=child",
            "get example.com/v1, Resource=widgets ns=ns1 name=gone",
            "get example.com/v1, Resource=widgets ns=ns1 name=keeper",
            "patch example.com/v1, Resource=widgets ns=ns1 name=child",
            "patch example.com/v1, Resource=widgets ns=ns1 name=child",
        ]
    );
    assert_eq!(calls[3].patch().unwrap().patch_type, PatchType::StrategicMerge);
    let fallback = calls[4].patch().unwrap();
    assert_eq!(fallback.patch_type, PatchType::JsonMerge);
    assert_eq!(fallback.body["metadata"]["resourceVersion"], rv.as_str());
    let child = env.cluster.object(&w, "ns1", "child").unwrap();
    assert_eq!(child.owner_references, [owner_ref(&w, "keeper", "ku", None)]);
}

/// A custom resource its controller writes while the collector decides (its status, every
/// second): the JSON merge patch, pinned to the version the decision read, conflicts. The
/// decision stands on the live object (same owners, not being deleted), so it is retried once
/// on the live version, rather than requeued to conflict again on every attempt. Had the
/// owners changed, the conflict is returned and nothing is written.
#[test]
fn a_pinned_patch_that_conflicts_is_retried_once_if_the_owners_are_unchanged() {
    for owners_change in [false, true] {
        let mut env = Env::new();
        let w = widgets();
        env.cluster.register_custom(w.clone());
        env.create(&w, object(&w, "keeper", "ku", vec![]));
        let owners = vec![owner_ref(&w, "gone", "gu", None), owner_ref(&w, "keeper", "ku", None)];
        env.create(&w, object(&w, "child", "cu", owners.clone()));
        let written = std::sync::atomic::AtomicBool::new(false);
        env.cluster.on_call(move |cluster, call| {
            let merge = call.patch().is_some_and(|p| p.patch_type == PatchType::JsonMerge);
            if merge && !written.swap(true, Ordering::SeqCst) {
                cluster
                    .update_object(&widgets(), "ns1", "child", |m| {
                        if owners_change {
                            m.owner_references.reverse();
                        }
                    })
                    .unwrap();
            }
            None
        });
        let outcome = env.work("cu");
        let child = env.cluster.object(&w, "ns1", "child").unwrap();
        let merges = env
            .cluster
            .take_calls()
            .iter()
            .filter(|c| c.patch().is_some_and(|p| p.patch_type == PatchType::JsonMerge))
            .count();
        if owners_change {
            assert_eq!(outcome, Outcome::Requeue);
            assert_eq!(merges, 1, "retried on changed owners");
            assert_eq!(child.owner_references.len(), 2, "{child:?}");
        } else {
            assert_eq!(outcome, Outcome::Forget);
            assert_eq!(merges, 2);
            assert_eq!(child.owner_references, [owner_ref(&w, "keeper", "ku", None)]);
        }
    }
}

/// Orphaning a custom resource's dependent falls back to a JSON merge patch built from a live
/// GET by name. When that name now holds another object (the dependent the graph knows was
/// deleted and created again, naming the same owner), the patch is not sent to the successor,
/// and the orphaning is not done either: it is retried, and once the graph holds the
/// successor, the successor is orphaned as a dependent of its own (its reference removed).
#[test]
fn a_json_merge_fallback_never_lands_on_a_successor_of_the_same_name() {
    let mut env = Env::new();
    let w = widgets();
    env.cluster.register_custom(w.clone());
    let owned = || vec![owner_ref(&w, "parent", "pu", None)];
    env.create(&w, object(&w, "child", "cu", owned()));
    env.create(&w, deleting(object(&w, "parent", "pu", vec![]), &["orphan"]));
    // The child the graph knows goes; a successor takes its name (not observed yet).
    env.cluster.delete_object(&w, "ns1", "child").unwrap();
    env.cluster.create(&w, object(&w, "child", "cu2", owned())).unwrap();
    env.cluster.take_calls();

    assert!(block_on(env.gc.process_attempt_to_orphan_worker()));
    let calls = env.cluster.take_calls();
    let merges = calls
        .iter()
        .filter(|c| c.patch().is_some_and(|p| p.patch_type == PatchType::JsonMerge))
        .filter(|c| c.action().ends_with("name=child"))
        .count();
    assert_eq!(merges, 0, "{calls:#?}");
    let successor = env.cluster.object(&w, "ns1", "child").unwrap();
    assert_eq!((successor.uid.as_str(), successor.owner_references.len()), ("cu2", 1));
    let parent = env.cluster.object(&w, "ns1", "parent").expect("the orphaning waits");
    assert_eq!(parent.finalizers, ["orphan"]);
    // The graph shows the old child's delete and the successor; the orphaning is tried again.
    let old = object(&w, "child", "cu", owned());
    env.observe(EventType::Delete, &w, old);
    let successor = env.cluster.object(&w, "ns1", "child").unwrap();
    env.observe(EventType::Add, &w, successor);
    assert!(block_on(env.gc.process_attempt_to_orphan_worker()));
    let successor = env.cluster.object(&w, "ns1", "child").expect("orphaned, kept");
    assert!(successor.owner_references.is_empty(), "{successor:?}");
    assert!(env.cluster.object(&w, "ns1", "parent").is_none(), "the orphaning finished");
}

#[test]
fn remove_finalizer_conflicts_are_retried_five_times_then_fail() {
    let mut env = Env::new();
    let cm = configmaps();
    env.create(&cm, deleting(object(&cm, "owner", "ou", vec![]), &["foregroundDeletion", "x/y"]));
    env.cluster.take_actions();
    let patches = Arc::new(AtomicUsize::new(0));
    let counter = patches.clone();
    env.cluster.on_call(move |_, call| {
        (call.verb() == Verb::Patch).then(|| {
            counter.fetch_add(1, Ordering::SeqCst);
            ClusterError::Conflict("the object has been modified".into())
        })
    });
    let node = env.graph.node(Uid::parse("ou")).unwrap();
    let err = block_on(env.gc.attempt_to_delete_item(&node)).unwrap_err();
    assert!(err.to_string().contains("updateMaxRetries(5) has reached"), "{err}");
    assert_eq!(err.outcome(), Outcome::Requeue);
    assert_eq!(patches.load(Ordering::SeqCst), 5);
    let actions = env.cluster.take_actions();
    let gets = actions.iter().filter(|a| a.starts_with("get ")).count();
    assert_eq!(gets, 1 + 5, "the item, then one GET per attempt: {actions:?}");
    assert_eq!(env.work("ou"), Outcome::Requeue);
    // Healthy again: the finalizer goes, the other one stays.
    env.cluster.clear_faults();
    assert_eq!(env.work("ou"), Outcome::Forget);
    assert_eq!(env.cluster.object(&cm, "ns1", "owner").unwrap().finalizers, ["x/y"]);
}

#[test]
fn remove_finalizer_retries_from_a_fresh_read_and_succeeds() {
    let mut env = Env::new();
    let cm = configmaps();
    env.create(&cm, deleting(object(&cm, "owner", "ou", vec![]), &["foregroundDeletion"]));
    // Two conflicts, then the patch goes through.
    for _ in 0..2 {
        env.cluster.fail_next(
            Verb::Patch,
            "configmaps",
            "owner",
            ClusterError::Conflict(String::new()),
        );
    }
    let node = env.graph.node(Uid::parse("ou")).unwrap();
    assert_eq!(
        block_on(env.gc.attempt_to_delete_item(&node)),
        Ok(DeleteItemResult::ProcessedDeletingDependents)
    );
    assert!(env.cluster.object(&cm, "ns1", "owner").is_none());
}

#[test]
fn item_being_deleted_without_foreground_is_left_alone() {
    let mut env = Env::new();
    let owners = vec![owner_ref(&deployments(), "d", "du", None)];
    env.create(&pods(), deleting(object(&pods(), "p", "pu", owners), &["x/y"]));
    env.cluster.take_actions();
    let node = env.graph.node(Uid::parse("pu")).unwrap();
    assert_eq!(block_on(env.gc.attempt_to_delete_item(&node)), Ok(DeleteItemResult::Kept));
    assert!(env.cluster.take_actions().is_empty(), "a deleting object needs no call");
}

#[test]
fn item_with_own_orphan_finalizer_is_deleted_with_orphan_policy() {
    let mut env = Env::new();
    let mut meta = object(&pods(), "p", "pu", vec![owner_ref(&deployments(), "d", "du", None)]);
    meta.finalizers = vec!["orphan".into()];
    env.create(&pods(), meta);
    env.cluster.take_actions();
    assert_eq!(env.work("pu"), Outcome::Forget);
    let delete = env.cluster.take_calls().pop().unwrap();
    assert_eq!(
        delete.delete_options().and_then(|o| o.propagation_policy),
        Some(kube_gc_engine::cluster::PropagationPolicy::Orphan)
    );
}
