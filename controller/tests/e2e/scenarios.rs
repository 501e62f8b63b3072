//! The differential scenarios: each runs once under kube-gc and once under upstream's
//! collector, and both runs must reach the same states.
//!
//! Named after upstream's integration tests where they port one
//! (test/integration/garbagecollector/garbage_collector_test.go and
//! cluster_scoped_owner_test.go, v1.20.2), scaled down; the others name what they check.
//! Expected states are upstream's behaviour as GC-SPEC.md §2-5 describes it.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::json;

use super::cluster::{
    Ctx, Del, Kind, OwnerRef, Wait, config_map, cron_job, job, job_owned, owners, pod, rc, workload,
};

/// A scenario's body.
pub type Run =
    for<'a, 'b> fn(&'b mut Ctx<'a>) -> Pin<Box<dyn Future<Output = anyhow::Result<()>> + 'b>>;

/// A named scenario.
#[derive(Clone, Copy)]
pub struct Scenario {
    /// Its name (upstream's test name, snake-cased, where it ports one).
    pub name: &'static str,
    /// Its body.
    pub run: Run,
}

macro_rules! scenarios {
    ($($f:path),* $(,)?) => {
        vec![$(Scenario {
            name: {
                let full = stringify!($f);
                match full.rfind(':') { Some(i) => full.split_at(i + 1).1, None => full }
            },
            run: |cx| Box::pin($f(cx)),
        }),*]
    };
}

/// Every differential scenario, in running order.
pub fn all() -> Vec<Scenario> {
    scenarios![
        cascading_deletion,
        create_with_non_existent_owner,
        orphaning,
        dependent_created_after_an_orphaning_deletion,
        legacy_default_orphan_kinds,
        kinds_served_only_at_a_version_their_group_does_not_prefer,
        stressing_cascading_deletion,
        solid_owner_does_not_block_waiting_owner,
        non_blocking_owner_ref_does_not_block,
        blocking_owner_ref_does_block,
        double_deletion_with_finalizer,
        deployment_replicaset_pod_chain,
        owner_cycles_under_foreground_deletion,
        cluster_scoped_owners,
        cross_namespace_references,
        custom_resource_cascading_deletion,
        crd_deletion_cascading,
        super::bad_input::owner_references_with_unknown_kinds,
        super::bad_input::owner_references_with_non_uuid_uids,
        super::bad_input::self_references,
        super::bad_input::broken_api_group_in_discovery,
    ]
}

const RC: &str = "ReplicationController";

fn rc_ref(cx: &Ctx<'_>, logical: &str) -> OwnerRef {
    cx.owner(logical)
}

/// TestCascadingDeletion: deleting an RC (orphanDependents=false) deletes the pod it alone
/// owns, and only removes the reference from a pod that has another, live owner.
pub async fn cascading_deletion(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    cx.create("to-be-deleted", Kind::rc(), rc(&[], &[])).await?;
    cx.create("remaining", Kind::rc(), rc(&[], &[])).await?;
    let (tbd, rem) = (rc_ref(cx, "to-be-deleted"), rc_ref(cx, "remaining"));
    cx.create("gc-pod", Kind::pod(), pod(std::slice::from_ref(&tbd), &[])).await?;
    cx.create("one-valid-owner", Kind::pod(), pod(&[tbd, rem], &[])).await?;
    cx.create("independent", Kind::pod(), pod(&[], &[])).await?;
    cx.delete("to-be-deleted", Del::OrphanDependents(false)).await?;
    let owners_rem = format!("live owners=[{RC}/remaining]");
    cx.expect(
        "final",
        &[
            ("to-be-deleted", "gone"),
            ("remaining", "live"),
            ("gc-pod", "gone"),
            ("one-valid-owner", &owners_rem),
            ("independent", "live"),
        ],
        Wait::DEFAULT,
    )
    .await
}

