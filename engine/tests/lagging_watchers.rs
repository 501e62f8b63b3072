//! Orphaning waits for a watcher that fell behind (chaos seed 1740): an owner deleted with
//! `orphan` while the watcher of one of its dependents' resources is down must not lose its
//! finalizer before that watcher has delivered what it missed, or the dependent keeps a
//! reference to an absent owner, and a collector that restarts (forgetting the owners it
//! orphaned) collects it. A foreground deletion waits the same way before it removes its
//! `foregroundDeletion` finalizer, or the owner goes before a blocking dependent it missed.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::executor::block_on;
use kube_gc_engine::cluster::{Cluster, DeleteOptions, PropagationPolicy, Resource};
use kube_gc_engine::collector::{Collector, CollectorOptions};
use kube_gc_engine::meta::ObjectMeta;
use kube_gc_engine::{
    EventType, Graph, GraphBuilder, Ingester, Notification, ObjectType, OwnerReference, WatchBatch,
    WatchSource,
};
use kube_gc_testkit::MemoryCluster;
use kube_gc_testkit::memory_cluster::{Call, Verb, resource};

mod support;

const RS: &str = "apps/v1/replicasets";
const CM: &str = "v1/configmaps";

fn replicasets() -> Resource {
    resource("apps/v1", "replicasets", "ReplicaSet", true)
}

fn configmaps() -> Resource {
    resource("v1", "configmaps", "ConfigMap", true)
}

fn source(resource: &str) -> WatchSource {
    let object_type = match resource {
        RS => ObjectType::new("apps/v1", "ReplicaSet"),
        _ => ObjectType::new("v1", "ConfigMap"),
    };
    WatchSource { resource: resource.into(), object_type, generation: 1 }
}

fn batch(resource: &str, notifications: Vec<Notification>) -> WatchBatch {
    WatchBatch { source: source(resource), notifications }
}

struct World {
    cluster: Arc<MemoryCluster>,
    builder: GraphBuilder<MemoryCluster>,
    owner: ObjectMeta,
}

impl World {
    /// A ReplicaSet `owner` and its dependent ReplicaSet `child`, both watchers synced, and
    /// the configmaps watcher synced with nothing; each watch after its list is back.
    fn new(timeout: Duration) -> World {
        let mut w = World::listed(timeout);
        w.builder.ingest(vec![batch(CM, vec![Notification::Resumed])]);
        w
    }

    /// As [`World::new`], but the configmaps watch after its list has not delivered yet.
    fn listed(timeout: Duration) -> World {
        let cluster = Arc::new(MemoryCluster::with_test_resources());
        let graph = Arc::new(Graph::new(4).unwrap());
        let (collector, changes) =
            support::immediate_collector(&graph, &cluster, CollectorOptions::default());
        let collector = collector.with_catch_up_timeout(timeout);
        let mut builder = GraphBuilder::new(Ingester::new(graph, 2), Arc::new(collector), changes);
        let owner = cluster.create(&replicasets(), meta(1, "owner", None)).unwrap();
        let child = cluster.create(&replicasets(), meta(2, "child", Some(&owner))).unwrap();
        builder.ingest(vec![
            batch(
                RS,
                vec![
                    Notification::ListStarted,
                    Notification::Listed(owner.clone()),
                    Notification::Listed(child),
                    Notification::ListDone,
                    Notification::Resumed,
                ],
            ),
            batch(CM, vec![Notification::ListStarted, Notification::ListDone]),
        ]);
        World { cluster, builder, owner }
    }

    fn collector(&self) -> &Arc<Collector<MemoryCluster>> {
        self.builder.collector()
    }

    /// The user deletes the owner with `orphan`; its watcher delivers the change.
    fn delete_owner_orphan(&mut self) {
        self.delete_owner(PropagationPolicy::Orphan, "orphan");
    }

