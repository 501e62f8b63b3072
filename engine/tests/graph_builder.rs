//! The graph builder: one call applies watchers' notifications and the workers' virtual
//! deletes, and queues what they call for; stores are per watcher run.

use std::sync::Arc;

use kube_gc_engine::collector::CollectorOptions;
use kube_gc_engine::meta::ObjectMeta;
use kube_gc_engine::{
    Event, Graph, GraphBuilder, Ingester, Notification, ObjectReference, ObjectType,
    OwnerReference, Uid, WatchBatch, WatchSource,
};
use kube_gc_testkit::MemoryCluster;

mod support;

const RS: &str = "apps/v1/replicasets";
const POD: &str = "v1/pods";

fn pod_type() -> ObjectType {
    ObjectType::new("v1", "Pod")
}

fn rs_type() -> ObjectType {
    ObjectType::new("apps/v1", "ReplicaSet")
}

fn source(resource: &str, generation: u64) -> WatchSource {
    let object_type = if resource == POD { pod_type() } else { rs_type() };
    WatchSource { resource: resource.into(), object_type, generation }
}

fn uid(n: u8) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

fn meta(n: u8, owner: Option<u8>) -> ObjectMeta {
    ObjectMeta {
        uid: uid(n),
        name: format!("o{n}"),
        namespace: "ns".into(),
        owner_references: owner
            .map(|o| OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: format!("o{o}"),
                uid: uid(o),
                ..OwnerReference::default()
            })
            .into_iter()
            .collect(),
        ..ObjectMeta::default()
    }
}

fn batch(resource: &str, generation: u64, notifications: Vec<Notification>) -> WatchBatch {
    WatchBatch { source: source(resource, generation), notifications }
}

/// A whole list of `objects`, as a watcher sends it.
fn list(objects: Vec<ObjectMeta>) -> Vec<Notification> {
    let mut n = vec![Notification::ListStarted];
    n.extend(objects.into_iter().map(Notification::Listed));
    n.push(Notification::ListDone);
    n
}

fn builder() -> (Arc<Graph>, GraphBuilder<MemoryCluster>) {
    let graph = Arc::new(Graph::new(4).unwrap());
    let cluster = Arc::new(MemoryCluster::with_test_resources());
    let (collector, changes) =
        support::immediate_collector(&graph, &cluster, CollectorOptions::default());
    let builder = GraphBuilder::new(Ingester::new(graph.clone(), 2), Arc::new(collector), changes);
    (graph, builder)
}

/// A pod whose owner was never seen: ingesting it queues the owner's verification, with no
/// call beside `ingest`.
#[test]
fn ingest_queues_what_it_finds() {
    let (graph, mut builder) = builder();
    let done = builder.ingest(vec![batch(
        POD,
        1,
        vec![
            Notification::ListStarted,
            Notification::Listed(meta(1, Some(9))),
            Notification::ListDone,
        ],
    )]);
    assert_eq!((done.events, done.applied), (1, 1));
    assert_eq!(done.listed, [source(POD, 1)]);
    assert!(graph.node(Uid::parse(&uid(9))).is_some_and(|n| n.is_virtual));
    assert_eq!(builder.collector().attempt_to_delete_queue().len(), 1, "the virtual owner");
}

/// Virtual deletes left by workers are applied with the next batch, before its notifications.
#[test]
fn virtual_deletes_go_first() {
    let (graph, mut builder) = builder();
    builder.ingest(vec![batch(RS, 1, vec![Notification::Applied(meta(2, None))])]);
    assert_eq!(graph.len(), 1);
    let identity = ObjectReference::new("apps/v1", "ReplicaSet", "ns", "o2", &uid(2));
    builder.graph_changes().push(Event::virtual_delete(&identity));
    // The same batch re-adds it afterwards: it must end up present.
    let done = builder.ingest(vec![batch(RS, 1, vec![Notification::Applied(meta(2, None))])]);
    assert_eq!(done.events, 2);
    assert!(builder.graph_changes().is_empty());
    assert!(graph.node(Uid::parse(&uid(2))).is_some_and(|n| !n.is_virtual));
}

