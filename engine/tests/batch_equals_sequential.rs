//! The batch contract (DESIGN.md, "Batched ingestion"): after every batch, the parallel
//! ingester's graph equals the sequential reference's (upstream's one-event-at-a-time
//! processGraphChanges), and what it queues includes everything the reference queues.
//!
//! Streams are random over a small pool of UIDs, so that they hit same-UID repeats, owner
//! changes, virtual owners promoted with other coordinates, deletes of nodes with dependents,
//! virtual deletes (a worker's "not found"), owners in other namespaces, cluster-scoped owners,
//! cycles, self-references, repeated owner UIDs, non-UUID UIDs and malformed events.
//!
//! `PROPTEST_CASES` sets the number of cases (default 2000).

use std::collections::HashSet;
use std::sync::Arc;

use kube_gc_engine::ingest::Enqueue;
use kube_gc_engine::{
    Event, EventType, Graph, Ingester, ObjectMeta, ObjectType, OwnerReference, SequentialGraph,
};
use proptest::prelude::*;

const UIDS: [&str; 7] = [
    "00000000-0000-4000-8000-000000000001",
    "00000000-0000-4000-8000-000000000002",
    "6dc58edd-5dfe-4794-af95-152bf3551c51",
    "f893a2ee-fb32-455e-b1c1-8690ee42c90b",
    "poduid1",
    "nodeuid1",
    "ABCDEF00-0000-4000-8000-000000000001",
];
const TYPES: [(&str, &str); 5] = [
    ("v1", "Pod"),
    ("v1", "Node"), // cluster-scoped
    ("apps/v1", "ReplicaSet"),
    ("apps/v1beta1", "ReplicaSet"),
    ("v1", "Secret"),
];
const NAMESPACES: [&str; 3] = ["", "ns1", "ns2"];
const FINALIZERS: [&str; 3] = ["orphan", "foregroundDeletion", "example.com/custom"];

fn name_of(uid: usize, variant: bool) -> String {
    if variant { format!("other-{uid}") } else { format!("name-{uid}") }
}

fn owner_ref() -> impl Strategy<Value = OwnerReference> {
    (0..UIDS.len(), 0..TYPES.len(), 0..10u8, 0..4u8, 0..3u8, 0..20u8).prop_map(
        |(u, t, name, block, controller, bad)| OwnerReference {
            api_version: TYPES[t].0.into(),
            // A malformed reference now and then: no kind, or no UID.
            kind: if bad == 0 { String::new() } else { TYPES[t].1.into() },
            // Now and then a name that is a prefix of every object's own (the graph keeps
            // such a name as a prefix of its holder's).
            name: match name {
                0 | 1 => name_of(u, true),
                2 => "name-".to_owned(),
                _ => name_of(u, false),
            },
            uid: if bad == 1 { String::new() } else { UIDS[u].into() },
            controller: [None, Some(true), Some(false)][controller as usize],
            block_owner_deletion: [None, Some(true), Some(false), Some(true)][block as usize],
        },
    )
}

fn meta() -> impl Strategy<Value = (usize, ObjectMeta)> {
    (
        0..UIDS.len(),
        0..NAMESPACES.len(),
        prop::bool::weighted(0.1),
        prop::collection::vec(owner_ref(), 0..4),
        prop::collection::vec(0..FINALIZERS.len(), 0..3),
        prop::bool::weighted(0.3),
        0..40u8,
        (0..4u8, any::<u64>()),
    )
        .prop_map(|(u, ns, other_name, owners, fins, dts, bad, (rv_kind, rv))| {
            // The graph keeps a numeric resourceVersion below 2^56; anything else is unknown.
            let resource_version = match rv_kind {
                0 => String::new(),
                1 => "not-a-number".to_owned(),
                2 => (rv >> 8).to_string(),
                _ => rv.to_string(),
            };
            let meta = ObjectMeta {
                uid: if bad == 0 { String::new() } else { UIDS[u].into() },
                name: name_of(u, other_name),
                namespace: NAMESPACES[ns].into(),
                resource_version,
                owner_references: owners,
                finalizers: fins.into_iter().map(|f| FINALIZERS[f].to_string()).collect(),
                deletion_timestamp: dts,
                ..ObjectMeta::default()
            };
            (u, meta)
        })
}

fn event() -> impl Strategy<Value = Event> {
    (0..10u8, 0..TYPES.len(), meta(), prop::option::weighted(0.5, meta())).prop_map(
        |(kind, t, (_, object), old)| {
            let object_type = ObjectType::new(TYPES[t].0, TYPES[t].1);
            match kind {
                0..=3 => Event::new(EventType::Add, object_type, object),
                4..=6 => {
                    let old = old.map(|(_, mut o)| {
                        o.uid = object.uid.clone();
                        Box::new(o)
                    });
                    Event {
                        event_type: EventType::Update,
                        is_virtual: false,
                        object_type,
                        object,
                        old_object: old,
                    }
                }
                7..=8 => Event::new(EventType::Delete, object_type, object),
                _ => {
                    // A worker's virtual delete carries only the identity.
                    let object = ObjectMeta {
                        uid: object.uid,
                        name: object.name,
                        namespace: object.namespace,
                        ..Default::default()
                    };
                    Event {
                        event_type: EventType::Delete,
                        is_virtual: true,
                        object_type,
                        object,
                        old_object: None,
                    }
                }
            }
        },
    )
}

