//! kube-rs against simcluster: every verb kube-gc and its tests use, over real HTTP.

mod common;

use std::time::Duration;

use common::{DEADLINE, client, code, start, start_with};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ReplicationController};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, Preconditions, WatchEvent, WatchParams,
};
use kube::core::PartialObjectMeta;
use kube_gc_simcluster::{Config, SimCluster, StoreConfig};
use serde_json::json;

fn cm(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": "v"}})).unwrap()
}

fn pod_owned_by(name: &str, owner_uid: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid}
    ]}}))
    .unwrap()
}

fn with_finalizer(name: &str, finalizer: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "finalizers": [finalizer]}})).unwrap()
}

#[tokio::test]
async fn discovery_should_list_groups_resources_and_version() {
    let sim = start().await;
    let c = client(&sim).await;
    let version = c.apiserver_version().await.unwrap();
    assert_eq!((version.major.as_str(), version.minor.as_str()), ("1", "33"));
    assert_eq!(c.list_core_api_versions().await.unwrap().versions, vec!["v1"]);
    let core = c.list_core_api_resources("v1").await.unwrap();
    let rc = core.resources.iter().find(|r| r.name == "replicationcontrollers").unwrap();
    assert!(rc.namespaced && rc.verbs.iter().any(|v| v == "watch"));
    let ns = core.resources.iter().find(|r| r.name == "namespaces").unwrap();
    assert!(!ns.namespaced);
    let groups = c.list_api_groups().await.unwrap();
    let apps = groups.groups.iter().find(|g| g.name == "apps").unwrap();
    assert_eq!(apps.preferred_version.as_ref().unwrap().group_version, "apps/v1");
    let apps = c.list_api_group_resources("apps/v1").await.unwrap();
    assert!(apps.resources.iter().any(|r| r.kind == "ReplicaSet"));
}

#[tokio::test]
async fn create_get_and_paginated_list_should_round_trip() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&sim).await, "default");
    for i in 0..25 {
        api.create(&PostParams::default(), &cm(&format!("cm-{i:02}"))).await.unwrap();
    }
    let err = api.create(&PostParams::default(), &cm("cm-00")).await.unwrap_err();
    assert_eq!(code(&err), 409, "AlreadyExists: {err}");
    let got = api.get("cm-07").await.unwrap();
    assert_eq!(got.data.unwrap()["k"], "v");
    let meta = got.metadata;
    assert_eq!(meta.uid.as_ref().map(String::len), Some(36));
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(code(&api.get("absent").await.unwrap_err()), 404);

    let mut names = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    let mut list_rv = None;
    loop {
        let mut lp = ListParams::default().limit(10);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await.unwrap();
        pages += 1;
        // Every page reports the resourceVersion of the first.
        let rv = page.metadata.resource_version.clone();
        assert_eq!(*list_rv.get_or_insert(rv.clone()), rv);
        names.extend(page.items.into_iter().map(|c| c.metadata.name.unwrap()));
        // A write between pages must not disturb the pagination.
        if pages == 1 {
            api.create(&PostParams::default(), &cm("zz-late")).await.unwrap();
        }
        token = page.metadata.continue_.filter(|c| !c.is_empty());
        if token.is_none() {
            break;
        }
    }
    assert_eq!(pages, 3);
    let expected: Vec<String> =
        (0..25).map(|i| format!("cm-{i:02}")).chain(["zz-late".into()]).collect();
    assert_eq!(names, expected);
    // Other namespaces are not listed; all-namespaces is.
    let other: Api<ConfigMap> = Api::namespaced(client(&sim).await, "kube-system");
    assert!(other.list(&ListParams::default()).await.unwrap().items.is_empty());
    let all: Api<ConfigMap> = Api::all(client(&sim).await);
    assert_eq!(all.list(&ListParams::default()).await.unwrap().items.len(), 26);
}

#[tokio::test]
async fn update_with_a_stale_resource_version_should_conflict() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&sim).await, "default");
    let created = api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let mut next = created.clone();
    next.data = Some([("k".to_owned(), "w".to_owned())].into());
    let updated = api.replace("a", &PostParams::default(), &next).await.unwrap();
    assert_ne!(updated.metadata.resource_version, created.metadata.resource_version);
    let err = api.replace("a", &PostParams::default(), &next).await.unwrap_err();
    assert_eq!(code(&err), 409, "stale resourceVersion: {err}");
}

