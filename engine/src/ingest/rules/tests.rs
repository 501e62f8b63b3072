//! Unit tests of upstream's per-event rules.

use super::*;

fn r(uid: &str) -> OwnerRef {
    OwnerRef {
        ty: ObjectType::new("v1", "Pod"),
        name: String::new(),
        uid: Uid::parse(uid),
        controller: None,
        block_owner_deletion: None,
    }
}

#[test]
fn references_are_equal_field_by_field() {
    let base = OwnerRef { name: "rs-1".to_owned(), ..r("1") };
    let copy = base.clone();
    assert_eq!(RefView::of(&base), RefView::of(&base));
    assert_eq!(RefView::of(&base), RefView::of(&copy), "same text, another string");
    let renamed = OwnerRef { name: "rs-2".to_owned(), ..base.clone() };
    let other_uid = OwnerRef { uid: Uid::parse("2"), ..base.clone() };
    let other_type = OwnerRef { ty: ObjectType::new("apps/v1", "ReplicaSet"), ..base.clone() };
    let controller = OwnerRef { controller: Some(true), ..base.clone() };
    let blocking = OwnerRef { block_owner_deletion: Some(false), ..base.clone() };
    for other in [&renamed, &other_uid, &other_type, &controller, &blocking] {
        assert_ne!(RefView::of(&base), RefView::of(other), "{other:?}");
    }
    // A name that is a prefix of the other, borrowed from the same bytes.
    let prefix = RefView { name: &base.name[..2], ..RefView::of(&base) };
    assert_ne!(RefView::of(&base), prefix);
}

#[test]
fn references_diffs_as_upstream_benchmark() {
    // BenchmarkReferencesDiffs: old [{1},{2}] new [{2},{3}] → added {3}, removed {1}.
    let (a, b, c) = (r("1"), r("2"), r("3"));
    let old = [RefView::of(&a), RefView::of(&b)];
    let new = [RefView::of(&b), RefView::of(&c)];
    let d = references_diffs(&old, &new);
    assert_eq!(d.added, vec![RefView::of(&c)]);
    assert_eq!(d.removed, vec![RefView::of(&a)]);
    assert!(d.changed.is_empty());
}

#[test]
fn references_diffs_reports_changed_block_owner_deletion() {
    let old = r("1");
    let mut new = r("1");
    new.block_owner_deletion = Some(true);
    let d = references_diffs(&[RefView::of(&old)], &[RefView::of(&new)]);
    assert_eq!(d.changed, vec![(RefView::of(&old), RefView::of(&new))]);
    assert!(d.added.is_empty() && d.removed.is_empty());
}

#[test]
fn references_diffs_keeps_go_map_semantics_for_duplicates() {
    let (a, mut a2) = (r("1"), r("1"));
    a2.name = "other".into();
    // new has the UID twice: the last wins.
    let d = references_diffs(&[], &[RefView::of(&a), RefView::of(&a2)]);
    assert_eq!(d.added, vec![RefView::of(&a2)]);
    // old has it twice and new still names it: the second old entry is not removed
    // (upstream counts it removed and drops the edge; see the divergence above).
    let d = references_diffs(&[RefView::of(&a), RefView::of(&a)], &[RefView::of(&a)]);
    assert!(d.removed.is_empty() && d.changed.is_empty(), "{d:?}");
    // Gone from new altogether: removed, each old entry as upstream.
    let d = references_diffs(&[RefView::of(&a), RefView::of(&a)], &[]);
    assert_eq!(d.removed, vec![RefView::of(&a), RefView::of(&a)]);
}

/// The blocking one of two references to an owner goes: the owner lost a blocking
/// dependent, reported as a change to the reference kept (so that the owner is queued).
#[test]
fn references_diffs_reports_a_dropped_blocking_duplicate_as_unblocked() {
    let (a, mut blocking) = (r("1"), r("1"));
    blocking.block_owner_deletion = Some(true);
    let d = references_diffs(&[RefView::of(&a), RefView::of(&blocking)], &[RefView::of(&a)]);
    assert_eq!(d.changed, vec![(RefView::of(&blocking), RefView::of(&a))]);
    assert!(d.removed.is_empty() && d.added.is_empty());
    // Another reference to the owner still blocks: no unblocking to report.
    let d = references_diffs(
        &[RefView::of(&a), RefView::of(&blocking)],
        &[RefView::of(&a), RefView::of(&blocking)],
    );
    assert!(!d.changed.iter().any(|(o, n)| o.blocks() && !n.blocks()), "{d:?}");
}