/// A stream and the sizes of the batches it is cut into.
fn stream() -> impl Strategy<Value = (Vec<Event>, Vec<usize>)> {
    prop::collection::vec(event(), 1..40).prop_flat_map(|events| {
        let n = events.len();
        (Just(events), prop::collection::vec(1..=n, 1..=n))
    })
}

/// Streams cut into batches of at least [`Ingester::SMALL_BATCH`] events (the last one may be
/// shorter): the batches the ingester spreads over its threads.
fn large_batches() -> impl Strategy<Value = (Vec<Event>, Vec<usize>)> {
    let min = Ingester::SMALL_BATCH;
    prop::collection::vec(event(), min..4 * min).prop_flat_map(move |events| {
        let n = events.len();
        (Just(events), prop::collection::vec(min..=n, 1..4))
    })
}

fn queued(out: &[Enqueue]) -> HashSet<(bool, String)> {
    out.iter().map(|e| (e.is_orphan(), e.key().uid.to_string())).collect()
}

fn check(
    events: &[Event],
    cuts: &[usize],
    shards: usize,
    threads: usize,
) -> Result<(), TestCaseError> {
    let graph = Arc::new(Graph::new(shards).unwrap());
    let mut parallel = Ingester::new(graph.clone(), threads);
    let mut sequential = SequentialGraph::new();
    let mut start = 0;
    for (b, &size) in cuts.iter().cycle().enumerate() {
        if start >= events.len() {
            break;
        }
        let batch = &events[start..(start + size).min(events.len())];
        start += batch.len();
        let got = parallel.ingest(batch);
        let want = sequential.apply_all(batch);
        prop_assert_eq!(graph.snapshot(), sequential.snapshot(), "batch #{} graphs differ", b);
        let (got_q, want_q) = (queued(&got.enqueued), queued(&want.enqueued));
        prop_assert!(
            got_q.is_superset(&want_q),
            "batch #{}: missing queue items {:?}",
            b,
            want_q.difference(&got_q).collect::<Vec<_>>()
        );
        let got_absent: HashSet<_> = got.absent_owners.iter().collect();
        prop_assert!(want.absent_owners.iter().all(|a| got_absent.contains(a)), "batch #{}", b);
        prop_assert_eq!(got.errors, want.errors, "batch #{} errors", b);
        prop_assert_eq!(got.applied, want.applied);
        if let Err(e) = graph.check_edge_copies() {
            return Err(TestCaseError::fail(format!("batch #{b}: {e}")));
        }
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn batch_equals_sequential_one_shard((events, cuts) in stream()) {
        check(&events, &cuts, 1, 1)?;
    }

    #[test]
    fn batch_equals_sequential_many_shards_two_threads((events, cuts) in stream()) {
        check(&events, &cuts, 8, 2)?;
    }

    #[test]
    fn batch_equals_sequential_more_threads_than_cores((events, cuts) in stream()) {
        check(&events, &cuts, 64, 3)?;
    }
}

proptest! {
    // Each case ingests a few hundred events.
    #![proptest_config(ProptestConfig::with_cases(cases() / 8))]

    #[test]
    fn large_batches_on_two_threads_equal_sequential((events, cuts) in large_batches()) {
        check(&events, &cuts, 8, 2)?;
    }

    #[test]
    fn large_batches_on_three_threads_equal_sequential((events, cuts) in large_batches()) {
        check(&events, &cuts, 64, 3)?;
    }
}

/// Warnings of the parallel ingester, one event at a time, equal the reference's.
/// (In larger batches a warning about a dependent deleted later in the batch is dropped.)
#[test]
fn one_event_batches_report_the_same_warnings() {
    let mut runner =
        proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(cases() / 4));
    runner
        .run(&prop::collection::vec(event(), 1..30), |events| {
            let graph = Arc::new(Graph::new(4).unwrap());
            let mut parallel = Ingester::new(graph, 2);
            let mut sequential = SequentialGraph::new();
            for e in &events {
                let got = parallel.ingest(std::slice::from_ref(e));
                let want = sequential.apply_all(std::slice::from_ref(e));
                // Dependents are a set (a Go map upstream): warnings about several of them
                // come in no particular order.
                let sorted = |mut w: Vec<kube_gc_engine::cluster::WarningEvent>| {
                    w.sort_by_key(|w| (w.involved.uid, w.message.clone()));
                    w
                };
                prop_assert_eq!(sorted(got.warnings), sorted(want.warnings));
            }
            Ok(())
        })
        .unwrap();
}
