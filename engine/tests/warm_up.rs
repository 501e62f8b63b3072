//! The warm-up rules beyond upstream (issue "collect real garbage within seconds of a
//! restart"): no wasted verification of virtual nodes observed in place, early collection
//! before sync limited to what live reads prove, and owner lookups shared between workers.
//!
//! Each test drives the real collector over a `MemoryCluster`, with the graph fed from the same
//! objects by the `Ingester`, as informers would.

use std::sync::atomic::Ordering;
use std::task::Poll;

use futures::executor::block_on;
use kube_gc_engine::cluster::{Cluster, ClusterError, Resource};
use kube_gc_engine::collector::{CollectorOptions, Outcome};
use kube_gc_engine::graph::NodeKey;
use kube_gc_engine::{EventType, ObjectMeta, ObjectType, OwnerReference};
use kube_gc_testkit::{MemoryCluster, Verb};

mod support;
use support::{Env, pods, replicasets};

const RS_UID: &str = "00000000-0000-4000-8000-0000000000aa";

fn rs_ref() -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "web".into(),
        uid: RS_UID.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn meta(name: &str, uid: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
    ObjectMeta {
        uid: uid.into(),
        name: name.into(),
        namespace: "ns1".into(),
        owner_references: owners,
        ..ObjectMeta::default()
    }
}

fn pod(i: u32) -> ObjectMeta {
    meta(&format!("web-{i}"), &format!("00000000-0000-4000-8000-{i:012}"), vec![rs_ref()])
}

fn rs() -> ObjectMeta {
    meta("web", RS_UID, vec![])
}

fn pod_type() -> ObjectType {
    ObjectType::new("v1", "Pod")
}
fn rs_type() -> ObjectType {
    ObjectType::new("apps/v1", "ReplicaSet")
}

fn skip() -> CollectorOptions {
    CollectorOptions { skip_observed_verification: true, ..CollectorOptions::default() }
}

fn cluster_with(objects: &[(Resource, ObjectMeta)]) -> MemoryCluster {
    let c = MemoryCluster::with_test_resources();
    c.register(replicasets());
    for (r, m) in objects {
        c.create(r, m.clone()).unwrap();
    }
    c.take_actions();
    c
}

/// The dependent is listed before its owner: the owner becomes a virtual node queued for
/// verification, then is observed in place. Upstream GETs it anyway; kube-gc does not, and the
/// queue holds the same item as upstream's.
#[test]
fn observed_in_place_owner_is_not_reverified() {
    for (options, want_calls) in [(CollectorOptions::default(), true), (skip(), false)] {
        let mut env = Env::new(cluster_with(&[(pods(), pod(1)), (replicasets(), rs())]), options);
        env.observe(EventType::Add, pod_type(), pod(1));
        env.observe(EventType::Add, rs_type(), rs());
        // Same queue state either way: the (now observed) owner is pending.
        let pending = env.collector.attempt_to_delete_queue().pending();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].uid.to_string(), RS_UID);
        env.drain_attempt_to_delete(10);
        let actions = env.cluster.take_actions();
        assert_eq!(!actions.is_empty(), want_calls, "{options:?}: {actions:?}");
        assert_eq!(
            env.collector.stats().verifications_skipped.load(Ordering::Relaxed),
            u64::from(!want_calls)
        );
        assert!(env.cluster.object(&pods(), "ns1", "web-1").is_some());
    }
}

/// Skipping the verification does not lose garbage: when the owner is deleted later, its
/// delete event queues the dependent, which is collected.
#[test]
fn dependent_of_an_owner_deleted_later_is_still_collected() {
    let mut env = Env::new(cluster_with(&[(pods(), pod(1)), (replicasets(), rs())]), skip());
    env.observe(EventType::Add, pod_type(), pod(1));
    env.observe(EventType::Add, rs_type(), rs());
    env.drain_attempt_to_delete(10);
    assert!(env.cluster.take_actions().is_empty());
    env.cluster.delete_object(&replicasets(), "ns1", "web").unwrap();
    env.observe(EventType::Delete, rs_type(), rs());
    env.drain_attempt_to_delete(10);
    assert!(env.cluster.object(&pods(), "ns1", "web-1").is_none(), "garbage pod kept");
}