    /// The user deletes the owner with `policy`, which sets `finalizer` on it; its watcher
    /// delivers the change.
    fn delete_owner(&mut self, policy: PropagationPolicy, finalizer: &str) {
        let options =
            DeleteOptions { propagation_policy: Some(policy), ..DeleteOptions::default() };
        block_on(self.cluster.delete(&replicasets(), "ns", "owner", &options)).unwrap();
        let deleting = self.cluster.object(&replicasets(), "ns", "owner").unwrap();
        assert!(deleting.deletion_timestamp && deleting.has_finalizer(finalizer));
        self.builder.ingest(vec![batch(RS, vec![Notification::Applied(deleting)])]);
        self.cluster.take_watch_events();
    }

    /// The configmaps watch breaks, a ConfigMap that blocks the owner is created meanwhile
    /// (returned), and the owner is deleted in the foreground.
    fn break_configmaps_and_delete_the_owner_in_the_foreground(&mut self) -> ObjectMeta {
        self.builder.ingest(vec![batch(CM, vec![Notification::Interrupted])]);
        let mut blocking = meta(3, "child-cm", Some(&self.owner));
        blocking.owner_references[0].block_owner_deletion = Some(true);
        let cm = self.cluster.create(&configmaps(), blocking).unwrap();
        self.delete_owner(PropagationPolicy::Foreground, "foregroundDeletion");
        cm
    }

    /// Runs the attemptToDelete worker and delivers what it changed to the graph, both
    /// watchers up, until neither has anything left; returns the writes made, in order.
    fn collect_until_quiet(&mut self) -> Vec<Call> {
        let mut writes = Vec::new();
        loop {
            while !self.collector().attempt_to_delete_queue().is_empty() {
                block_on(self.collector().process_attempt_to_delete_worker());
            }
            let calls = self.cluster.take_calls();
            writes.extend(
                calls.into_iter().filter(|c| matches!(c.verb(), Verb::Patch | Verb::Delete)),
            );
            let events = self.cluster.take_watch_events();
            if events.is_empty() {
                return writes;
            }
            for e in events {
                let resource = if e.object_type.kind() == "ReplicaSet" { RS } else { CM };
                let notification = match e.event_type {
                    EventType::Delete => Notification::Deleted(e.object),
                    _ => Notification::Applied(e.object),
                };
                self.builder.ingest(vec![batch(resource, vec![notification])]);
            }
        }
    }

    /// The configmaps watch breaks, the owner is deleted with `orphan`: its orphaning is held.
    fn break_configmaps_and_orphan_the_owner(&mut self) {
        self.builder.ingest(vec![batch(CM, vec![Notification::Interrupted])]);
        self.delete_owner_orphan();
        self.orphan();
        assert!(self.owner_exists(), "held while a watcher is behind");
    }

    /// With a watcher behind: a ConfigMap naming the owner is created (returned), the owner is
    /// deleted with `orphan`, and its orphaning is held without a read or a write.
    fn orphan_the_owner_with_a_configmap_unseen(&mut self) -> ObjectMeta {
        assert_eq!(self.collector().watchers_behind().len(), 1);
        let owner = self.owner.clone();
        let cm = self.cluster.create(&configmaps(), meta(3, "child-cm", Some(&owner))).unwrap();
        self.delete_owner_orphan();
        self.cluster.take_calls();
        self.orphan();
        assert!(self.cluster.take_calls().is_empty(), "held: no read, no write");
        assert!(self.owner_exists() && self.references_owner(&replicasets(), "child"));
        cm
    }

    /// Runs the attemptToOrphan worker while it has work.
    fn orphan(&self) {
        while !self.collector().attempt_to_orphan_queue().is_empty() {
            block_on(self.collector().process_attempt_to_orphan_worker());
        }
    }

    fn references_owner(&self, resource: &Resource, name: &str) -> bool {
        let object = self.cluster.object(resource, "ns", name).unwrap();
        object.owner_references.iter().any(|r| r.uid == self.owner.uid)
    }

