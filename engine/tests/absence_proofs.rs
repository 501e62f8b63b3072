//! Bulk proof of absence (`CollectorOptions::bulk_absence_proof`): one consistent LIST of a
//! resource proves absent every waiting virtual owner it does not hold, and only those; what a
//! list cannot answer goes back to upstream's per-owner GET.
//!
//! Each test drives the real collector over a `MemoryCluster` (whose paged LIST reads a
//! snapshot taken at the first page, as etcd's), with the graph fed by the `Ingester`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::executor::block_on;
use kube_gc_engine::Uid;
use kube_gc_engine::cluster::{Cluster, ClusterError, ListPage, Resource};
use kube_gc_engine::collector::absence_proofs::{OWNERS_PER_PAGE, PAGE_SIZE};
use kube_gc_engine::collector::{CollectorOptions, ProofWaits};
use kube_gc_engine::{Event, EventType, Ingester, ObjectMeta, ObjectType, OwnerReference};
use kube_gc_testkit::{Call, MemoryCluster, Verb, resource};

mod support;
use support::{Env, pods, replicasets, uid, until};

fn rs_ref(i: u32) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: format!("rs-{i}"),
        uid: uid(i),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}
fn rs(i: u32) -> ObjectMeta {
    ObjectMeta {
        uid: uid(i),
        name: format!("rs-{i}"),
        namespace: "ns1".into(),
        ..ObjectMeta::default()
    }
}
/// Pod `i` owned by ReplicaSet `owner`.
fn pod(i: u32, owner: u32) -> ObjectMeta {
    ObjectMeta {
        uid: uid(100_000 + i),
        name: format!("pod-{i}"),
        namespace: "ns1".into(),
        owner_references: vec![rs_ref(owner)],
        ..ObjectMeta::default()
    }
}

fn options() -> CollectorOptions {
    CollectorOptions {
        skip_observed_verification: true,
        garbage_first: true,
        read_items_from_graph: true,
        bulk_absence_proof: true,
        early_collection: false,
    }
}

fn is_virtual<C: Cluster>(env: &Env<C>, owner: u32) -> bool {
    env.graph.node(Uid::parse(&uid(owner))).is_some_and(|n| n.is_virtual)
}

fn cluster() -> MemoryCluster {
    let cluster = MemoryCluster::new();
    cluster.register(pods());
    cluster.register(replicasets());
    cluster
}

/// Creates `m` in `cluster` and returns it as stored (with its resourceVersion), as a watch
/// would show it.
fn create(cluster: &MemoryCluster, r: &Resource, m: ObjectMeta) -> ObjectMeta {
    let name = m.name.clone();
    cluster.create(r, m).unwrap();
    cluster.object(r, "ns1", &name).unwrap()
}

/// An environment over `cluster` whose informers have shown `stored`.
fn observing<C: Cluster>(cluster: C, stored: Vec<ObjectMeta>) -> Env<C> {
    let mut env = Env::new(cluster, options());
    for p in stored {
        env.observe_pod_or_replica_set(p);
    }
    env
}

fn count(calls: &[Call], verb: Verb) -> usize {
    calls.iter().filter(|c| c.verb() == verb).count()
}

/// Three owners absent, one present but not yet observed: one LIST proves the three absent,
/// their Pods are deleted with one call each, and the present one goes to the GET (and its Pod
/// stays).
#[test]
fn one_list_proves_every_missing_owner_and_only_those() {
    let cluster = cluster();
    cluster.create(&replicasets(), rs(4)).unwrap();
    let stored: Vec<ObjectMeta> = (1..=4).map(|i| create(&cluster, &pods(), pod(i, i))).collect();
    let mut env = observing(cluster, stored);
    env.drain_attempt_to_delete(10_000); // the four verifications are offered to the prover
    assert_eq!(env.collector.pending_proofs(), 4);
    assert!(env.cluster.calls().is_empty(), "offering costs no call");

    let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
    assert_eq!((round.lists, round.pages, round.proven_absent, round.handed_back), (1, 1, 3, 1));
    env.drain_attempt_to_delete(10_000);
    let calls = env.cluster.take_calls();
    assert_eq!(count(&calls, Verb::List), 1);
    assert_eq!(count(&calls, Verb::Delete), 3, "{calls:#?}");
    let gets: Vec<String> =
        calls.iter().filter(|c| c.verb() == Verb::Get).map(|c| c.action()).collect();
    assert_eq!(gets, ["get apps/v1, Resource=replicasets ns=ns1 name=rs-4"], "the present owner");
    for i in 1..=3 {
        assert!(env.cluster.object(&pods(), "ns1", &format!("pod-{i}")).is_none());
    }
    assert!(env.cluster.object(&pods(), "ns1", "pod-4").is_some(), "its owner lives");
    assert_eq!(env.collector.stats().proven_absent.load(Ordering::Relaxed), 3);
}