/// A virtual owner whose object exists but is not yet observed is verified (found) and kept
/// virtual; its dependent is never deleted, before or after the owner is observed late.
#[test]
fn still_virtual_node_whose_owner_appears_late_is_not_deleted() {
    let mut env = Env::new(cluster_with(&[(pods(), pod(1)), (replicasets(), rs())]), skip());
    env.observe(EventType::Add, pod_type(), pod(1));
    // One verification: the owner exists, the node stays virtual and is requeued.
    block_on(env.collector.process_attempt_to_delete_worker());
    assert_eq!(env.cluster.take_actions(), ["get apps/v1, Resource=replicasets ns=ns1 name=web"]);
    assert_eq!(env.collector.attempt_to_delete_queue().len(), 1);
    env.observe(EventType::Add, rs_type(), rs());
    env.drain_attempt_to_delete(10);
    assert!(env.cluster.object(&pods(), "ns1", "web-1").is_some());
    assert!(env.cluster.take_actions().iter().all(|a| !a.starts_with("delete")));
}

/// Garbage found by verification is collected at the cost of the owner's GET, the dependent's
/// GET and its DELETE.
#[test]
fn garbage_of_a_never_listed_owner_is_collected() {
    let mut env = Env::new(cluster_with(&[(pods(), pod(1))]), skip());
    env.observe(EventType::Add, pod_type(), pod(1));
    env.drain_attempt_to_delete(10);
    assert!(env.cluster.object(&pods(), "ns1", "web-1").is_none());
    assert_eq!(
        env.cluster.take_actions(),
        [
            "get apps/v1, Resource=replicasets ns=ns1 name=web",
            "get /v1, Resource=pods ns=ns1 name=web-1",
            "delete /v1, Resource=pods ns=ns1 name=web-1",
        ]
    );
}

fn early() -> CollectorOptions {
    CollectorOptions {
        early_collection: true,
        skip_observed_verification: true,
        garbage_first: true,
        ..CollectorOptions::default()
    }
}

/// Before sync, only deletions that live reads prove are carried out: an object whose every
/// owner is absent goes; one whose owner waits for its dependents, or one with its own orphan
/// finalizer, waits for the graph to be synced.
#[test]
fn early_collection_deletes_only_what_live_reads_prove() {
    let owner_fg = meta("fg", "00000000-0000-4000-8000-0000000000f0", vec![]);
    let mut owner_fg_live = owner_fg.clone();
    owner_fg_live.deletion_timestamp = true;
    owner_fg_live.finalizers = vec!["foregroundDeletion".into()];
    let fg_ref = OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: "fg".into(),
        uid: owner_fg.uid.clone(),
        controller: None,
        block_owner_deletion: Some(true),
    };
    let waiting_child = meta("waiting-child", "00000000-0000-4000-8000-0000000000f1", vec![fg_ref]);
    let mut orphaning_garbage = pod(2);
    orphaning_garbage.finalizers = vec!["orphan".into()];
    let mut env = Env::new(
        cluster_with(&[
            (pods(), pod(1)),
            (pods(), orphaning_garbage.clone()),
            (pods(), owner_fg_live.clone()),
            (pods(), waiting_child.clone()),
        ]),
        early(),
    );
    assert!(env.collector.is_warming_up());
    // The owner being deleted in the foreground queues itself and its child (transition).
    for m in [pod(1), orphaning_garbage, waiting_child, owner_fg_live] {
        env.observe(EventType::Add, pod_type(), m);
    }
    env.run_attempt_to_delete(50);
    assert!(env.cluster.object(&pods(), "ns1", "web-1").is_none(), "plain garbage collected early");
    assert!(
        env.cluster.object(&pods(), "ns1", "web-2").is_some(),
        "orphan-finalizer garbage deferred"
    );
    assert!(
        env.cluster.object(&pods(), "ns1", "waiting-child").is_some(),
        "waiting child deferred"
    );
    assert!(
        env.cluster.object(&pods(), "ns1", "fg").is_some(),
        "deleting-dependents owner deferred"
    );
    // web-2, the waiting child and the owner deleting its dependents.
    assert_eq!(env.collector.stats().deferred_until_synced.load(Ordering::Relaxed), 3);
    // Synced: warm-up ends, and the deferred decisions are made.
    env.collector.finish_warm_up();
    env.run_attempt_to_delete(50);
    let web2 = env.cluster.object(&pods(), "ns1", "web-2").expect("held by its orphan finalizer");
    assert!(web2.deletion_timestamp, "deleted with the Orphan policy once synced");
    assert!(
        env.cluster.object(&pods(), "ns1", "waiting-child").is_none(),
        "waiting child deleted once synced"
    );
    // Its last blocking dependent gone, the owner loses its foregroundDeletion finalizer.
    env.observe(
        EventType::Delete,
        pod_type(),
        meta("waiting-child", "00000000-0000-4000-8000-0000000000f1", vec![]),
    );
    env.run_attempt_to_delete(50);
    assert!(env.cluster.object(&pods(), "ns1", "fg").is_none(), "owner finalized once synced");
}