/// TestCreateWithNonExistentOwner: an object created with an owner that never existed is
/// deleted (the owner's UID is not even a UUID).
pub async fn create_with_non_existent_owner(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let ghost = OwnerRef::new("v1", RC, "to-be-deleted", &cx.fake_uid("doesn't matter"));
    cx.create("gc-pod", Kind::pod(), pod(&[ghost], &[])).await?;
    cx.expect("final", &[("gc-pod", "gone")], Wait::DEFAULT).await
}

/// TestOrphaning: deleting an RC with orphanDependents=true leaves its pods without the
/// reference.
pub async fn orphaning(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    cx.create("to-be-deleted", Kind::rc(), rc(&[], &[])).await?;
    let owner = rc_ref(cx, "to-be-deleted");
    for i in 0..3 {
        cx.create(&format!("gc-pod-{i}"), Kind::pod(), pod(std::slice::from_ref(&owner), &[]))
            .await?;
    }
    // Deletion observed before a dependent's creation does not orphan it (#26120).
    cx.wait_observed(&["gc-pod-0", "gc-pod-1", "gc-pod-2"], Duration::from_secs(60)).await?;
    cx.delete("to-be-deleted", Del::OrphanDependents(true)).await?;
    cx.expect(
        "final",
        &[
            ("to-be-deleted", "gone"),
            ("gc-pod-0", "live"),
            ("gc-pod-1", "live"),
            ("gc-pod-2", "live"),
        ],
        Wait::DEFAULT,
    )
    .await
}

/// An orphaning deletion of an owner another finalizer holds, and a Pod created seconds after
/// it with a reference to that owner: the orphaning was asked for before the Pod
/// existed, and was not for it. It stays while the owner does (a live owner), and once the
/// owner goes it is garbage, under both collectors (kube-gc's memory of orphaned owners reads
/// its creationTimestamp against the owner's deletionTimestamp), while a Pod that existed at
/// the deletion is orphaned.
pub async fn dependent_created_after_an_orphaning_deletion(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    cx.create("held", Kind::rc(), rc(&[], &["example.com/hold"])).await?;
    let held = rc_ref(cx, "held");
    cx.create("before", Kind::pod(), pod(std::slice::from_ref(&held), &[])).await?;
    cx.wait_observed(&["before"], Duration::from_secs(60)).await?;
    cx.delete("held", Del::Orphan).await?;
    let orphaned = [("held", "deleting fin=[example.com/hold]"), ("before", "live")];
    cx.expect("orphaned", &orphaned, Wait::DEFAULT).await?;
    // Timestamps are to the second, and kube-gc leaves a dependent to upstream only past a
    // margin (CREATED_AFTER_MARGIN_SECS, 2 s): three seconds later.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    cx.create("after", Kind::pod(), pod(&[held], &[])).await?;
    cx.wait_observed(&["after"], Duration::from_secs(60)).await?;
    let owners_held = format!("live owners=[{RC}/held]");
    let kept = [orphaned[0], orphaned[1], ("after", &owners_held)];
    cx.expect("kept by a live owner", &kept, Wait::HOLD).await?;
    cx.clear_finalizers("held").await?;
    cx.expect("final", &[("held", "gone"), ("before", "live"), ("after", "gone")], Wait::DEFAULT)
        .await
}

/// Deleting with no options orphans for the legacy kinds whose default policy is
/// OrphanDependents (core/v1 ReplicationController, batch/v1 Job), and deletes in the
/// background for the others (apps/v1 Deployment). GC-SPEC.md §5.6.
pub async fn legacy_default_orphan_kinds(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    cx.create("rc", Kind::rc(), rc(&[], &[])).await?;
    cx.create("job", Kind::job(), job()).await?;
    cx.create("deployment", Kind::deployment(), workload(&[], "legacy")).await?;
    let (r, j, d) = (cx.owner("rc"), cx.owner("job"), cx.owner("deployment"));
    cx.create("rc-pod", Kind::pod(), pod(&[r], &[])).await?;
    cx.create("job-pod", Kind::pod(), pod(&[j], &[])).await?;
    cx.create("deployment-rs", Kind::replica_set(), workload(&[d], "legacy")).await?;
    cx.wait_observed(&["rc-pod", "job-pod", "deployment-rs"], Duration::from_secs(60)).await?;
    for o in ["rc", "job", "deployment"] {
        cx.delete(o, Del::Default).await?;
    }
    cx.expect(
        "final",
        &[
            ("rc", "gone"),
            ("rc-pod", "live"),
            ("job", "gone"),
            ("job-pod", "live"),
            ("deployment", "gone"),
            ("deployment-rs", "gone"),
        ],
        Wait::DEFAULT,
    )
    .await
}

