use futures::FutureExt;
use futures::executor::block_on;
use serde_json::json;

use super::*;
use kube_gc_engine::cluster::{Cluster, DeleteOptions, Patch, PatchType, PropagationPolicy};
use kube_gc_engine::identity::ObjectReference;
use kube_gc_engine::meta::OwnerReference;
use kube_gc_engine::patch::{
    delete_owner_refs_json_merge, delete_owner_refs_strategic, remove_finalizer_json_merge,
};

fn pods() -> Resource {
    resource("v1", "pods", "Pod", true)
}

fn rcs() -> Resource {
    resource("v1", "replicationcontrollers", "ReplicationController", true)
}

fn nodes() -> Resource {
    resource("v1", "nodes", "Node", false)
}

fn widgets() -> Resource {
    resource("acme.example/v1", "widgets", "Widget", true)
}

fn owner(uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ReplicationController".into(),
        name: format!("rc{uid}"),
        uid: uid.into(),
        controller: None,
        block_owner_deletion: None,
    }
}

fn meta(name: &str, uid: &str, owners: &[&str], finalizers: &[&str]) -> ObjectMeta {
    ObjectMeta {
        uid: uid.into(),
        name: name.into(),
        namespace: "ns1".into(),
        owner_references: owners.iter().map(|u| owner(u)).collect(),
        finalizers: finalizers.iter().map(|f| (*f).to_owned()).collect(),
        ..ObjectMeta::default()
    }
}