/// An owner present but never observed (its resource ignored, or its watch forbidden): each
/// round lists it, hands it back, and its GET requeues it still virtual, as upstream requeues
/// it (#56121). Its backoff grows from round to round, as upstream's, rather than starting
/// over at each offer (a list and a GET every few milliseconds, for ever).
#[test]
fn an_owner_handed_back_round_after_round_keeps_its_backoff() {
    let cluster = cluster();
    cluster.create(&replicasets(), rs(4)).unwrap();
    let stored = create(&cluster, &pods(), pod(4, 4));
    let mut env = observing(cluster, vec![stored]);
    let owner = env.graph.key_of(Uid::parse(&uid(4))).unwrap();
    let queue = env.collector.attempt_to_delete_queue().clone();
    env.drain_attempt_to_delete(10_000);
    for round in 1..=3 {
        assert_eq!(env.collector.pending_proofs(), 1, "offered again in round {round}");
        let proofs = block_on(env.collector.prove_absences(ProofWaits::NONE));
        assert_eq!((proofs.lists, proofs.handed_back), (1, 1));
        env.drain_attempt_to_delete(10_000);
        assert_eq!(queue.num_requeues(&owner), round, "the backoff started over");
    }
    assert!(is_virtual(&env, 4));
    assert!(env.cluster.object(&pods(), "ns1", "pod-4").is_some(), "its owner lives");
}

/// A cluster whose lists panic (a bug in a client, say).
struct PanickingList(MemoryCluster);

impl Cluster for PanickingList {
    support::forward_to!(0: resource_for, consistent_lists, get, patch, delete, record_event);
    async fn list_page(
        &self,
        _: &Resource,
        _: Option<&str>,
        _: u32,
    ) -> Result<kube_gc_engine::cluster::ListPage, ClusterError> {
        panic!("the list broke")
    }
}

/// A proof list that panics hands its owners back to the GET: their items had left the queue
/// when offered, so nothing else would verify them again (their garbage never collected).
#[test]
fn a_list_that_panics_hands_its_owners_back() {
    let cluster = cluster();
    let stored = create(&cluster, &pods(), pod(1, 1));
    let mut env = observing(PanickingList(cluster), vec![stored]);
    env.drain_attempt_to_delete(10_000);
    assert_eq!(env.collector.pending_proofs(), 1);
    let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
    assert_eq!(round.handed_back, 1);
    env.drain_attempt_to_delete(10_000);
    assert!(env.cluster.0.object(&pods(), "ns1", "pod-1").is_none(), "collected after a GET");
}

/// Owners of a resource an aggregated API server serves are never offered to a list (its lists
/// promise no consistency): each takes upstream's GET, and the garbage still goes.
#[test]
fn owners_served_by_an_aggregated_api_server_take_the_get() {
    let cluster = cluster();
    let aggregated = kube_gc_testkit::ResourceOptions { aggregated: true, ..Default::default() };
    cluster.register_with(replicasets(), aggregated);
    let stored: Vec<ObjectMeta> = (1..=3).map(|i| create(&cluster, &pods(), pod(i, i))).collect();
    let mut env = observing(cluster, stored);
    env.drain_attempt_to_delete(10_000);
    assert_eq!(env.collector.pending_proofs(), 0, "nothing offered");
    let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
    assert_eq!(round.lists, 0);
    env.drain_attempt_to_delete(10_000);
    let calls = env.cluster.take_calls();
    assert_eq!(count(&calls, Verb::List), 0, "{calls:#?}");
    assert_eq!(count(&calls, Verb::Get), 3, "one GET per owner: {calls:#?}");
    for i in 1..=3 {
        assert!(env.cluster.object(&pods(), "ns1", &format!("pod-{i}")).is_none());
    }
}

