//! Fault injection and the write audit, over HTTP: each fault as a client sees it, switched at
//! run time, and the wrongful-deletion oracle attributing deletes by User-Agent.

mod common;

use std::time::Duration;

use common::{DEADLINE, code, start};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, PostParams, WatchEvent, WatchParams};
use kube::client::Body;
use kube_gc_simcluster::faults::FAULT_HEADER;
use kube_gc_simcluster::{FaultKind, Faults, SimCluster};

/// A collector's User-Agent (kube-gc sends `kube-gc/<version>`).
const GC_AGENT: &str = "kube-gc/0.1.0";
use serde_json::{Value, json};

/// A client sending `user_agent` (as kube-gc's does), that never retries by itself (kube-rs
/// retries 429 and 503 by default: the faults would be hidden).
async fn client_as(sim: &SimCluster, user_agent: &'static str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig()).unwrap();
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.unwrap();
    config.default_retry = false;
    config.headers.push((http::header::USER_AGENT, http::HeaderValue::from_static(user_agent)));
    kube::Client::try_from(config).unwrap()
}

async fn client(sim: &SimCluster) -> kube::Client {
    client_as(sim, "simcluster-tests").await
}

/// A raw request: status, headers, body.
async fn send(c: &kube::Client, method: &str, uri: &str) -> (u16, http::HeaderMap, Value) {
    let req = http::Request::builder().method(method).uri(uri).body(Body::empty()).unwrap();
    let resp = c.send(req).await.expect("a response");
    let (parts, body) = resp.into_parts();
    let bytes = body.collect_bytes().await.expect("a body");
    (parts.status.as_u16(), parts.headers, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn faults(f: impl FnOnce(&mut Faults)) -> Faults {
    let mut faults = Faults { seed: 42, ..Faults::default() };
    f(&mut faults);
    faults
}

async fn cm(c: &kube::Client, name: &str) -> ConfigMap {
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.expect("create")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_should_answer_429_500_503_with_a_status_and_spare_discovery() {
    let sim = start().await;
    let c = client(&sim).await;
    sim.set_faults(faults(|f| f.error_rate = 1.0));
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..30 {
        let (status, headers, body) =
            send(&c, "GET", "/api/v1/namespaces/default/configmaps").await;
        assert!([429, 500, 503].contains(&status), "got {status}");
        assert_eq!(body["kind"], "Status");
        assert_eq!(body["code"], status);
        assert!(headers.contains_key(FAULT_HEADER));
        if status == 429 {
            assert_eq!(headers[http::header::RETRY_AFTER], "1");
            assert_eq!(body["reason"], "TooManyRequests");
        }
        seen.insert(status);
    }
    assert_eq!(seen.len(), 3, "all three errors: {seen:?}");
    // Discovery, /version and /healthz are never faulted.
    for uri in ["/api", "/api/v1", "/apis", "/apis/apps/v1", "/version"] {
        assert_eq!(send(&c, "GET", uri).await.0, 200, "{uri}");
    }
    let counts = sim.fault_counts();
    let errors: u64 =
        [FaultKind::TooManyRequests, FaultKind::InternalError, FaultKind::ServiceUnavailable]
            .iter()
            .map(|k| counts.get(*k))
            .sum();
    assert_eq!(errors, 30);
    // Off: served again.
    sim.faults_off();
    assert_eq!(send(&c, "GET", "/api/v1/namespaces/default/configmaps").await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_should_refuse_writes_to_one_object_and_apply_nothing() {
    let sim = start().await;
    let c = client(&sim).await;
    cm(&c, "kept").await;
    sim.set_faults(faults(|f| f.conflict_rate = 1.0));
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let err = cms.delete("kept", &DeleteParams::default()).await.expect_err("409");
    assert_eq!(code(&err), 409);
    // A create names no version: not faulted.
    cm(&c, "created").await;
    sim.faults_off();
    assert!(cms.get("kept").await.is_ok(), "the refused delete deleted nothing");
    assert_eq!(sim.fault_counts().get(FaultKind::Conflict), 1);
}

/// A lost answer: the write happens, and the client is told 504, as the apiserver's timeout
/// filter answers a handler that finished too late. A read is never faulted so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_answers_should_apply_the_write_and_answer_504() {
    let sim = start().await;
    let c = client(&sim).await;
    cm(&c, "patched").await;
    cm(&c, "deleted").await;
    sim.set_faults(faults(|f| f.answer_lost_rate = 1.0));
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let labels = kube::api::Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}}));
    let err = cms.patch("patched", &Default::default(), &labels).await.expect_err("504");
    assert_eq!(code(&err), 504);
    let err = cms.delete("deleted", &DeleteParams::default()).await.expect_err("504");
    assert_eq!(code(&err), 504);
    assert!(cms.get("patched").await.is_ok(), "a read is served");
    // A write refused by the server itself keeps its own answer.
    let err = cms.delete("missing", &DeleteParams::default()).await.expect_err("404");
    assert_eq!(code(&err), 404);
    sim.faults_off();
    let patched = cms.get("patched").await.unwrap();
    assert_eq!(patched.metadata.labels.unwrap()["a"], "b", "the patch was applied");
    assert_eq!(code(&cms.get("deleted").await.expect_err("gone")), 404, "the delete happened");
    assert_eq!(sim.fault_counts().get(FaultKind::AnswerLost), 2, "the two applied writes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_should_answer_410_to_continued_lists_and_watches_from_a_version() {
    let sim = start().await;
    let c = client(&sim).await;
    for i in 0..3 {
        cm(&c, &format!("cm-{i}")).await;
    }
    let (status, _, page) = send(&c, "GET", "/api/v1/namespaces/default/configmaps?limit=1").await;
    assert_eq!(status, 200);
    let token = page["metadata"]["continue"].as_str().expect("a continue token").to_owned();
    let rv = page["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
    sim.set_faults(faults(|f| f.expire_rate = 1.0));
    // A first page is never expired; a continued one is.
    assert_eq!(send(&c, "GET", "/api/v1/namespaces/default/configmaps?limit=1").await.0, 200);
    let uri = format!("/api/v1/namespaces/default/configmaps?limit=1&continue={token}");
    let (status, _, body) = send(&c, "GET", &uri).await;
    assert_eq!((status, body["reason"].as_str()), (410, Some("Expired")));
    // A watch from a version: one ERROR event with a 410 Status.
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let mut events = cms.watch(&WatchParams::default().timeout(5), &rv).await.unwrap().boxed();
    match tokio::time::timeout(DEADLINE, events.next()).await.expect("an event") {
        Some(Ok(WatchEvent::Error(e))) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected an ERROR event, got {other:?}"),
    }
    let counts = sim.fault_counts();
    assert_eq!(
        (counts.get(FaultKind::ContinueExpired), counts.get(FaultKind::WatchExpired)),
        (1, 1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_watches_should_end_mid_stream_with_an_error() {
    let sim = start().await;
    let c = client(&sim).await;
    for i in 0..10 {
        cm(&c, &format!("cm-{i}")).await;
    }
    sim.set_faults(faults(|f| f.watch_drop_rate = 1.0));
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    // Ten objects to send, and at most 7 events or 1 s before the cut: the watch (asked for
    // 20 s) ends early, with an error.
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        let mut added = 0;
        // Cut before its first event: the request itself fails.
        let Ok(events) = cms.watch(&WatchParams::default().timeout(20), "0").await else {
            return (0, true);
        };
        let mut events = events.boxed();
        while let Some(e) = events.next().await {
            match e {
                Ok(WatchEvent::Added(_)) => added += 1,
                Ok(other) => panic!("unexpected {other:?}"),
                Err(_) => return (added, true),
            }
        }
        (added, false)
    })
    .await
    .expect("the watch was cut before its timeout");
    assert!(ended.0 < 10 && ended.1, "cut after {} events, error: {}", ended.0, ended.1);
    assert_eq!(sim.fault_counts().get(FaultKind::WatchDropped), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_should_delay_requests_and_be_counted() {
    let sim = start().await;
    let c = client(&sim).await;
    sim.set_faults(faults(|f| f.latency = Duration::from_millis(50)));
    let started = std::time::Instant::now();
    assert_eq!(send(&c, "GET", "/api/v1/namespaces/default/configmaps").await.0, 200);
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(sim.fault_counts().get(FaultKind::Latency), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_should_flag_the_collector_deleting_a_dependent_of_a_live_owner() {
    let sim = start().await;
    let user = client(&sim).await;
    let gc = client_as(&sim, GC_AGENT).await;
    let owner = cm(&user, "owner").await;
    let pods: Api<Pod> = Api::namespaced(user.clone(), "default");
    for name in ["by-user", "by-gc"] {
        let pod: Pod =
            serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid,
            }]}}))
            .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    // A user may delete a dependent of a live owner; the collector may not.
    pods.delete("by-user", &DeleteParams::default()).await.unwrap();
    Api::<Pod>::namespaced(gc, "default").delete("by-gc", &DeleteParams::default()).await.unwrap();
    let audit = sim.audit();
    assert_eq!(audit.deletions(), 2);
    assert_eq!(audit.deletions_checked(), 1);
    let wrongful = audit.wrongful_deletions();
    assert_eq!(wrongful.len(), 1, "{wrongful:?}");
    assert_eq!(wrongful[0].record.name, "by-gc");
    assert_eq!(&*wrongful[0].record.actor, GC_AGENT);
    let last = audit.records().pop().unwrap();
    assert_eq!((last.name.as_str(), last.owner_references[0].name.as_str()), ("by-gc", "owner"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_watch_events_keep_their_order() {
    let sim = start().await;
    let c = client(&sim).await;
    sim.set_faults(faults(|f| {
        f.watch_delay_rate = 1.0;
        f.watch_delay = Duration::from_millis(30);
    }));
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let mut events = cms.watch(&WatchParams::default().timeout(20), "0").await.unwrap().boxed();
    let names: Vec<String> = (0..8).map(|i| format!("cm-{i}")).collect();
    for name in &names {
        cm(&c, name).await;
    }
    let mut got = Vec::new();
    while got.len() < names.len() {
        let event = tokio::time::timeout(DEADLINE, events.next()).await.expect("an event");
        match event {
            Some(Ok(WatchEvent::Added(cm))) => got.push(cm.metadata.name.unwrap()),
            Some(Ok(WatchEvent::Bookmark(_))) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(got, names, "held-back events overtook later ones");
    assert!(sim.fault_counts().get(FaultKind::WatchDelayed) >= names.len() as u64);
}