fn policy(policy: Option<PropagationPolicy>) -> DeleteOptions {
    DeleteOptions { propagation_policy: policy, ..DeleteOptions::default() }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn rest_mapper_maps_registered_kinds_only() {
    let cluster = MemoryCluster::with_test_resources();
    let got = cluster.resource_for(ObjectType::new("apps/v1", "Deployment")).unwrap();
    assert_eq!(got.to_string(), "apps/v1, Resource=deployments");
    assert!(!cluster.resource_for(ObjectType::new("v1", "Node")).unwrap().namespaced);
    let err =
        cluster.resource_for(ObjectType::new("extensions/v1beta1", "Deployment")).unwrap_err();
    assert_eq!(err, ClusterError::NoMapping("extensions/v1beta1/Deployment".into()));
    assert_eq!(err.to_string(), "unable to get REST mapping for extensions/v1beta1/Deployment");
    cluster.unregister("apps/v1", "Deployment");
    assert!(cluster.resource_for(ObjectType::new("apps/v1", "Deployment")).is_err());
}

#[test]
fn get_records_fake_client_actions() {
    let cluster = MemoryCluster::with_test_resources();
    cluster.create(&pods(), meta("podname1", "poduid1", &[], &[])).unwrap();
    cluster
        .create(
            &nodes(),
            ObjectMeta { namespace: "ignored".into(), ..meta("nodename", "nodeuid1", &[], &[]) },
        )
        .unwrap();
    let roles = resource("rbac.authorization.k8s.io/v1beta1", "roles", "Role", true);
    block_on(async {
        assert_eq!(cluster.get(&pods(), "ns1", "podname1").await.unwrap().uid, "poduid1");
        assert_eq!(cluster.get(&nodes(), "", "nodename").await.unwrap().namespace, "");
        assert_eq!(cluster.get(&roles, "ns1", "role1").await, Err(ClusterError::NotFound));
        // A namespace on a cluster-scoped request is the wrong URL.
        assert_eq!(cluster.get(&nodes(), "ns1", "nodename").await, Err(ClusterError::NotFound));
    });
    assert_eq!(
        cluster.take_actions(),
        [
            "get /v1, Resource=pods ns=ns1 name=podname1",
            "get /v1, Resource=nodes name=nodename",
            "get rbac.authorization.k8s.io/v1beta1, Resource=roles ns=ns1 name=role1",
            "get /v1, Resource=nodes ns=ns1 name=nodename",
        ]
    );
    assert!(cluster.take_actions().is_empty(), "take_actions clears");
}

#[test]
fn create_assigns_increasing_resource_versions_and_refuses_duplicates() {
    let cluster = MemoryCluster::new();
    let a = cluster.create(&pods(), meta("a", "1", &[], &[])).unwrap();
    let b = cluster.create(&pods(), meta("b", "2", &[], &[])).unwrap();
    assert!(
        a.resource_version.parse::<u64>().unwrap() < b.resource_version.parse::<u64>().unwrap()
    );
    let err = cluster.create(&pods(), meta("a", "3", &[], &[])).unwrap_err();
    assert!(matches!(err, ClusterError::Other { code: 409, .. }), "{err:?}");
    assert_eq!(cluster.objects().len(), 2);
    assert!(cluster.calls().is_empty(), "helpers are not recorded");
}

/// The clock stamps creation, and deletion once it begins (kept after), and moves only when
/// told.
#[test]
fn timestamps_come_from_a_clock_that_tests_move() {
    let cluster = MemoryCluster::with_test_resources();
    let created = cluster.create(&pods(), meta("pod", "100", &[], &["x/y"])).unwrap();
    let t0 = created.creation_time.expect("stamped");
    assert_eq!(created.deletion_time, None);
    cluster.advance_clock(5);
    block_on(cluster.delete(&pods(), "ns1", "pod", &policy(None))).unwrap();
    let deleting = cluster.object(&pods(), "ns1", "pod").unwrap();
    assert_eq!((deleting.creation_time, deleting.deletion_time), (Some(t0), Some(t0 + 5)));
    cluster.advance_clock(5);
    let later = cluster.update_object(&pods(), "ns1", "pod", |m| m.creation_time = None).unwrap();
    assert_eq!((later.creation_time, later.deletion_time), (Some(t0), Some(t0 + 5)));
}

/// A dry run records the collector's writes and applies none; a patch answers with the object
/// as it is, a delete with success (as shadow mode answers them).
#[test]
fn a_dry_run_records_writes_and_applies_none() {
    let cluster = MemoryCluster::with_test_resources();
    let created = cluster.create(&pods(), meta("pod", "100", &["1", "2"], &[])).unwrap();
    cluster.set_dry_run(true);
    let patch = delete_owner_refs_strategic("100", ["2"]);
    let answer = block_on(cluster.patch(&pods(), "ns1", "pod", &patch)).unwrap();
    assert_eq!(answer, created);
    block_on(cluster.delete(&pods(), "ns1", "pod", &policy(None))).unwrap();
    block_on(cluster.delete(&pods(), "ns1", "nope", &policy(None))).unwrap();
    assert_eq!(cluster.object(&pods(), "ns1", "pod").unwrap(), created);
    assert_eq!(cluster.take_calls().len(), 3);
    cluster.set_dry_run(false);
    block_on(cluster.patch(&pods(), "ns1", "pod", &patch)).unwrap();
    assert_eq!(cluster.object(&pods(), "ns1", "pod").unwrap().owner_references, [owner("1")]);
}

#[test]
fn strategic_patch_deletes_owner_refs_and_bumps_resource_version() {
    let cluster = MemoryCluster::with_test_resources();
    let created = cluster.create(&pods(), meta("pod", "100", &["1", "2", "3"], &[])).unwrap();
    let patch = delete_owner_refs_strategic("100", ["2", "3"]);
    let patched = block_on(cluster.patch(&pods(), "ns1", "pod", &patch)).unwrap();
    assert_eq!(patched.owner_references, vec![owner("1")]);
    assert_ne!(patched.resource_version, created.resource_version);
    assert_eq!(cluster.object(&pods(), "ns1", "pod").unwrap(), patched);
    let calls = cluster.take_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].action(), "patch /v1, Resource=pods ns=ns1 name=pod");
    assert_eq!(calls[0].patch(), Some(&patch));
}

#[test]
fn no_op_patch_keeps_the_resource_version() {
    let cluster = MemoryCluster::new();
    let created = cluster.create(&pods(), meta("pod", "100", &["1"], &[])).unwrap();
    let patch = delete_owner_refs_strategic("100", ["9"]);
    let patched = block_on(cluster.patch(&pods(), "ns1", "pod", &patch)).unwrap();
    assert_eq!(patched.resource_version, created.resource_version);
}

