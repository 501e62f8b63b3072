//! The graph's answers without an API call: the ownership tree, and the blast radius of a delete
//! with each policy.

use std::sync::Arc;

use kube_gc_engine::cluster::PropagationPolicy;
use kube_gc_engine::inspect::{blast_radius, tree};
use kube_gc_engine::{
    Event, EventType, Graph, Ingester, ObjectMeta, ObjectType, OwnerReference, Uid,
};

mod support;
use support::{blocking_owner as owner, uid};

fn object(name: &str, i: u32, owners: Vec<OwnerReference>) -> ObjectMeta {
    ObjectMeta {
        uid: uid(i),
        name: name.into(),
        namespace: "ns1".into(),
        resource_version: "1".into(),
        owner_references: owners,
        ..ObjectMeta::default()
    }
}

/// Deployment web (1) → ReplicaSet web-1 (2) → Pods a (3) and b (4); b also owned by the
/// ConfigMap keep (5), which stays; the ReplicaSet also names a Deployment that never existed
/// (6, virtual). Pod c (7) is owned by a and by b.
fn graph() -> Arc<Graph> {
    let graph = Arc::new(Graph::new(4).unwrap());
    let deploy = ObjectType::new("apps/v1", "Deployment");
    let rs = ObjectType::new("apps/v1", "ReplicaSet");
    let pod = ObjectType::new("v1", "Pod");
    let cm = ObjectType::new("v1", "ConfigMap");
    let events = vec![
        Event::new(EventType::Add, deploy, object("web", 1, vec![])),
        Event::new(
            EventType::Add,
            rs,
            object(
                "web-1",
                2,
                vec![
                    owner("apps/v1", "Deployment", "web", 1),
                    owner("apps/v1", "Deployment", "gone", 6),
                ],
            ),
        ),
        Event::new(
            EventType::Add,
            pod,
            object("a", 3, vec![owner("apps/v1", "ReplicaSet", "web-1", 2)]),
        ),
        Event::new(
            EventType::Add,
            pod,
            object(
                "b",
                4,
                vec![
                    owner("apps/v1", "ReplicaSet", "web-1", 2),
                    owner("v1", "ConfigMap", "keep", 5),
                ],
            ),
        ),
        Event::new(EventType::Add, cm, object("keep", 5, vec![])),
        Event::new(
            EventType::Add,
            pod,
            object("c", 7, vec![owner("v1", "Pod", "a", 3), owner("v1", "Pod", "b", 4)]),
        ),
    ];
    let out = Ingester::new(graph.clone(), 2).ingest(&events);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    graph
}

fn names(objects: &[kube_gc_engine::ObjectReference]) -> Vec<&str> {
    objects.iter().map(|o| o.name.as_str()).collect()
}

#[test]
fn background_takes_what_only_the_deleted_own_and_keeps_what_another_owner_holds() {
    let graph = graph();
    let radius = blast_radius(&graph, Uid::parse(&uid(1)), PropagationPolicy::Background).unwrap();
    assert_eq!(names(&radius.deleted), ["web", "web-1", "a"]);
    let kept: Vec<(&str, Vec<&str>)> =
        radius.kept.iter().map(|(o, by)| (o.name.as_str(), names(by))).collect();
    assert_eq!(kept, [("b", vec!["keep"]), ("c", vec!["b"])]);
    assert!(radius.orphaned.is_empty());
    assert_eq!(radius.deleted_by_kind().get("v1/Pod"), Some(&1));
    // Foreground removes the same objects.
    let fg = blast_radius(&graph, Uid::parse(&uid(1)), PropagationPolicy::Foreground).unwrap();
    assert_eq!(fg, radius);
}

#[test]
fn a_shared_dependent_goes_once_every_owner_is_in_the_radius() {
    let graph = graph();
    // Deleting the ConfigMap alone keeps b (its ReplicaSet stays) ...
    let radius = blast_radius(&graph, Uid::parse(&uid(5)), PropagationPolicy::Background).unwrap();
    assert_eq!(names(&radius.deleted), ["keep"]);
    // ... deleting the ReplicaSet takes a, keeps b for the ConfigMap, and c stays for b.
    let radius = blast_radius(&graph, Uid::parse(&uid(2)), PropagationPolicy::Background).unwrap();
    assert_eq!(names(&radius.deleted), ["web-1", "a"]);
    assert_eq!(radius.kept.len(), 2);
}

#[test]
fn orphan_removes_the_root_alone() {
    let graph = graph();
    let radius = blast_radius(&graph, Uid::parse(&uid(2)), PropagationPolicy::Orphan).unwrap();
    assert_eq!(names(&radius.deleted), ["web-1"]);
    let mut orphaned = names(&radius.orphaned);
    orphaned.sort();
    assert_eq!(orphaned, ["a", "b"]);
}

#[test]
fn virtual_owners_have_no_blast_radius() {
    let graph = graph();
    assert!(blast_radius(&graph, Uid::parse(&uid(6)), PropagationPolicy::Background).is_none());
    assert!(blast_radius(&graph, Uid::parse(&uid(99)), PropagationPolicy::Background).is_none());
}

#[test]
fn the_tree_goes_up_to_the_roots_and_down_to_the_leaves() {
    let graph = graph();
    let (up, down) = tree(&graph, Uid::parse(&uid(4)), 10).unwrap();
    // b's owners: web-1 (whose owners are web and the virtual gone) and keep.
    let owners: Vec<&str> = up.children.iter().map(|c| c.identity.name.as_str()).collect();
    assert_eq!(owners, ["web-1", "keep"]);
    let grand: Vec<(&str, bool)> =
        up.children[0].children.iter().map(|c| (c.identity.name.as_str(), c.is_virtual)).collect();
    assert_eq!(grand, [("web", false), ("gone", true)]);
    assert_eq!(down.children.len(), 1, "c");

    let (_, down) = tree(&graph, Uid::parse(&uid(1)), 10).unwrap();
    let rs = &down.children[0];
    let pods: Vec<&str> = rs.children.iter().map(|c| c.identity.name.as_str()).collect();
    assert_eq!(pods.len(), 2);
    // c appears under a and under b: expanded once, marked repeated the second time.
    let c: Vec<bool> =
        rs.children.iter().flat_map(|p| p.children.iter().map(|c| c.repeated)).collect();
    assert_eq!(c.iter().filter(|r| **r).count(), 1);
    // Depth bounds the walk.
    let (_, shallow) = tree(&graph, Uid::parse(&uid(1)), 1).unwrap();
    assert!(shallow.children[0].children.is_empty());
}