/// Discovery moves on while a proof list runs: the group is found served by an aggregated
/// server, or the owners' kind is no longer served. The list then proves nothing: its owners
/// take the GET (which finds them absent, or cannot map them and keeps their dependents).
#[test]
fn a_list_that_discovery_overtook_proves_nothing() {
    for kind_unserved in [false, true] {
        let cluster = cluster();
        let stored: Vec<ObjectMeta> =
            (1..=3).map(|i| create(&cluster, &pods(), pod(i, i))).collect();
        let mut env = observing(cluster, stored);
        env.drain_attempt_to_delete(10_000);
        assert_eq!(env.collector.pending_proofs(), 3);
        let moved = AtomicBool::new(false);
        env.cluster.on_call(move |cluster, call| {
            if call.verb() == Verb::List && !moved.swap(true, Ordering::SeqCst) {
                if kind_unserved {
                    cluster.unregister("apps/v1", "ReplicaSet");
                } else {
                    let aggregated =
                        kube_gc_testkit::ResourceOptions { aggregated: true, ..Default::default() };
                    cluster.register_with(replicasets(), aggregated);
                }
            }
            None
        });
        let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
        assert_eq!((round.lists, round.proven_absent, round.handed_back), (1, 0, 3));
        // Bounded: owners of a kind no longer served are retried for ever.
        env.run_attempt_to_delete(100);
        let calls = env.cluster.take_calls();
        let gets = count(&calls, Verb::Get);
        let pods_left = (1..=3)
            .filter(|i| env.cluster.object(&pods(), "ns1", &format!("pod-{i}")).is_some())
            .count();
        if kind_unserved {
            assert_eq!((gets, pods_left), (0, 3), "{calls:#?}");
        } else {
            assert_eq!((gets, pods_left), (3, 0), "{calls:#?}");
        }
    }
}

/// An owner recreated under the same name (another UID) is absent, as a GET would find it.
#[test]
fn a_name_held_by_another_uid_proves_the_owner_absent() {
    let cluster = cluster();
    let mut recreated = rs(7);
    recreated.uid = uid(8);
    cluster.create(&replicasets(), recreated).unwrap();
    let stored = create(&cluster, &pods(), pod(1, 7));
    let mut env = Env::new(cluster, options());
    env.observe_pod_or_replica_set(stored);
    env.drain_attempt_to_delete(10_000);
    let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
    assert_eq!(round.proven_absent, 1);
    env.drain_attempt_to_delete(10_000);
    assert!(env.cluster.object(&pods(), "ns1", "pod-1").is_none());
}

/// A failed list proves nothing: its owners take the GET (and their garbage still goes), and
/// the resource is left to the GETs for a while.
#[test]
fn a_failed_list_leaves_its_owners_to_the_get() {
    let cluster = cluster();
    let stored: Vec<ObjectMeta> = (1..=3).map(|i| create(&cluster, &pods(), pod(i, i))).collect();
    cluster.fail_next(
        Verb::List,
        "replicasets",
        "",
        ClusterError::Other { code: 410, message: "expired".into() },
    );
    let mut env = observing(cluster, stored);
    env.drain_attempt_to_delete(10_000);
    let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
    assert_eq!((round.proven_absent, round.handed_back), (0, 3));
    env.drain_attempt_to_delete(10_000);
    let calls = env.cluster.take_calls();
    let actions: Vec<String> = calls.iter().map(|c| c.action()).collect();
    assert_eq!(count(&calls, Verb::Get), 3, "one GET per owner: {actions:#?}");
    assert_eq!(count(&calls, Verb::Delete), 3);
    assert_eq!(env.collector.stats().proof_lists_failed.load(Ordering::Relaxed), 1);

    // A new virtual owner of that resource is not offered while it is left to the GETs.
    let late = create(&env.cluster, &pods(), pod(9, 9));
    env.observe_pod_or_replica_set(late);
    env.drain_attempt_to_delete(10_000);
    assert_eq!(env.collector.pending_proofs(), 0);
    assert!(env.cluster.object(&pods(), "ns1", "pod-9").is_none());
}