    fn owner_exists(&self) -> bool {
        self.cluster.object(&replicasets(), "ns", "owner").is_some()
    }
}

fn actions(calls: &[Call]) -> Vec<String> {
    calls.iter().map(Call::action).collect()
}

fn meta(i: u32, name: &str, owner: Option<&ObjectMeta>) -> ObjectMeta {
    ObjectMeta {
        uid: support::uid(i),
        name: name.into(),
        namespace: "ns".into(),
        owner_references: owner
            .map(|o| OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: o.name.clone(),
                uid: o.uid.clone(),
                ..OwnerReference::default()
            })
            .into_iter()
            .collect(),
        ..ObjectMeta::default()
    }
}

/// The configmaps watch breaks; a ConfigMap naming the owner is created meanwhile; the owner
/// is deleted with `orphan`. Nothing is written until the watch resumes and delivers the
/// ConfigMap; then both dependents are orphaned and the owner goes.
#[test]
fn orphaning_waits_for_a_broken_watch_and_orphans_what_it_missed() {
    let mut w = World::new(Duration::from_secs(60));
    w.builder.ingest(vec![batch(CM, vec![Notification::Interrupted])]);
    let cm = w.orphan_the_owner_with_a_configmap_unseen();
    assert_eq!(w.collector().stats().orphans_held_for_watchers.load(Ordering::Relaxed), 1);

    // Back: the missed ConfigMap first, then the resumption, in one batch or two alike.
    w.builder.ingest(vec![batch(CM, vec![Notification::Resumed, Notification::Applied(cm)])]);
    assert!(w.collector().watchers_behind().is_empty());
    assert_eq!(w.collector().attempt_to_orphan_queue().len(), 1, "queued again at once");
    w.orphan();
    assert!(!w.references_owner(&replicasets(), "child"));
    assert!(!w.references_owner(&configmaps(), "child-cm"), "the missed dependent is orphaned");
    assert!(!w.owner_exists());
}

/// The configmaps watch breaks; a ConfigMap that blocks the owner is created meanwhile; the
/// owner is deleted in the foreground. Its `foregroundDeletion` stays until the watch resumes
/// and delivers the ConfigMap; then the ConfigMap is deleted first, and the owner after it.
#[test]
fn a_foreground_deletion_waits_for_a_broken_watch_and_for_what_it_missed() {
    let mut w = World::new(Duration::from_secs(60));
    let cm = w.break_configmaps_and_delete_the_owner_in_the_foreground();
    w.cluster.take_calls();
    // Held, and so is the ReplicaSet child (which does not block, and shows no dependents):
    // no write at all.
    assert_eq!(actions(&w.collect_until_quiet()), Vec::<String>::new());
    assert!(w.owner_exists());
    let stats = w.collector().stats();
    assert_eq!(stats.foreground_deletions_held_for_watchers.load(Ordering::Relaxed), 2);

    w.builder.ingest(vec![batch(CM, vec![Notification::Resumed, Notification::Applied(cm)])]);
    assert_eq!(w.collector().attempt_to_delete_queue().len(), 2, "queued again at once");
    let writes = actions(&w.collect_until_quiet());
    let cm_deleted =
        writes.iter().position(|a| a.starts_with("delete") && a.ends_with("name=child-cm"));
    let owner_released =
        writes.iter().position(|a| a.starts_with("patch") && a.ends_with("name=owner"));
    assert!(
        cm_deleted.is_some() && cm_deleted < owner_released,
        "the blocking ConfigMap goes before the owner: {writes:?}"
    );
    assert!(!w.owner_exists());
}

