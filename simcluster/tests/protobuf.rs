//! Metadata as protobuf over HTTP (kube-gc-wire's format): lists, pages and watches asked for as
//! upstream's metadata informers do, decoded with kube-gc-wire's readers and compared with the
//! same objects served as JSON.

mod common;

use std::collections::BTreeMap;

use axum::body::Bytes;
use common::{DEADLINE, client, start, start_with};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::client::Body;
use kube_gc_engine::ObjectMeta;
use kube_gc_simcluster::{Config, StoreConfig};
use kube_gc_wire::messages::{PartialObjectMetadata, PartialObjectMetadataList};
use kube_gc_wire::{
    FrameReader, LIST_ACCEPT, OBJECT_ACCEPT, OrStatus, PROTOBUF, PROTOBUF_WATCH, WatchEvent,
    WatchEventType, decode_list, decode_watch_event, open_envelope,
};
use prost::Message;
use serde_json::{Value, json};

/// What kube-rs's `list_metadata` sends: JSON metadata only.
const JSON_LIST_ACCEPT: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const PODS: &str = "/api/v1/namespaces/default/pods";

/// A GET with `accept`: status, `Content-Type`, body.
async fn get(c: &kube::Client, uri: &str, accept: &str) -> (u16, String, Bytes) {
    let req = http::Request::get(uri).header(http::header::ACCEPT, accept).body(Body::empty());
    let resp = c.send(req.unwrap()).await.expect("a response");
    let (parts, body) = resp.into_parts();
    let content_type = parts.headers[http::header::CONTENT_TYPE].to_str().unwrap().to_owned();
    (parts.status.as_u16(), content_type, body.collect_bytes().await.expect("a body"))
}

/// A protobuf list page, checked to be one.
async fn list_protobuf(c: &kube::Client, uri: &str) -> kube_gc_wire::ListPage {
    let (status, content_type, body) = get(c, uri, LIST_ACCEPT).await;
    assert_eq!((status, content_type.as_str()), (200, PROTOBUF), "{uri}");
    match decode_list(body).expect("a protobuf list") {
        OrStatus::Ok(page) => page,
        OrStatus::Status(s) => panic!("a Status instead of a list: {s:?}"),
    }
}

/// A JSON metadata list page.
async fn list_json(c: &kube::Client, uri: &str) -> Value {
    let (status, content_type, body) = get(c, uri, JSON_LIST_ACCEPT).await;
    assert_eq!((status, content_type.as_str()), (200, "application/json"), "{uri}");
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    list
}

/// JSON metadata as the engine keeps it, to compare with what the protobuf decoder reads.
fn engine_meta(meta: &Value) -> ObjectMeta {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    ObjectMeta {
        uid: s(&meta["uid"]),
        name: s(&meta["name"]),
        namespace: s(&meta["namespace"]),
        resource_version: s(&meta["resourceVersion"]),
        owner_references: meta["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| kube_gc_engine::OwnerReference {
                api_version: s(&r["apiVersion"]),
                kind: s(&r["kind"]),
                name: s(&r["name"]),
                uid: s(&r["uid"]),
                controller: r["controller"].as_bool(),
                block_owner_deletion: r["blockOwnerDeletion"].as_bool(),
            })
            .collect(),
        finalizers: meta["finalizers"].as_array().into_iter().flatten().map(s).collect(),
        deletion_timestamp: meta["deletionTimestamp"].is_string(),
        creation_time: meta["creationTimestamp"]
            .is_string()
            .then(|| seconds(meta, "creationTimestamp")),
        deletion_time: meta["deletionTimestamp"]
            .is_string()
            .then(|| seconds(meta, "deletionTimestamp")),
    }
}

/// The seconds of a JSON timestamp, read by k8s-openapi (another parser than simcluster's).
fn seconds(meta: &Value, field: &str) -> i64 {
    let t: metav1::Time = serde_json::from_value(meta[field].clone()).unwrap();
    t.0.as_second()
}

fn configmap(meta: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": meta, "data": {"k": "v"}})).unwrap()
}

