use super::*;
use kube_gc_engine::identity::{OwnerRef, Uid};
use kube_gc_engine::patch::*;
use serde_json::json;

fn api_ref(uid: &str) -> OwnerReference {
    OwnerReference { uid: uid.into(), ..OwnerReference::default() }
}

fn full_ref(
    name: &str,
    uid: &str,
    controller: Option<bool>,
    block: Option<bool>,
) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "ReplicationController".into(),
        name: name.into(),
        uid: uid.into(),
        controller,
        block_owner_deletion: block,
    }
}

fn graph_ref(uid: &str, block: Option<bool>) -> OwnerRef {
    owner_ref_from_api(&OwnerReference { block_owner_deletion: block, ..api_ref(uid) })
}

fn pod(uid: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
    ObjectMeta {
        uid: uid.into(),
        name: "pod".into(),
        namespace: "ns1".into(),
        resource_version: "42".into(),
        owner_references: owners,
        ..ObjectMeta::default()
    }
}

/// TestDeleteOwnerRefPatch: pod uid 100 owned by 1, 2, 3; the strategic merge patch deleting
/// 2 and 3 leaves 1.
#[test]
fn delete_owner_ref_patch() {
    let mut meta = pod("100", vec![api_ref("1"), api_ref("2"), api_ref("3")]);
    let patch = delete_owner_refs_strategic("100", ["2", "3"]);
    assert_eq!(patch.patch_type, PatchType::StrategicMerge);
    assert_eq!(
        patch.body.to_string(),
        r#"{"metadata":{"uid":"100","ownerReferences":[{"$patch":"delete","uid":"2"},{"$patch":"delete","uid":"3"}]}}"#
    );
    apply_strategic_merge(&mut meta, &patch.body).unwrap();
    assert_eq!(meta.owner_references, vec![api_ref("1")]);
}

/// TestUnblockOwnerReference: owners [{1, block}, {2, no block}, {3, unset}]; the strategic
/// merge patch flips only 1, leaving [{1,false}, {2,false}, {3,unset}].
#[test]
fn unblock_owner_reference() {
    let graph_owners =
        [graph_ref("1", Some(true)), graph_ref("2", Some(false)), graph_ref("3", None)];
    let mut meta = pod(
        "100",
        vec![
            OwnerReference { block_owner_deletion: Some(true), ..api_ref("1") },
            OwnerReference { block_owner_deletion: Some(false), ..api_ref("2") },
            api_ref("3"),
        ],
    );
    // Upstream's test node has no identity, so no uid in the body.
    let patch = unblock_owner_refs_strategic("", &graph_owners);
    assert_eq!(
        patch.body.to_string(),
        r#"{"metadata":{"creationTimestamp":null,"ownerReferences":[{"apiVersion":"","kind":"","name":"","uid":"1","blockOwnerDeletion":false}]}}"#
    );
    apply_strategic_merge(&mut meta, &patch.body).unwrap();
    assert_eq!(
        meta.owner_references,
        vec![
            OwnerReference { block_owner_deletion: Some(false), ..api_ref("1") },
            OwnerReference { block_owner_deletion: Some(false), ..api_ref("2") },
            api_ref("3"),
        ]
    );
}

#[test]
fn unblock_strategic_carries_the_item_uid_and_full_refs() {
    let owners = [
        owner_ref_from_api(&full_ref("rc1", "1", Some(true), Some(true))),
        owner_ref_from_api(&full_ref("rc2", "2", None, None)),
    ];
    let patch = unblock_owner_refs_strategic(Uid::parse("100"), &owners);
    assert_eq!(
        patch.body.to_string(),
        r#"{"metadata":{"uid":"100","creationTimestamp":null,"ownerReferences":[{"apiVersion":"v1","kind":"ReplicationController","name":"rc1","uid":"1","controller":true,"blockOwnerDeletion":false}]}}"#
    );
    let none_blocking = unblock_owner_refs_strategic("100", &owners[1..]);
    assert_eq!(
        none_blocking.body.to_string(),
        r#"{"metadata":{"uid":"100","creationTimestamp":null}}"#
    );
}

