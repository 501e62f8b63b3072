//! What the carried-over tests share: upstream's `makeID`, `makeObj`, `makeAddEvent`,
//! `verifyGraphInvariants`, the resources of its fake REST mapper, and a collector over a
//! MemoryCluster.

pub(crate) use std::collections::{BTreeMap, BTreeSet};
pub(crate) use std::sync::Arc;

pub(crate) use futures::executor::block_on;
pub(crate) use kube_gc_engine::GraphChanges;
pub(crate) use kube_gc_engine::absent_owner_cache::AbsentOwnerCache;
pub(crate) use kube_gc_engine::cluster::{ClusterError, Resource};
pub(crate) use kube_gc_engine::collector::{Collector, DeleteItemResult, ItemError, Outcome};
pub(crate) use kube_gc_engine::graph::{GraphSnapshot, NodeKey, NodeView};
pub(crate) use kube_gc_engine::ingest::IngestOutput;
pub(crate) use kube_gc_engine::{
    Event, EventType, Graph, Ingester, ObjectMeta, ObjectReference, ObjectType, OwnerRef,
    OwnerReference, RateLimiterConfig, SequentialGraph, Uid, WorkQueue,
};
pub(crate) use kube_gc_testkit::MemoryCluster;
pub(crate) use kube_gc_testkit::memory_cluster::{Verb, resource};

/// Upstream's `makeID(groupVersion, kind, namespace, name, uid)`.
pub(crate) fn make_id(
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
    uid: &str,
) -> ObjectReference {
    ObjectReference::new(api_version, kind, namespace, name, uid)
}

/// An identity's coordinates as an owner reference (no `controller`, no `blockOwnerDeletion`).
pub(crate) fn owner_reference(owner: &ObjectReference) -> OwnerReference {
    OwnerReference {
        api_version: owner.ty.api_version().to_owned(),
        kind: owner.ty.kind().to_owned(),
        name: owner.name.clone(),
        uid: owner.uid.to_string(),
        controller: None,
        block_owner_deletion: None,
    }
}

/// Upstream's `makeObj` / `makeMetadataObj`: namespace, name, UID and owner references only.
pub(crate) fn make_obj(identity: &ObjectReference, owners: &[&ObjectReference]) -> ObjectMeta {
    ObjectMeta {
        uid: identity.uid.to_string(),
        name: identity.name.clone(),
        namespace: identity.namespace.as_str().to_owned(),
        owner_references: owners.iter().map(|o| owner_reference(o)).collect(),
        ..ObjectMeta::default()
    }
}

/// Upstream's `makeAddEvent`: the event's type is the identity's (the monitor's GVK).
pub(crate) fn make_add_event(identity: &ObjectReference, owners: &[&ObjectReference]) -> Event {
    Event::new(EventType::Add, identity.ty, make_obj(identity, owners))
}

/// Upstream's `makeDeleteEvent`.
pub(crate) fn make_delete_event(identity: &ObjectReference, owners: &[&ObjectReference]) -> Event {
    Event::new(EventType::Delete, identity.ty, make_obj(identity, owners))
}

/// Upstream's `makeVirtualDeleteEvent` (what a worker sends when a live GET finds nothing).
pub(crate) fn make_virtual_delete_event(identity: &ObjectReference) -> Event {
    Event::virtual_delete(identity)
}

/// Upstream's `verifyGraphInvariants`: every dependent of a node lists the node's UID among its
/// owners, and every owner present in the graph lists the node among its dependents.
pub(crate) fn verify_graph_invariants(snapshot: &GraphSnapshot) -> Result<(), String> {
    for (uid, node) in &snapshot.nodes {
        for dependent in &node.dependents {
            let Some(d) = snapshot.nodes.get(dependent) else {
                return Err(format!(
                    "{uid:?} has dependent {dependent:?}, which is not in the graph"
                ));
            };
            if !d.owners.iter().any(|o| o.uid == *uid) {
                return Err(format!(
                    "{} has {} as a dependent, but it's not present in the latter node's owners list",
                    node.identity, d.identity
                ));
            }
        }
        for owner in &node.owners {
            if let Some(o) = snapshot.nodes.get(&owner.uid)
                && !o.dependents.contains(uid)
            {
                return Err(format!(
                    "{} has {} as an owner, but it's not present in the latter node's dependents list",
                    node.identity, o.identity
                ));
            }
        }
    }
    Ok(())
}

pub(crate) fn pods() -> Resource {
    resource("v1", "pods", "Pod", true)
}
pub(crate) fn nodes() -> Resource {
    resource("v1", "nodes", "Node", false)
}
pub(crate) fn deployments() -> Resource {
    resource("apps/v1", "deployments", "Deployment", true)
}
pub(crate) fn roles_v1() -> Resource {
    resource("rbac.authorization.k8s.io/v1", "roles", "Role", true)
}
pub(crate) fn roles_v1beta1() -> Resource {
    resource("rbac.authorization.k8s.io/v1beta1", "roles", "Role", true)
}

/// A collector over `cluster` with tracking queues (`add_rate_limited` == `add`), an empty
/// 4-shard graph, and the worker-generated events kept in a [`GraphChanges`].
pub(crate) fn collector(
    cluster: Arc<MemoryCluster>,
    absent_owner_cache_size: usize,
) -> (Arc<Graph>, Arc<GraphChanges>, Collector<MemoryCluster>) {
    let graph = Arc::new(Graph::new(4).expect("4 is a power of two"));
    let graph_changes = Arc::new(GraphChanges::new());
    let gc = Collector::new(
        graph.clone(),
        cluster,
        Arc::new(AbsentOwnerCache::new(absent_owner_cache_size)),
        Arc::new(WorkQueue::with_rate_limiter(
            "garbage_collector_attempt_to_delete",
            RateLimiterConfig::immediate(),
        )),
        Arc::new(WorkQueue::with_rate_limiter(
            "garbage_collector_attempt_to_orphan",
            RateLimiterConfig::immediate(),
        )),
        graph_changes.clone(),
    );
    (graph, graph_changes, gc)
}

/// Upstream's `podToGCNode` / TestAttemptToDeleteItem's item: the identity only, no owners (the
/// item's live owners are read from the server).
pub(crate) fn item(identity: &ObjectReference, is_virtual: bool) -> NodeView {
    NodeView {
        identity: identity.clone(),
        incarnation: 0,
        is_virtual,
        being_deleted: false,
        deleting_dependents: false,
        owners: Vec::new(),
        dependents_len: 0,
        resource_version: None,
        has_gc_finalizers: false,
    }
}