/// The builder keeps its event buffer from one batch to the next: each batch applies its own
/// events once, never again with the next, whether its buffer was cleared on the builder's
/// thread (small batches), on the ingester's pool while the next batch is built (large ones,
/// two in a row here), or not kept (a relist's deletes, more than the builder keeps).
#[test]
fn each_batch_applies_only_its_own_events() {
    let (graph, mut builder) = builder();
    let object = |n: u32| ObjectMeta {
        uid: format!("00000000-0000-4000-8000-{n:012}"),
        name: format!("rs{n}"),
        namespace: "ns".into(),
        ..ObjectMeta::default()
    };
    let many = 20_000;
    let mut next = 0;
    for size in [500, 2500, 2500, 500].into_iter().cycle() {
        let end = (next + size).min(many);
        let listed = (next..end).map(|n| Notification::Listed(object(n))).collect();
        assert_eq!(builder.ingest(vec![batch(RS, 1, listed)]).events, (end - next) as usize);
        next = end;
        if next == many {
            break;
        }
    }
    assert_eq!(builder.ingest(Vec::new()).events, 0, "nothing left over");
    assert_eq!(graph.len(), many as usize);
    let done = builder.ingest(vec![batch(RS, 1, vec![Notification::Applied(object(many))])]);
    assert_eq!(done.events, 1);
    // A relist that returns one object deletes all the others, in one batch.
    let relist =
        vec![Notification::ListStarted, Notification::Listed(object(7)), Notification::ListDone];
    assert_eq!(builder.ingest(vec![batch(RS, 1, relist)]).events, many as usize + 1);
    assert_eq!(graph.len(), 1);
    assert_eq!(builder.ingest(Vec::new()).events, 0, "nothing left over");
    let done = builder.ingest(vec![batch(RS, 1, vec![Notification::Applied(object(8))])]);
    assert_eq!(done.events, 1);
    assert_eq!(graph.len(), 2);
}

/// A relist deletes what its own watcher run emitted and the list no longer returns; a new
/// run of the watcher starts from an empty store; a late batch of a replaced run still applies.
#[test]
fn stores_belong_to_one_watcher_run() {
    let (graph, mut builder) = builder();
    let list = |uids: &[u8]| {
        let mut n = vec![Notification::ListStarted];
        n.extend(uids.iter().map(|&u| Notification::Listed(meta(u, None))));
        n.push(Notification::ListDone);
        n
    };
    builder.ingest(vec![batch(RS, 1, list(&[1, 2, 3]))]);
    assert_eq!(graph.len(), 3);
    let done = builder.ingest(vec![batch(RS, 1, list(&[1, 2]))]);
    assert_eq!(done.events, 3, "two adds and one synthesised delete");
    assert_eq!(graph.len(), 2);
    // Run 2 never emitted 4: its relist without 4 deletes nothing of run 1's.
    builder.ingest(vec![batch(RS, 1, vec![Notification::Applied(meta(4, None))])]);
    let done = builder.ingest(vec![batch(RS, 2, list(&[1, 2]))]);
    assert_eq!(done.events, 2);
    assert_eq!(done.listed, [source(RS, 2)]);
    // Run 1, replaced, still delivers a delete it saw: applied, but it is not run 2's list.
    let late = builder.ingest(vec![batch(RS, 1, vec![Notification::Deleted(meta(4, None))])]);
    assert_eq!(late.applied, 1);
    assert!(late.listed.is_empty());
    assert!(graph.node(Uid::parse(&uid(4))).is_none());
    // Run 2's store is intact: its relist without 2 deletes 2.
    builder.ingest(vec![batch(RS, 2, list(&[1]))]);
    assert_eq!(graph.len(), 1);
}

