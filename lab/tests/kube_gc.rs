//! kube-gc itself against simcluster: the collector, started in-process on the kubeconfig
//! simcluster writes, collects dangling dependents and honours each propagation policy.
//!
//! These are the foundation of the demo and of the chaos suite: if they pass, kube-gc's
//! discovery, metadata watchers, live reads, patches and deletes all work over simcluster's
//! HTTP API.

#[path = "../../simcluster/tests/common/mod.rs"]
mod common;

use common::{client, code, eventually, start};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ReplicationController};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Resource};
use kube_gc_lab::InProcess;
use kube_gc_lab::in_process::TempFile;
use kube_gc_simcluster::{FaultKind, Faults, SimCluster};
use serde_json::json;

/// kube-gc running against `sim` until stopped.
struct Gc {
    gc: InProcess,
    _kubeconfig: TempFile,
}

impl Gc {
    async fn start(sim: &SimCluster) -> Gc {
        Gc::start_with(sim, &[]).await
    }

    /// Started with `extra` flags besides the defaults.
    async fn start_with(sim: &SimCluster, extra: &[&str]) -> Gc {
        let path = std::env::temp_dir().join(format!(
            "kube-gc-simcluster-{}-{}.kubeconfig",
            std::process::id(),
            sim.addr().port()
        ));
        let kubeconfig = TempFile::write(path, &sim.kubeconfig()).expect("write kubeconfig");
        let mut args = InProcess::simcluster_args(&kubeconfig.0);
        args.extend(["--initial-sync-timeout", "20s"].map(str::to_owned));
        args.extend(extra.iter().map(|a| a.to_string()));
        let gc = InProcess::start(args).await.expect("kube-gc starts");
        Gc { gc, _kubeconfig: kubeconfig }
    }

    async fn stop(self) {
        self.gc.stop().await;
    }
}

fn owned_pod(name: &str, owner: &impl Resource<DynamicType = ()>, block: bool) -> Pod {
    let meta = owner.meta();
    serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": [{
        "apiVersion": <ConfigMap as Resource>::api_version(&()),
        "kind": <ConfigMap as Resource>::kind(&()),
        "name": meta.name, "uid": meta.uid,
        "blockOwnerDeletion": block,
    }]}}))
    .unwrap()
}

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
}

async fn gone<K>(api: &Api<K>, name: &str) -> bool
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    matches!(api.get(name).await, Err(e) if code(&e) == 404)
}