#[test]
fn a_strategic_patch_pinned_to_a_version_conflicts_on_any_other() {
    let patch = at_resource_version(delete_owner_refs_strategic("100", ["2"]), "7");
    assert_eq!(
        patch.body.to_string(),
        r#"{"metadata":{"uid":"100","ownerReferences":[{"$patch":"delete","uid":"2"}],"resourceVersion":"7"}}"#
    );
    let owner = |uid: &str| OwnerReference { uid: uid.into(), ..OwnerReference::default() };
    let mut meta = ObjectMeta {
        uid: "100".into(),
        resource_version: "8".into(),
        owner_references: vec![owner("1"), owner("2")],
        ..ObjectMeta::default()
    };
    assert!(matches!(apply_patch(&mut meta, &patch), Err(ClusterError::Conflict(_))));
    meta.resource_version = "7".into();
    apply_patch(&mut meta, &patch).unwrap();
    assert_eq!(meta.owner_references, vec![owner("1")]);
    let unpinned = at_resource_version(delete_owner_refs_strategic("100", ["2"]), "");
    assert_eq!(unpinned, delete_owner_refs_strategic("100", ["2"]));
}

#[test]
fn unblock_json_merge_sets_every_owner_unblocked() {
    let owners = [full_ref("rc1", "1", Some(true), Some(true)), full_ref("rc2", "2", None, None)];
    let patch = unblock_owner_refs_json_merge("42", &owners);
    assert_eq!(patch.patch_type, PatchType::JsonMerge);
    assert_eq!(
        patch.body.to_string(),
        r#"{"metadata":{"resourceVersion":"42","ownerReferences":[{"apiVersion":"v1","kind":"ReplicationController","name":"rc1","uid":"1","controller":true,"blockOwnerDeletion":false},{"apiVersion":"v1","kind":"ReplicationController","name":"rc2","uid":"2","blockOwnerDeletion":false}]}}"#
    );
    assert_eq!(
        unblock_owner_refs_json_merge("42", &[]).body.to_string(),
        r#"{"metadata":{"resourceVersion":"42","ownerReferences":null}}"#
    );
}

#[test]
fn delete_owner_refs_json_merge_keeps_the_rest_in_full() {
    let current = [
        full_ref("rc1", "1", Some(true), None),
        full_ref("rc2", "2", None, Some(true)),
        full_ref("rc3", "3", None, None),
    ];
    let patch = delete_owner_refs_json_merge("42", &current, ["2", "3"]);
    assert_eq!(patch.patch_type, PatchType::JsonMerge);
    assert_eq!(
        patch.body.to_string(),
        r#"{"metadata":{"resourceVersion":"42","ownerReferences":[{"apiVersion":"v1","kind":"ReplicationController","name":"rc1","uid":"1","controller":true}]}}"#
    );
    let mut meta = pod("100", current.to_vec());
    apply_json_merge(&mut meta, &patch.body).unwrap();
    assert_eq!(meta.owner_references, vec![current[0].clone()]);
}

#[test]
fn delete_owner_refs_json_merge_of_every_ref_is_null() {
    let current = [full_ref("rc1", "1", None, None)];
    let patch = delete_owner_refs_json_merge("7", &current, [Uid::parse("1")]);
    assert_eq!(
        patch.body.to_string(),
        r#"{"metadata":{"resourceVersion":"7","ownerReferences":null}}"#
    );
    let mut meta = ObjectMeta { resource_version: "7".into(), ..pod("100", current.to_vec()) };
    apply_json_merge(&mut meta, &patch.body).unwrap();
    assert!(meta.owner_references.is_empty());
}