/// A cluster whose GETs yield once before answering, so concurrent lookups overlap.
struct YieldingCluster(MemoryCluster);

fn yield_once() -> impl std::future::Future<Output = ()> + Send {
    let mut yielded = false;
    std::future::poll_fn(move |cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
}

impl Cluster for YieldingCluster {
    support::forward_to!(0: resource_for, consistent_lists, list_page, patch, delete, record_event);
    async fn get(&self, r: &Resource, ns: &str, name: &str) -> Result<ObjectMeta, ClusterError> {
        yield_once().await;
        self.0.get(r, ns, name).await
    }
}

/// Two workers classifying dependents of the same owner at once each read the owner, as
/// upstream's do: neither takes the other's answer (engine/tests/owner_lookups.rs has why).
#[test]
fn concurrent_workers_each_read_the_owner() {
    let base = cluster_with(&[(pods(), pod(1)), (pods(), pod(2)), (replicasets(), rs())]);
    let mut env = Env::new(YieldingCluster(base), CollectorOptions::default());
    env.observe(EventType::Add, pod_type(), pod(1));
    env.observe(EventType::Add, pod_type(), pod(2));
    let keys: Vec<NodeKey> = [1u32, 2]
        .iter()
        .map(|i| env.graph.key_of(kube_gc_engine::Uid::parse(&pod(*i).uid)).unwrap())
        .collect();
    let (a, b) = block_on(futures::future::join(
        env.collector.attempt_to_delete_worker(keys[0]),
        env.collector.attempt_to_delete_worker(keys[1]),
    ));
    assert_eq!((a, b), (Outcome::Forget, Outcome::Forget));
    let actions = env.cluster.0.take_actions();
    let owner_gets =
        actions.iter().filter(|a| a.starts_with("get apps/v1, Resource=replicasets")).count();
    assert_eq!(owner_gets, 2, "{actions:?}");
}

/// With garbage first, likely garbage and virtual-owner verifications overtake re-checks; the
/// order within each lane is kept.
#[test]
fn likely_garbage_is_processed_before_re_checks() {
    use kube_gc_engine::ingest::{Enqueue, IngestOutput};
    let key = |i: u128| NodeKey { uid: kube_gc_engine::Uid::from_u128(i), incarnation: 0 };
    let output = IngestOutput {
        enqueued: vec![
            Enqueue::AttemptToDelete(key(1)),
            Enqueue::VerifyVirtual(key(4)),
            Enqueue::LikelyGarbage(key(2)),
            Enqueue::AttemptToDelete(key(3)),
        ],
        ..IngestOutput::default()
    };
    // Garbage first: found garbage before waiting verifications, both before re-checks.
    for (garbage_first, want) in [(false, [1, 4, 2, 3]), (true, [2, 4, 1, 3])] {
        let options = CollectorOptions { garbage_first, ..skip() };
        let env = Env::new(cluster_with(&[]), options);
        env.collector.apply_ingest_output(output.clone());
        let got: Vec<u128> = env
            .collector
            .attempt_to_delete_queue()
            .pending()
            .iter()
            .map(|k| k.uid.as_u128())
            .collect();
        assert_eq!(got, want, "garbage_first={garbage_first}");
    }
}

/// While some watcher has not synced (begin_warm_up), orphaning waits: the graph may not know
/// every dependent yet. Once synced, the deferred owner is orphaned.
#[test]
fn orphaning_waits_until_synced() {
    let mut owner = rs();
    owner.deletion_timestamp = true;
    owner.finalizers = vec!["orphan".into()];
    let mut env =
        Env::new(cluster_with(&[(pods(), pod(1)), (replicasets(), owner.clone())]), skip());
    env.collector.begin_warm_up();
    env.observe(EventType::Add, pod_type(), pod(1));
    env.observe(EventType::Add, rs_type(), owner);
    let queue = env.collector.attempt_to_orphan_queue().clone();
    assert_eq!(queue.len(), 1);
    block_on(env.collector.process_attempt_to_orphan_worker());
    assert!(queue.is_empty(), "deferred, not requeued");
    assert_eq!(env.cluster.object(&pods(), "ns1", "web-1").unwrap().owner_references.len(), 1);
    env.collector.finish_warm_up();
    assert_eq!(queue.len(), 1, "queued again once synced");
    block_on(env.collector.process_attempt_to_orphan_worker());
    assert!(env.cluster.object(&pods(), "ns1", "web-1").unwrap().owner_references.is_empty());
}

fn from_graph() -> CollectorOptions {
    CollectorOptions { read_items_from_graph: true, ..skip() }
}

/// A live ReplicaSet `solid`, and a reference to it.
fn solid_owner() -> (ObjectMeta, OwnerReference) {
    let solid = meta("solid", "00000000-0000-4000-8000-0000000000b0", vec![]);
    let solid_ref = OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "solid".into(),
        uid: solid.uid.clone(),
        controller: None,
        block_owner_deletion: None,
    };
    (solid, solid_ref)
}