/// Few owners of a large resource: the GETs are cheaper than its pages, so no list is made.
#[test]
fn few_owners_of_a_large_resource_take_the_get() {
    let cluster = cluster();
    let stored: Vec<ObjectMeta> = (1..=2).map(|i| create(&cluster, &pods(), pod(i, i))).collect();
    let mut env = Env::new(cluster, options());
    // The ReplicaSets' watcher has listed 5,000 objects: 10 pages.
    env.collector.note_listed(ObjectType::new("apps/v1", "ReplicaSet"), 5_000);
    for p in stored {
        env.observe_pod_or_replica_set(p);
    }
    env.drain_attempt_to_delete(10_000);
    let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
    assert_eq!((round.lists, round.handed_back), (0, 2));
    env.drain_attempt_to_delete(10_000);
    let calls = env.cluster.take_calls();
    assert_eq!((count(&calls, Verb::List), count(&calls, Verb::Get)), (0, 2), "{calls:#?}");
    assert_eq!(count(&calls, Verb::Delete), 2);
}

/// During warm-up, owners wait: for their resource's list to be in the graph, then for enough
/// of them to share the list's pages (or the end of warm-up); one early list per resource.
#[test]
fn during_warm_up_owners_wait_until_a_list_is_worth_it() {
    let cluster = cluster();
    let owners = OWNERS_PER_PAGE as u32;
    let mut stored: Vec<ObjectMeta> =
        (1..=owners).map(|i| create(&cluster, &pods(), pod(i, i))).collect();
    let last = stored.pop().unwrap();
    let mut env = Env::new(cluster, CollectorOptions { early_collection: true, ..options() });
    for p in stored {
        env.observe_pod_or_replica_set(p);
    }
    env.drain_attempt_to_delete(10_000);
    let round = block_on(env.collector.prove_absences(ProofWaits::default()));
    assert_eq!(
        (round.lists, round.waiting),
        (0, owners as usize - 1),
        "ReplicaSets not listed yet"
    );
    env.collector.note_listed(ObjectType::new("apps/v1", "ReplicaSet"), 10);
    let round = block_on(env.collector.prove_absences(ProofWaits::default()));
    assert_eq!(round.lists, 0, "one short of {OWNERS_PER_PAGE} owners per page");
    env.observe_pod_or_replica_set(last);
    env.drain_attempt_to_delete(10_000);
    let round = block_on(env.collector.prove_absences(ProofWaits::default()));
    assert_eq!((round.lists, round.proven_absent), (1, owners as usize));

    // One early list per resource and warm-up: the owners found after it wait for the sync.
    let more: Vec<ObjectMeta> =
        (101..101 + 2 * owners).map(|i| create(&env.cluster, &pods(), pod(i, i))).collect();
    for p in more {
        env.observe_pod_or_replica_set(p);
    }
    env.drain_attempt_to_delete(10_000);
    let round = block_on(env.collector.prove_absences(ProofWaits::default()));
    assert_eq!((round.lists, round.waiting), (0, 2 * owners as usize));
    env.collector.finish_warm_up();
    let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
    assert_eq!((round.lists, round.proven_absent), (1, 2 * owners as usize));
}

/// During warm-up no round looks up owners it cannot decide for (too few to list, and not
/// waiting long enough to be settled), observed or not: an owner observed meanwhile stays until
/// a decision is taken (here at the sync), then goes back to its queue with no list spent on it.
#[test]
fn during_warm_up_owners_that_cannot_be_settled_are_not_looked_up() {
    let cluster = cluster();
    let owner = create(&cluster, &replicasets(), rs(1));
    let stored = create(&cluster, &pods(), pod(1, 1));
    let mut env = Env::new(cluster, CollectorOptions { early_collection: true, ..options() });
    env.observe_pod_or_replica_set(stored);
    env.drain_attempt_to_delete(10_000);
    assert_eq!(env.collector.pending_proofs(), 1);
    env.observe_pod_or_replica_set(owner);
    for listed in [false, true] {
        if listed {
            env.collector.note_listed(ObjectType::new("apps/v1", "ReplicaSet"), 1);
        }
        let round = block_on(env.collector.prove_absences(ProofWaits::default()));
        assert_eq!(
            (round.lists, round.handed_back, round.waiting),
            (0, 0, 1),
            "one owner, short of {OWNERS_PER_PAGE} a page (ReplicaSets listed: {listed})"
        );
    }
    env.collector.finish_warm_up();
    let round = block_on(env.collector.prove_absences(ProofWaits::default()));
    assert_eq!((round.lists, round.handed_back, round.waiting), (0, 1, 0), "observed: back");
    env.drain_attempt_to_delete(10_000);
    assert!(env.cluster.calls().is_empty(), "{:#?}", env.cluster.calls());
    assert!(env.cluster.object(&pods(), "ns1", "pod-1").is_some());
}