/// A dependent that blocks a foreground-deleted owner, whose own dependent the broken watch
/// missed, is not deleted in the background meanwhile (its dependent would then outlive the
/// owner's wait): once the watch delivers that dependent, it is deleted in the foreground.
/// (It blocks, so that the owner waits for it whichever the held items run first; a
/// dependent that does not block may go in the background once its owner is gone, as
/// upstream's would.)
#[test]
fn a_dependent_of_a_foreground_deletion_waits_to_see_its_own_dependents() {
    let mut w = World::new(Duration::from_secs(60));
    let mut blocker = meta(4, "blocker", Some(&w.owner));
    blocker.owner_references[0].block_owner_deletion = Some(true);
    let blocker = w.cluster.create(&replicasets(), blocker).unwrap();
    w.builder.ingest(vec![batch(RS, vec![Notification::Applied(blocker.clone())])]);
    w.builder.ingest(vec![batch(CM, vec![Notification::Interrupted])]);
    let cm = w.cluster.create(&configmaps(), meta(3, "grandchild", Some(&blocker))).unwrap();
    w.delete_owner(PropagationPolicy::Foreground, "foregroundDeletion");
    w.cluster.take_calls();
    assert_eq!(actions(&w.collect_until_quiet()), Vec::<String>::new(), "held: no write");
    assert!(w.cluster.object(&replicasets(), "ns", "blocker").is_some());

    w.builder.ingest(vec![batch(CM, vec![Notification::Resumed, Notification::Applied(cm)])]);
    let writes = w.collect_until_quiet();
    let blocker_deleted = writes.iter().find(|c| c.verb() == Verb::Delete && c.name == "blocker");
    let policy = blocker_deleted.and_then(|c| c.delete_options()?.propagation_policy);
    assert_eq!(policy, Some(PropagationPolicy::Foreground), "{:?}", actions(&writes));
    assert!(!w.owner_exists());
}

/// With a zero timeout (upstream's behaviour), the owner's `foregroundDeletion` goes while the
/// blocking ConfigMap the broken watch missed still exists.
#[test]
fn without_a_timeout_a_foreground_owner_goes_before_what_it_missed() {
    let mut w = World::new(Duration::ZERO);
    w.break_configmaps_and_delete_the_owner_in_the_foreground();
    w.collect_until_quiet();
    assert!(!w.owner_exists());
    assert!(w.cluster.object(&configmaps(), "ns", "child-cm").is_some());
}

/// A relist (a 410 Gone, or a first watch after a failed list) holds orphaning until its end,
/// and past it until the watch after it has delivered what changed since the list.
#[test]
fn a_relist_holds_orphaning_until_its_watch_is_back() {
    let mut w = World::new(Duration::from_secs(60));
    let owner = w.owner.clone();
    let cm = w.cluster.create(&configmaps(), meta(3, "child-cm", Some(&owner))).unwrap();
    w.builder.ingest(vec![batch(CM, vec![Notification::ListStarted])]);
    w.delete_owner_orphan();
    w.orphan();
    assert!(w.owner_exists() && w.references_owner(&replicasets(), "child"));
    // A watch "resuming" in the middle of a list does not end it.
    w.builder.ingest(vec![batch(CM, vec![Notification::Resumed, Notification::Listed(cm)])]);
    assert_eq!(w.collector().watchers_behind().len(), 1);
    w.builder.ingest(vec![batch(CM, vec![Notification::ListDone])]);
    assert_eq!(w.collector().watchers_behind().len(), 1, "the watch after the list is to come");
    w.orphan();
    assert!(w.owner_exists());
    w.builder.ingest(vec![batch(CM, vec![Notification::Resumed])]);
    w.orphan();
    assert!(!w.references_owner(&configmaps(), "child-cm"));
    assert!(!w.owner_exists());
}