/// An owner, a dependent pod with a finalizer, labels and a managedFields entry, and a
/// configmap in foreground deletion (kept by its finalizers, with a deletionTimestamp).
async fn objects(c: &kube::Client) -> (ConfigMap, Pod) {
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let pp = PostParams::default();
    let owner = configmap(json!({"name": "owner", "labels": {"app": "web"}}));
    let owner = cms.create(&pp, &owner).await.unwrap();
    let pod: Pod = serde_json::from_value(json!({"metadata": {
        "name": "dependent",
        "labels": {"app": "web", "tier": "front"},
        "annotations": {"note": "kept"},
        "finalizers": ["example.com/keep"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
            "uid": owner.metadata.uid.clone().unwrap(), "controller": true, "blockOwnerDeletion": true}],
        "managedFields": [{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
            "time": "2024-05-01T13:01:01Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}}],
    }}))
    .unwrap();
    let pod = pods.create(&pp, &pod).await.unwrap();
    let doomed = configmap(json!({"name": "doomed", "finalizers": ["example.com/keep"]}));
    cms.create(&pp, &doomed).await.unwrap();
    cms.delete("doomed", &DeleteParams::foreground()).await.unwrap();
    (owner, pod)
}

#[tokio::test]
async fn lists_should_be_protobuf_when_asked_first_and_match_json() {
    let sim = start().await;
    let c = client(&sim).await;
    objects(&c).await;
    for uri in [CMS, PODS] {
        let page = list_protobuf(&c, uri).await;
        let json = list_json(&c, uri).await;
        assert_eq!(page.resource_version, json["metadata"]["resourceVersion"].as_str().unwrap());
        assert_eq!(page.continue_token, None);
        let expected: Vec<ObjectMeta> =
            json["items"].as_array().unwrap().iter().map(|i| engine_meta(&i["metadata"])).collect();
        assert_eq!(page.items, expected, "{uri}");
    }
    let page = list_protobuf(&c, CMS).await;
    let doomed = page.items.iter().find(|o| o.name == "doomed").unwrap();
    assert!(doomed.deletion_timestamp);
    assert_eq!(doomed.finalizers, ["example.com/keep", "foregroundDeletion"]);
    let pods = list_protobuf(&c, PODS).await;
    let owner = page.items.iter().find(|o| o.name == "owner").unwrap();
    assert_eq!(pods.items[0].owner_references[0].uid, owner.uid);
    assert_eq!(pods.items[0].owner_references[0].controller, Some(true));

    // The fields kube-gc's lean decoder skips are served too.
    let (_, _, body) = get(&c, PODS, LIST_ACCEPT).await;
    let (kind, raw) = open_envelope(body).unwrap();
    assert_eq!(kind, "PartialObjectMetadataList");
    let list = PartialObjectMetadataList::decode(raw).unwrap();
    let pod = list.items[0].metadata.clone().unwrap();
    let json = list_json(&c, PODS).await;
    let json_meta = &json["items"][0]["metadata"];
    let labels: BTreeMap<String, String> =
        [("app".into(), "web".into()), ("tier".into(), "front".into())].into();
    assert_eq!(pod.labels, labels);
    assert_eq!(pod.annotations, [("note".to_owned(), "kept".to_owned())].into());
    assert_eq!(pod.generation, Some(1));
    let created = pod.creation_timestamp.unwrap();
    assert_eq!(created.seconds, Some(seconds(json_meta, "creationTimestamp")));
    let managed = &pod.managed_fields[0];
    assert_eq!(managed.manager.as_deref(), Some("kubectl-create"));
    assert_eq!(managed.time.unwrap().seconds, Some(1_714_568_461));
    let fields: Value =
        serde_json::from_slice(managed.fields_v1.as_ref().unwrap().raw.as_ref().unwrap()).unwrap();
    assert_eq!(fields, json!({"f:metadata": {"f:labels": {"f:app": {}}}}));
    // Timestamps: the JSON's, to the second.
    let (_, _, body) = get(&c, CMS, LIST_ACCEPT).await;
    let list = PartialObjectMetadataList::decode(open_envelope(body).unwrap().1).unwrap();
    let json = list_json(&c, CMS).await;
    let json_items = json["items"].as_array().unwrap();
    assert_eq!(list.items.len(), json_items.len());
    for (item, json_item) in list.items.iter().zip(json_items) {
        let (meta, json_meta) = (item.metadata.as_ref().unwrap(), &json_item["metadata"]);
        let created = meta.creation_timestamp.unwrap().seconds;
        assert_eq!(created, Some(seconds(json_meta, "creationTimestamp")));
        let deleted = meta.deletion_timestamp.map(|t| t.seconds.unwrap());
        let json_deleted = json_meta["deletionTimestamp"].is_string();
        assert_eq!(deleted, json_deleted.then(|| seconds(json_meta, "deletionTimestamp")));
        let grace = json_meta["deletionGracePeriodSeconds"].as_i64();
        assert_eq!(meta.deletion_grace_period_seconds, grace);
    }
    assert!(list.items.iter().any(|i| i.metadata.as_ref().unwrap().deletion_timestamp.is_some()));
}

/// A list past 10,000 items is encoded on two threads and sent in parts of about a megabyte:
/// the parts must join into the one list, in the store's order.
#[tokio::test]
async fn a_large_list_sent_in_parts_should_match_json() {
    let sim = start().await;
    let preload = kube_gc_simcluster::preload::Preload::new(30_000);
    let loaded = kube_gc_simcluster::preload::preload(sim.store(), &preload).unwrap();
    assert!(loaded.pods > 10_000, "{} pods: not a list encoded on two threads", loaded.pods);
    let c = client(&sim).await;
    let uri = "/api/v1/pods?resourceVersion=0";
    let (_, _, body) = get(&c, uri, LIST_ACCEPT).await;
    assert!(body.len() > 2 << 20, "{} bytes: not a list of several parts", body.len());
    let page = list_protobuf(&c, uri).await;
    let json = list_json(&c, uri).await;
    let expected: Vec<ObjectMeta> =
        json["items"].as_array().unwrap().iter().map(|i| engine_meta(&i["metadata"])).collect();
    assert_eq!(page.items.len(), loaded.pods);
    assert!(page.items == expected, "the protobuf list differs from the JSON list");
}

/// An object's protobuf metadata is encoded once per stored version: a list after a write
/// must show the write.
#[tokio::test]
async fn a_list_after_a_write_should_show_it() {
    let sim = start().await;
    let c = client(&sim).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    cms.create(&PostParams::default(), &configmap(json!({"name": "w"}))).await.unwrap();
    let before = list_protobuf(&c, CMS).await;
    assert!(before.items[0].finalizers.is_empty());
    let patch = json!({"metadata": {"finalizers": ["example.com/hold"]}});
    cms.patch("w", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let after = list_protobuf(&c, CMS).await;
    assert_eq!(after.items[0].finalizers, ["example.com/hold"]);
    assert_ne!(after.items[0].resource_version, before.items[0].resource_version);
}

#[tokio::test]
async fn other_answers_should_stay_json() {
    let sim = start().await;
    let c = client(&sim).await;
    objects(&c).await;
    // JSON first: JSON, even with protobuf listed after.
    let accept = format!("{JSON_LIST_ACCEPT},{LIST_ACCEPT}");
    let (status, content_type, body) = get(&c, CMS, &accept).await;
    assert_eq!((status, content_type.as_str()), (200, "application/json"));
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    // Protobuf of whole objects is not served: the next type listed.
    let (status, content_type, body) =
        get(&c, CMS, "application/vnd.kubernetes.protobuf, application/json").await;
    assert_eq!((status, content_type.as_str()), (200, "application/json"));
    let list: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["kind"], "ConfigMapList");
    // One object: JSON metadata.
    let (status, content_type, body) = get(&c, &format!("{CMS}/owner"), OBJECT_ACCEPT).await;
    assert_eq!((status, content_type.as_str()), (200, "application/json"));
    let obj: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (obj["kind"].as_str(), obj["metadata"]["name"].as_str()),
        (Some("PartialObjectMetadata"), Some("owner"))
    );
    // Errors: a JSON Status.
    let (status, content_type, body) = get(&c, &format!("{CMS}?limit=x"), LIST_ACCEPT).await;
    assert_eq!((status, content_type.as_str()), (400, "application/json"));
    let s: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(s["kind"], "Status");
    let (status, content_type, _) =
        get(&c, "/api/v1/namespaces/default/nothings", LIST_ACCEPT).await;
    assert_eq!((status, content_type.as_str()), (404, "application/json"));
}