/// A kind its group serves only at a version it does not prefer (v1.20's CronJobs, in
/// `batch/v1beta1` while batch prefers `v1`) is watched there, as upstream's discovery
/// (`ServerPreferredResources`) picks it: a CronJob deleted in the foreground loses its
/// blocking Job, then its finalizer; one deleted with `orphan` orphans its Job. Watching
/// preferred versions only, kube-gc never saw either deletion: both finalizers stayed.
pub async fn kinds_served_only_at_a_version_their_group_does_not_prefer(
    cx: &mut Ctx<'_>,
) -> anyhow::Result<()> {
    cx.create("cron-fg", Kind::cron_job(), cron_job()).await?;
    cx.create("cron-orphan", Kind::cron_job(), cron_job()).await?;
    let (fg, orphan) = (cx.owner("cron-fg").block(true), cx.owner("cron-orphan").block(true));
    cx.create("job-fg", Kind::job(), job_owned(&[fg])).await?;
    cx.create("job-orphan", Kind::job(), job_owned(&[orphan])).await?;
    cx.wait_observed(&["job-fg", "job-orphan"], Duration::from_secs(60)).await?;
    cx.delete("cron-fg", Del::Foreground).await?;
    cx.delete("cron-orphan", Del::Orphan).await?;
    cx.expect(
        "final",
        &[("cron-fg", "gone"), ("job-fg", "gone"), ("cron-orphan", "gone"), ("job-orphan", "live")],
        Wait::DEFAULT,
    )
    .await
}

/// TestStressingCascadingDeletion, 2 collections instead of 10: RCs created with or without
/// the orphan finalizer, deleted with nil, orphanDependents and propagationPolicy options;
/// only collection 3 (orphan finalizer, orphanDependents=false) loses its pods.
pub async fn stressing_cascading_deletion(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    const COLLECTIONS: usize = 2;
    let groups: [(&str, &[&str], Del, bool); 5] = [
        ("c1", &[], Del::Default, true),
        ("c2", &["orphan"], Del::Default, true),
        ("c3", &["orphan"], Del::OrphanDependents(false), false),
        ("c4", &[], Del::OrphanDependents(true), true),
        ("c5", &[], Del::Orphan, true),
    ];
    let mut want: Vec<(String, String)> = Vec::new();
    for i in 0..COLLECTIONS {
        for (g, finalizers, how, survive) in groups {
            let rc_name = format!("rc-{g}-{i}");
            cx.create(&rc_name, Kind::rc(), rc(&[], finalizers)).await?;
            let owner = cx.owner(&rc_name);
            let mut pods = Vec::new();
            for j in 0..3 {
                let p = format!("pod-{g}-{i}-{j}");
                cx.create(&p, Kind::pod(), pod(std::slice::from_ref(&owner), &[])).await?;
                want.push((p.clone(), if survive { "live" } else { "gone" }.into()));
                pods.push(p);
            }
            if survive {
                let pods: Vec<&str> = pods.iter().map(String::as_str).collect();
                cx.wait_observed(&pods, Duration::from_secs(60)).await?;
            }
            cx.delete(&rc_name, how).await?;
            want.push((rc_name, "gone".into()));
        }
    }
    let want = want.into_iter().collect();
    cx.expect_snapshot("final", want, Wait { timeout: Duration::from_secs(60), ..Wait::DEFAULT })
        .await
}

