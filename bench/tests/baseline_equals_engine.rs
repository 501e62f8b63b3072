//! `upstream_design` builds the graph kube-gc's engine builds: the same nodes, flags, owners and
//! dependents, compared through `GraphSnapshot`, on the warm-up workload (every order, with the
//! no-op update and the delete passes) and on random event streams against the engine's
//! sequential reference.

use std::sync::Arc;

use kube_gc_bench::baseline::GraphBuilder;
use kube_gc_bench::dashmap_graph::DashGraph;
use kube_gc_bench::workload::{Order, SplitMix64, Workload, WorkloadConfig};
use kube_gc_engine::{
    Event, EventType, Graph, Ingester, ObjectMeta, ObjectType, OwnerReference, SequentialGraph, Uid,
};

const N: usize = 2_000;

fn ingest(ingester: &mut Ingester, events: &[Event], batch: usize) -> usize {
    events.chunks(batch).map(|c| ingester.ingest(c).attempt_to_delete().count()).sum()
}

#[test]
fn baseline_builds_the_engines_graph_on_the_warmup_in_every_order() {
    for (i, order) in Order::ALL.into_iter().enumerate() {
        let w = Workload::generate(&WorkloadConfig::new(N, order));
        let graph = Arc::new(Graph::new(16).unwrap());
        let mut ingester = Ingester::new(Arc::clone(&graph), 2);
        let baseline = GraphBuilder::new();

        // Warm-up.
        let engine_atd = ingest(&mut ingester, w.events(), 64);
        let stats = baseline.run(w.events());
        assert_eq!(stats.processed, N, "#{i} {order}");
        assert_eq!(baseline.len(), w.counts().graph_nodes(), "#{i} {order}");
        assert_eq!(graph.len(), w.counts().graph_nodes(), "#{i} {order}");
        assert_eq!(
            baseline.snapshot(),
            graph.snapshot().upstream_fields(),
            "#{i} {order}: after warm-up"
        );
        let expected = w.expected_attempt_to_delete();
        assert_eq!(baseline.attempt_to_delete_len(), expected, "#{i} {order}");
        assert_eq!(engine_atd, expected, "#{i} {order}");
        assert_eq!(stats.virtual_owners_created, expected, "#{i} {order}");

        // No-op updates change nothing.
        let updates = w.update_pass();
        ingest(&mut ingester, &updates, 64);
        baseline.run(&updates);
        assert_eq!(
            baseline.snapshot(),
            graph.snapshot().upstream_fields(),
            "#{i} {order}: after updates"
        );
        assert_eq!(baseline.attempt_to_delete_len(), expected, "#{i} {order}: updates queue");

        // Deletes leave the V virtual owners, without dependents.
        let deletes = w.delete_pass();
        ingest(&mut ingester, &deletes, 64);
        baseline.run(&deletes);
        let snap = graph.snapshot().upstream_fields();
        assert_eq!(baseline.snapshot(), snap, "#{i} {order}: after deletes");
        assert_eq!(snap.nodes.len(), w.counts().virtual_owner_pods, "#{i} {order}");
        assert!(snap.nodes.values().all(|n| n.is_virtual && n.dependents.is_empty()), "#{i}");
    }
}

#[test]
fn dashmap_builds_the_same_nodes_and_edges_on_the_warmup() {
    for (i, order) in Order::ALL.into_iter().enumerate() {
        let w = Workload::generate(&WorkloadConfig::new(N, order));
        let graph = Arc::new(Graph::new(16).unwrap());
        ingest(&mut Ingester::new(Arc::clone(&graph), 1), w.events(), 512);
        let dash = DashGraph::new();
        let created = dash.ingest_adds(w.events(), 3);
        // Where owners are created virtual depends on the threads' interleaving; the V owners
        // never listed always are.
        let c = w.counts();
        assert!(
            (c.virtual_owner_pods..=c.virtual_owner_pods + 2 * c.families).contains(&created),
            "#{i} {order}: {created} virtual owners created"
        );
        let snap = graph.snapshot();
        assert_eq!(dash.len(), snap.nodes.len(), "#{i} {order}");
        dash.for_each(|uid, n| {
            let want = &snap.nodes[&uid];
            assert_eq!(n.is_virtual, want.is_virtual, "#{i} {uid:?}");
            let mut deps: Vec<Uid> = n.dependents.iter().copied().collect();
            deps.sort_unstable();
            assert_eq!(deps, want.dependents, "#{i} {uid:?}");
            assert_eq!(n.owners.len(), want.owners.len(), "#{i} {uid:?}");
        });
    }
}

