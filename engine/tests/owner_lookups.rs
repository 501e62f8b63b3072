//! Owner GETs are never shared between workers, as upstream's are not: a GET another worker
//! sent before this worker's reference was in hand may predate the owner it names
//! (`collector/classify.rs`, `is_dangling`).
//!
//! The in-memory cluster answers a GET as soon as it is asked, so no GET is ever in flight there
//! while another worker decides; [`HeldGet`] reads the cluster when a GET is sent and holds the
//! answer back until the test lets it go, as a network would.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use futures::executor::block_on;
use kube_gc_engine::cluster::{Cluster, ClusterError, DeleteOptions, Resource};
use kube_gc_engine::collector::CollectorOptions;
use kube_gc_engine::{EventType, ObjectMeta, ObjectType, OwnerReference, Uid};
use kube_gc_testkit::{MemoryCluster, Verb};

mod support;
use support::{Env, pods, replicasets, uid, until};

/// ReplicaSet `web` with UID number `i`.
fn web(i: u32) -> ObjectMeta {
    ObjectMeta { uid: uid(i), name: "web".into(), namespace: "ns1".into(), ..Default::default() }
}

/// Pod `name` (UID number `i`) owned by ReplicaSet `web` with UID number `owner`.
fn pod(name: &str, i: u32, owner: u32) -> ObjectMeta {
    ObjectMeta {
        uid: uid(i),
        name: name.into(),
        namespace: "ns1".into(),
        owner_references: vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web".into(),
            uid: uid(owner),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }],
        ..Default::default()
    }
}

/// A cluster whose first GET reads the store when it is sent and answers only once the test
/// sets `release`; later GETs answer at once.
struct HeldGet {
    inner: MemoryCluster,
    gets_sent: AtomicUsize,
    release: AtomicBool,
}

impl Cluster for HeldGet {
    support::forward_to!(inner: resource_for, consistent_lists, list_page, patch, delete, record_event);
    async fn get(&self, r: &Resource, ns: &str, name: &str) -> Result<ObjectMeta, ClusterError> {
        let answer = self.inner.get(r, ns, name).await;
        if self.gets_sent.fetch_add(1, Ordering::SeqCst) == 0 {
            until(|| self.release.load(Ordering::SeqCst)).await;
        }
        answer
    }
}

/// ReplicaSet `web` is deleted and created again under the same name while one worker's GET
/// of it, sent before the new one existed, is on its way back with 404. A second worker then
/// decides a Pod of the new `web`: it must not take that 404 for its owner (upstream's GET,
/// after the Pod was read, finds the new `web`): it sends a GET of its own and keeps the Pod. The first worker's Pod, owned by the old `web`, is garbage and goes.
#[test]
fn a_lookup_sent_before_the_owner_was_recreated_answers_no_other_worker() {
    let inner = MemoryCluster::new();
    inner.register(pods());
    inner.register(replicasets());
    for m in [web(1), pod("old", 11, 1)] {
        let r = if m.owner_references.is_empty() { replicasets() } else { pods() };
        inner.create(&r, m).unwrap();
    }
    let cluster = HeldGet { inner, gets_sent: AtomicUsize::new(0), release: false.into() };
    let options = CollectorOptions { read_items_from_graph: true, ..CollectorOptions::default() };
    let mut env = Env::new(cluster, options);
    for name in ["web", "old"] {
        let r = if name == "web" { replicasets() } else { pods() };
        let stored = env.cluster.inner.object(&r, "ns1", name).unwrap();
        env.observe_pod_or_replica_set(stored);
    }
    // The old `web` goes; its delete event is not observed yet.
    block_on(env.cluster.inner.delete(&replicasets(), "ns1", "web", &DeleteOptions::default()))
        .unwrap();

    let old_pod = env.graph.key_of(Uid::parse(&uid(11))).unwrap();
    let cluster = Arc::clone(&env.cluster);
    let collector = &env.collector;
    let first = collector.attempt_to_delete_worker(old_pod);
    let second = async {
        // The first worker's GET has read the store (404) and is on its way back.
        until(|| cluster.gets_sent.load(Ordering::SeqCst) == 1).await;
        cluster.inner.create(&replicasets(), web(2)).unwrap();
        let stored = |r: &Resource, m: ObjectMeta| {
            let name = m.name.clone();
            cluster.inner.create(r, m).unwrap();
            cluster.inner.object(r, "ns1", &name).unwrap()
        };
        let new_pod = stored(&pods(), pod("new", 12, 2));
        let out = kube_gc_engine::Ingester::new(env.graph.clone(), 1).ingest(&[
            kube_gc_engine::Event::new(EventType::Add, ObjectType::new("v1", "Pod"), new_pod),
        ]);
        collector.apply_ingest_output(out);
        let key = env.graph.key_of(Uid::parse(&uid(12))).unwrap();
        let decided = collector.attempt_to_delete_worker(key);
        let release = async {
            // Let the held 404 go once the second worker has sent its own GET, or (a worker
            // waiting on the held one instead) after a few thousand polls.
            let polls = std::cell::Cell::new(0);
            until(|| {
                polls.set(polls.get() + 1);
                cluster.gets_sent.load(Ordering::SeqCst) > 1 || polls.get() > 5_000
            })
            .await;
            cluster.release.store(true, Ordering::SeqCst);
        };
        futures::join!(decided, release).0
    };
    block_on(futures::future::join(first, second));

    let inner = &env.cluster.inner;
    assert!(inner.object(&pods(), "ns1", "new").is_some(), "the new web's Pod was collected");
    assert!(inner.object(&pods(), "ns1", "old").is_none(), "the old web's Pod is garbage");
    let gets = inner.calls().iter().filter(|c| c.verb() == Verb::Get).count();
    assert_eq!(gets, 2, "one GET per worker: {:#?}", inner.calls());
}