#[test]
fn strategic_patch_of_custom_resource_is_unsupported_media_type() {
    let cluster = MemoryCluster::new();
    cluster.register_custom(widgets());
    let created = cluster.create(&widgets(), meta("w", "100", &["1", "2"], &[])).unwrap();
    let smp = delete_owner_refs_strategic("100", ["2"]);
    assert_eq!(
        block_on(cluster.patch(&widgets(), "ns1", "w", &smp)),
        Err(ClusterError::UnsupportedMediaType)
    );
    // Refused before the object is read: absent objects get 415 too.
    assert_eq!(
        block_on(cluster.patch(&widgets(), "ns1", "absent", &smp)),
        Err(ClusterError::UnsupportedMediaType)
    );
    let jmp =
        delete_owner_refs_json_merge(&created.resource_version, &created.owner_references, ["2"]);
    let patched = block_on(cluster.patch(&widgets(), "ns1", "w", &jmp)).unwrap();
    assert_eq!(patched.owner_references, vec![owner("1")]);
}

#[test]
fn patch_preconditions_uid_is_invalid_and_stale_resource_version_conflicts() {
    let cluster = MemoryCluster::new();
    let created = cluster.create(&pods(), meta("pod", "recreated", &["1"], &[])).unwrap();
    block_on(async {
        let smp = delete_owner_refs_strategic("original", ["1"]);
        let err = cluster.patch(&pods(), "ns1", "pod", &smp).await.unwrap_err();
        assert!(matches!(err, ClusterError::Invalid(_)), "{err:?}");
        let jmp = delete_owner_refs_json_merge("0", &created.owner_references, ["1"]);
        let err = cluster.patch(&pods(), "ns1", "pod", &jmp).await.unwrap_err();
        assert!(matches!(err, ClusterError::Conflict(_)), "{err:?}");
        assert_eq!(
            cluster.patch(&pods(), "ns1", "absent", &smp).await,
            Err(ClusterError::NotFound)
        );
    });
    assert_eq!(cluster.object(&pods(), "ns1", "pod").unwrap(), created);
}

#[test]
fn emptying_finalizers_of_object_being_deleted_deletes_it() {
    let cluster = MemoryCluster::with_test_resources();
    cluster.create(&rcs(), meta("rc1", "1", &[], &[])).unwrap();
    block_on(async {
        cluster
            .delete(&rcs(), "ns1", "rc1", &policy(Some(PropagationPolicy::Orphan)))
            .await
            .unwrap();
        let held = cluster.get(&rcs(), "ns1", "rc1").await.unwrap();
        assert!(held.deletion_timestamp);
        assert_eq!(held.finalizers, strings(&["orphan"]));
        let patch = remove_finalizer_json_merge(&held.resource_version, &[]);
        cluster.patch(&rcs(), "ns1", "rc1", &patch).await.unwrap();
        assert_eq!(cluster.get(&rcs(), "ns1", "rc1").await, Err(ClusterError::NotFound));
    });
}

#[test]
fn emptying_finalizers_of_live_object_keeps_it() {
    let cluster = MemoryCluster::new();
    let created = cluster.create(&pods(), meta("pod", "1", &[], &["x/y"])).unwrap();
    let patch = remove_finalizer_json_merge(&created.resource_version, &[]);
    let patched = block_on(cluster.patch(&pods(), "ns1", "pod", &patch)).unwrap();
    assert!(patched.finalizers.is_empty());
    assert!(cluster.object(&pods(), "ns1", "pod").is_some());
}

#[test]
fn no_new_finalizers_on_object_being_deleted() {
    let cluster = MemoryCluster::new();
    cluster.create(&pods(), meta("pod", "1", &[], &["x/y"])).unwrap();
    block_on(async {
        cluster.delete(&pods(), "ns1", "pod", &DeleteOptions::default()).await.unwrap();
        let body = json!({"metadata": {"finalizers": ["x/y", "new"]}});
        let patch = Patch { patch_type: PatchType::JsonMerge, body };
        let err = cluster.patch(&pods(), "ns1", "pod", &patch).await.unwrap_err();
        assert!(
            matches!(err, ClusterError::Invalid(ref m) if m.contains("no new finalizers")),
            "{err:?}"
        );
    });
}