/// TestSolidOwnerDoesNotBlockWaitingOwner: a dependent with a solid owner and a
/// foreground-deleting owner loses the waiting reference and stays.
pub async fn solid_owner_does_not_block_waiting_owner(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    cx.create("to-be-deleted", Kind::rc(), rc(&[], &[])).await?;
    cx.create("remaining", Kind::rc(), rc(&[], &[])).await?;
    let refs = [rc_ref(cx, "to-be-deleted").block(true), rc_ref(cx, "remaining")];
    cx.create("pod", Kind::pod(), pod(&refs, &[])).await?;
    cx.delete("to-be-deleted", Del::Foreground).await?;
    let pod_state = format!("live owners=[{RC}/remaining]");
    cx.expect(
        "final",
        &[("to-be-deleted", "gone"), ("remaining", "live"), ("pod", &pod_state)],
        Wait::DEFAULT,
    )
    .await
}

/// TestNonBlockingOwnerRefDoesNotBlock: dependents without blockOwnerDeletion (unset or
/// false) do not hold a foreground deletion; they are deleted too (custom finalizers keep
/// them, being deleted, until removed).
pub async fn non_blocking_owner_ref_does_not_block(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    cx.create("to-be-deleted", Kind::rc(), rc(&[], &[])).await?;
    let owner = rc_ref(cx, "to-be-deleted");
    cx.create("pod1", Kind::pod(), pod(std::slice::from_ref(&owner), &["x/y"])).await?;
    cx.create("pod2", Kind::pod(), pod(&[owner.block(false)], &["x/y"])).await?;
    cx.wait_observed(&["pod1", "pod2"], Duration::from_secs(60)).await?;
    cx.delete("to-be-deleted", Del::Foreground).await?;
    let deleting = format!("deleting fin=[x/y] owners=[{RC}/to-be-deleted]");
    cx.expect(
        "owner deleted",
        &[("to-be-deleted", "gone"), ("pod1", &deleting), ("pod2", &deleting)],
        Wait::DEFAULT,
    )
    .await?;
    cx.clear_finalizers("pod1").await?;
    cx.clear_finalizers("pod2").await?;
    cx.expect(
        "finalizers removed",
        &[("to-be-deleted", "gone"), ("pod1", "gone"), ("pod2", "gone")],
        Wait::DEFAULT,
    )
    .await
}

/// TestBlockingOwnerRefDoesBlock: a dependent with blockOwnerDeletion=true that cannot go
/// (custom finalizer) holds its owner's foreground deletion; removing the finalizer lets both
/// go.
pub async fn blocking_owner_ref_does_block(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    cx.create("to-be-deleted", Kind::rc(), rc(&[], &[])).await?;
    let owner = rc_ref(cx, "to-be-deleted").block(true);
    cx.create("pod", Kind::pod(), pod(&[owner], &["x/y"])).await?;
    cx.wait_observed(&["pod"], Duration::from_secs(60)).await?;
    cx.delete("to-be-deleted", Del::Foreground).await?;
    let pod_state = format!("deleting fin=[x/y] owners=[{RC}/to-be-deleted!]");
    cx.expect(
        "blocked",
        &[("to-be-deleted", "deleting fin=[foregroundDeletion]"), ("pod", &pod_state)],
        Wait::HOLD,
    )
    .await?;
    cx.clear_finalizers("pod").await?;
    cx.expect("unblocked", &[("to-be-deleted", "gone"), ("pod", "gone")], Wait::DEFAULT).await
}

/// TestDoubleDeletionWithFinalizer: a second foreground deletion of an object whose
/// foregroundDeletion finalizer was already removed does not bring it back.
pub async fn double_deletion_with_finalizer(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    cx.create("lucy", Kind::pod(), pod(&[], &["x/y"])).await?;
    cx.delete("lucy", Del::Foreground).await?;
    cx.expect("first deletion", &[("lucy", "deleting fin=[x/y]")], Wait::DEFAULT).await?;
    cx.delete("lucy", Del::Foreground).await?;
    cx.expect("second deletion", &[("lucy", "deleting fin=[x/y]")], Wait::HOLD).await?;
    cx.clear_finalizers("lucy").await?;
    cx.expect("finalizer removed", &[("lucy", "gone")], Wait::DEFAULT).await
}

