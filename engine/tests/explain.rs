//! `inspect::explain`: each owner classified as the collector classifies it, the next step it
//! would take, and for an object being deleted what each finalizer waits for, read live.

use futures::executor::block_on;
use kube_gc_engine::cluster::Resource;
use kube_gc_engine::collector::{CollectorOptions, HeldDecision};
use kube_gc_engine::inspect::{Decision, Evidence, Explanation, OwnerState, explain};
use kube_gc_engine::{EventType, ObjectMeta, ObjectReference, OwnerReference, Uid};
use kube_gc_testkit::{MemoryCluster, resource};

mod support;
use support::{Env, pods, replicasets, uid};

fn configmaps() -> Resource {
    resource("v1", "configmaps", "ConfigMap", true)
}

fn owner(kind: &str, name: &str, i: u32) -> OwnerReference {
    let api_version = if kind == "ReplicaSet" { "apps/v1" } else { "v1" };
    support::blocking_owner(api_version, kind, name, i)
}

fn meta(name: &str, i: u32, owners: Vec<OwnerReference>, finalizers: &[&str]) -> ObjectMeta {
    ObjectMeta {
        uid: uid(i),
        name: name.into(),
        namespace: "ns1".into(),
        owner_references: owners,
        finalizers: finalizers.iter().map(|f| f.to_string()).collect(),
        ..ObjectMeta::default()
    }
}

fn env() -> Env<MemoryCluster> {
    let cluster = MemoryCluster::new();
    for r in [pods(), replicasets(), configmaps()] {
        cluster.register(r);
    }
    Env::new(cluster, CollectorOptions::default())
}

/// Stores `m` in the cluster and shows it to the graph, as a watch would.
fn add(env: &mut Env<MemoryCluster>, r: &Resource, m: ObjectMeta) {
    let name = m.name.clone();
    env.cluster.create(r, m).unwrap();
    let stored = env.cluster.object(r, "ns1", &name).unwrap();
    env.observe(EventType::Add, r.object_type(), stored);
}

/// Marks `name` deleted (deletionTimestamp) in the cluster and shows it to the graph.
fn being_deleted(env: &mut Env<MemoryCluster>, r: &Resource, name: &str) {
    let updated = env
        .cluster
        .update_object(r, "ns1", name, |m| m.deletion_timestamp = true)
        .expect("the object exists");
    env.observe(EventType::Update, r.object_type(), updated);
}

fn explained(env: &Env<MemoryCluster>, i: u32) -> Explanation {
    block_on(explain(&env.collector, &*env.cluster, Uid::parse(&uid(i)))).expect("in the graph")
}

fn name(o: &ObjectReference) -> &str {
    &o.name
}

#[test]
fn a_foreground_deletion_names_its_blocking_dependent_and_that_ones_foreign_finalizer() {
    let mut env = env();
    add(&mut env, &replicasets(), meta("web", 1, vec![], &["foregroundDeletion"]));
    add(
        &mut env,
        &pods(),
        meta("held", 2, vec![owner("ReplicaSet", "web", 1)], &["example.com/hold"]),
    );
    being_deleted(&mut env, &replicasets(), "web");

    let rs = explained(&env, 1);
    assert!(rs.observed && rs.being_deleted);
    assert_eq!(rs.decision, Decision::WaitForBlockingDependents(1));
    assert_eq!(rs.finalizers.len(), 1, "{rs:?}");
    let foreground = &rs.finalizers[0];
    assert_eq!(foreground.name, "foregroundDeletion");
    assert!(foreground.garbage_collectors);
    assert_eq!(foreground.waiting_for_total, 1);
    assert_eq!(name(&foreground.waiting_for[0].object), "held");
    assert_eq!(foreground.waiting_for[0].finalizers, ["example.com/hold"]);
    assert!(!foreground.waiting_for[0].being_deleted);

    // The Pod itself: its owner waits for its dependents' deletion, so it is deleted.
    let pod = explained(&env, 2);
    assert_eq!(pod.owners.len(), 1);
    assert_eq!(pod.owners[0].state, OwnerState::WaitingForDependentsDeletion);
    assert_eq!(pod.owners[0].evidence, Evidence::Observed);
    assert!(pod.owners[0].block_owner_deletion);
    assert_eq!(pod.decision, Decision::Delete { foreground: false });

    // Once deleted, the Pod's foreign finalizer holds it: the API server waits for its
    // controller, and the foreground deletion still names it.
    being_deleted(&mut env, &pods(), "held");
    let pod = explained(&env, 2);
    assert!(matches!(pod.decision, Decision::Nothing(_)), "{pod:?}");
    assert_eq!(pod.finalizers.len(), 1);
    assert!(!pod.finalizers[0].garbage_collectors, "example.com/hold is not the collector's");
    let rs = explained(&env, 1);
    assert!(rs.finalizers[0].waiting_for[0].being_deleted);
}