/// The stored object, as an informer would deliver it (with its resourceVersion).
fn stored(env: &Env<MemoryCluster>, name: &str) -> ObjectMeta {
    env.cluster.object(&pods(), "ns1", name).expect("stored")
}

/// Garbage whose owner a live read found absent is deleted from the graph's copy of it: no GET
/// of the item, and the DELETE carries the observed resourceVersion as its precondition.
#[test]
fn read_items_from_graph_deletes_garbage_without_reading_it() {
    let mut env = Env::new(cluster_with(&[(pods(), pod(1))]), from_graph());
    let observed = stored(&env, "web-1");
    env.observe(EventType::Add, pod_type(), observed.clone());
    env.drain_attempt_to_delete(10);
    assert!(env.cluster.object(&pods(), "ns1", "web-1").is_none(), "garbage kept");
    let calls = env.cluster.take_calls();
    let actions: Vec<_> = calls.iter().map(|c| c.action()).collect();
    assert_eq!(
        actions,
        [
            "get apps/v1, Resource=replicasets ns=ns1 name=web",
            "delete /v1, Resource=pods ns=ns1 name=web-1",
        ]
    );
    let options = calls[1].delete_options().expect("a delete");
    assert_eq!(options.precondition_resource_version, Some(observed.resource_version));
    assert_eq!(options.precondition_uid, Some(observed.uid));
    assert_eq!(env.collector.stats().item_reads_saved.load(Ordering::Relaxed), 1);
}

/// The graph's copy is stale: the object was adopted by a live owner after the informer last
/// saw it. The DELETE's resourceVersion precondition fails, the object is re-read, kept, and
/// once the informer catches up only its dangling reference is removed.
#[test]
fn read_items_from_graph_never_deletes_an_object_changed_since_observed() {
    let (solid, solid_ref) = solid_owner();
    let mut env =
        Env::new(cluster_with(&[(pods(), pod(1)), (replicasets(), solid.clone())]), from_graph());
    env.observe(EventType::Add, rs_type(), solid);
    let observed = stored(&env, "web-1");
    env.observe(EventType::Add, pod_type(), observed.clone());
    // Adopted behind the informer's back.
    let adopted = env
        .cluster
        .update_object(&pods(), "ns1", "web-1", |m| m.owner_references.push(solid_ref.clone()))
        .expect("pod exists");
    env.run_attempt_to_delete(10);
    assert!(env.cluster.object(&pods(), "ns1", "web-1").is_some(), "adopted object deleted");
    let actions = env.cluster.take_actions();
    assert!(actions.iter().any(|a| a == "get /v1, Resource=pods ns=ns1 name=web-1"), "{actions:?}");
    // The informer delivers the adoption: the dangling reference goes, the object stays.
    env.observe(EventType::Update, pod_type(), adopted);
    env.drain_attempt_to_delete(10);
    let live = env.cluster.object(&pods(), "ns1", "web-1").expect("kept");
    assert_eq!(live.owner_references, vec![solid_ref]);
}