/// Forgetting a stopped run drops its store, never a later run's.
#[test]
fn forgetting_a_run_spares_later_runs() {
    let (graph, mut builder) = builder();
    let run2 = vec![
        Notification::ListStarted,
        Notification::Listed(meta(1, None)),
        Notification::ListDone,
    ];
    builder.ingest(vec![batch(RS, 2, run2)]);
    builder.forget(&source(RS, 1));
    // Run 2 still remembers 1: its relist without 1 deletes it.
    builder.ingest(vec![batch(RS, 2, vec![Notification::ListStarted, Notification::ListDone])]);
    assert!(graph.is_empty());
    builder.ingest(vec![batch(RS, 2, vec![Notification::Applied(meta(1, None))])]);
    builder.forget(&source(RS, 2));
    // Forgotten: a new run's relist without 1 knows nothing of it.
    builder.ingest(vec![batch(RS, 3, vec![Notification::ListStarted, Notification::ListDone])]);
    assert_eq!(graph.len(), 1);
}

/// A batch of a stopped run that arrives after the run was forgotten (its task was still
/// sending when it was stopped) still applies, but makes no store: a store no watcher feeds
/// would stay behind, and hold orphanings and foreground deletions, until the catch-up timeout.
#[test]
fn a_late_batch_of_a_forgotten_run_makes_no_store() {
    let (graph, mut builder) = builder();
    let list = vec![Notification::ListStarted, Notification::Listed(meta(1, None))];
    builder.ingest(vec![batch(RS, 1, list)]);
    builder.forget(&source(RS, 1));
    // The rest of its list, and a broken watch: a synced run that fell behind, had it a store.
    let late = vec![Notification::ListDone, Notification::Resumed, Notification::Interrupted];
    let done = builder.ingest(vec![batch(RS, 1, late)]);
    assert!(done.listed.is_empty(), "a forgotten run's list is no run's sync");
    assert!(builder.collector().watchers_behind().is_empty(), "a forgotten run holds nothing");
    let late = vec![Notification::Applied(meta(2, None))];
    assert_eq!(builder.ingest(vec![batch(RS, 1, late)]).applied, 1, "its events still apply");
    assert_eq!(graph.len(), 2);
    // A later run makes its store as before, and falls behind as before.
    let run2 = vec![
        Notification::ListStarted,
        Notification::ListDone,
        Notification::Resumed,
        Notification::Interrupted,
    ];
    assert_eq!(builder.ingest(vec![batch(RS, 2, run2)]).listed, [source(RS, 2)]);
    let behind = builder.collector().watchers_behind();
    assert_eq!(behind.iter().map(|(r, _)| r.as_str()).collect::<Vec<_>>(), [RS]);
}

/// Asked to (shadow mode), the builder reports the objects a relist found gone, as the graph
/// held them before: name, namespace and owners. Objects the relist still lists, and deletes a
/// watch delivered, are not among them; unasked, nothing is reported.
#[test]
fn relist_deletions_are_reported_as_the_graph_held_them() {
    for asked in [true, false] {
        let (graph, mut builder) = builder();
        if asked {
            builder.report_relist_deletions();
        }
        let first = builder.ingest(vec![batch(
            POD,
            1,
            list(vec![meta(1, Some(9)), meta(2, Some(9)), meta(3, None)]),
        )]);
        assert!(first.relisted_away.is_empty(), "a first list finds nothing gone");
        builder.ingest(vec![batch(POD, 1, vec![Notification::Deleted(meta(3, None))])]);
        // The watch broke; o2 was deleted meanwhile, o1 stays.
        let done = builder.ingest(vec![batch(POD, 1, list(vec![meta(1, Some(9))]))]);
        assert!(graph.node(Uid::parse(&uid(2))).is_none(), "the relist's delete was applied");
        if !asked {
            assert!(done.relisted_away.is_empty());
            continue;
        }
        let reported: Vec<_> = done
            .relisted_away
            .iter()
            .map(|(resource, node)| {
                let owners: Vec<_> = node.owners.iter().map(|o| o.uid.to_string()).collect();
                (
                    resource.as_str(),
                    node.identity.name.as_str(),
                    node.identity.namespace.as_str(),
                    owners,
                )
            })
            .collect();
        assert_eq!(reported, [(POD, "o2", "ns", vec![uid(9)])]);
    }
}