#[test]
fn delete_preconditions_conflict_and_change_nothing() {
    let cluster = MemoryCluster::new();
    let created = cluster.create(&pods(), meta("pod", "1", &[], &[])).unwrap();
    let cases = [
        DeleteOptions { precondition_uid: Some("2".into()), ..DeleteOptions::default() },
        DeleteOptions {
            precondition_uid: Some("1".into()),
            precondition_resource_version: Some("999".into()),
            ..DeleteOptions::default()
        },
    ];
    for (i, options) in cases.iter().enumerate() {
        let err = block_on(cluster.delete(&pods(), "ns1", "pod", options)).unwrap_err();
        assert!(matches!(err, ClusterError::Conflict(_)), "#{i}: got {err:?}, want Conflict");
        assert!(err.to_string().contains("does not match"), "#{i}: {err}");
    }
    assert_eq!(cluster.object(&pods(), "ns1", "pod").unwrap(), created);
    let matching = DeleteOptions {
        precondition_uid: Some("1".into()),
        precondition_resource_version: Some(created.resource_version.clone()),
        ..DeleteOptions::default()
    };
    block_on(cluster.delete(&pods(), "ns1", "pod", &matching)).unwrap();
    assert!(cluster.objects().is_empty());
    assert_eq!(
        block_on(cluster.delete(&pods(), "ns1", "pod", &matching)),
        Err(ClusterError::NotFound)
    );
}

/// The outcome of one delete, per policy, on an object with `finalizers`:
/// (finalizers after, kept).
#[test]
fn delete_propagation_table() {
    use PropagationPolicy::{Background, Foreground, Orphan};
    /// (finalizers before, policy, finalizers after, kept).
    type Case = (&'static [&'static str], Option<PropagationPolicy>, &'static [&'static str], bool);
    let cases: [Case; 8] = [
        (&[], Some(Background), &[], false),
        (&[], None, &[], false),
        (&[], Some(Orphan), &["orphan"], true),
        (&[], Some(Foreground), &["foregroundDeletion"], true),
        (&["x/y"], Some(Background), &["x/y"], true),
        (&["x/y"], Some(Foreground), &["x/y", "foregroundDeletion"], true),
        // The existing finalizer is the default when no policy is given.
        (&["orphan"], None, &["orphan"], true),
        // An explicit policy replaces it.
        (&["orphan", "x/y"], Some(Foreground), &["x/y", "foregroundDeletion"], true),
    ];
    for (i, (before, propagation, want, want_kept)) in cases.iter().enumerate() {
        let cluster = MemoryCluster::new();
        cluster.create(&pods(), meta("pod", "1", &[], before)).unwrap();
        block_on(cluster.delete(&pods(), "ns1", "pod", &policy(*propagation))).unwrap();
        let got = cluster.object(&pods(), "ns1", "pod");
        assert_eq!(got.is_some(), *want_kept, "#{i}: kept = {}, want {want_kept}", got.is_some());
        if let Some(got) = got {
            assert!(got.deletion_timestamp, "#{i}: no deletionTimestamp");
            assert_eq!(got.finalizers, strings(want), "#{i}: finalizers");
        }
    }
}

#[test]
fn legacy_default_orphan_kind_orphans_without_policy() {
    let cluster = MemoryCluster::with_test_resources();
    cluster.create(&rcs(), meta("rc1", "1", &[], &[])).unwrap();
    cluster.create(&rcs(), meta("rc2", "2", &[], &[])).unwrap();
    block_on(async {
        cluster.delete(&rcs(), "ns1", "rc1", &DeleteOptions::default()).await.unwrap();
        cluster
            .delete(&rcs(), "ns1", "rc2", &policy(Some(PropagationPolicy::Background)))
            .await
            .unwrap();
    });
    assert_eq!(cluster.object(&rcs(), "ns1", "rc1").unwrap().finalizers, strings(&["orphan"]));
    assert!(cluster.object(&rcs(), "ns1", "rc2").is_none());
}