#[test]
fn transitions_start_only_once() {
    let deleting_fg = DeletionState { deletion_timestamp: true, foreground: true, orphan: false };
    let deleting_orphan =
        DeletionState { deletion_timestamp: true, foreground: false, orphan: true };
    assert_eq!(transition(None, deleting_fg), Transition::Foreground);
    assert_eq!(transition(Some(deleting_fg), deleting_fg), Transition::None);
    assert_eq!(transition(Some(DeletionState::default()), deleting_orphan), Transition::Orphan);
    let both = DeletionState { deletion_timestamp: true, foreground: true, orphan: true };
    assert_eq!(transition(None, both), Transition::Orphan);
    assert_eq!(transition(None, DeletionState::default()), Transition::None);
}

/// TestGetAlternateOwnerIdentity, from
/// <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/graph_builder_test.go>
/// (GC-SPEC.md §2.6, §9.A): which identity a virtual owner takes next after one of its
/// identities was verified absent.
mod get_alternate_owner_identity {
    use super::*;

    /// Upstream's `makeID(groupVersion, kind, namespace, name, uid)`.
    fn make_id(api_version: &str, kind: &str, ns: &str, name: &str, uid: &str) -> ObjectReference {
        ObjectReference::new(api_version, kind, ns, name, uid)
    }