#[tokio::test]
async fn protobuf_pages_should_follow_limit_and_continue() {
    let sim = start().await;
    let c = client(&sim).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    for i in 0..25 {
        let cm = configmap(json!({"name": format!("cm-{i:02}")}));
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let (mut names, mut tokens, mut versions) = (Vec::new(), Vec::new(), Vec::new());
    let mut token: Option<String> = None;
    loop {
        let uri = match &token {
            Some(t) => format!("{CMS}?limit=10&continue={t}"),
            None => format!("{CMS}?limit=10"),
        };
        let page = list_protobuf(&c, &uri).await;
        // The same page as JSON.
        let json = list_json(&c, &uri).await;
        assert_eq!(json["metadata"]["continue"].as_str(), page.continue_token.as_deref());
        let json_names: Vec<&str> = json["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(page.items.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(), json_names);
        names.extend(page.items.into_iter().map(|o| o.name));
        versions.push(page.resource_version);
        token = page.continue_token;
        match &token {
            Some(t) => tokens.push(t.clone()),
            None => break,
        }
    }
    let expected: Vec<String> = (0..25).map(|i| format!("cm-{i:02}")).collect();
    assert_eq!(names, expected);
    assert_eq!(tokens.len(), 2, "three pages");
    assert!(
        versions.iter().all(|v| *v == versions[0]),
        "every page at the first's version: {versions:?}"
    );
}

/// A protobuf watch: its frames as they arrive.
struct Watch {
    chunks: futures::stream::BoxStream<'static, Result<Bytes, axum::Error>>,
    frames: FrameReader,
}

impl Watch {
    async fn open(c: &kube::Client, query: &str) -> Watch {
        let uri = format!("{CMS}?watch=1&{query}");
        let req = http::Request::get(&uri)
            .header(http::header::ACCEPT, OBJECT_ACCEPT)
            .body(Body::empty());
        let resp = c.send(req.unwrap()).await.expect("a response");
        assert_eq!(resp.status().as_u16(), 200);
        assert_eq!(resp.headers()[http::header::CONTENT_TYPE], PROTOBUF_WATCH);
        let chunks = axum::body::Body::new(resp.into_body()).into_data_stream().boxed();
        Watch { chunks, frames: FrameReader::new() }
    }

    /// The next frame, undecoded.
    async fn next_frame(&mut self) -> Bytes {
        loop {
            if let Some(frame) = self.frames.next_frame().unwrap() {
                return frame;
            }
            let chunk = tokio::time::timeout(DEADLINE, self.chunks.next()).await;
            let chunk = chunk.expect("an event within the deadline").expect("the stream goes on");
            self.frames.push(&chunk.expect("a chunk"));
        }
    }

    async fn next(&mut self) -> WatchEvent {
        decode_watch_event(self.next_frame().await).expect("a watch event")
    }

    /// The next event that is no bookmark.
    async fn next_change(&mut self) -> (WatchEventType, ObjectMeta) {
        loop {
            let event = self.next().await;
            match (event.event_type, event.object) {
                (WatchEventType::Bookmark, _) => {}
                (t, OrStatus::Ok(meta)) => return (t, meta),
                (t, OrStatus::Status(s)) => panic!("{t:?} with {s:?}"),
            }
        }
    }
}

#[tokio::test]
async fn watches_should_send_protobuf_events_and_bookmarks() {
    let sim = start().await;
    let c = client(&sim).await;
    let (owner, _) = objects(&c).await;
    let rv = list_protobuf(&c, CMS).await.resource_version;
    let mut watch = Watch::open(
        &c,
        &format!("resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=20"),
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let created = cms.create(&PostParams::default(), &configmap(json!({
        "name": "w",
        "finalizers": ["example.com/keep"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid.clone().unwrap()}],
    })))
    .await
    .unwrap();
    let (t, added) = watch.next_change().await;
    assert_eq!(t, WatchEventType::Added);
    let uid = created.metadata.uid.clone().unwrap();
    assert_eq!(
        (added.name.as_str(), added.namespace.as_str(), added.uid.as_str()),
        ("w", "default", uid.as_str())
    );
    assert_eq!(added.resource_version, created.metadata.resource_version.unwrap());
    assert_eq!(added.owner_references.len(), 1);
    assert_eq!(added.owner_references[0].uid, owner.metadata.uid.clone().unwrap());
    assert_eq!(added.finalizers, ["example.com/keep"]);
    assert!(!added.deletion_timestamp);

    cms.delete("w", &DeleteParams::foreground()).await.unwrap();
    let (t, deleting) = watch.next_change().await;
    assert_eq!(t, WatchEventType::Modified);
    assert!(deleting.deletion_timestamp);
    assert_eq!(deleting.finalizers, ["example.com/keep", "foregroundDeletion"]);
    assert!(
        deleting.resource_version.parse::<u64>().unwrap() > added.resource_version.parse().unwrap()
    );

    let patch = json!({"metadata": {"finalizers": null}});
    cms.patch("w", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let (t, deleted) = watch.next_change().await;
    assert_eq!(t, WatchEventType::Deleted);
    assert_eq!((deleted.name.as_str(), deleted.uid.as_str()), ("w", uid.as_str()));

    // Then only bookmarks (every 100 ms here), at the version of the latest change.
    let latest = sim.store().resource_version();
    let bookmark = watch.next().await;
    assert_eq!(bookmark.event_type, WatchEventType::Bookmark, "{bookmark:?}");
    let OrStatus::Ok(meta) = bookmark.object else { panic!("a bookmark object") };
    assert_eq!(meta.resource_version.parse::<u64>().unwrap(), latest);
    assert!(meta.name.is_empty() && meta.uid.is_empty());
}

#[tokio::test]
async fn initial_events_should_end_with_an_annotated_protobuf_bookmark() {
    let sim = start().await;
    let c = client(&sim).await;
    objects(&c).await;
    let mut watch = Watch::open(&c, "sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=20").await;
    let mut names = Vec::new();
    let end = loop {
        let frame = watch.next_frame().await;
        let event = decode_watch_event(frame.clone()).unwrap();
        match (event.event_type, event.object) {
            (WatchEventType::Added, OrStatus::Ok(meta)) => names.push(meta.name),
            (WatchEventType::Bookmark, _) => break frame,
            other => panic!("unexpected {other:?}"),
        }
    };
    names.sort();
    assert_eq!(names, ["doomed", "owner"]);
    // The annotation, which the lean decoder skips: the whole message.
    let event = kube_gc_wire::messages::WatchEvent::decode(end).unwrap();
    let (kind, raw) = open_envelope(event.object.unwrap().raw.unwrap()).unwrap();
    assert_eq!(kind, "PartialObjectMetadata");
    let meta = PartialObjectMetadata::decode(raw).unwrap().metadata.unwrap();
    assert_eq!(
        meta.annotations,
        [("k8s.io/initial-events-end".to_owned(), "true".to_owned())].into()
    );
    assert_eq!(
        meta.resource_version.unwrap().parse::<u64>().unwrap(),
        sim.store().resource_version()
    );
}

#[tokio::test]
async fn a_watch_from_an_expired_version_should_get_a_protobuf_410() {
    let config =
        Config { store: StoreConfig { history: 3, ..StoreConfig::default() }, ..Config::default() };
    let sim = start_with(config).await;
    let c = client(&sim).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let old = cms.create(&PostParams::default(), &configmap(json!({"name": "a"}))).await.unwrap();
    let old = old.metadata.resource_version.unwrap();
    for i in 0..5 {
        cms.create(&PostParams::default(), &configmap(json!({"name": format!("b{i}")})))
            .await
            .unwrap();
    }
    let mut watch = Watch::open(&c, &format!("resourceVersion={old}")).await;
    let event = watch.next().await;
    assert_eq!(event.event_type, WatchEventType::Error);
    match event.object {
        OrStatus::Status(s) => {
            assert_eq!(
                (s.code, s.reason.as_deref(), s.status.as_deref()),
                (Some(410), Some("Expired"), Some("Failure"))
            );
            assert!(s.message.is_some_and(|m| !m.is_empty()));
        }
        other => panic!("expected a Status, got {other:?}"),
    }
    // The stream ends after it.
    let rest = tokio::time::timeout(DEADLINE, watch.chunks.next()).await.expect("the stream ends");
    assert!(rest.is_none(), "nothing after the error: {rest:?}");
    assert_eq!(watch.frames.pending(), 0);
}