#[test]
fn second_delete_of_object_held_by_finalizers_recomputes_gc_finalizers() {
    let cluster = MemoryCluster::new();
    cluster.create(&pods(), meta("pod", "1", &[], &["x/y"])).unwrap();
    block_on(async {
        let foreground = policy(Some(PropagationPolicy::Foreground));
        cluster.delete(&pods(), "ns1", "pod", &foreground).await.unwrap();
        let first = cluster.object(&pods(), "ns1", "pod").unwrap();
        assert_eq!(first.finalizers, strings(&["x/y", "foregroundDeletion"]));
        // Same policy again: the set is unchanged, so nothing is written.
        cluster.delete(&pods(), "ns1", "pod", &DeleteOptions::default()).await.unwrap();
        assert_eq!(cluster.object(&pods(), "ns1", "pod").unwrap(), first);
        // Grace period 0 is not a pending graceful deletion: a new policy applies.
        cluster
            .delete(&pods(), "ns1", "pod", &policy(Some(PropagationPolicy::Orphan)))
            .await
            .unwrap();
    });
    let last = cluster.object(&pods(), "ns1", "pod").unwrap();
    assert_eq!(last.finalizers, strings(&["x/y", "orphan"]));
}

/// TestDoubleDeletionWithFinalizer's rule: once a graceful deletion is pending, a second
/// delete cannot change the finalizers.
#[test]
fn second_delete_during_graceful_deletion_does_not_change_finalizers() {
    let cluster = MemoryCluster::new();
    cluster.register_with(
        pods(),
        ResourceOptions { grace_period_seconds: 30, ..ResourceOptions::default() },
    );
    cluster.create(&pods(), meta("pod", "1", &[], &["x/y"])).unwrap();
    block_on(async {
        cluster
            .delete(&pods(), "ns1", "pod", &policy(Some(PropagationPolicy::Foreground)))
            .await
            .unwrap();
        let first = cluster.object(&pods(), "ns1", "pod").unwrap();
        assert!(first.deletion_timestamp);
        assert_eq!(first.finalizers, strings(&["x/y", "foregroundDeletion"]));
        cluster
            .delete(&pods(), "ns1", "pod", &policy(Some(PropagationPolicy::Orphan)))
            .await
            .unwrap();
        assert_eq!(cluster.object(&pods(), "ns1", "pod").unwrap(), first);
    });
    // The kubelet's final delete: finalizers remain, so it stays, now with grace period 0.
    assert!(!cluster.expire_grace_period(&pods(), "ns1", "pod"));
    let held = cluster.update_object(&pods(), "ns1", "pod", |m| m.finalizers.clear());
    assert!(held.is_some());
    assert!(cluster.object(&pods(), "ns1", "pod").is_none(), "emptied finalizers delete it");
}

#[test]
fn graceful_deletion_without_finalizers_waits_for_the_grace_period() {
    let cluster = MemoryCluster::new();
    cluster.register_with(
        pods(),
        ResourceOptions { grace_period_seconds: 30, ..ResourceOptions::default() },
    );
    cluster.create(&pods(), meta("pod", "1", &[], &[])).unwrap();
    block_on(cluster.delete(&pods(), "ns1", "pod", &DeleteOptions::default())).unwrap();
    assert!(cluster.object(&pods(), "ns1", "pod").unwrap().deletion_timestamp);
    assert!(cluster.expire_grace_period(&pods(), "ns1", "pod"));
    assert!(cluster.objects().is_empty());
}

/// TestOrphanDependentsFailure's server: PATCH of the pod answers 409.
#[test]
fn fail_next_fails_one_matching_call_and_still_records_it() {
    let cluster = MemoryCluster::with_test_resources();
    cluster.create(&pods(), meta("pod", "1", &["1"], &[])).unwrap();
    cluster.fail_next(Verb::Patch, "pods", "pod", ClusterError::Conflict("patch pods pod".into()));
    let patch = delete_owner_refs_strategic("1", ["1"]);
    block_on(async {
        // Another verb or object is not affected.
        cluster.get(&pods(), "ns1", "pod").await.unwrap();
        let err = cluster.patch(&pods(), "ns1", "pod", &patch).await.unwrap_err();
        assert!(err.to_string().contains("the server reported a conflict"), "{err}");
        assert_eq!(cluster.object(&pods(), "ns1", "pod").unwrap().owner_references.len(), 1);
        cluster.patch(&pods(), "ns1", "pod", &patch).await.unwrap();
    });
    assert_eq!(
        cluster.take_actions(),
        [
            "get /v1, Resource=pods ns=ns1 name=pod",
            "patch /v1, Resource=pods ns=ns1 name=pod",
            "patch /v1, Resource=pods ns=ns1 name=pod",
        ]
    );
}