async fn apis(c: &Client) -> (Api<ConfigMap>, Api<Pod>) {
    (Api::namespaced(c.clone(), "default"), Api::namespaced(c.clone(), "default"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_gc_should_collect_a_dependent_whose_owner_never_existed() {
    let sim = start().await;
    let c = client(&sim).await;
    let (_, pods) = apis(&c).await;
    let dangling: Pod = serde_json::from_value(json!({"metadata": {"name": "dangling", "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "never", "uid": "00000000-0000-4000-8000-000000000001"
    }]}}))
    .unwrap();
    pods.create(&PostParams::default(), &dangling).await.unwrap();
    let solid_owner = Api::<ConfigMap>::namespaced(c.clone(), "default")
        .create(&PostParams::default(), &cm("solid"))
        .await
        .unwrap();
    pods.create(&PostParams::default(), &owned_pod("kept", &solid_owner, false)).await.unwrap();

    let gc = Gc::start(&sim).await;
    eventually("the dangling pod is collected", || gone(&pods, "dangling")).await;
    assert!(pods.get("kept").await.is_ok(), "a pod with a live owner stays");
    gc.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_gc_should_honour_each_propagation_policy() {
    let sim = start().await;
    let c = client(&sim).await;
    let (cms, pods) = apis(&c).await;
    let gc = Gc::start(&sim).await;

    // Background: the owner goes at once, then kube-gc deletes the dependent.
    let owner = cms.create(&PostParams::default(), &cm("bg-owner")).await.unwrap();
    pods.create(&PostParams::default(), &owned_pod("bg-dep", &owner, false)).await.unwrap();
    cms.delete("bg-owner", &DeleteParams::background()).await.unwrap();
    eventually("background: the dependent is collected", || gone(&pods, "bg-dep")).await;

    // Foreground: the owner waits (foregroundDeletion) for its blocking dependent, kube-gc
    // deletes the dependent, then removes the finalizer, and the owner goes.
    let owner = cms.create(&PostParams::default(), &cm("fg-owner")).await.unwrap();
    pods.create(&PostParams::default(), &owned_pod("fg-dep", &owner, true)).await.unwrap();
    cms.delete("fg-owner", &DeleteParams::foreground()).await.unwrap();
    eventually("foreground: the dependent is collected", || gone(&pods, "fg-dep")).await;
    eventually("foreground: the owner follows", || gone(&cms, "fg-owner")).await;

    // Orphan: kube-gc strips the owner reference, then removes the orphan finalizer.
    let owner = cms.create(&PostParams::default(), &cm("or-owner")).await.unwrap();
    pods.create(&PostParams::default(), &owned_pod("or-dep", &owner, true)).await.unwrap();
    cms.delete("or-owner", &DeleteParams::orphan()).await.unwrap();
    eventually("orphan: the owner goes", || gone(&cms, "or-owner")).await;
    let dep = pods.get("or-dep").await.expect("orphan: the dependent stays");
    assert!(dep.metadata.owner_references.unwrap_or_default().is_empty(), "and has no owner left");

    // Legacy default-orphan kind: a ReplicationController deleted without a policy orphans.
    let rcs: Api<ReplicationController> = Api::namespaced(c.clone(), "default");
    let rc: ReplicationController =
        serde_json::from_value(json!({"metadata": {"name": "rc"}})).unwrap();
    let rc = rcs.create(&PostParams::default(), &rc).await.unwrap();
    let rc_pod: Pod = serde_json::from_value(json!({"metadata": {"name": "rc-dep", "ownerReferences": [{
        "apiVersion": "v1", "kind": "ReplicationController", "name": "rc", "uid": rc.metadata.uid,
        "controller": true, "blockOwnerDeletion": true
    }]}}))
    .unwrap();
    pods.create(&PostParams::default(), &rc_pod).await.unwrap();
    rcs.delete("rc", &DeleteParams::default()).await.unwrap();
    eventually("legacy orphan: the controller goes", || gone(&rcs, "rc")).await;
    let dep = pods.get("rc-dep").await.expect("legacy orphan: the dependent stays");
    assert!(dep.metadata.owner_references.unwrap_or_default().is_empty());

    gc.stop().await;
}

/// Both of the watchers' wire formats (`--kube-api-content-type`: JSON and protobuf, each also
/// with `--list-from-watch-cache`), through every watch fault simcluster injects: watches cut and
/// answered 410, continue tokens expired mid-list, requests failing with 429/500/503. The
/// watchers relist again and again; kube-gc must still collect exactly the garbage, before and
/// after sync, and keep everything else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_wire_formats_collect_exactly_the_garbage_through_relists() {
    let configurations: [&[&str]; 4] = [
        &["--kube-api-content-type=application/json", "--list-from-watch-cache=false"],
        &[
            "--kube-api-content-type=application/vnd.kubernetes.protobuf",
            "--list-from-watch-cache=false",
        ],
        // Only a first list that emitted nothing may come from the watch cache.
        &["--kube-api-content-type=application/vnd.kubernetes.protobuf", "--list-from-watch-cache"],
        &["--kube-api-content-type=application/json", "--list-from-watch-cache"],
    ];
    let (mut dropped, mut expired) = (0, 0);
    for flags in configurations {
        let sim = start().await;
        let c = client(&sim).await;
        let (cms, pods) = apis(&c).await;
        // Over two list pages of 500 each: the first list uses continue tokens.
        let owner = cms.create(&PostParams::default(), &cm("live")).await.unwrap();
        let doomed = cms.create(&PostParams::default(), &cm("doomed")).await.unwrap();
        for i in 0..600 {
            pods.create(&PostParams::default(), &owned_pod(&format!("kept-{i}"), &owner, false))
                .await
                .unwrap();
        }
        for i in 0..300 {
            let dangling: Pod = serde_json::from_value(json!({"metadata": {"name": format!("dangling-{i}"), "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "never", "uid": format!("00000000-0000-4000-8000-{i:012}")
            }]}}))
            .unwrap();
            pods.create(&PostParams::default(), &dangling).await.unwrap();
            pods.create(&PostParams::default(), &owned_pod(&format!("doomed-{i}"), &doomed, false))
                .await
                .unwrap();
        }
        sim.set_faults(Faults {
            seed: 7,
            error_rate: 0.05,
            watch_drop_rate: 0.5,
            expire_rate: 0.3,
            ..Faults::off()
        });
        let gc = Gc::start_with(&sim, flags).await;
        let count = |prefix: &'static str| {
            let pods = pods.clone();
            async move {
                let list = pods.list(&Default::default()).await;
                list.map(|l| {
                    l.items
                        .iter()
                        .filter(|p| {
                            p.metadata.name.as_deref().is_some_and(|n| n.starts_with(prefix))
                        })
                        .count()
                })
            }
        };
        eventually("the dangling pods are collected", || async {
            count("dangling-").await.is_ok_and(|n| n == 0)
        })
        .await;
        // The test's own calls meet the faults too: retried until the server has the delete
        // (a 404 means that an earlier try went through).
        eventually("the doomed owner is deleted", || async {
            cms.delete("doomed", &DeleteParams::background())
                .await
                .map_or_else(|e| code(&e) == 404, |_| true)
        })
        .await;
        eventually("the doomed owner's pods are collected", || async {
            count("doomed-").await.is_ok_and(|n| n == 0)
        })
        .await;
        sim.faults_off();
        assert_eq!(count("kept-").await.unwrap(), 600, "{flags:?}: pods with a live owner stay");
        // Each configuration's watchers started over at least once. Whether a given run's few
        // watches draw a drop as well as an expiry is chance (a watch left open draws no
        // more), so both kinds are required over the three runs.
        let faults = sim.fault_counts();
        let run_expired =
            faults.get(FaultKind::WatchExpired) + faults.get(FaultKind::ContinueExpired);
        let run_dropped = faults.get(FaultKind::WatchDropped);
        assert!(run_expired + run_dropped > 0, "{flags:?}: the watchers met no fault ({faults:?})");
        (dropped, expired) = (dropped + run_dropped, expired + run_expired);
        gc.stop().await;
    }
    assert!(
        dropped > 0 && expired > 0,
        "the watchers met both faults: {dropped} drops, {expired} expiries"
    );
}