/// An object of an aggregated API takes the GET: the copy's safety rests on the server
/// refusing a write once the object has changed, which only kube-apiserver's own resources
/// promise.
#[test]
fn read_items_from_graph_reads_objects_of_aggregated_apis() {
    let cluster = cluster_with(&[]);
    let aggregated =
        kube_gc_testkit::memory_cluster::ResourceOptions { aggregated: true, ..Default::default() };
    cluster.register_with(pods(), aggregated);
    cluster.create(&pods(), pod(1)).unwrap();
    cluster.take_actions();
    let mut env = Env::new(cluster, from_graph());
    let observed = stored(&env, "web-1");
    env.observe(EventType::Add, pod_type(), observed);
    env.drain_attempt_to_delete(10);
    let actions = env.cluster.take_actions();
    assert!(
        actions.contains(&"get /v1, Resource=pods ns=ns1 name=web-1".to_owned()),
        "{actions:?}"
    );
    assert!(env.cluster.object(&pods(), "ns1", "web-1").is_none(), "garbage kept");
    assert_eq!(env.collector.stats().item_reads_saved.load(Ordering::Relaxed), 0);
}

/// An object carrying a GC finalizer takes the GET, as upstream: its policy comes from the
/// live finalizers.
#[test]
fn read_items_from_graph_reads_objects_with_gc_finalizers() {
    let mut orphaning = pod(1);
    orphaning.finalizers = vec!["orphan".into()];
    let mut env = Env::new(cluster_with(&[(pods(), orphaning)]), from_graph());
    let observed = stored(&env, "web-1");
    env.observe(EventType::Add, pod_type(), observed);
    env.drain_attempt_to_delete(10);
    let calls = env.cluster.take_calls();
    let actions: Vec<_> = calls.iter().map(|c| c.action()).collect();
    assert!(
        actions.contains(&"get /v1, Resource=pods ns=ns1 name=web-1".to_owned()),
        "{actions:?}"
    );
    let delete = calls.iter().find_map(|c| c.delete_options()).expect("deleted");
    assert_eq!(delete.propagation_policy.map(|p| p.as_str()), Some("Orphan"));
    assert_eq!(env.collector.stats().item_reads_saved.load(Ordering::Relaxed), 0);
}

/// The confirmed bug: the graph's copy of a garbage Pod shows no finalizers, but the
/// user has just asked for an orphaning delete of it (not yet observed). The DELETE decided
/// from the copy fails its resourceVersion precondition; the retry must decide afresh from the
/// live object, which is being deleted: upstream, reading it live, would not send a Background
/// DELETE (that would make the API server strip `orphan` and collect the Pod's own dependents).
#[test]
fn read_items_from_graph_never_overrides_a_users_orphan_request() {
    let mut env = Env::new(cluster_with(&[(pods(), pod(1))]), from_graph());
    let observed = stored(&env, "web-1");
    env.observe(EventType::Add, pod_type(), observed);
    // `kubectl delete --cascade=orphan` of the Pod, before the informer delivers it.
    env.cluster
        .update_object(&pods(), "ns1", "web-1", |m| {
            m.deletion_timestamp = true;
            m.finalizers = vec!["orphan".into()];
        })
        .expect("pod exists");
    env.run_attempt_to_delete(10);
    let live = env.cluster.object(&pods(), "ns1", "web-1").expect("the user's deletion decides");
    assert_eq!(live.finalizers, ["orphan"], "the user's orphan request was overridden");
    let calls = env.cluster.take_calls();
    for call in &calls {
        if let Some(options) = call.delete_options() {
            let policy = options.propagation_policy.map(|p| p.as_str());
            assert!(
                options.precondition_resource_version.is_some() || policy == Some("Orphan"),
                "a retry without a fresh decision: {} {options:?}",
                call.action()
            );
        }
    }
}