#[test]
fn hook_can_make_the_resource_version_stale_before_a_delete() {
    let cluster = MemoryCluster::new();
    let created = cluster.create(&pods(), meta("pod", "1", &[], &[])).unwrap();
    cluster.on_call(|cluster, call| {
        if call.verb() == Verb::Delete {
            cluster.update_object(&call.resource, &call.namespace, &call.name, |_| {});
        }
        None
    });
    let options = DeleteOptions {
        precondition_uid: Some("1".into()),
        precondition_resource_version: Some(created.resource_version),
        ..DeleteOptions::default()
    };
    let err = block_on(cluster.delete(&pods(), "ns1", "pod", &options)).unwrap_err();
    assert!(matches!(err, ClusterError::Conflict(_)), "{err:?}");
    cluster.on_call(|_, call| {
        (call.verb() == Verb::Get)
            .then(|| ClusterError::Other { code: 500, message: "boom".into() })
    });
    assert_eq!(
        block_on(cluster.get(&pods(), "ns1", "pod")),
        Err(ClusterError::Other { code: 500, message: "boom".into() })
    );
    cluster.clear_faults();
    assert!(block_on(cluster.get(&pods(), "ns1", "pod")).is_ok());
    let delete = &cluster.calls()[0];
    assert_eq!(delete.delete_options(), Some(&options));
}

#[test]
fn a_hook_may_make_calls_of_its_own() {
    let cluster = MemoryCluster::new();
    cluster.create(&pods(), meta("a", "1", &[], &[])).unwrap();
    cluster.create(&pods(), meta("b", "2", &[], &[])).unwrap();
    cluster.on_call(|cluster, call| {
        if call.verb() == Verb::Get && call.name == "a" {
            // The in-memory server answers at once (block_on does not nest).
            let options = DeleteOptions::default();
            let deleted = cluster.delete(&pods(), "ns1", "b", &options).now_or_never();
            assert_eq!(deleted, Some(Ok(())));
        }
        None
    });
    assert!(block_on(cluster.get(&pods(), "ns1", "a")).is_ok());
    assert!(cluster.object(&pods(), "ns1", "b").is_none(), "the hook's DELETE was served");
    let actions = cluster.take_actions();
    assert_eq!(
        actions,
        ["get /v1, Resource=pods ns=ns1 name=a", "delete /v1, Resource=pods ns=ns1 name=b"]
    );
}

#[test]
fn events_are_kept_in_fake_recorder_form() {
    let cluster = MemoryCluster::new();
    let event = WarningEvent {
        involved: ObjectReference::new("v1", "Pod", "ns1", "podname1", "poduid1"),
        reason: "OwnerRefInvalidNamespace",
        message: r#"ownerRef [v1/Pod, namespace: ns1, name: podname2, uid: poduid2] does not exist in namespace "ns1""#
            .into(),
    };
    cluster.record_event(event.clone());
    assert_eq!(
        cluster.take_event_strings(),
        [
            r#"Warning OwnerRefInvalidNamespace ownerRef [v1/Pod, namespace: ns1, name: podname2, uid: poduid2] does not exist in namespace "ns1" involvedObject{kind=Pod,apiVersion=v1}"#
        ]
    );
    assert!(cluster.take_events().is_empty());
}

#[test]
fn delete_object_removes_without_recording() {
    let cluster = MemoryCluster::new();
    cluster.create(&pods(), meta("pod", "1", &[], &["x/y"])).unwrap();
    assert_eq!(cluster.delete_object(&pods(), "ns1", "pod").unwrap().uid, "1");
    assert!(cluster.objects().is_empty());
    assert!(cluster.calls().is_empty());
}

#[test]
fn cluster_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let (cluster, pods, options) = (MemoryCluster::new(), pods(), DeleteOptions::default());
    assert_send(&cluster.get(&pods, "ns1", "pod"));
    assert_send(&cluster.delete(&pods, "ns1", "pod", &options));
}
