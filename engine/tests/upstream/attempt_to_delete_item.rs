//! TestAttemptToDeleteItem, plus the resourceVersion-precondition cases of PR #132632.
//!
//! <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/garbagecollector_test.go>; GC-SPEC.md §9.A, §3.2, §5.4.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// Upstream's `getPod`: a pod in ns1 with UID 456.
fn get_pod(name: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
    ObjectMeta {
        uid: "456".into(),
        name: name.into(),
        namespace: "ns1".into(),
        owner_references: owners,
        ..ObjectMeta::default()
    }
}

fn rc_owner(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ReplicationController".into(),
        name: name.into(),
        uid: uid.into(),
        controller: None,
        block_owner_deletion: None,
    }
}

fn to_be_deleted_pod() -> ObjectReference {
    make_id("v1", "Pod", "ns1", "ToBeDeletedPod", "456")
}

/// The server of TestAttemptToDeleteItem: the pod exists, its owner rc `owner1` does not.
fn setup() -> (Arc<MemoryCluster>, Arc<GraphChanges>, Collector<MemoryCluster>) {
    let cluster = Arc::new(MemoryCluster::with_test_resources());
    cluster.create(&pods(), get_pod("ToBeDeletedPod", vec![rc_owner("owner1", "123")])).unwrap();
    let (_, graph_changes, gc) = collector(cluster.clone(), 500);
    (cluster, graph_changes, gc)
}

fn action_set(cluster: &MemoryCluster) -> BTreeSet<String> {
    cluster.take_actions().into_iter().collect()
}

#[test]
fn test_attempt_to_delete_item() {
    let (cluster, _, gc) = setup();
    let item = item(&to_be_deleted_pod(), true);
    let got = block_on(gc.attempt_to_delete_item(&item));
    assert_eq!(got, Ok(DeleteItemResult::Deleted), "unexpected error");
    assert!(item.is_virtual, "attemptToDeleteItem changed virtual to false unexpectedly");
    let want: BTreeSet<String> = [
        "get /v1, Resource=replicationcontrollers ns=ns1 name=owner1",
        "delete /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
        "get /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
    ]
    .map(String::from)
    .into();
    assert_eq!(action_set(&cluster), want);
}

/// Makes the first DELETE find the object changed since its GET, by `change`.
fn change_before_first_delete(
    cluster: &MemoryCluster,
    change: impl Fn(&MemoryCluster, &kube_gc_testkit::memory_cluster::Call) -> Option<ClusterError>
    + Send
    + Sync
    + 'static,
) {
    let deletes = AtomicUsize::new(0);
    cluster.on_call(move |cluster, call| {
        if call.verb() == Verb::Delete && deletes.fetch_add(1, Ordering::SeqCst) == 0 {
            return change(cluster, call);
        }
        None
    });
}

/// [reconstructed] #132632: the DELETE conflicts on the resourceVersion, but the object's
/// owner references are unchanged since the GET: retried once without the resourceVersion,
/// and it succeeds.
#[test]
fn conflict_with_owners_unchanged_is_retried_without_resource_version() {
    let (cluster, _, gc) = setup();
    change_before_first_delete(&cluster, |cluster, call| {
        cluster.update_object(&call.resource, &call.namespace, &call.name, |_| {});
        None
    });
    let got = block_on(gc.attempt_to_delete_item(&item(&to_be_deleted_pod(), false)));
    assert_eq!(got, Ok(DeleteItemResult::Deleted));
    let calls = cluster.take_calls();
    let actions: Vec<String> = calls.iter().map(|c| c.action()).collect();
    assert_eq!(
        actions,
        [
            "get /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
            "get /v1, Resource=replicationcontrollers ns=ns1 name=owner1",
            "delete /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
            "get /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
            "delete /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
        ]
    );
    let first = calls[2].delete_options().unwrap();
    let retry = calls[4].delete_options().unwrap();
    assert!(first.precondition_resource_version.is_some(), "first delete without RV");
    assert_eq!(retry.precondition_resource_version, None, "retry still carries the RV");
    assert_eq!(retry.precondition_uid.as_deref(), Some("456"), "retry lost the UID");
    assert!(cluster.object(&pods(), "ns1", "ToBeDeletedPod").is_none(), "pod not deleted");
}

/// [reconstructed] #132632 (#114603): the owner references changed between the GET and the
/// DELETE (an adoption): the Conflict is returned and the item requeued; the pod is kept.
#[test]
fn conflict_with_owners_changed_returns_conflict() {
    let (cluster, _, gc) = setup();
    change_before_first_delete(&cluster, |cluster, call| {
        cluster.update_object(&call.resource, &call.namespace, &call.name, |meta| {
            meta.owner_references.push(rc_owner("adopter", "789"));
        });
        None
    });
    let err = block_on(gc.attempt_to_delete_item(&item(&to_be_deleted_pod(), false)))
        .expect_err("deleted despite an adoption");
    assert!(
        matches!(err, ItemError::Cluster { source: ClusterError::Conflict(_), .. }),
        "got {err:?}, want a Conflict"
    );
    assert_eq!(err.outcome(), Outcome::Requeue);
    assert_eq!(
        cluster.take_actions(),
        [
            "get /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
            "get /v1, Resource=replicationcontrollers ns=ns1 name=owner1",
            "delete /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
            "get /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
        ]
    );
    assert!(cluster.object(&pods(), "ns1", "ToBeDeletedPod").is_some(), "adopted pod deleted");
}

/// [reconstructed] #132632's follow-up: the DELETE conflicts and the object is gone by the
/// re-GET: NotFound, which becomes a virtual delete event (forget).
#[test]
fn conflict_then_object_gone_generates_virtual_delete_event() {
    let (cluster, graph_changes, gc) = setup();
    change_before_first_delete(&cluster, |cluster, call| {
        cluster.delete_object(&call.resource, &call.namespace, &call.name);
        Some(ClusterError::Conflict("the object has been modified".into()))
    });
    let pod = to_be_deleted_pod();
    let err = block_on(gc.attempt_to_delete_item(&item(&pod, false))).unwrap_err();
    assert_eq!(err, ItemError::EnqueuedVirtualDeleteEvent);
    assert_eq!(err.outcome(), Outcome::Forget);
    assert_eq!(graph_changes.pending(), [make_virtual_delete_event(&pod)]);
    assert_eq!(
        cluster.take_actions(),
        [
            "get /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
            "get /v1, Resource=replicationcontrollers ns=ns1 name=owner1",
            "delete /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
            "get /v1, Resource=pods ns=ns1 name=ToBeDeletedPod",
        ]
    );
}

/// TestAbsentOwnerCache (below) uses the same pods.
pub(super) fn pod(name: &str, owner: OwnerReference) -> ObjectMeta {
    get_pod(name, vec![owner])
}
pub(super) fn rc(name: &str, uid: &str, controller: Option<bool>) -> OwnerReference {
    OwnerReference { controller, ..rc_owner(name, uid) }
}