/// On a conflict, the live object under the name has another UID: the object the graph knows
/// is gone (UIDs never come back). That is its absence, as upstream treats a UID mismatch, not a
/// conflict to retry for ever.
#[test]
fn a_conflict_that_finds_another_uid_is_the_old_objects_absence() {
    let mut env = Env::new(cluster_with(&[(pods(), pod(1))]), from_graph());
    let observed = stored(&env, "web-1");
    env.observe(EventType::Add, pod_type(), observed.clone());
    // Deleted and recreated under the same name (a StatefulSet's Pod), not yet observed.
    env.cluster.delete_object(&pods(), "ns1", "web-1").unwrap();
    let recreated = meta("web-1", "00000000-0000-4000-8000-0000000000ff", vec![]);
    env.cluster.create(&pods(), recreated.clone()).unwrap();
    env.run_attempt_to_delete(10);
    assert!(env.cluster.object(&pods(), "ns1", "web-1").is_some(), "the new Pod was deleted");
    assert!(env.collector.attempt_to_delete_queue().is_empty(), "retried for ever");
    assert!(env.graph.node(kube_gc_engine::Uid::parse(&observed.uid)).is_none());
}

/// Reading items from the graph, the Pod web-1 observed with a solid owner and a dangling one
/// (the decision from its copy: remove the dangling reference), and the copy.
fn observed_with_a_solid_and_a_dangling_owner() -> (Env<MemoryCluster>, ObjectMeta) {
    let (solid, solid_ref) = solid_owner();
    let mut both = pod(1);
    both.owner_references.push(solid_ref);
    let mut env =
        Env::new(cluster_with(&[(pods(), both), (replicasets(), solid.clone())]), from_graph());
    env.observe(EventType::Add, rs_type(), solid);
    let observed = stored(&env, "web-1");
    env.observe(EventType::Add, pod_type(), observed.clone());
    (env, observed)
}

/// Finding 1: a patch decided from the graph's copy must land only on the version the copy
/// shows. The copy has a solid owner and a dangling one, so the decision is to remove the
/// dangling reference; but live, the solid owner's reference is gone too, and upstream reading
/// it live would delete the object. Unpinned, the patch would leave an object with no owner,
/// never collected. Pinned, it conflicts, and the live decision deletes it.
#[test]
fn a_patch_decided_from_the_graphs_copy_never_lands_on_a_newer_version() {
    let (mut env, observed) = observed_with_a_solid_and_a_dangling_owner();
    // Released by the solid owner behind the informer's back: only the dangling one is left.
    env.cluster
        .update_object(&pods(), "ns1", "web-1", |m| m.owner_references = vec![rs_ref()])
        .expect("pod exists");
    env.run_attempt_to_delete(20);
    let calls = env.cluster.take_calls();
    let patch = calls.iter().find_map(|c| c.patch()).expect("the copy's decision patched");
    assert_eq!(
        patch.body["metadata"]["resourceVersion"],
        observed.resource_version.as_str(),
        "the patch is not pinned to the copy's version"
    );
    assert!(
        env.cluster.object(&pods(), "ns1", "web-1").is_none(),
        "left with no owner and never collected: {:?}",
        env.cluster.object(&pods(), "ns1", "web-1")
    );
    assert_eq!(env.collector.stats().stale_view_conflicts.load(Ordering::Relaxed), 1);
}

/// A patch decided from the graph's copy of an object deleted behind the informer's back gets
/// 404: the copy is stale, so the next decision reads the object live, finds it gone and
/// removes it from the graph (upstream's GET and virtual delete), instead of patching the
/// same copy again on every attempt until the watch delivers the delete.
#[test]
fn a_patch_decided_from_the_graphs_copy_of_a_deleted_object_reads_it_live_next() {
    let (mut env, observed) = observed_with_a_solid_and_a_dangling_owner();
    env.cluster.delete_object(&pods(), "ns1", "web-1").unwrap();
    env.run_attempt_to_delete(20);
    let patches = env.cluster.take_calls().iter().filter(|c| c.patch().is_some()).count();
    assert_eq!(patches, 1, "the copy's patch was sent again");
    assert!(env.graph.node(kube_gc_engine::Uid::parse(&observed.uid)).is_none());
    assert!(env.collector.attempt_to_delete_queue().is_empty(), "retried for ever");
}