/// A warm-up held open past the wait (a resource that never syncs): owners of a resource whose
/// list is in the graph are settled (here a list, cheaper than the GETs), the others take the
/// GET; none waits for a sync that does not come.
#[test]
fn a_warm_up_held_open_does_not_hold_the_owners() {
    let cluster = cluster();
    cluster.register(resource("example.com/v1", "widgets", "Widget", true));
    let stored: Vec<ObjectMeta> = (1..=3).map(|i| create(&cluster, &pods(), pod(i, i))).collect();
    let mut widget_owned = pod(9, 9);
    widget_owned.owner_references[0].api_version = "example.com/v1".into();
    widget_owned.owner_references[0].kind = "Widget".into();
    let widget_owned = create(&cluster, &pods(), widget_owned);
    let mut env = Env::new(cluster, CollectorOptions { early_collection: true, ..options() });
    env.collector.note_listed(ObjectType::new("apps/v1", "ReplicaSet"), 10);
    for p in stored {
        env.observe_pod_or_replica_set(p);
    }
    env.observe_pod_or_replica_set(widget_owned);
    env.drain_attempt_to_delete(10_000);
    assert_eq!(env.collector.pending_proofs(), 4);
    let held_open = ProofWaits { warm_up_max_wait: Duration::ZERO, ..ProofWaits::default() };
    let round = block_on(env.collector.prove_absences(held_open));
    assert_eq!((round.lists, round.proven_absent, round.handed_back), (1, 3, 1));
    env.drain_attempt_to_delete(10_000);
    let calls = env.cluster.take_calls();
    let gets: Vec<String> =
        calls.iter().filter(|c| c.verb() == Verb::Get).map(|c| c.action()).collect();
    assert_eq!(gets, ["get example.com/v1, Resource=widgets ns=ns1 name=rs-9"]);
    assert_eq!(count(&calls, Verb::Delete), 4, "early collection goes on: {calls:#?}");
}

/// A cluster whose LIST, past its first page, waits until the test lets it go on, so that the
/// test can act while a list is under way.
struct GatedList {
    inner: MemoryCluster,
    first_page_served: AtomicBool,
    go_on: AtomicBool,
    pages: AtomicUsize,
}

impl Cluster for GatedList {
    support::forward_to!(inner: resource_for, consistent_lists, get, patch, delete, record_event);
    async fn list_page(
        &self,
        r: &Resource,
        token: Option<&str>,
        limit: u32,
    ) -> Result<ListPage, ClusterError> {
        self.pages.fetch_add(1, Ordering::SeqCst);
        if token.is_some() {
            until(|| self.go_on.load(Ordering::SeqCst)).await;
        }
        let page = self.inner.list_page(r, token, limit).await;
        self.first_page_served.store(true, Ordering::SeqCst);
        page
    }
}

/// An environment over `inner` behind a [`GatedList`], in which Pod 1's owner rs-1 waits for a
/// proof list.
fn waiting_for_rs_1(inner: MemoryCluster) -> Env<GatedList> {
    let gated = GatedList {
        inner,
        first_page_served: AtomicBool::new(false),
        go_on: AtomicBool::new(false),
        pages: AtomicUsize::new(0),
    };
    let mut env = Env::new(gated, options());
    env.observe_pod_or_replica_set(pod(1, 1));
    env.drain_attempt_to_delete(10_000);
    assert_eq!(env.collector.pending_proofs(), 1);
    env
}