#[test]
fn a_foreground_chain_is_shown_down_to_what_holds_it() {
    let mut env = env();
    // ReplicaSet web (foreground) ← Pod mid (blocking) ← ConfigMap leaf (blocking), and a
    // cycle back from leaf to mid that must not loop.
    add(&mut env, &replicasets(), meta("web", 1, vec![], &["foregroundDeletion"]));
    let mid_owners = vec![owner("ReplicaSet", "web", 1), owner("ConfigMap", "leaf", 3)];
    add(&mut env, &pods(), meta("mid", 2, mid_owners, &[]));
    add(&mut env, &configmaps(), meta("leaf", 3, vec![owner("Pod", "mid", 2)], &["example.com/x"]));
    being_deleted(&mut env, &replicasets(), "web");
    let rs = explained(&env, 1);
    let mid = &rs.finalizers[0].waiting_for[0];
    assert_eq!(name(&mid.object), "mid");
    assert_eq!(mid.blocking_total, 1);
    assert_eq!(name(&mid.blocking[0].object), "leaf");
    // leaf's blocking dependent is mid again: counted, not followed round the cycle.
    assert_eq!(mid.blocking[0].blocking_total, 1);
    assert!(mid.blocking[0].blocking.is_empty());
}

/// What the object `i` waits for, if it is held for watchers behind: the decision held and
/// the resources it waits for.
fn held_for(env: &Env<MemoryCluster>, i: u32) -> Option<(HeldDecision, Vec<String>)> {
    match explained(env, i).decision {
        Decision::WaitForWatchers { decision, behind } => {
            Some((decision, behind.into_iter().map(|(resource, _)| resource).collect()))
        }
        _ => None,
    }
}

#[test]
fn an_orphaning_deletion_held_for_a_watcher_behind_names_it() {
    let mut env = env();
    add(&mut env, &replicasets(), meta("web", 1, vec![], &["orphan"]));
    add(&mut env, &pods(), meta("a", 2, vec![owner("ReplicaSet", "web", 1)], &[]));
    being_deleted(&mut env, &replicasets(), "web");
    env.collector.note_watch_behind("v1/configmaps", true);
    let configmaps = vec!["v1/configmaps".to_owned()];
    assert_eq!(held_for(&env, 1), Some((HeldDecision::Orphaning, configmaps)));
    env.collector.note_watch_behind("v1/configmaps", false);
    assert_eq!(explained(&env, 1).decision, Decision::OrphanDependents(1));
}

/// Both steps of a foreground deletion that rest on the graph showing no dependents wait: the
/// owner's finalizer (no blocking dependent left) and its dependent's background deletion (it
/// shows none of its own).
#[test]
fn a_foreground_deletion_held_for_a_watcher_behind_names_it() {
    let mut env = env();
    add(&mut env, &replicasets(), meta("web", 1, vec![], &["foregroundDeletion"]));
    let not_blocking =
        OwnerReference { block_owner_deletion: None, ..owner("ReplicaSet", "web", 1) };
    add(&mut env, &pods(), meta("a", 2, vec![not_blocking], &[]));
    being_deleted(&mut env, &replicasets(), "web");
    env.collector.note_watch_behind("v1/configmaps", true);
    let configmaps = vec!["v1/configmaps".to_owned()];
    for i in [1, 2] {
        let held = held_for(&env, i);
        assert_eq!(held, Some((HeldDecision::ForegroundDeletion, configmaps.clone())), "{i}");
    }
    env.collector.note_watch_behind("v1/configmaps", false);
    assert_eq!(explained(&env, 1).decision, Decision::RemoveForegroundFinalizer);
    assert_eq!(explained(&env, 2).decision, Decision::Delete { foreground: false });
}