/// Asks kube-gc's debug server (its router, in-process) for `path`.
async fn debug_get(gc: &Gc, path: &str) -> http::Response<axum::body::Body> {
    use tower::ServiceExt;
    let router = kube_gc::http::router(gc.gc.debug().clone());
    router.oneshot(http::Request::get(path).body(axum::body::Body::empty()).unwrap()).await.unwrap()
}

/// [`debug_get`]'s JSON answer, which must be a 200.
async fn debug_json(gc: &Gc, path: &str) -> serde_json::Value {
    let response = debug_get(gc, path).await;
    assert_eq!(response.status(), 200, "{path}");
    let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    serde_json::from_slice(&body).unwrap()
}

fn names_in(v: &serde_json::Value) -> Vec<String> {
    let mut names: Vec<String> =
        v.as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap().to_owned()).collect();
    names.sort();
    names
}

/// The blast radius kube-gc reports for a background delete is exactly what that delete then
/// removes: the owner, a dependent, that dependent's own dependent; and a dependent with a
/// second, live owner is reported kept, and is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_blast_radius_is_what_a_background_delete_removes() {
    let sim = start().await;
    let c = client(&sim).await;
    let (cms, pods) = apis(&c).await;
    let root = cms.create(&PostParams::default(), &cm("root")).await.unwrap();
    let other = cms.create(&PostParams::default(), &cm("other")).await.unwrap();
    let a = pods.create(&PostParams::default(), &owned_pod("a", &root, false)).await.unwrap();
    let mut b = owned_pod("b", &root, false);
    let mut refs = b.metadata.owner_references.take().unwrap();
    refs.extend(owned_pod("x", &other, false).metadata.owner_references.unwrap());
    b.metadata.owner_references = Some(refs);
    pods.create(&PostParams::default(), &b).await.unwrap();
    let c_pod: Pod = serde_json::from_value(json!({"metadata": {"name": "c", "ownerReferences": [{
        "apiVersion": "v1", "kind": "Pod", "name": "a", "uid": a.metadata.uid,
    }]}}))
    .unwrap();
    pods.create(&PostParams::default(), &c_pod).await.unwrap();

    let gc = Gc::start(&sim).await;
    let uid = root.metadata.uid.clone().unwrap();
    eventually("kube-gc has synced", || async {
        gc.gc.debug().ready.load(std::sync::atomic::Ordering::Acquire)
    })
    .await;
    let radius =
        debug_json(&gc, &format!("/debug/controllers/garbagecollector/blast-radius?uid={uid}"))
            .await;
    assert_eq!(names_in(&radius["deleted"]), ["a", "c", "root"], "{radius:#}");
    assert_eq!(names_in(&radius["kept"]), ["b"], "{radius:#}");
    assert_eq!(radius["kept"][0]["keptBy"][0]["name"], "other");
    let tree =
        debug_json(&gc, &format!("/debug/controllers/garbagecollector/tree?uid={uid}")).await;
    assert_eq!(names_in(&tree["down"]["children"]), ["a", "b"], "{tree:#}");
    // Bad questions get a client error, never a panic nor an answer about another object.
    let base = "/debug/controllers/garbagecollector";
    for (path, status) in [
        (format!("{base}/blast-radius"), 400),
        (format!("{base}/blast-radius?uid={uid}&policy=sideways"), 400),
        (format!("{base}/tree?uid={uid}&depth=-1"), 400),
        (format!("{base}/tree?uid=00000000-0000-4000-8000-00000000dead"), 404),
        (format!("{base}/blast-radius?uid=not-a-uid-anyone-used"), 404),
        (format!("{base}/tree?uid=%zz"), 404),
    ] {
        assert_eq!(debug_get(&gc, &path).await.status(), status, "{path}");
    }

    cms.delete("root", &DeleteParams::background()).await.unwrap();
    eventually("a goes", || gone(&pods, "a")).await;
    eventually("c goes", || gone(&pods, "c")).await;
    // Everything in the radius is gone; what it kept stays (with its other owner).
    assert!(gone(&cms, "root").await);
    let b = pods.get("b").await.expect("b is kept");
    let owners: Vec<String> =
        b.metadata.owner_references.unwrap_or_default().into_iter().map(|r| r.name).collect();
    assert!(owners.contains(&"other".to_owned()), "{owners:?}");
    assert!(cms.get("other").await.is_ok());
    gc.stop().await;
}