/// A three-level Deployment → ReplicaSet → Pods chain (controller, blocking references, as
/// the workload controllers write them), deleted in the foreground and in the background.
pub async fn deployment_replicaset_pod_chain(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let mut want = Vec::new();
    for mode in ["fg", "bg"] {
        let (d, rs) = (format!("deploy-{mode}"), format!("rs-{mode}"));
        cx.create(&d, Kind::deployment(), workload(&[], &d)).await?;
        let dref = cx.owner(&d).controller(true).block(true);
        cx.create(&rs, Kind::replica_set(), workload(&[dref], &d)).await?;
        let rsref = cx.owner(&rs).controller(true).block(true);
        for i in 0..3 {
            let p = format!("pod-{mode}-{i}");
            cx.create(&p, Kind::pod(), pod(std::slice::from_ref(&rsref), &[])).await?;
            want.push((p, "gone".to_owned()));
        }
        want.push((d, "gone".to_owned()));
        want.push((rs, "gone".to_owned()));
    }
    cx.delete("deploy-fg", Del::Foreground).await?;
    cx.delete("deploy-bg", Del::Background).await?;
    cx.expect_snapshot("final", want.into_iter().collect(), Wait::DEFAULT).await
}

/// Owner cycles (blocking references all round) under foreground deletion: the collector
/// breaks the cycle (GC-SPEC.md §3.2, "cycle message") and everything goes; a live cycle
/// elsewhere is left alone.
pub async fn owner_cycles_under_foreground_deletion(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    // a <-> b, c -> b
    cx.create("a", Kind::config_map(), config_map(&[], &[])).await?;
    let a = cx.owner("a").block(true);
    cx.create("b", Kind::config_map(), config_map(&[a], &[])).await?;
    let b = cx.owner("b").block(true);
    cx.create("c", Kind::config_map(), config_map(std::slice::from_ref(&b), &[])).await?;
    cx.add_owner("a", b).await?;
    // p -> r -> q -> p
    cx.create("p", Kind::config_map(), config_map(&[], &[])).await?;
    let p = cx.owner("p").block(true);
    cx.create("q", Kind::config_map(), config_map(&[p], &[])).await?;
    let q = cx.owner("q").block(true);
    cx.create("r", Kind::config_map(), config_map(&[q], &[])).await?;
    let r = cx.owner("r").block(true);
    cx.add_owner("p", r).await?;
    // x <-> y, never deleted
    cx.create("x", Kind::config_map(), config_map(&[], &[])).await?;
    let x = cx.owner("x").block(true);
    cx.create("y", Kind::config_map(), config_map(&[x], &[])).await?;
    let y = cx.owner("y").block(true);
    cx.add_owner("x", y).await?;
    cx.wait_observed(&["a", "b", "c", "p", "q", "r", "x", "y"], Duration::from_secs(60)).await?;
    cx.delete("a", Del::Foreground).await?;
    cx.delete("p", Del::Foreground).await?;
    cx.expect(
        "final",
        &[
            ("a", "gone"),
            ("b", "gone"),
            ("c", "gone"),
            ("p", "gone"),
            ("q", "gone"),
            ("r", "gone"),
            ("x", "live owners=[ConfigMap/y!]"),
            ("y", "live owners=[ConfigMap/x!]"),
        ],
        Wait::DEFAULT,
    )
    .await
}

