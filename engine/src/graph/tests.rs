//! The graph's unit tests: the shard count, a shard's slab and index, names read back after
//! compaction, a hashed dependents set through a re-identification, UIDs spread over shards.

use super::*;

#[test]
fn shard_count_must_be_a_power_of_two() {
    assert!(Graph::new(0).is_err());
    assert!(Graph::new(3).is_err());
    assert!(Graph::new(MAX_SHARDS * 2).is_err());
    assert_eq!(Graph::new(64).unwrap().shard_count(), 64);
}

#[test]
fn a_shard_finds_every_node_as_its_index_grows_over_reused_slots() {
    use crate::identity::{Namespace, ObjectType};
    let uid = |i: u32| Uid::parse(&format!("00000000-0000-4000-8000-{i:012}"));
    let ty = ObjectType::new("v1", "Pod");
    let mut shard = Shard::default();
    let insert = |shard: &mut Shard, i: u32| {
        let node = Node::new_virtual(ty, Namespace::new("ns"), "pod", uid(i), shard.names_mut());
        shard.insert_absent(node);
    };
    // Grow it, free a third of its slots, then grow it again over those and past them.
    for i in 0..1000 {
        insert(&mut shard, i);
    }
    for i in (0..1000).step_by(3) {
        assert!(shard.remove(uid(i)).is_some());
    }
    for i in 1000..5000 {
        insert(&mut shard, i);
    }
    let live = |i: u32| i >= 1000 || i % 3 != 0;
    assert_eq!(shard.len(), (0..5000).filter(|&i| live(i)).count());
    for i in 0..5000 {
        assert_eq!(shard.get(uid(i)).map(|n| n.uid), live(i).then(|| uid(i)), "node {i}");
    }
}

#[test]
fn names_read_back_the_same_after_their_shard_compacts_them() {
    use std::sync::Arc;

    use crate::identity::ObjectType;
    use crate::ingest::{Event, EventType, Ingester, SequentialGraph};
    use crate::meta::{ObjectMeta, OwnerReference};
    let uid = |i: u32| format!("00000000-0000-4000-8000-{i:012}");
    let long = |i: u32| format!("{}-{i}", "replicaset-with-a-long-name".repeat(3));
    let pod = |i: u32, owner: u32| ObjectMeta {
        uid: uid(i),
        name: long(i),
        namespace: "ns".into(),
        owner_references: vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: long(owner),
            uid: uid(owner),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }],
        ..Default::default()
    };
    let pod_type = ObjectType::new("v1", "Pod");
    // One shard, so that every name shares one arena: 2,000 pods owned by 20 virtual
    // owners (never observed), then most pods re-pointed at other owners, and most deleted.
    let graph = Arc::new(Graph::new(1).unwrap());
    let mut ingester = Ingester::new(graph.clone(), 2);
    let mut reference = SequentialGraph::new();
    let mut batches: Vec<Vec<Event>> = Vec::new();
    batches.push(
        (0..2000).map(|i| Event::new(EventType::Add, pod_type, pod(i, 5000 + i % 20))).collect(),
    );
    batches.push(
        (0..2000)
            .step_by(3)
            .map(|i| Event::update(pod_type, pod(i, 5000 + i % 20), pod(i, 6000 + i % 7)))
            .collect(),
    );
    let owner_now = |i: u32| if i % 3 == 0 { 6000 + i % 7 } else { 5000 + i % 20 };
    batches.push(
        (0..1900).map(|i| Event::new(EventType::Delete, pod_type, pod(i, owner_now(i)))).collect(),
    );
    let capacity = |g: &Graph| g.read_shard(0).names().capacity();
    let mut peak = 0;
    for batch in &batches {
        ingester.ingest(batch);
        reference.apply_all(batch);
        peak = peak.max(capacity(&graph));
        assert_eq!(graph.snapshot(), reference.snapshot());
        graph.check_edge_copies().unwrap();
    }
    assert!(capacity(&graph) * 4 < peak, "{} of {peak} bytes kept", capacity(&graph));
}

#[test]
fn a_hashed_dependents_set_keeps_its_edges_when_its_virtual_owner_is_observed_renamed() {
    use std::sync::Arc;

    use crate::identity::ObjectType;
    use crate::ingest::{Event, EventType, Ingester, SequentialGraph};
    use crate::meta::{ObjectMeta, OwnerReference};
    let uid = |i: u32| format!("00000000-0000-4000-8000-{i:012}");
    let owner_ref = |kind: &str, name: &str| OwnerReference {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid(9999),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    // 40 pods name a never-seen ReplicaSet "rs-a" (compact entries, past the inline
    // limit); every fifth names it as a Deployment (explicit entries). Then the owner's
    // watch delivers it under another name: its entries must still say what each pod named.
    let pod = |i: u32| ObjectMeta {
        uid: uid(i),
        name: format!("pod-{i}"),
        namespace: "ns".into(),
        owner_references: vec![owner_ref(
            if i % 5 == 0 { "Deployment" } else { "ReplicaSet" },
            "rs-a",
        )],
        ..Default::default()
    };
    let rs = ObjectMeta {
        uid: uid(9999),
        name: "rs-b".into(),
        namespace: "ns".into(),
        ..Default::default()
    };
    let pod_type = ObjectType::new("v1", "Pod");
    let rs_type = ObjectType::new("apps/v1", "ReplicaSet");
    let batches = [
        (0..40).map(|i| Event::new(EventType::Add, pod_type, pod(i))).collect::<Vec<_>>(),
        vec![Event::new(EventType::Add, rs_type, rs)],
        (0..33).map(|i| Event::new(EventType::Delete, pod_type, pod(i))).collect(),
    ];
    let graph = Arc::new(Graph::new(4).unwrap());
    let mut ingester = Ingester::new(graph.clone(), 2);
    let mut reference = SequentialGraph::new();
    let owner = Uid::parse(&uid(9999));
    for (step, batch) in batches.iter().enumerate() {
        ingester.ingest(batch);
        reference.apply_all(batch);
        assert_eq!(graph.snapshot(), reference.snapshot(), "after batch {step}");
        graph.check_edge_copies().unwrap_or_else(|e| panic!("after batch {step}: {e}"));
        let hashed = graph.with_node(owner, |n, _| n.dependents.is_hashed()).unwrap();
        assert_eq!(hashed, step < 2, "after batch {step}");
    }
    assert_eq!(graph.node(owner).unwrap().identity.name, "rs-b");
    assert_eq!(graph.blocking_dependents(owner).len(), 7);
}

#[test]
fn uids_spread_over_shards() {
    let g = Graph::new(16).unwrap();
    let mut counts = [0usize; 16];
    for i in 0..16_000u32 {
        counts[g.shard_of(Uid::parse(&format!("uid-{i}")))] += 1;
    }
    assert!(counts.iter().all(|&c| c > 500), "{counts:?}");
}