/// kube-gc started on `sim` with no periodic resync, a ConfigMap `owner` with a Pod depending on
/// it, then a CustomResourceDefinition for Widgets that kube-gc has seen, and a Widget naming
/// `owner` (`blockOwnerDeletion` as `block`), created just now: its watcher does not exist yet.
struct JustDiscovered {
    gc: Gc,
    cms: Api<ConfigMap>,
    widgets: Api<kube::api::DynamicObject>,
}

impl JustDiscovered {
    async fn start(sim: &SimCluster, block: bool) -> JustDiscovered {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
        let c = client(sim).await;
        let (cms, pods) = apis(&c).await;
        let gc = Gc::start_with(sim, &["--resync-period", "1h"]).await;
        let owner = cms.create(&PostParams::default(), &cm("owner")).await.unwrap();
        pods.create(&PostParams::default(), &owned_pod("pod", &owner, false)).await.unwrap();
        eventually("kube-gc is ready", || async {
            gc.gc.debug().ready.load(std::sync::atomic::Ordering::Acquire)
        })
        .await;

        let crd = Api::<CustomResourceDefinition>::all(c.clone())
            .create(&PostParams::default(), &widget_crd())
            .await
            .unwrap();
        // Once kube-gc has seen the CRD (its watch and the owner's are separate streams, and a
        // decision made before the CRD's event arrives is upstream's race, in flight).
        let crd_uid = kube_gc_engine::Uid::parse(&crd.metadata.uid.unwrap());
        eventually("kube-gc sees the CRD", || async {
            gc.gc.debug().graph.node(crd_uid).is_some()
        })
        .await;
        let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "widgets");
        let widgets: Api<DynamicObject> = Api::namespaced_with(c.clone(), "default", &ar);
        let widget: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "widget", "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                "uid": owner.metadata.uid.clone().unwrap(),
                "blockOwnerDeletion": block,
            }]}
        }))
        .unwrap();
        widgets.create(&PostParams::default(), &widget).await.unwrap();
        JustDiscovered { gc, cms, widgets }
    }
}

/// The CustomResourceDefinition of Widgets (`widgets.example.com`, namespaced, v1).
fn widget_crd()
-> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    serde_json::from_value(json!({
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true}]
        }
    }))
    .unwrap()
}