/// Right after the first lists (a window that fits chaos seed 2184): a ConfigMap created after its
/// resource was listed, and before the owner is deleted with `orphan`, comes with the watch
/// after the list; the orphaning waits for that watch to deliver, then orphans it too. Without
/// the wait the owner would go first, the ConfigMap would keep its reference to it, and only
/// the in-process memory of orphaned owners would keep it from being collected.
#[test]
fn orphaning_waits_for_the_watch_after_a_list() {
    let mut w = World::listed(Duration::from_secs(60));
    let cm = w.orphan_the_owner_with_a_configmap_unseen();

    w.builder.ingest(vec![batch(CM, vec![Notification::Applied(cm), Notification::Resumed])]);
    assert!(w.collector().watchers_behind().is_empty());
    w.orphan();
    assert!(!w.references_owner(&replicasets(), "child"));
    assert!(!w.references_owner(&configmaps(), "child-cm"), "the late dependent is orphaned");
    assert!(!w.owner_exists());
    assert_eq!(w.collector().stats().late_orphans.load(Ordering::Relaxed), 0);
}

/// Upstream's behaviour, with a zero timeout: the orphaning goes ahead at once, and the
/// ConfigMap the broken watch missed keeps its reference to an owner that is gone (what the
/// other tests guard against; the in-process memory of orphaned owners mends it, until a
/// restart).
#[test]
fn without_a_timeout_the_missed_dependent_keeps_its_reference() {
    let mut w = World::new(Duration::ZERO);
    w.builder.ingest(vec![batch(CM, vec![Notification::Interrupted])]);
    let owner = w.owner.clone();
    w.cluster.create(&configmaps(), meta(3, "child-cm", Some(&owner))).unwrap();
    w.delete_owner_orphan();
    w.orphan();
    assert!(!w.owner_exists());
    assert!(w.references_owner(&configmaps(), "child-cm"));
}

/// A watcher behind for longer than the timeout holds nothing: kube-gc proceeds as upstream
/// (and counts it), rather than keep owners for ever behind a resource that never recovers.
#[test]
fn a_watcher_behind_past_the_timeout_no_longer_holds_orphaning() {
    let mut w = World::new(Duration::from_millis(20));
    w.break_configmaps_and_orphan_the_owner();
    std::thread::sleep(Duration::from_millis(30));
    // The worker sees it again once the timeout has passed (the queue's delayed add).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while w.owner_exists() && std::time::Instant::now() < deadline {
        w.orphan();
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!w.owner_exists());
    let stats = w.collector().stats();
    assert_eq!(stats.orphans_past_catch_up_timeout.load(Ordering::Relaxed), 1);
}

/// A watcher stopped for good (its resource gone) or replaced by a new run holds nothing.
#[test]
fn a_stopped_or_replaced_watcher_releases_what_it_held() {
    let mut w = World::new(Duration::from_secs(60));
    w.break_configmaps_and_orphan_the_owner();
    w.builder.forget(&source(CM));
    assert!(w.collector().watchers_behind().is_empty());
    w.orphan();
    assert!(!w.owner_exists());

    let mut w = World::new(Duration::from_secs(60));
    w.builder.ingest(vec![batch(CM, vec![Notification::Interrupted])]);
    let next_run = WatchSource { generation: 2, ..source(CM) };
    w.builder.ingest(vec![WatchBatch { source: next_run, notifications: vec![] }]);
    assert!(w.collector().watchers_behind().is_empty(), "a new run starts in warm-up");
}

/// A watcher that never synced is warm-up's business: its breaks hold nothing here.
#[test]
fn a_watcher_that_never_synced_is_not_behind() {
    let mut w = World::new(Duration::from_secs(60));
    let secrets = WatchSource {
        resource: "v1/secrets".into(),
        object_type: ObjectType::new("v1", "Secret"),
        generation: 1,
    };
    let notifications = vec![Notification::ListStarted, Notification::Interrupted];
    w.builder.ingest(vec![WatchBatch { source: secrets, notifications }]);
    assert!(w.collector().watchers_behind().is_empty());
    w.delete_owner_orphan();
    w.orphan();
    assert!(!w.owner_exists());
}