/// Random event streams over a few UIDs: adds, updates that change owners, flags and
/// finalizers, deletes, owners in other namespaces and cluster-scoped, cycles. No virtual
/// deletes (the baseline leaves out alternate identities) and no repeated owner UIDs.
fn random_stream(rng: &mut SplitMix64, len: usize) -> Vec<Event> {
    const UIDS: [&str; 6] = [
        "00000000-0000-4000-8000-000000000001",
        "00000000-0000-4000-8000-000000000002",
        "6dc58edd-5dfe-4794-af95-152bf3551c51",
        "f893a2ee-fb32-455e-b1c1-8690ee42c90b",
        "poduid1",
        "nodeuid1",
    ];
    const TYPES: [(&str, &str); 4] =
        [("v1", "Pod"), ("v1", "Node"), ("apps/v1", "ReplicaSet"), ("apps/v1beta1", "ReplicaSet")];
    const NAMESPACES: [&str; 3] = ["", "ns1", "ns2"];
    const FINALIZERS: [&str; 3] = ["orphan", "foregroundDeletion", "example.com/custom"];
    let mut pick = |n: usize| (rng.next() % n as u64) as usize;
    let meta = |pick: &mut dyn FnMut(usize) -> usize| {
        let u = pick(UIDS.len());
        let mut owners: Vec<OwnerReference> = Vec::new();
        for _ in 0..pick(3) {
            let o = pick(UIDS.len());
            if owners.iter().any(|r| r.uid == UIDS[o]) {
                continue;
            }
            let t = pick(TYPES.len());
            owners.push(OwnerReference {
                api_version: TYPES[t].0.into(),
                kind: TYPES[t].1.into(),
                name: if pick(5) == 0 { format!("other-{o}") } else { format!("name-{o}") },
                uid: UIDS[o].into(),
                controller: [None, Some(true), Some(false)][pick(3)],
                block_owner_deletion: [None, Some(true), Some(false)][pick(3)],
            });
        }
        ObjectMeta {
            uid: UIDS[u].into(),
            name: if pick(8) == 0 { format!("other-{u}") } else { format!("name-{u}") },
            namespace: NAMESPACES[pick(3)].into(),
            resource_version: String::new(),
            owner_references: owners,
            finalizers: (0..pick(3)).map(|_| FINALIZERS[pick(3)].to_owned()).collect(),
            deletion_timestamp: pick(4) == 0,
            ..ObjectMeta::default()
        }
    };
    (0..len)
        .map(|_| {
            let t = pick(TYPES.len());
            let ty = ObjectType::new(TYPES[t].0, TYPES[t].1);
            let object = meta(&mut pick);
            match pick(10) {
                0..=3 => Event::new(EventType::Add, ty, object),
                4..=7 => {
                    let mut old = meta(&mut pick);
                    old.uid = object.uid.clone();
                    Event::update(ty, old, object)
                }
                _ => Event::new(EventType::Delete, ty, object),
            }
        })
        .collect()
}

#[test]
fn baseline_equals_the_sequential_reference_on_random_streams() {
    let mut rng = SplitMix64::new(7);
    for case in 0..2_000 {
        let events = random_stream(&mut rng, 24);
        let mut reference = SequentialGraph::new();
        let baseline = GraphBuilder::new();
        for (j, e) in events.iter().enumerate() {
            reference.apply_all(std::slice::from_ref(e));
            baseline.apply_all(std::slice::from_ref(e));
            assert_eq!(
                baseline.snapshot(),
                reference.snapshot().upstream_fields(),
                "case #{case}, after event #{j}: {events:#?}"
            );
        }
    }
}