#[test]
fn delete_owner_refs_with_no_uids_is_a_no_op() {
    let patch = delete_owner_refs_strategic("100", std::iter::empty::<&str>());
    assert_eq!(patch.body.to_string(), r#"{"metadata":{"uid":"100","ownerReferences":[]}}"#);
    let mut meta = pod("100", vec![api_ref("1")]);
    apply_strategic_merge(&mut meta, &patch.body).unwrap();
    assert_eq!(meta.owner_references, vec![api_ref("1")]);
}

#[test]
fn remove_finalizer_bodies() {
    let patch = remove_finalizer_json_merge("42", &["x/y".to_owned()]);
    assert_eq!(
        patch.body.to_string(),
        r#"{"metadata":{"resourceVersion":"42","finalizers":["x/y"]}}"#
    );
    let none = remove_finalizer_json_merge("42", &[]);
    assert_eq!(none.body.to_string(), r#"{"metadata":{"resourceVersion":"42","finalizers":null}}"#);
    let mut meta =
        ObjectMeta { finalizers: vec!["orphan".into(), "x/y".into()], ..pod("100", vec![]) };
    apply_patch(&mut meta, &patch).unwrap();
    assert_eq!(meta.finalizers, vec!["x/y".to_owned()]);
    apply_patch(&mut meta, &none).unwrap();
    assert!(meta.finalizers.is_empty());
}

#[test]
fn strategic_uid_mismatch_is_invalid_and_leaves_meta_unchanged() {
    let mut meta = pod("200", vec![api_ref("1")]);
    let before = meta.clone();
    let err = apply_strategic_merge(&mut meta, &delete_owner_refs_strategic("100", ["1"]).body)
        .unwrap_err();
    assert!(
        matches!(err, ClusterError::Invalid(ref m) if m.contains("field is immutable")),
        "{err:?}"
    );
    assert_eq!(meta, before);
}

#[test]
fn json_merge_stale_resource_version_is_a_conflict() {
    let mut meta = pod("100", vec![api_ref("1")]);
    let before = meta.clone();
    let patch = delete_owner_refs_json_merge("41", &meta.owner_references.clone(), ["1"]);
    let err = apply_json_merge(&mut meta, &patch.body).unwrap_err();
    assert!(matches!(err, ClusterError::Conflict(_)), "{err:?}");
    assert!(err.to_string().contains("the server reported a conflict"));
    assert_eq!(meta, before);
}

#[test]
fn json_merge_empty_resource_version_is_unconditional() {
    let mut meta = pod("100", vec![api_ref("1")]);
    let patch = delete_owner_refs_json_merge("", &meta.owner_references.clone(), ["1"]);
    apply_json_merge(&mut meta, &patch.body).unwrap();
    assert!(meta.owner_references.is_empty());
    assert_eq!(meta.resource_version, "42");
}

#[test]
fn strategic_delete_of_absent_ref_is_a_no_op() {
    let mut meta = pod("100", vec![api_ref("1")]);
    apply_strategic_merge(&mut meta, &delete_owner_refs_strategic("100", ["9"]).body).unwrap();
    assert_eq!(meta.owner_references, vec![api_ref("1")]);
}

#[test]
fn strategic_merge_appends_new_refs_and_merges_fields_of_existing_ones() {
    let mut meta = pod("100", vec![full_ref("rc1", "1", Some(true), Some(true))]);
    let body = json!({"metadata": {"ownerReferences": [
        {"uid": "1", "controller": null, "name": "renamed"},
        {"apiVersion": "v1", "kind": "Secret", "name": "s", "uid": "2", "controller": null},
    ]}});
    apply_strategic_merge(&mut meta, &body).unwrap();
    assert_eq!(
        meta.owner_references,
        vec![
            full_ref("renamed", "1", None, Some(true)),
            OwnerReference {
                api_version: "v1".into(),
                kind: "Secret".into(),
                name: "s".into(),
                uid: "2".into(),
                controller: None,
                block_owner_deletion: None,
            },
        ]
    );
}

#[test]
fn strategic_merge_orders_refs_as_the_api_server_does() {
    // New references go before the object's own (the real server's order).
    let mut meta = pod("100", vec![api_ref("1"), api_ref("2")]);
    let body = json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "3"}]}});
    apply_strategic_merge(&mut meta, &body).unwrap();
    let uids: Vec<&str> = meta.owner_references.iter().map(|r| r.uid.as_str()).collect();
    assert_eq!(uids, ["3", "1", "2"]);
    // A patch naming every reference orders them as it lists them.
    let body = json!({"metadata": {"ownerReferences": [{"uid": "2"}, {"uid": "1"}, {"uid": "3"}]}});
    apply_strategic_merge(&mut meta, &body).unwrap();
    let uids: Vec<&str> = meta.owner_references.iter().map(|r| r.uid.as_str()).collect();
    assert_eq!(uids, ["2", "1", "3"]);
}