/// TestClusterScopedOwners: namespaced dependents of cluster-scoped owners. A live owner
/// keeps its dependent, a missing one (non-UUID UID) does not, an unknown owner type is never
/// decided; deleting a cluster-scoped owner collects its namespaced dependent.
pub async fn cluster_scoped_owners(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let pv = Kind::new("", "v1", "PersistentVolume", "persistentvolumes", false);
    cx.create(
        "pv-valid",
        pv,
        json!({"spec": {
            "hostPath": {"path": "/foo"},
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany"]
        }}),
    )
    .await?;
    let pv_ref = cx.owner("pv-valid");
    cx.create("cm-valid", Kind::config_map(), config_map(&[pv_ref], &[])).await?;
    let missing =
        OwnerRef::new("v1", "PersistentVolume", "missing-name", &cx.fake_uid("missing-uid"));
    cx.create("cm-missing", Kind::config_map(), config_map(&[missing], &[])).await?;
    let invalid = OwnerRef::new(
        "unknown.group/v1",
        "UnknownType",
        "invalid-name",
        &cx.fake_uid("invalid-uid"),
    );
    cx.create("cm-invalid", Kind::config_map(), config_map(&[invalid], &[])).await?;
    cx.create("owner-role", Kind::cluster_role(), json!({"rules": []})).await?;
    let role = cx.owner("owner-role");
    cx.create("cm-role", Kind::config_map(), config_map(&[role], &[])).await?;
    let pv_live = "live fin=[kubernetes.io/pv-protection]";
    cx.expect(
        "missing owner collected",
        &[
            ("pv-valid", pv_live),
            ("cm-valid", "live owners=[PersistentVolume/pv-valid]"),
            ("cm-missing", "gone"),
            ("cm-invalid", "live owners=[UnknownType/?invalid-name]"),
            ("owner-role", "live"),
            ("cm-role", "live owners=[ClusterRole/owner-role]"),
        ],
        Wait::HOLD,
    )
    .await?;
    cx.delete("owner-role", Del::Background).await?;
    cx.expect(
        "cluster-scoped owner deleted",
        &[
            ("pv-valid", pv_live),
            ("cm-valid", "live owners=[PersistentVolume/pv-valid]"),
            ("cm-missing", "gone"),
            ("cm-invalid", "live owners=[UnknownType/?invalid-name]"),
            ("owner-role", "gone"),
            ("cm-role", "gone"),
        ],
        Wait::DEFAULT,
    )
    .await
}