#[tokio::test]
async fn watch_should_resume_from_a_resource_version_with_bookmarks() {
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&sim).await, "default");
    api.create(&PostParams::default(), &cm("before")).await.unwrap();
    let rv = api.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    let wp = WatchParams::default().timeout(20);
    let mut stream = api.watch(&wp, &rv).await.unwrap().boxed();
    api.create(&PostParams::default(), &cm("after")).await.unwrap();
    api.delete("after", &DeleteParams::default()).await.unwrap();
    let mut seen = Vec::new();
    let mut bookmark = None;
    tokio::time::timeout(DEADLINE, async {
        while let Some(e) = stream.try_next().await.unwrap() {
            match e {
                WatchEvent::Added(o) => seen.push(format!("ADDED {}", o.metadata.name.unwrap())),
                WatchEvent::Deleted(o) => {
                    seen.push(format!("DELETED {}", o.metadata.name.unwrap()))
                }
                WatchEvent::Bookmark(b) => {
                    bookmark = Some(b.metadata.resource_version);
                    if seen.len() == 2 {
                        break;
                    }
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    })
    .await
    .expect("watch delivers within the deadline");
    assert_eq!(seen, ["ADDED after", "DELETED after"], "nothing from before {rv}");
    let bookmark: u64 = bookmark.unwrap().parse().unwrap();
    assert!(bookmark >= sim.store().resource_version(), "bookmark at the latest version");
}

#[tokio::test]
async fn watch_from_an_expired_resource_version_should_get_410_expired() {
    let config =
        Config { store: StoreConfig { history: 3, ..StoreConfig::default() }, ..Config::default() };
    let sim = start_with(config).await;
    let api: Api<ConfigMap> = Api::namespaced(client(&sim).await, "default");
    api.create(&PostParams::default(), &cm("a")).await.unwrap();
    let old = api.get("a").await.unwrap().metadata.resource_version.unwrap();
    for i in 0..5 {
        api.create(&PostParams::default(), &cm(&format!("b{i}"))).await.unwrap();
    }
    let mut stream = api.watch(&WatchParams::default(), &old).await.unwrap().boxed();
    let event = tokio::time::timeout(DEADLINE, stream.try_next()).await.unwrap().unwrap();
    match event {
        Some(WatchEvent::Error(status)) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    // A version inside the history still works.
    let recent = api.get("b4").await.unwrap().metadata.resource_version.unwrap();
    let mut stream = api.watch(&WatchParams::default().timeout(5), &recent).await.unwrap().boxed();
    api.create(&PostParams::default(), &cm("c")).await.unwrap();
    let event = tokio::time::timeout(DEADLINE, stream.try_next()).await.unwrap().unwrap();
    assert!(matches!(event, Some(WatchEvent::Added(o)) if o.metadata.name.as_deref() == Some("c")));
}

#[tokio::test]
async fn metadata_only_requests_should_get_partial_object_metadata() {
    let sim = start().await;
    let c = client(&sim).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    api.create(&PostParams::default(), &cm("m")).await.unwrap();
    let meta: PartialObjectMeta<ConfigMap> = api.get_metadata("m").await.unwrap();
    assert_eq!(meta.types.as_ref().unwrap().kind, "PartialObjectMetadata");
    assert_eq!(meta.metadata.name.as_deref(), Some("m"));
    let list = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(list.types.kind, "PartialObjectMetadataList");
    assert_eq!(list.items.len(), 1);
    let rv = list.metadata.resource_version.unwrap();
    let mut stream =
        api.watch_metadata(&WatchParams::default().timeout(5), &rv).await.unwrap().boxed();
    api.create(&PostParams::default(), &cm("n")).await.unwrap();
    let event = tokio::time::timeout(DEADLINE, stream.try_next()).await.unwrap().unwrap();
    match event {
        Some(WatchEvent::Added(o)) => {
            assert_eq!(o.types.unwrap().kind, "PartialObjectMetadata");
            assert_eq!(o.metadata.name.as_deref(), Some("n"));
        }
        other => panic!("expected ADDED, got {other:?}"),
    }
    // The raw bytes: no `data` travels.
    let raw = reqwest_like_get(&sim, "/api/v1/namespaces/default/configmaps/m").await;
    assert!(!raw.contains("\"data\""), "{raw}");
}

/// GET with kube-rs's metadata Accept header, returning the body.
async fn reqwest_like_get(sim: &SimCluster, path: &str) -> String {
    let c = client(sim).await;
    let req = axum::http::Request::get(path)
        .header("Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
        .body(Vec::new())
        .unwrap();
    c.request_text(req).await.unwrap()
}

#[tokio::test]
async fn patches_should_follow_each_content_type() {
    let sim = start().await;
    let c = client(&sim).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let owner = cms.create(&PostParams::default(), &cm("owner")).await.unwrap();
    let owner_uid = owner.metadata.uid.unwrap();
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pod = pods.create(&PostParams::default(), &pod_owned_by("p", &owner_uid)).await.unwrap();
    let pod_uid = pod.metadata.uid.unwrap();
    let pp = PatchParams::default();

    // Strategic merge: delete an owner reference by uid (kube-gc's §5.1 body).
    let body = json!({"metadata": {"uid": pod_uid, "ownerReferences": [{"$patch": "delete", "uid": owner_uid}]}});
    let out = pods.patch_metadata("p", &pp, &Patch::Strategic(&body)).await.unwrap();
    assert!(out.metadata.owner_references.unwrap_or_default().is_empty());
    // Strategic merge with another uid: 422 (the uid acts as a precondition).
    let body = json!({"metadata": {"uid": "someone-else", "labels": {"a": "b"}}});
    let err = pods.patch("p", &pp, &Patch::Strategic(&body)).await.unwrap_err();
    assert_eq!(code(&err), 422, "{err}");

    // JSON merge with a stale resourceVersion: 409; with the current one: applied.
    let body = json!({"metadata": {"resourceVersion": "1", "finalizers": ["x/y"]}});
    assert_eq!(code(&pods.patch("p", &pp, &Patch::Merge(&body)).await.unwrap_err()), 409);
    let rv = pods.get("p").await.unwrap().metadata.resource_version.unwrap();
    let body = json!({"metadata": {"resourceVersion": rv, "finalizers": ["x/y"]}});
    let out = pods.patch("p", &pp, &Patch::Merge(&body)).await.unwrap();
    assert_eq!(out.metadata.finalizers.unwrap(), ["x/y"]);

    // JSON patch, with a failing `test`: 422; with a passing one: applied.
    let failing: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/name", "value": "q"},
        {"op": "remove", "path": "/metadata/finalizers"}
    ]))
    .unwrap();
    assert_eq!(code(&pods.patch("p", &pp, &Patch::<()>::Json(failing)).await.unwrap_err()), 422);
    let passing: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/name", "value": "p"},
        {"op": "remove", "path": "/metadata/finalizers"}
    ]))
    .unwrap();
    let out = pods.patch("p", &pp, &Patch::<()>::Json(passing)).await.unwrap();
    assert!(out.metadata.finalizers.is_none());

    // A CRD adds its resource; strategic merge on it is 415, JSON merge works.
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    crds.create(&PostParams::default(), &widget_crd()).await.unwrap();
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let widgets: Api<DynamicObject> = Api::namespaced_with(c.clone(), "default", &ar);
    let w: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}
    }))
    .unwrap();
    widgets.create(&PostParams::default(), &w).await.unwrap();
    let body = json!({"spec": {"size": 2}});
    assert_eq!(code(&widgets.patch("w", &pp, &Patch::Strategic(&body)).await.unwrap_err()), 415);
    let out = widgets.patch("w", &pp, &Patch::Merge(&body)).await.unwrap();
    assert_eq!(out.data["spec"]["size"], 2);
    let groups = c.list_api_groups().await.unwrap();
    assert!(groups.groups.iter().any(|g| g.name == "example.com"));
    // Deleting the CRD removes the resource.
    crds.delete("widgets.example.com", &DeleteParams::default()).await.unwrap();
    assert_eq!(code(&widgets.get("w").await.unwrap_err()), 404);
}