#[test]
fn an_orphaning_deletion_lists_the_dependents_it_waits_for() {
    let mut env = env();
    add(&mut env, &replicasets(), meta("web", 1, vec![], &["orphan"]));
    for (n, i) in [("a", 2), ("b", 3)] {
        add(&mut env, &pods(), meta(n, i, vec![owner("ReplicaSet", "web", 1)], &[]));
    }
    being_deleted(&mut env, &replicasets(), "web");
    let rs = explained(&env, 1);
    assert_eq!(rs.decision, Decision::OrphanDependents(2));
    assert_eq!(rs.finalizers[0].name, "orphan");
    let mut waiting: Vec<_> =
        rs.finalizers[0].waiting_for.iter().map(|w| name(&w.object)).collect();
    waiting.sort();
    assert_eq!(waiting, ["a", "b"]);
}

#[test]
fn a_solid_second_owner_keeps_the_object_and_dangling_references_go() {
    let mut env = env();
    add(&mut env, &configmaps(), meta("keep", 5, vec![], &[]));
    let owners = vec![owner("ReplicaSet", "gone", 1), owner("ConfigMap", "keep", 5)];
    add(&mut env, &pods(), meta("p", 2, owners, &[]));

    // Before any read: the ReplicaSet is only named, so the collector reads it first.
    let pod = explained(&env, 2);
    assert_eq!(pod.owners[0].state, OwnerState::Unverified);
    assert_eq!(pod.owners[0].evidence, Evidence::Virtual);
    assert_eq!(pod.owners[1].state, OwnerState::Solid);
    assert!(matches!(&pod.decision, Decision::Verify(o) if o.len() == 1 && name(&o[0]) == "gone"));

    // A read proves it absent: the reference is dangling, and the decision is to remove it.
    env.collector.absent_owners().add(ObjectReference::from_owner(
        &kube_gc_engine::patch::owner_ref_from_api(&owner("ReplicaSet", "gone", 1)),
        kube_gc_engine::Namespace::new("ns1"),
    ));
    let pod = explained(&env, 2);
    assert_eq!(
        (pod.owners[0].state, pod.owners[0].evidence),
        (OwnerState::Dangling, Evidence::ProvenAbsent)
    );
    assert!(matches!(&pod.decision, Decision::RemoveReferences(o) if name(&o[0]) == "gone"));

    // The collector removes references only once synced: until then, neither does explain.
    env.collector.begin_warm_up();
    assert_eq!(explained(&env, 2).decision, Decision::DeferredUntilSynced);
    env.collector.finish_warm_up();
    assert!(matches!(explained(&env, 2).decision, Decision::RemoveReferences(_)));
}

#[test]
fn objects_without_owners_or_with_all_owners_gone_and_warm_up() {
    let mut env = env();
    add(&mut env, &configmaps(), meta("alone", 7, vec![], &[]));
    assert!(matches!(explained(&env, 7).decision, Decision::Nothing(_)));
    add(&mut env, &pods(), meta("orphan-pod", 8, vec![owner("ReplicaSet", "never", 9)], &[]));
    // The owner's placeholder is virtual: explaining it says it will be read.
    assert!(matches!(explained(&env, 9).decision, Decision::Verify(_)));
    assert!(!explained(&env, 9).observed);
    // Run the collector: the owner is proven absent and the Pod deleted.
    env.run_attempt_to_delete(20);
    assert!(env.cluster.object(&pods(), "ns1", "orphan-pod").is_none(), "collected");

    // During warm-up a foreground deletion waits for sync.
    add(&mut env, &replicasets(), meta("fg", 10, vec![], &["foregroundDeletion"]));
    being_deleted(&mut env, &replicasets(), "fg");
    env.collector.begin_warm_up();
    let rs = explained(&env, 10);
    assert!(rs.warming_up);
    assert_eq!(rs.decision, Decision::DeferredUntilSynced);
    env.collector.finish_warm_up();
    assert_eq!(explained(&env, 10).decision, Decision::RemoveForegroundFinalizer);

    assert!(block_on(explain(&env.collector, &*env.cluster, Uid::parse(&uid(999)))).is_none());
}