/// TestCrossNamespaceReferences (scaled down): references to an owner's UID from another
/// namespace are invalid. Dependents whose only reference is such are deleted and get a
/// Warning OwnerRefInvalidNamespace event (GC-SPEC.md §2.4); those that also reference
/// unknown kinds can never be decided and stay; the owner's valid children survive.
pub async fn cross_namespace_references(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    cx.create("parent", Kind::config_map(), config_map(&[], &[])).await?;
    let parent = cx.owner("parent").controller(false);
    for i in 0..3 {
        cx.create(
            &format!("child-{i}"),
            Kind::secret(),
            config_map(std::slice::from_ref(&parent), &[]),
        )
        .await?;
    }
    // The parent must be in the graph first, for the invalid references to be recognised
    // as such when the dependents are added (upstream starts its GC after creating all).
    cx.wait_observed(&["parent", "child-0"], Duration::from_secs(60)).await?;
    let ns_a = cx.namespace("a").await?;
    let mut invalid: Vec<OwnerRef> = (0..3)
        .map(|i| {
            OwnerRef::new(
                "test/v1",
                &format!("invalid{i}"),
                "invalid",
                &cx.fake_uid(&format!("invalid-{i}")),
            )
        })
        .collect();
    let wrong_ns = OwnerRef::new("v1", "Pod", "invalid", &cx.uid("parent")).controller(false);
    invalid.push(wrong_ns.clone());
    let mut want = vec![("parent".to_owned(), "live".to_owned())];
    for i in 0..3 {
        want.push((format!("child-{i}"), "live owners=[ConfigMap/parent]".to_owned()));
    }
    let all_invalid =
        "live owners=[invalid0/?invalid,invalid1/?invalid,invalid2/?invalid,Pod/parent]";
    let mut events = Vec::new();
    let event = |kind: &str, name: &str| {
        format!(
            "Warning OwnerRefInvalidNamespace {kind}/{name}: ownerRef [v1/Pod, namespace: <ns:a>, \
             name: invalid, uid: <uid:parent>] does not exist in namespace \"<ns:a>\""
        )
    };
    for i in 0..2 {
        let (t1, t2, t3) = (
            format!("invalid-child-{i}"),
            format!("invalid-child-a-{i}"),
            format!("invalid-child-b-{i}"),
        );
        cx.create_in(&t1, Kind::config_map(), Some(&ns_a), config_map(&invalid, &[])).await?;
        cx.create_in(&t2, Kind::secret(), Some(&ns_a), config_map(&invalid, &[])).await?;
        cx.create_in(
            &t3,
            Kind::secret(),
            Some(&ns_a),
            config_map(std::slice::from_ref(&wrong_ns), &[]),
        )
        .await?;
        events.push(event("ConfigMap", &t1));
        events.push(event("Secret", &t2));
        events.push(event("Secret", &t3));
        want.push((t1, all_invalid.to_owned()));
        want.push((t2, all_invalid.to_owned()));
        want.push((t3, "gone".to_owned()));
    }
    cx.expect_snapshot("invalid children collected", want.iter().cloned().collect(), Wait::HOLD)
        .await?;
    // The same made-up owners referenced from a third namespace: their virtual nodes already
    // carry namespace "a" (the first referencing dependent's), so the first reference is
    // flagged as potentially invalid without an event, and the parent reference after it is
    // not examined (no event either). GC-SPEC.md §2.3.
    cx.wait_observed(&["invalid-child-0", "invalid-child-a-0"], Duration::from_secs(30)).await?;
    let ns_c = cx.namespace("c").await?;
    cx.create_in("c-invalid-child", Kind::config_map(), Some(&ns_c), config_map(&invalid, &[]))
        .await?;
    want.push(("c-invalid-child".to_owned(), all_invalid.to_owned()));
    // Now that the graph is settled, a new invalid child.
    cx.create_in("invalid-child-c", Kind::secret(), Some(&ns_a), config_map(&[wrong_ns], &[]))
        .await?;
    events.push(event("Secret", "invalid-child-c"));
    want.push(("invalid-child-c".to_owned(), "gone".to_owned()));
    cx.expect_snapshot("new invalid child collected", want.into_iter().collect(), Wait::DEFAULT)
        .await?;
    events.sort();
    cx.expect_events("a", &events, Wait::DEFAULT).await?;
    cx.expect_events("c", &[], Wait::DEFAULT).await
}

/// Creates a namespaced CRD `<plural>.<group>` (v1, schemaless) and waits until it is
/// Established. Tracked as `logical`.
pub async fn create_crd(
    cx: &mut Ctx<'_>,
    logical: &str,
    group: &str,
    kind: &str,
    plural: &str,
) -> anyhow::Result<Kind> {
    let name = format!("{plural}.{group}");
    cx.create(
        logical,
        Kind::crd(),
        json!({
            "metadata": {"name": name},
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
                }]
            }
        }),
    )
    .await?;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let crd = cx.get(logical).await?.ok_or_else(|| anyhow::anyhow!("CRD {name} vanished"))?;
        let established = crd.data["status"]["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Established" && c["status"] == "True"));
        if established {
            break;
        }
        anyhow::ensure!(std::time::Instant::now() < deadline, "CRD {name} not Established");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(Kind::new(group, "v1", kind, plural, true))
}

const CRD_FIN: &str = "live";