fn widget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn delete_should_follow_the_registry_store_semantics() {
    let sim = start().await;
    let c = client(&sim).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "default");

    // Background, no finalizers: gone at once.
    api.create(&PostParams::default(), &cm("bg")).await.unwrap();
    assert!(
        api.delete("bg", &DeleteParams::background()).await.unwrap().is_right(),
        "a delete that removes the object answers a Status"
    );
    assert_eq!(code(&api.get("bg").await.unwrap_err()), 404);

    // Foreground: kept with foregroundDeletion and a deletionTimestamp until the finalizer goes.
    api.create(&PostParams::default(), &cm("fg")).await.unwrap();
    api.delete("fg", &DeleteParams::foreground()).await.unwrap();
    let fg = api.get("fg").await.unwrap();
    assert_eq!(fg.metadata.finalizers.as_deref().unwrap(), ["foregroundDeletion"]);
    assert!(fg.metadata.deletion_timestamp.is_some());
    // No new finalizers while deleting.
    let body = json!({"metadata": {"finalizers": ["foregroundDeletion", "new/one"]}});
    let err = api.patch("fg", &PatchParams::default(), &Patch::Merge(&body)).await.unwrap_err();
    assert_eq!(code(&err), 422, "{err}");
    // Emptying the finalizers removes the object.
    let body = json!({"metadata": {"finalizers": null}});
    api.patch("fg", &PatchParams::default(), &Patch::Merge(&body)).await.unwrap();
    assert_eq!(code(&api.get("fg").await.unwrap_err()), 404);

    // Orphan: the orphan finalizer.
    api.create(&PostParams::default(), &cm("or")).await.unwrap();
    api.delete("or", &DeleteParams::orphan()).await.unwrap();
    assert_eq!(api.get("or").await.unwrap().metadata.finalizers.unwrap(), ["orphan"]);

    // Background with another finalizer: kept, being deleted, finalizer untouched.
    api.create(&PostParams::default(), &with_finalizer("other", "example.com/hold")).await.unwrap();
    api.delete("other", &DeleteParams::background()).await.unwrap();
    let other = api.get("other").await.unwrap();
    assert_eq!(other.metadata.finalizers.unwrap(), ["example.com/hold"]);
    assert!(other.metadata.deletion_timestamp.is_some());

    // Preconditions: uid and resourceVersion mismatches are 409 and change nothing.
    let kept = api.create(&PostParams::default(), &cm("pre")).await.unwrap();
    let bad_uid = DeleteParams::default()
        .preconditions(Preconditions { uid: Some("nope".into()), resource_version: None });
    assert_eq!(code(&api.delete("pre", &bad_uid).await.unwrap_err()), 409);
    let bad_rv = DeleteParams::default()
        .preconditions(Preconditions { uid: None, resource_version: Some("1".into()) });
    assert_eq!(code(&api.delete("pre", &bad_rv).await.unwrap_err()), 409);
    let good = DeleteParams::default().preconditions(Preconditions {
        uid: kept.metadata.uid.clone(),
        resource_version: kept.metadata.resource_version.clone(),
    });
    api.delete("pre", &good).await.unwrap();
    assert_eq!(code(&api.get("pre").await.unwrap_err()), 404);

    // Legacy default-orphan kind: a delete without a policy orphans.
    let rcs: Api<ReplicationController> = Api::namespaced(c.clone(), "default");
    let rc: ReplicationController =
        serde_json::from_value(json!({"metadata": {"name": "rc"}})).unwrap();
    rcs.create(&PostParams::default(), &rc).await.unwrap();
    rcs.delete("rc", &DeleteParams::default()).await.unwrap();
    assert_eq!(rcs.get("rc").await.unwrap().metadata.finalizers.unwrap(), ["orphan"]);
    // … and an explicit policy changes it while deletion is pending (grace period 0).
    rcs.delete("rc", &DeleteParams::background()).await.unwrap();
    assert_eq!(code(&rcs.get("rc").await.unwrap_err()), 404);

    // deletecollection.
    for i in 0..3 {
        api.create(&PostParams::default(), &cm(&format!("col-{i}"))).await.unwrap();
    }
    api.delete_collection(&DeleteParams::default(), &ListParams::default()).await.unwrap();
    let left: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| c.metadata.name.unwrap())
        .collect();
    assert_eq!(left, ["or", "other"], "only objects held by finalizers remain");
}