/// The rule that makes a list a proof: it must have started after the owner's dependent was
/// observed. An owner created while a list is under way (after its snapshot), whose dependent
/// is observed and whose verification is offered before the list ends, is not on the list's
/// pages: it must wait for the next list, never be judged absent by this one.
#[test]
fn an_owner_offered_while_a_list_runs_waits_for_the_next_list() {
    let inner = cluster();
    // Two pages of ReplicaSets, so the list is under way between them.
    for i in 1..=PAGE_SIZE + 1 {
        inner.create(&replicasets(), rs(10_000 + i)).unwrap();
    }
    inner.create(&pods(), pod(1, 1)).unwrap(); // rs-1 absent: garbage
    let mut env = waiting_for_rs_1(inner);

    let collector = &env.collector;
    let cluster = env.cluster.clone();
    let late_owner = std::cell::Cell::new(None);
    let during_the_list = async {
        until(|| cluster.first_page_served.load(Ordering::SeqCst)).await;
        // After the snapshot: rs-2 is created, its Pod observed, its verification offered.
        cluster.inner.create(&replicasets(), rs(2)).unwrap();
        cluster.inner.create(&pods(), pod(2, 2)).unwrap();
        let out = Ingester::new(env.graph.clone(), 1).ingest(&[Event::new(
            EventType::Add,
            ObjectType::new("v1", "Pod"),
            pod(2, 2),
        )]);
        collector.apply_ingest_output(out);
        while !collector.attempt_to_delete_queue().is_empty() {
            collector.process_attempt_to_delete_worker().await;
        }
        late_owner.set(Some(collector.pending_proofs()));
        cluster.go_on.store(true, Ordering::SeqCst);
    };
    let (round, ()) = block_on(futures::future::join(
        collector.prove_absences(ProofWaits::NONE),
        during_the_list,
    ));
    assert_eq!(late_owner.get(), Some(1), "rs-2's verification was offered during the list");
    assert_eq!(round.proven_absent, 1, "rs-1 only");
    assert!(is_virtual(&env, 2), "rs-2 is still waiting, not judged by a list that predates it");
    assert_eq!(env.collector.pending_proofs(), 1);

    // The next list holds it: rs-2 goes to the GET, its Pod stays.
    let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
    assert_eq!((round.proven_absent, round.handed_back), (0, 1));
    env.drain_attempt_to_delete(10_000);
    assert!(env.cluster.inner.object(&pods(), "ns1", "pod-2").is_some());
    assert!(env.cluster.inner.object(&pods(), "ns1", "pod-1").is_none());
}

/// A long list holds only its own resource's owners: while the ReplicaSets' list is under way,
/// another round proves a ConfigMap owner absent, and leaves a ReplicaSet owner offered
/// meanwhile waiting until that list is done, not listed a second time beside it.
#[test]
fn a_list_under_way_holds_only_its_own_resources_owners() {
    let inner = cluster();
    inner.register(resource("v1", "configmaps", "ConfigMap", true));
    for i in 1..=PAGE_SIZE + 1 {
        inner.create(&replicasets(), rs(10_000 + i)).unwrap();
    }
    let cm_owned = ObjectMeta {
        owner_references: vec![OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "cm-3".into(),
            uid: uid(3),
            ..OwnerReference::default()
        }],
        ..pod(3, 3)
    };
    for p in [pod(1, 1), pod(2, 2), cm_owned.clone()] {
        inner.create(&pods(), p).unwrap(); // rs-1, rs-2 and cm-3 absent: garbage
    }
    let mut env = waiting_for_rs_1(inner);

    let collector = &env.collector;
    let cluster = env.cluster.clone();
    let beside = std::cell::Cell::new(None);
    let during_the_list = async {
        until(|| cluster.first_page_served.load(Ordering::SeqCst)).await;
        let out = Ingester::new(env.graph.clone(), 1).ingest(&[
            Event::new(EventType::Add, ObjectType::new("v1", "Pod"), pod(2, 2)),
            Event::new(EventType::Add, ObjectType::new("v1", "Pod"), cm_owned),
        ]);
        collector.apply_ingest_output(out);
        while !collector.attempt_to_delete_queue().is_empty() {
            collector.process_attempt_to_delete_worker().await;
        }
        // It needs no call the gate holds: it must be done at its first poll.
        beside.set(collector.prove_absences(ProofWaits::NONE).now_or_never());
        cluster.go_on.store(true, Ordering::SeqCst);
    };
    let (round, ()) = block_on(futures::future::join(
        collector.prove_absences(ProofWaits::NONE),
        during_the_list,
    ));
    let beside = beside.get().expect("the round beside the list waited for it");
    assert_eq!((beside.lists, beside.proven_absent, beside.waiting), (1, 1, 1), "{beside:?}");
    assert_eq!(cluster.pages.load(Ordering::SeqCst), 3, "two ReplicaSet pages, one ConfigMap");
    assert_eq!((round.lists, round.proven_absent), (1, 1), "rs-1 by its own list");

    // Once that list is done, rs-2 is settled: one owner, two pages, so the GET.
    let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
    assert_eq!((round.lists, round.handed_back), (0, 1));
    env.drain_attempt_to_delete(10_000);
    for i in 1..=3 {
        assert!(env.cluster.inner.object(&pods(), "ns1", &format!("pod-{i}")).is_none());
    }
}