#[test]
fn a_failing_read_shows_as_retries_with_the_last_error_until_it_succeeds() {
    let mut env = env();
    add(&mut env, &pods(), meta("p", 2, vec![owner("ReplicaSet", "flaky", 9)], &[]));
    env.cluster.fail_next(
        kube_gc_testkit::Verb::Get,
        "replicasets",
        "flaky",
        kube_gc_engine::ClusterError::Other { code: 503, message: "etcd is slow".into() },
    );
    // One attempt on the owner's placeholder: its verification fails and it is retried.
    block_on(env.collector.process_attempt_to_delete_worker());
    let rs = explained(&env, 9);
    assert_eq!(rs.retries, 1, "{rs:?}");
    let error = rs.last_error.expect("the last error is kept while retrying");
    assert!(error.contains("etcd is slow"), "{error}");
    // The retry succeeds: the owner is proven absent, the Pod collected, nothing left to explain.
    env.run_attempt_to_delete(20);
    assert!(env.cluster.object(&pods(), "ns1", "p").is_none());
    assert_eq!(env.collector.last_error(Uid::parse(&uid(9))), None);
}

/// The collector's memory of the owners it orphaned, as `attemptToDelete` consults it: an
/// object whose owners are all orphaned owners, gone, has its references removed rather than
/// being deleted, unless it was created after their deletion; while such an owner's orphaning
/// is finishing, nothing is decided yet.
#[test]
fn owners_the_collector_orphaned_are_removed_not_collected() {
    let mut env = env();
    add(&mut env, &pods(), meta("late", 2, vec![owner("ReplicaSet", "gone", 1)], &[]));
    env.collector.absent_owners().add(ObjectReference::from_owner(
        &kube_gc_engine::patch::owner_ref_from_api(&owner("ReplicaSet", "gone", 1)),
        kube_gc_engine::Namespace::new("ns1"),
    ));
    assert_eq!(explained(&env, 2).decision, Decision::Delete { foreground: false });

    let orphaned = env.collector.orphaned_owners();
    let created = env.cluster.object(&pods(), "ns1", "late").unwrap().creation_time.unwrap();
    orphaned.record(Uid::parse(&uid(1)), Some(created));
    assert!(matches!(explained(&env, 2).decision, Decision::Nothing(_)), "finishing");
    orphaned.confirm(Uid::parse(&uid(1)));
    let decision = explained(&env, 2).decision;
    assert!(matches!(&decision, Decision::RemoveReferences(o) if name(&o[0]) == "gone"));
    // Its creationTimestamp unread, which way it goes is not known.
    env.cluster.fail_next(
        kube_gc_testkit::Verb::Get,
        "pods",
        "late",
        kube_gc_engine::ClusterError::Other { code: 503, message: "etcd is slow".into() },
    );
    let unread = explained(&env, 2);
    assert!(matches!(unread.decision, Decision::Nothing(_)), "{unread:?}");
    assert!(unread.live_read_error.is_some_and(|e| e.contains("etcd is slow")));

    // Had the owner's deletion begun well before the Pod was created, no orphaning was meant
    // for the Pod: upstream's decision, as the live read of its creation tells.
    let margin = kube_gc_engine::collector::CREATED_AFTER_MARGIN_SECS;
    orphaned.record(Uid::parse(&uid(1)), Some(created - margin - 1));
    orphaned.confirm(Uid::parse(&uid(1)));
    assert_eq!(explained(&env, 2).decision, Decision::Delete { foreground: false });
}

/// An owner reference whose kind is longer than any served type's: explain says the collector
/// cannot map it and stops there (keeping the object), not that the owner is dangling.
#[test]
fn an_owner_reference_no_server_can_serve_is_reported_unmappable() {
    let mut env = env();
    add(&mut env, &replicasets(), meta("web", 1, vec![], &[]));
    let mut unservable = owner("ReplicaSet", "web", 1);
    unservable.kind = "K".repeat(kube_gc_engine::identity::MAX_TYPE_STRING_LEN + 1);
    add(&mut env, &pods(), meta("p", 2, vec![unservable], &[]));
    let pod = explained(&env, 2);
    assert_eq!(pod.owners[0].evidence, Evidence::Unmappable);
    assert!(matches!(pod.decision, Decision::Nothing(why) if why.contains("no server serves")));
}