#[tokio::test]
async fn kube_runtime_metadata_watcher_should_sync_and_follow() {
    let sim = start().await;
    let c = client(&sim).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    for i in 0..7 {
        api.create(&PostParams::default(), &cm(&format!("w{i}"))).await.unwrap();
    }
    let config = kube::runtime::watcher::Config::default().page_size(3);
    let meta: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(c.clone(), "default");
    let mut events = kube::runtime::watcher(meta, config).boxed();
    let mut initial = 0;
    tokio::time::timeout(DEADLINE, async {
        loop {
            match events.try_next().await.unwrap().unwrap() {
                kube::runtime::watcher::Event::InitApply(_) => initial += 1,
                kube::runtime::watcher::Event::InitDone => break,
                _ => {}
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(initial, 7);
    api.delete("w3", &DeleteParams::default()).await.unwrap();
    let deleted = tokio::time::timeout(DEADLINE, async {
        loop {
            if let kube::runtime::watcher::Event::Delete(o) =
                events.try_next().await.unwrap().unwrap()
            {
                break o.metadata.name.unwrap();
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(deleted, "w3");
}

#[tokio::test]
async fn a_token_should_be_required_once_configured() {
    let sim = start_with(Config { token: Some("test-only".into()), ..Config::default() }).await;
    let api: Api<ConfigMap> = Api::namespaced(client(&sim).await, "default");
    api.list(&ListParams::default()).await.unwrap();
    let bare = kube::Client::try_from(kube::Config::new(sim.url().parse().unwrap())).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(bare, "default");
    assert_eq!(code(&api.list(&ListParams::default()).await.unwrap_err()), 401);
}

#[tokio::test]
async fn a_non_loopback_address_should_be_refused_without_listen_any() {
    let config = Config { listen: "0.0.0.0:0".parse().unwrap(), ..Config::default() };
    let err = SimCluster::start(config).await.unwrap_err();
    assert!(err.to_string().contains("--listen-any"), "{err}");
    // Shutdown is bounded even with a watch open.
    let sim = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&sim).await, "default");
    let _stream = api.watch(&WatchParams::default(), "0").await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), sim.shutdown()).await.unwrap();
}