/// The patch that orphans a late dependent answered 404 (or a Status saying NotFound, which
/// an admission webhook may give, the object still there): not taken for the dependent's
/// absence, as upstream never takes a PATCH's; the next attempt reads it and orphans it.
#[test]
fn a_late_orphans_patch_answered_not_found_is_not_its_absence() {
    let mut owner = rs();
    owner.deletion_timestamp = true;
    owner.finalizers = vec!["orphan".into()];
    let cluster =
        cluster_with(&[(pods(), pod(1)), (pods(), pod(2)), (replicasets(), owner.clone())]);
    let mut env = Env::configured(cluster, skip(), |c| c);
    env.observe(EventType::Add, pod_type(), stored(&env, "web-1"));
    env.observe(EventType::Add, rs_type(), owner.clone());
    block_on(env.collector.process_attempt_to_orphan_worker());
    env.observe(EventType::Delete, rs_type(), owner);
    let web2 = stored(&env, "web-2");
    env.observe(EventType::Add, pod_type(), web2.clone());
    env.cluster.fail_next(Verb::Patch, "pods", "web-2", ClusterError::NotFound);
    env.drain_attempt_to_delete(20);
    let web2_now = env.cluster.object(&pods(), "ns1", "web-2").expect("kept");
    assert!(web2_now.owner_references.is_empty(), "{web2_now:?}");
    let node = env.graph.node(kube_gc_engine::Uid::parse(&web2.uid));
    assert!(node.is_some_and(|n| !n.is_virtual), "taken for gone");
}

/// Beyond upstream (issue #11, "Liveness"): a dependent the graph did not know when its owner
/// was orphaned (its resource not synced yet, or its add event still in flight: upstream's
/// race #26120) keeps its reference to the orphaned owner. Upstream later finds that owner
/// absent and deletes the dependent; kube-gc remembers whom it orphaned and removes the
/// reference instead, as the orphaning would have. With no memory (capacity 0), upstream's
/// behaviour.
#[test]
fn a_dependent_seen_after_its_owner_was_orphaned_is_orphaned_too() {
    for (capacity, kept) in
        [(kube_gc_engine::collector::orphaned_owners::DEFAULT_CAPACITY, true), (0, false)]
    {
        let mut owner = rs();
        owner.deletion_timestamp = true;
        owner.finalizers = vec!["orphan".into()];
        let cluster =
            cluster_with(&[(pods(), pod(1)), (pods(), pod(2)), (replicasets(), owner.clone())]);
        let mut env =
            Env::configured(cluster, from_graph(), |c| c.with_orphaned_owners_capacity(capacity));
        // Only web-1 is known when the owner's orphaning runs.
        env.observe(EventType::Add, pod_type(), stored(&env, "web-1"));
        env.observe(EventType::Add, rs_type(), owner.clone());
        block_on(env.collector.process_attempt_to_orphan_worker());
        assert!(env.cluster.object(&replicasets(), "ns1", "web").is_none(), "owner not finalized");
        env.observe(EventType::Delete, rs_type(), owner.clone());
        // web-2 arrives late, still pointing at the orphaned owner.
        env.observe(EventType::Add, pod_type(), stored(&env, "web-2"));
        env.drain_attempt_to_delete(20);
        let web2 = env.cluster.object(&pods(), "ns1", "web-2");
        assert_eq!(web2.is_some(), kept, "capacity {capacity}: {web2:?}");
        if let Some(web2) = web2 {
            assert!(web2.owner_references.is_empty(), "{web2:?}");
            assert_eq!(env.collector.stats().late_orphans.load(Ordering::Relaxed), 1);
        }
        let web1 = env.cluster.object(&pods(), "ns1", "web-1").expect("orphaned web-1 kept");
        assert!(web1.owner_references.is_empty());
    }
}