/// A round dropped in the middle of a list (its task aborted) leaves the resource listable:
/// the next round lists it. (The owners the dropped round had taken go with it, their items
/// forgotten when offered, as before rounds ran side by side: only a controller shutting down
/// drops a round.)
#[test]
fn a_round_dropped_mid_list_leaves_its_resource_listable() {
    let inner = cluster();
    for i in 1..=PAGE_SIZE + 1 {
        inner.create(&replicasets(), rs(10_000 + i)).unwrap();
    }
    for p in [pod(1, 1), pod(2, 2)] {
        inner.create(&pods(), p).unwrap(); // rs-1 and rs-2 absent: garbage
    }
    let mut env = waiting_for_rs_1(inner);
    let dropped = env.collector.prove_absences(ProofWaits::NONE).now_or_never();
    assert!(dropped.is_none(), "the list is held between its pages");
    env.cluster.go_on.store(true, Ordering::SeqCst);

    env.observe_pod_or_replica_set(pod(2, 2));
    env.drain_attempt_to_delete(10_000);
    assert_eq!(env.collector.pending_proofs(), 1);
    let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
    assert_eq!((round.lists, round.proven_absent), (1, 1), "{round:?}");
}

/// An owner observed after it was offered (its resource's list reached the graph meanwhile)
/// needs no proof: no list is spent on it, and its item goes back to be skipped.
#[test]
fn owners_observed_since_they_were_offered_cost_no_list() {
    let cluster = cluster();
    let owner = create(&cluster, &replicasets(), rs(1));
    let stored = create(&cluster, &pods(), pod(1, 1));
    let mut env = Env::new(cluster, options());
    env.observe_pod_or_replica_set(stored);
    env.drain_attempt_to_delete(10_000);
    assert_eq!(env.collector.pending_proofs(), 1);
    env.observe_pod_or_replica_set(owner);
    let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
    assert_eq!((round.lists, round.handed_back), (0, 1));
    env.drain_attempt_to_delete(10_000);
    assert!(env.cluster.calls().is_empty(), "{:#?}", env.cluster.calls());
    assert!(env.cluster.object(&pods(), "ns1", "pod-1").is_some());
}

/// A server whose LIST hands back the continue token it was given.
struct StuckPaging(MemoryCluster);

impl Cluster for StuckPaging {
    support::forward_to!(0: resource_for, consistent_lists, get, patch, delete, record_event);
    async fn list_page(
        &self,
        _: &Resource,
        _: Option<&str>,
        _: u32,
    ) -> Result<ListPage, ClusterError> {
        Ok(ListPage { items: vec![], continue_token: Some("again".into()), remaining: None })
    }
}

/// A list that would page for ever (the same continue token again) fails after two pages, and
/// its owners take the GET: nothing is proven by it, and the garbage still goes.
#[test]
fn a_list_that_pages_for_ever_fails_and_its_owners_take_the_get() {
    let inner = cluster();
    let stored = create(&inner, &pods(), pod(1, 1));
    let mut env = Env::new(StuckPaging(inner), options());
    env.observe_pod_or_replica_set(stored);
    env.drain_attempt_to_delete(10_000);
    let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
    assert_eq!((round.pages, round.proven_absent, round.handed_back), (2, 0, 1));
    assert_eq!(env.collector.stats().proof_lists_failed.load(Ordering::Relaxed), 1);
    env.drain_attempt_to_delete(10_000);
    assert!(env.cluster.0.object(&pods(), "ns1", "pod-1").is_none(), "collected after a GET");
}