/// TestCustomResourceCascadingDeletion + TestMixedRelationships, with a CRD created while
/// the collector runs: custom owners and dependents, mixed with core ones, deleted in the
/// foreground; plus the two JSON-merge-patch fallbacks (custom resources answer 415 to a
/// strategic merge patch, GC-SPEC.md §5.1): removing a dangling reference from a custom
/// dependent that has a live owner, and orphaning a custom dependent.
pub async fn custom_resource_cascading_deletion(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let group = format!("{}.e2e.example.com", cx.suffix);
    let widget = create_crd(cx, "crd", &group, "Widget", "widgets").await?;
    let cm = Kind::config_map;
    // TestCustomResourceCascadingDeletion
    cx.create("owner", widget.clone(), json!({})).await?;
    let o = cx.owner("owner");
    cx.create("dependent", widget.clone(), json!({"metadata": {"ownerReferences": owners(&[o])}}))
        .await?;
    // TestMixedRelationships
    cx.create("custom-owner", widget.clone(), json!({})).await?;
    let o = cx.owner("custom-owner");
    cx.create("core-dependent", cm(), config_map(&[o], &[])).await?;
    cx.create("core-owner", cm(), config_map(&[], &[])).await?;
    let o = cx.owner("core-owner");
    cx.create(
        "custom-dependent",
        widget.clone(),
        json!({"metadata": {"ownerReferences": owners(&[o])}}),
    )
    .await?;
    // JSON merge patch fallbacks
    cx.create("keeper", cm(), config_map(&[], &[])).await?;
    cx.create("doomed", widget.clone(), json!({})).await?;
    let refs = [cx.owner("keeper"), cx.owner("doomed")];
    cx.create("multi", widget.clone(), json!({"metadata": {"ownerReferences": owners(&refs)}}))
        .await?;
    cx.create("orphan-owner", widget.clone(), json!({})).await?;
    let o = cx.owner("orphan-owner");
    cx.create("orphan-dep", widget.clone(), json!({"metadata": {"ownerReferences": owners(&[o])}}))
        .await?;
    // The collector must watch the new resource before acting (upstream 1.20: next Sync,
    // within 30 s).
    cx.wait_observed(
        &[
            "dependent",
            "custom-dependent",
            "multi",
            "orphan-dep",
            "owner",
            "custom-owner",
            "doomed",
            "orphan-owner",
        ],
        Duration::from_secs(90),
    )
    .await?;
    cx.delete("owner", Del::Foreground).await?;
    cx.delete("custom-owner", Del::Foreground).await?;
    cx.delete("core-owner", Del::Foreground).await?;
    cx.delete("doomed", Del::Background).await?;
    cx.wait_observed(&["orphan-dep"], Duration::from_secs(30)).await?;
    cx.delete("orphan-owner", Del::Orphan).await?;
    cx.expect(
        "final",
        &[
            ("crd", CRD_FIN),
            ("owner", "gone"),
            ("dependent", "gone"),
            ("custom-owner", "gone"),
            ("core-dependent", "gone"),
            ("core-owner", "gone"),
            ("custom-dependent", "gone"),
            ("keeper", "live"),
            ("doomed", "gone"),
            ("multi", "live owners=[ConfigMap/keeper]"),
            ("orphan-owner", "gone"),
            ("orphan-dep", "live"),
        ],
        Wait::CRD,
    )
    .await
}

/// TestCRDDeletionCascading: deleting a CRD deletes its instances, and the collector then
/// deletes their core dependents; twice, the second time with the CRD re-created under the
/// same name.
pub async fn crd_deletion_cascading(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let group = format!("{}.crd-deletion.example.com", cx.suffix);
    let mut want: Vec<(String, String)> = Vec::new();
    for pass in ["1", "2"] {
        let (crd, owner, dep) =
            (format!("crd-{pass}"), format!("owner-{pass}"), format!("dependent-{pass}"));
        let gadget = create_crd(cx, &crd, &group, "Gadget", "gadgets").await?;
        cx.create(&owner, gadget, json!({})).await?;
        let o = cx.owner(&owner);
        cx.create(&dep, Kind::config_map(), config_map(&[o], &[])).await?;
        cx.wait_observed(&[owner.as_str(), dep.as_str()], Duration::from_secs(90)).await?;
        cx.delete(&crd, Del::Default).await?;
        want.extend([(crd, "gone".into()), (owner, "gone".into()), (dep, "gone".into())]);
        cx.expect_snapshot(&format!("pass {pass}"), want.iter().cloned().collect(), Wait::CRD)
            .await?;
    }
    Ok(())
}
