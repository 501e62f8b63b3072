//! What every model shares: the loom entry point with a default preemption bound, and
//! deterministic UIDs and events.

use kube_gc_engine::graph::{GraphSnapshot, NodeSnapshot};
use kube_gc_engine::{
    Event, EventType, Graph, ObjectMeta, ObjectType, OwnerReference, SequentialGraph, Uid,
};

/// The preemption bound when `LOOM_MAX_PREEMPTIONS` is not set (the suite's bound; see README).
const DEFAULT_PREEMPTIONS: usize = 3;

/// Explores every interleaving of `f` up to the preemption bound (`LOOM_MAX_PREEMPTIONS`,
/// else [`DEFAULT_PREEMPTIONS`]), as `loom::model` does.
pub(crate) fn model<F>(f: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(DEFAULT_PREEMPTIONS);
    }
    // Counts the interleavings explored, reported with `--nocapture` (a std atomic: it counts
    // across executions, outside what loom models).
    let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&executions);
    builder.check(move || {
        counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f();
    });
    let executions = executions.load(std::sync::atomic::Ordering::Relaxed);
    let bound = builder.preemption_bound.unwrap_or(0);
    let name = std::thread::current().name().unwrap_or("?").to_owned();
    eprintln!("{name}: {executions} interleavings (preemption bound {bound})");
}

/// The `i`-th test UID, a canonical UUID: UUIDs parse to their value, so a UID's hash, and so
/// its shard, is the same in every run and every thread (interned non-UUID UIDs are not).
pub(crate) fn uid(i: u64) -> String {
    format!("00000000-0000-4000-8000-{i:012x}")
}

/// `n` test UIDs that live in `shard` of `graph`, starting the search at `from`.
pub(crate) fn uids_in_shard(graph: &Graph, shard: usize, from: u64, n: usize) -> Vec<String> {
    (from..).map(uid).filter(|u| graph.shard_of(Uid::parse(u)) == shard).take(n).collect()
}

/// The Pod type.
pub(crate) fn pod_type() -> ObjectType {
    ObjectType::new("v1", "Pod")
}

/// The ReplicaSet type.
pub(crate) fn rs_type() -> ObjectType {
    ObjectType::new("apps/v1", "ReplicaSet")
}

/// A reference to the ReplicaSet `name` with `uid`, blocking its owner's deletion.
pub(crate) fn rs_ref(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Object metadata in namespace `default`.
pub(crate) fn meta(name: &str, uid: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
    ObjectMeta {
        uid: uid.into(),
        name: name.into(),
        namespace: "default".into(),
        owner_references: owners,
        ..ObjectMeta::default()
    }
}

/// An informer add of `object` of type `ty`.
pub(crate) fn add(ty: ObjectType, object: ObjectMeta) -> Event {
    Event::new(EventType::Add, ty, object)
}

/// An informer delete of `object` of type `ty`.
pub(crate) fn delete(ty: ObjectType, object: ObjectMeta) -> Event {
    Event::new(EventType::Delete, ty, object)
}

/// `object` with a deletionTimestamp and the `foregroundDeletion` finalizer.
pub(crate) fn deleting_in_foreground(mut object: ObjectMeta) -> ObjectMeta {
    object.deletion_timestamp = true;
    object.finalizers.push("foregroundDeletion".into());
    object
}

/// The graph [`SequentialGraph`] (upstream's one-event-at-a-time algorithm) builds from
/// `events`: what a batch must leave behind.
pub(crate) fn sequential(events: &[Event]) -> GraphSnapshot {
    let mut reference = SequentialGraph::new();
    reference.apply_all(events);
    reference.snapshot()
}

/// The nodes of `snapshot` that live in `shard` of `graph`.
fn shard_part(graph: &Graph, snapshot: &GraphSnapshot, shard: usize) -> Vec<(Uid, NodeSnapshot)> {
    let nodes = snapshot.nodes.iter().filter(|(u, _)| graph.shard_of(**u) == shard);
    nodes.map(|(u, n)| (*u, n.clone())).collect()
}

/// Asserts that each shard in `seen` (copied while a batch was being applied) is that shard as
/// it was `before` the batch or as it is `after` it, never a mix: a reader copies one shard
/// under one read lock, and a batch writes each shard under one write lock.
pub(crate) fn assert_each_shard_whole(
    graph: &Graph,
    seen: &GraphSnapshot,
    before: &GraphSnapshot,
    after: &GraphSnapshot,
) {
    for shard in 0..graph.shard_count() {
        let got = shard_part(graph, seen, shard);
        assert!(
            got == shard_part(graph, before, shard) || got == shard_part(graph, after, shard),
            "shard {shard} seen half-way through a batch: {got:#?}"
        );
    }
}