/// A custom resource kube-gc watched, whose CustomResourceDefinition is deleted, leaves
/// `kube_gc_warmup_seconds` with its watcher: the series of every CRD ever removed would
/// otherwise stay exported for the process's life.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_custom_resource_leaves_the_metrics() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let sim = start().await;
    let c = client(&sim).await;
    let gc = Gc::start_with(&sim, &["--resync-period", "1s"]).await;
    let crds = Api::<CustomResourceDefinition>::all(c.clone());
    crds.create(&PostParams::default(), &widget_crd()).await.unwrap();
    let series = r#"kube_gc_warmup_seconds{resource="widgets.example.com"}"#;
    let exported = || async {
        let response = debug_get(&gc, "/metrics").await;
        let body = axum::body::to_bytes(response.into_body(), 1 << 24).await.unwrap();
        String::from_utf8_lossy(&body).contains(series)
    };
    eventually("the custom resource's watcher has listed", exported).await;
    crds.delete("widgets.example.com", &DeleteParams::default()).await.unwrap();
    eventually("its series is gone", || async { !exported().await }).await;
    gc.stop().await;
}

/// Asserts that `sim`'s audit records `what` (the first record that `matches`) before the
/// ConfigMap `owner`'s removal.
fn assert_before_the_owner_went(
    sim: &SimCluster,
    what: &str,
    matches: impl Fn(&kube_gc_simcluster::audit::WriteRecord) -> bool,
) {
    let records = sim.audit().records();
    let first = |what: &str, matches: &dyn Fn(&_) -> bool| {
        records.iter().position(matches).unwrap_or_else(|| panic!("no record of {what}"))
    };
    let done = first(what, &matches);
    let owner_gone = first("the owner's removal", &|r| removal(r, "configmaps", "owner"));
    assert!(
        done < owner_gone,
        "{what} came after the owner went (records {done} and {owner_gone})"
    );
}

/// Whether `r` records the removal of `resource` `name` from the store.
fn removal(r: &kube_gc_simcluster::audit::WriteRecord, resource: &str, name: &str) -> bool {
    r.resource == resource && r.name == name && r.removed
}

/// A custom resource created just before its owner is deleted with `orphan` is orphaned with the
/// owner's other dependents, before the owner goes, though no periodic resync discovers it in
/// time (`--resync-period 1h`): the CustomResourceDefinition's creation calls for a discovery,
/// and the orphaning waits for it and for the new watcher's list (`run::DISCOVERY_BEHIND`).
/// Without the wait, the owner would go first and only kube-gc's in-process memory of
/// orphaned owners would save the custom resource later (a restart in between loses it): a
/// discovery that a CRD change calls for comes at most every 5 s, and the CRD list at start
/// has just called for one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_created_just_before_an_orphan_delete_is_orphaned_first() {
    let sim = start().await;
    let JustDiscovered { gc, cms, widgets } = JustDiscovered::start(&sim, false).await;
    cms.delete("owner", &DeleteParams::orphan()).await.unwrap();

    eventually("the owner goes", || gone(&cms, "owner")).await;
    eventually("the widget is orphaned", || async {
        widgets
            .get("widget")
            .await
            .is_ok_and(|w| w.metadata.owner_references.is_none_or(|r| r.is_empty()))
    })
    .await;
    assert_before_the_owner_went(&sim, "the widget's orphaning patch", |r| {
        r.verb == kube_gc_simcluster::audit::Verb::Patch
            && r.resource == "widgets.example.com"
            && r.name == "widget"
    });
    gc.stop().await;
}

/// The same for a foreground deletion: a custom resource that blocks its owner, created just
/// before the owner is deleted in the foreground, is deleted before the owner goes. Without
/// the wait, the owner's `foregroundDeletion` would go while the custom resource has no
/// watcher yet, and the owner before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_created_just_before_a_foreground_delete_goes_first() {
    let sim = start().await;
    let JustDiscovered { gc, cms, widgets } = JustDiscovered::start(&sim, true).await;
    cms.delete("owner", &DeleteParams::foreground()).await.unwrap();

    eventually("the owner goes", || gone(&cms, "owner")).await;
    eventually("the widget goes", || gone(&widgets, "widget")).await;
    assert_before_the_owner_went(&sim, "the removal of the widget that blocks it", |r| {
        removal(r, "widgets.example.com", "widget")
    });
    gc.stop().await;
}