/// Owner names a GET would not address as themselves (`.`, `..`, a `/`: upstream's client
/// rewrites them into another path) are never offered to a list nor read: no object can hold
/// such a name, so a list would always prove them absent where upstream reads another object
/// (or fails). Their dependents are kept; a plainly named absent owner's goes as before.
#[test]
fn owner_names_a_get_would_rewrite_are_neither_listed_nor_read() {
    let cluster = cluster();
    cluster.create(&replicasets(), rs(1)).unwrap();
    let odd = [".", "..", "rs-1/", "./rs-1", "rs-1/..", "rs-1/status"];
    let mut stored = Vec::new();
    for (i, name) in (10..).zip(odd) {
        let mut p = pod(i, i);
        p.owner_references[0].name = name.into();
        stored.push(create(&cluster, &pods(), p));
    }
    stored.push(create(&cluster, &pods(), pod(2, 2))); // rs-2 absent: garbage
    let mut env = observing(cluster, stored);
    env.run_attempt_to_delete(1_000);
    assert_eq!(env.collector.pending_proofs(), 1, "only rs-2 is offered");
    let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
    assert_eq!(round.proven_absent, 1);
    // Their virtual owners' reads fail, and are retried for ever (the queue here has no
    // backoff): a bounded run.
    env.run_attempt_to_delete(1_000);
    let calls = env.cluster.take_calls();
    assert_eq!(count(&calls, Verb::Get), 0, "{calls:#?}");
    assert_eq!(count(&calls, Verb::Delete), 1, "{calls:#?}");
    assert!(env.cluster.object(&pods(), "ns1", "pod-2").is_none());
    for i in 10..10 + odd.len() as u32 {
        assert!(env.cluster.object(&pods(), "ns1", &format!("pod-{i}")).is_some(), "pod-{i}");
    }
}

/// A resource whose API moved to an aggregated server (a discovery since its owners were
/// offered) is not listed: its owners take the GET.
#[test]
fn owners_of_a_resource_that_became_aggregated_are_not_listed() {
    let cluster = cluster();
    let stored: Vec<ObjectMeta> = (1..=2).map(|i| create(&cluster, &pods(), pod(i, i))).collect();
    let mut env = observing(cluster, stored);
    env.drain_attempt_to_delete(10_000);
    assert_eq!(env.collector.pending_proofs(), 2);
    let aggregated = kube_gc_testkit::ResourceOptions { aggregated: true, ..Default::default() };
    env.cluster.register_with(replicasets(), aggregated);
    let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
    assert_eq!((round.lists, round.proven_absent, round.handed_back), (0, 0, 2));
    assert_eq!(count(&env.cluster.take_calls(), Verb::List), 0);
    env.drain_attempt_to_delete(10_000);
    assert_eq!(count(&env.cluster.take_calls(), Verb::Get), 2, "one GET per owner");
}

/// A cluster whose list pages drop every item's namespace (a broken server or proxy).
struct NamespacesDropped(MemoryCluster);

impl Cluster for NamespacesDropped {
    support::forward_to!(0: resource_for, consistent_lists, get, patch, delete, record_event);
    async fn list_page(
        &self,
        r: &Resource,
        token: Option<&str>,
        limit: u32,
    ) -> Result<ListPage, ClusterError> {
        let mut page = self.0.list_page(r, token, limit).await?;
        for item in &mut page.items {
            item.namespace.clear();
        }
        Ok(page)
    }
}

/// A list of a namespaced resource whose items come without namespace proves nothing: each
/// would sit at other coordinates than its GET's, and the owner it is would seem absent.
#[test]
fn a_list_of_items_out_of_their_resources_scope_proves_nothing() {
    let inner = cluster();
    inner.create(&replicasets(), rs(1)).unwrap();
    let stored = create(&inner, &pods(), pod(1, 1));
    let mut env = Env::new(NamespacesDropped(inner), options());
    env.observe_pod_or_replica_set(stored);
    env.drain_attempt_to_delete(10_000);
    let round = block_on(env.collector.prove_absences(ProofWaits::NONE));
    assert_eq!((round.proven_absent, round.handed_back), (0, 1));
    assert_eq!(env.collector.stats().proof_lists_failed.load(Ordering::Relaxed), 1);
    // rs-1 exists but is never observed here: its virtual node is verified for ever (#56121).
    env.run_attempt_to_delete(1_000);
    assert!(env.cluster.0.object(&pods(), "ns1", "pod-1").is_some(), "its owner lives");
}