/// An owner a relist found gone (its delete missed while the watch was down) is cached as
/// absent under the coordinates its dependents name, as an owner whose delete a watch
/// delivered: the deletes a relist synthesizes carry the name and namespace the graph held.
#[test]
fn an_owner_a_relist_found_gone_is_cached_under_its_name() {
    let (graph, mut builder) = builder();
    builder.ingest(vec![
        batch(RS, 1, list(vec![meta(9, None)])),
        batch(POD, 1, list(vec![meta(1, Some(9))])),
    ]);
    assert!(graph.node(Uid::parse(&uid(9))).is_some_and(|n| !n.is_virtual));
    // The ReplicaSets' watch broke and o9 was deleted meanwhile.
    builder.ingest(vec![batch(RS, 1, list(vec![]))]);
    assert!(graph.node(Uid::parse(&uid(9))).is_none());
    let owner = ObjectReference::new("apps/v1", "ReplicaSet", "ns", "o9", &uid(9));
    assert!(
        builder.collector().absent_owners().has(&owner),
        "{:?}",
        builder.collector().absent_owners().contents()
    );
}

/// A relist's delete for an object whose node is virtual again by then (a worker found it
/// gone, and a dependent has named it since) is not completed from that node: its name and
/// namespace are what the dependent claimed, and applied, the delete would first re-identify
/// the node by them and warn dependents in other namespaces of references the object never
/// had. Left nameless, it removes the node and warns no one.
#[test]
fn a_relist_delete_is_not_completed_from_a_virtual_node() {
    let (graph, mut builder) = builder();
    builder.report_relist_deletions();
    builder.ingest(vec![batch(RS, 1, list(vec![meta(9, None)]))]);
    // A worker found o9 gone (its watch broken): a virtual delete.
    let identity = ObjectReference::new("apps/v1", "ReplicaSet", "ns", "o9", &uid(9));
    builder.graph_changes().push(Event::virtual_delete(&identity));
    // Dependents in two other namespaces name it since, under another apiVersion: a virtual
    // node again, whose identity a delete completed from it (of the ReplicaSets' type) would
    // differ from, re-identifying it.
    let in_namespace = |n: u8, namespace: &str| {
        let mut m = ObjectMeta { namespace: namespace.into(), ..meta(n, Some(9)) };
        m.owner_references[0].api_version = "apps/v1beta2".into();
        m
    };
    builder.ingest(vec![batch(POD, 1, list(vec![in_namespace(1, "a"), in_namespace(2, "b")]))]);
    assert!(graph.node(Uid::parse(&uid(9))).is_some_and(|n| n.is_virtual));
    builder.collector().cluster().take_events();
    let done = builder.ingest(vec![batch(RS, 1, list(vec![]))]);
    assert!(done.relisted_away.is_empty(), "{:?}", done.relisted_away);
    let warnings = builder.collector().cluster().take_event_strings();
    assert!(warnings.iter().all(|w| !w.contains("OwnerRefInvalidNamespace")), "{warnings:?}");
}

/// A delete whose last state holds a malformed owner reference (no uid: an aggregated server
/// may not validate them) still removes the object: a delete takes the owners the graph holds.
/// Refused, the object would stay in the graph for ever. An add or update holding one is
/// still refused (counted).
#[test]
fn a_delete_is_applied_whatever_its_owner_references() {
    let (graph, mut builder) = builder();
    builder.ingest(vec![batch(RS, 1, list(vec![meta(9, None)]))]);
    let mut malformed = meta(9, Some(8));
    malformed.owner_references[0].uid = String::new();
    let update = builder.ingest(vec![batch(RS, 1, vec![Notification::Applied(malformed.clone())])]);
    assert_eq!(update.errors.len(), 1, "an update with it is refused");
    let done = builder.ingest(vec![batch(RS, 1, vec![Notification::Deleted(malformed)])]);
    assert!(done.errors.is_empty(), "{:?}", done.errors);
    assert!(graph.node(Uid::parse(&uid(9))).is_none(), "left in the graph");
}