    /// Upstream's `makeNode(child, withOwners(owners...))`, as the owner's side of the
    /// graph sees that dependent: its UID, namespace, and the references that name `uid`.
    ///
    /// Upstream's getAlternateOwnerIdentity skips references to other UIDs itself; kube-gc's
    /// callers hand it only the references to the owner's UID (the edge copies an owner
    /// keeps of its dependents), so the filter is here.
    fn dep<'a>(child: &ObjectReference, owners: &[&'a ObjectReference], uid: Uid) -> DepRefs<'a> {
        DepRefs {
            uid: child.uid,
            namespace: child.namespace,
            refs: owners.iter().filter(|o| o.uid == uid).map(|o| (o.ty, o.name.as_str())).collect(),
        }
    }

    #[test]
    fn test_get_alternate_owner_identity() {
        let ns1child1 = make_id("v1", "Child", "ns1", "child1", "childuid11");
        let ns1child2 = make_id("v1", "Child", "ns1", "child2", "childuid12");
        let ns2child1 = make_id("v1", "Child", "ns2", "child1", "childuid21");
        let clusterchild1 = make_id("v1", "Child", "", "child1", "childuidc1");

        let nsabsentparentns1 = make_id("v1", "NSParent", "ns1", "parentname", "parentuid");
        let nsabsentparentns2 = make_id("v1", "NSParent", "ns2", "parentname", "parentuid");
        let nsabsentparent_version = make_id("xx", "NSParent", "ns1", "parentname", "parentuid");
        let nsabsentparent_kind = make_id("v1", "xxxxxxxx", "ns1", "parentname", "parentuid");
        let nsabsentparent_name = make_id("v1", "NSParent", "ns1", "xxxxxxxxxx", "parentuid");

        let clusterabsentparent = make_id("v1", "ClusterParent", "", "parentname", "parentuid");
        let clusterabsentparent_version =
            make_id("xx", "ClusterParent", "", "parentname", "parentuid");
        let clusterabsentparent_kind =
            make_id("v1", "xxxxxxxxxxxxx", "", "parentname", "parentuid");
        let clusterabsentparent_name =
            make_id("v1", "ClusterParent", "", "xxxxxxxxxx", "parentuid");
        let clusterabsentparent_ns1_version =
            make_id("xx", "ClusterParent", "ns1", "parentname", "parentuid");
        let clusterabsentparent_ns1_kind =
            make_id("v1", "xxxxxxxxxxxxx", "ns1", "parentname", "parentuid");

        let ordered_namespaced: Vec<ObjectReference> = ["v1", "v2", "v3", "v4", "v5"]
            .iter()
            .map(|v| make_id(v, "kind", "ns1", "name", "uid"))
            .collect();
        let ordered_cluster: Vec<ObjectReference> = ["v1", "v2", "v3", "v4", "v5"]
            .iter()
            .map(|v| make_id(v, "kind", "", "name", "uid"))
            .collect();
        let all_namespaced: Vec<&ObjectReference> = ordered_namespaced.iter().collect();
        let all_cluster: Vec<&ObjectReference> = ordered_cluster.iter().collect();
        let another = make_id("v1", "Parent", "ns1", "name", "anotheruid");

        /// (name, dependents as (child, its owners), verified absent, expected alternate).
        type Case<'a> = (
            &'static str,
            Vec<(&'a ObjectReference, Vec<&'a ObjectReference>)>,
            &'a ObjectReference,
            Option<&'a ObjectReference>,
        );
        let cases: Vec<Case<'_>> = vec![
            (
                "namespaced alternate version",
                vec![
                    (&ns1child1, vec![&nsabsentparentns1]),
                    (&ns1child2, vec![&nsabsentparent_version]),
                ],
                &nsabsentparentns1,
                Some(&nsabsentparent_version), // switch to alternate version
            ),
            (
                "namespaced alternate kind",
                vec![
                    (&ns1child1, vec![&nsabsentparentns1]),
                    (&ns1child2, vec![&nsabsentparent_kind]),
                ],
                &nsabsentparentns1,
                Some(&nsabsentparent_kind), // switch to alternate kind
            ),
            (
                "namespaced alternate namespace",
                vec![
                    (&ns1child1, vec![&nsabsentparentns1]),
                    (&ns2child1, vec![&nsabsentparentns2]),
                ],
                &nsabsentparentns1,
                Some(&nsabsentparentns2), // switch to alternate namespace
            ),
            (
                "namespaced alternate name",
                vec![
                    (&ns1child1, vec![&nsabsentparentns1]),
                    (&ns1child1, vec![&nsabsentparent_name]),
                ],
                &nsabsentparentns1,
                Some(&nsabsentparent_name), // switch to alternate name
            ),
            (
                "cluster alternate version",
                vec![
                    (&ns1child1, vec![&clusterabsentparent]),
                    (&ns1child2, vec![&clusterabsentparent_version]),
                ],
                &clusterabsentparent,
                // namespaced to the new dependent: the version is not known cluster-scoped
                Some(&clusterabsentparent_ns1_version),
            ),
            (
                "cluster alternate kind",
                vec![
                    (&ns1child1, vec![&clusterabsentparent]),
                    (&ns1child2, vec![&clusterabsentparent_kind]),
                ],
                &clusterabsentparent,
                // namespaced to the new dependent: the kind is not known cluster-scoped
                Some(&clusterabsentparent_ns1_kind),
            ),
            (
                "cluster alternate namespace",
                vec![
                    (&ns1child1, vec![&clusterabsentparent]),
                    (&ns2child1, vec![&clusterabsentparent]),
                ],
                &clusterabsentparent,
                // apiVersion/kind verified cluster-scoped, namespace delta ignored
                None,
            ),
            (
                "cluster alternate name",
                vec![
                    (&ns1child1, vec![&clusterabsentparent]),
                    (&ns1child1, vec![&clusterabsentparent_name]),
                ],
                &clusterabsentparent,
                // apiVersion/kind verified cluster-scoped, namespace dropped
                Some(&clusterabsentparent_name),
            ),
            (
                "namespaced ref from namespaced child returns first if absent is sorted last",
                vec![(&ns1child1, all_namespaced.clone())],
                &ordered_namespaced[4],
                Some(&ordered_namespaced[0]),
            ),
            (
                "namespaced ref from namespaced child returns next after absent",
                vec![(&ns1child1, all_namespaced.clone())],
                &ordered_namespaced[3],
                Some(&ordered_namespaced[4]),
            ),
            (
                "cluster ref from cluster child returns first if absent is sorted last",
                vec![(&clusterchild1, all_cluster.clone())],
                &ordered_cluster[4],
                Some(&ordered_cluster[0]),
            ),
            (
                "cluster ref from cluster child returns next after absent",
                vec![(&clusterchild1, all_cluster.clone())],
                &ordered_cluster[3],
                Some(&ordered_cluster[4]),
            ),
            (
                "ignore unrelated",
                vec![(&ns1child1, vec![&clusterabsentparent, &another])],
                &clusterabsentparent,
                None,
            ),
            (
                "ignore matches",
                vec![(&ns1child1, vec![&clusterabsentparent, &clusterabsentparent])],
                &clusterabsentparent,
                None,
            ),
            (
                "collapse duplicates",
                vec![(
                    &clusterchild1,
                    vec![
                        &clusterabsentparent,
                        &clusterabsentparent_kind,
                        &clusterabsentparent_kind,
                    ],
                )],
                &clusterabsentparent,
                Some(&clusterabsentparent_kind),
            ),
        ];
        assert_eq!(cases.len(), 15);
        for (i, (name, deps, verified_absent, want)) in cases.iter().enumerate() {
            let deps: Vec<DepRefs<'_>> = deps
                .iter()
                .map(|(child, owners)| dep(child, owners, verified_absent.uid))
                .collect();
            let deps: Vec<&DepRefs<'_>> = deps.iter().collect();
            let got = alternate_owner_identity(&deps, verified_absent);
            assert_eq!(got.as_ref(), *want, "#{i} {name}: got {got:?}, want {want:?}");
        }
    }
}