#[test]
fn strategic_merge_replace_directive_and_null_list() {
    let mut meta = pod("100", vec![api_ref("1"), api_ref("2")]);
    let body = json!({"metadata": {"ownerReferences": [{"$patch": "replace"}, {"uid": "3"}]}});
    apply_strategic_merge(&mut meta, &body).unwrap();
    assert_eq!(meta.owner_references, vec![api_ref("3")]);
    apply_strategic_merge(&mut meta, &json!({"metadata": {"ownerReferences": null}})).unwrap();
    assert!(meta.owner_references.is_empty());
}

#[test]
fn strategic_merge_element_without_uid_is_a_bad_request() {
    let mut meta = pod("100", vec![api_ref("1")]);
    let err = apply_strategic_merge(
        &mut meta,
        &json!({"metadata": {"ownerReferences": [{"name": "x"}]}}),
    )
    .unwrap_err();
    assert!(matches!(err, ClusterError::Other { code: 400, .. }), "{err:?}");
}

#[test]
fn strategic_merge_finalizers_union_and_delete_from_primitive_list() {
    let mut meta = ObjectMeta { finalizers: vec!["a".into(), "b".into()], ..pod("100", vec![]) };
    let body = json!({"metadata": {
        "$deleteFromPrimitiveList/finalizers": ["a"],
        "finalizers": ["b", "c"],
    }});
    apply_strategic_merge(&mut meta, &body).unwrap();
    assert_eq!(meta.finalizers, vec!["b".to_owned(), "c".to_owned()]);
    apply_strategic_merge(&mut meta, &json!({"metadata": {"finalizers": null}})).unwrap();
    assert!(meta.finalizers.is_empty());
}

#[test]
fn json_merge_replaces_lists_and_ignores_unmodelled_fields() {
    let mut meta = ObjectMeta { finalizers: vec!["a".into()], ..pod("100", vec![api_ref("1")]) };
    let body = json!({
        "spec": {"replicas": 3},
        "metadata": {
            "labels": {"x": "y"},
            "finalizers": ["b"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "9"}],
        },
    });
    apply_json_merge(&mut meta, &body).unwrap();
    assert_eq!(meta.finalizers, vec!["b".to_owned()]);
    assert_eq!(meta.owner_references.len(), 1);
    assert_eq!(meta.owner_references[0].uid, "9");
}

#[test]
fn body_without_metadata_is_a_no_op_and_non_object_is_a_bad_request() {
    let mut meta = pod("100", vec![api_ref("1")]);
    let before = meta.clone();
    apply_json_merge(&mut meta, &json!({"spec": {}})).unwrap();
    assert_eq!(meta, before);
    let err = apply_json_merge(&mut meta, &json!([1])).unwrap_err();
    assert!(matches!(err, ClusterError::Other { code: 400, .. }), "{err:?}");
}

#[test]
fn owner_ref_conversions_round_trip() {
    let cases = [
        full_ref("rc1", "1", Some(true), Some(false)),
        full_ref("rc2", "910a2dec-8902-4cc1-beeb-8da1658eec67", None, None),
        api_ref("3"),
    ];
    for (i, api) in cases.iter().enumerate() {
        assert_eq!(&owner_ref_to_api(&owner_ref_from_api(api)), api, "#{i}: graph round trip");
        assert_eq!(
            &owner_reference_from_json(&owner_reference_to_json(api)).unwrap(),
            api,
            "#{i}: json round trip"
        );
    }
}
