//! Fidelity: the same sequence of requests against a real kube-apiserver v1.20.2
//! (`scripts/testenv`) and against a simcluster, compared step by step.
//!
//! After each step the two answers are reduced to what kube-gc and its tests depend on (the
//! status code; for a `Status`, its `status` and `reason`; for an object, its kind, name,
//! finalizers, whether it has a `deletionTimestamp`, and its ownerReferences with uids mapped
//! back to the names of their owners; for a list, the names it holds and whether it has a
//! `continue`) and compared. uids, resourceVersions and timestamps differ by nature and are
//! never compared. Where the two differ, the real server is right: a difference is either
//! fixed in simcluster or listed in [`KNOWN_DIFFERENCES`], which the suite asserts (a known
//! difference that disappears fails the suite too, so that the list stays true).
//!
//! No garbage collector runs on either side: dependents stay, on both.
//!
//! Behind the `fidelity` feature; scripts/test runs it (`cargo test -p kube-gc-simcluster
//! --features fidelity --test fidelity`). The real server is started in a scratch directory
//! and stopped when the test ends, panics included; `KUBE_GC_E2E_TESTENV=<dir>` reuses one
//! already started (`scripts/testenv start <dir>`) and leaves it running.
#![cfg(feature = "fidelity")]

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use http::{Method, Request};
use kube::Client;
use kube_gc_simcluster::Config;
use serde_json::{Value, json};

/// Steps where simcluster answers differently from the real server, on purpose or for now,
/// each with why. The suite fails if one of these stops differing, or another one starts.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[(
    "create in a namespace that does not exist",
    "the real server's NamespaceLifecycle admission answers 404; simcluster has no namespace \
     lifecycle and creates the object (README: what it does not emulate)",
)];

/// The real control plane of `scripts/testenv`, stopped on drop (panics included) if started
/// here.
struct RealServer {
    dir: PathBuf,
    kubeconfig: PathBuf,
    owned: bool,
}

fn testenv(args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/testenv");
    let out = Command::new(&script)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(out.status.success(), "scripts/testenv {args:?} failed: {}", out.status);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl RealServer {
    fn start() -> RealServer {
        if let Some(dir) = std::env::var_os("KUBE_GC_E2E_TESTENV") {
            let dir = PathBuf::from(dir);
            eprintln!("[fidelity] using the running testenv {}", dir.display());
            return RealServer { kubeconfig: dir.join("kubeconfig"), dir, owned: false };
        }
        let dir = std::env::temp_dir().join(format!("kube-gc-fidelity-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the testenv directory");
        let out = testenv(&["start", dir.to_str().expect("utf-8 path")]);
        RealServer { kubeconfig: PathBuf::from(out.trim()), dir, owned: true }
    }
}

impl Drop for RealServer {
    fn drop(&mut self) {
        if self.owned {
            let _ = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/testenv"))
                .args(["stop", self.dir.to_str().unwrap_or_default()])
                .stdin(Stdio::null())
                .status();
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

async fn client_from(kubeconfig: &str) -> Client {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig).expect("kubeconfig parses");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .expect("kubeconfig loads");
    config.read_timeout = Some(Duration::from_secs(30));
    Client::try_from(config).expect("client builds")
}

/// One server under comparison and what its answers taught us (uids by object name, the last
/// resourceVersion seen per object, the last answer).
struct Side {
    label: &'static str,
    client: Client,
    uids: HashMap<String, String>,
    rvs: HashMap<String, String>,
    last: Value,
}

impl Side {
    fn uid(&self, name: &str) -> String {
        self.uids.get(name).cloned().unwrap_or_else(|| panic!("{}: no uid for {name}", self.label))
    }

    fn rv(&self, name: &str) -> String {
        self.rvs.get(name).cloned().unwrap_or_else(|| panic!("{}: no rv for {name}", self.label))
    }

    fn continue_token(&self) -> String {
        self.last["metadata"]["continue"].as_str().unwrap_or_default().to_owned()
    }

    fn alias(&self, uid: &str) -> String {
        self.uids
            .iter()
            .find(|(_, u)| *u == uid)
            .map_or_else(|| "<unknown uid>".to_owned(), |(n, _)| n.clone())
    }

    /// Remembers the uid and resourceVersion of an object answer.
    fn learn(&mut self, obj: &Value) {
        let meta = &obj["metadata"];
        if let (Some(name), Some(uid)) = (meta["name"].as_str(), meta["uid"].as_str()) {
            self.uids.insert(name.to_owned(), uid.to_owned());
            if let Some(rv) = meta["resourceVersion"].as_str() {
                self.rvs.insert(name.to_owned(), rv.to_owned());
            }
        }
    }

    async fn send(&mut self, req: &Req) -> (u16, Value) {
        let mut builder = Request::builder().method(req.method.clone()).uri(&req.path);
        if let Some(ct) = req.content_type {
            builder = builder.header(http::header::CONTENT_TYPE, ct);
        }
        let body = req.body.as_ref().map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let request = builder.body(kube::client::Body::from(body)).expect("a valid request");
        let response = tokio::time::timeout(common::DEADLINE, self.client.send(request))
            .await
            .unwrap_or_else(|_| panic!("{}: {} {} timed out", self.label, req.method, req.path))
            .unwrap_or_else(|e| panic!("{}: {} {}: {e}", self.label, req.method, req.path));
        let code = response.status().as_u16();
        let bytes = response.into_body().collect_bytes().await.expect("read the body");
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if (200..300).contains(&code) && value["kind"] != "Status" {
            self.learn(&value);
        }
        self.last = value.clone();
        (code, value)
    }

    /// The part of an answer that is compared.
    fn view(&self, code: u16, body: &Value) -> Value {
        let kind = body["kind"].as_str().unwrap_or_default();
        if kind == "Status" {
            // A success (a delete that removed the object) names what went; a failure's
            // details are not compared (their `kind` spelling varies by error on the real
            // server: a Kind for Invalid and precondition conflicts, a resource otherwise).
            let d = &body["details"];
            let details = (body["status"] == "Success")
                .then(|| json!({"name": d["name"], "group": d["group"], "kind": d["kind"]}));
            return json!({"code": code, "status": body["status"], "reason": body["reason"], "details": details});
        }
        if let Some(items) = body["items"].as_array() {
            let names: Vec<&str> =
                items.iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
            let has_continue = body["metadata"]["continue"].as_str().is_some_and(|c| !c.is_empty());
            return json!({"code": code, "list": names, "continue": has_continue});
        }
        let meta = &body["metadata"];
        let refs: Vec<Value> = meta["ownerReferences"]
            .as_array()
            .map(|refs| {
                refs.iter()
                    .map(|r| {
                        json!({
                            "apiVersion": r["apiVersion"], "kind": r["kind"], "name": r["name"],
                            "uid": self.alias(r["uid"].as_str().unwrap_or_default()),
                            "controller": r["controller"], "blockOwnerDeletion": r["blockOwnerDeletion"],
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        json!({
            "code": code,
            "kind": kind,
            "name": meta["name"],
            "finalizers": meta["finalizers"].as_array().cloned().unwrap_or_default(),
            "deleting": meta["deletionTimestamp"].is_string(),
            "ownerReferences": refs,
        })
    }
}

/// A request, made for one side (uids, resourceVersions and continue tokens differ).
struct Req {
    method: Method,
    path: String,
    content_type: Option<&'static str>,
    body: Option<Value>,
}

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

fn get(path: String) -> Req {
    Req { method: Method::GET, path, content_type: None, body: None }
}

fn post(path: String, body: Value) -> Req {
    Req { method: Method::POST, path, content_type: Some(JSON), body: Some(body) }
}

fn put(path: String, body: Value) -> Req {
    Req { method: Method::PUT, path, content_type: Some(JSON), body: Some(body) }
}

fn patch(content_type: &'static str, path: String, body: Value) -> Req {
    Req { method: Method::PATCH, path, content_type: Some(content_type), body: Some(body) }
}

fn delete(path: String, body: Option<Value>) -> Req {
    let content_type = body.as_ref().map(|_| JSON);
    Req { method: Method::DELETE, path, content_type, body }
}

struct Suite {
    sides: [Side; 2],
    ns: String,
    steps: usize,
    /// (step, real view, simcluster view) of every step that differed.
    differences: Vec<(String, Value, Value)>,
}

impl Suite {
    /// Sends `make(side)` to both servers and compares the views; returns them (real, sim).
    async fn step(&mut self, what: &str, make: impl Fn(&Side) -> Req) -> (Value, Value) {
        self.steps += 1;
        let mut views = Vec::with_capacity(2);
        for side in &mut self.sides {
            let req = make(side);
            let (code, body) = side.send(&req).await;
            views.push(side.view(code, &body));
        }
        let sim = views.pop().expect("two views");
        let real = views.pop().expect("two views");
        if real == sim {
            eprintln!("[fidelity] same      #{:02} {what}: {real}", self.steps);
        } else {
            eprintln!(
                "[fidelity] DIFFERENT #{:02} {what}:\n    real: {real}\n    sim:  {sim}",
                self.steps
            );
            self.differences.push((what.to_owned(), real.clone(), sim.clone()));
        }
        (real, sim)
    }

    fn cms(&self) -> String {
        format!("/api/v1/namespaces/{}/configmaps", self.ns)
    }

    fn cm(&self, name: &str) -> String {
        format!("{}/{name}", self.cms())
    }

    /// Polls `path` on both sides until it answers 200 (a CRD's resource being served).
    async fn wait_served(&mut self, path: &str) {
        for side in &mut self.sides {
            let deadline = tokio::time::Instant::now() + common::DEADLINE;
            loop {
                let (code, _) = side.send(&get(path.to_owned())).await;
                if code == 200 {
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "{}: {path} never served",
                    side.label
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

fn owner_ref(side: &Side, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": side.uid(name)})
}

fn cm_body(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simcluster_should_answer_as_the_real_apiserver() {
    let real = RealServer::start();
    let sim = common::start_with(Config::default()).await;
    let real_kc = std::fs::read_to_string(&real.kubeconfig).expect("the testenv's kubeconfig");
    let side = |label, client| Side {
        label,
        client,
        uids: HashMap::new(),
        rvs: HashMap::new(),
        last: Value::Null,
    };
    let ns = format!("fidelity-{}", std::process::id());
    let mut s = Suite {
        sides: [
            side("real", client_from(&real_kc).await),
            side("sim", client_from(&sim.kubeconfig()).await),
        ],
        ns: ns.clone(),
        steps: 0,
        differences: Vec::new(),
    };

    // --- create / get / list with limit and continue --------------------------------------
    s.step("create a namespace", |_| {
        post("/api/v1/namespaces".into(), json!({"metadata": {"name": ns}}))
    })
    .await;
    s.step("create owner", |_| post(s_cms(&ns), cm_body("owner"))).await;
    s.step("create owner2", |_| post(s_cms(&ns), cm_body("owner2"))).await;
    s.step("create a", |_| post(s_cms(&ns), cm_body("a"))).await;
    s.step("create a again: 409 AlreadyExists", |_| post(s_cms(&ns), cm_body("a"))).await;
    s.step("create without a name: 422", |_| post(s_cms(&ns), json!({"metadata": {}}))).await;
    s.step("get a", |_| get(s_cm(&ns, "a"))).await;
    s.step("create in a namespace that does not exist", |_| {
        post(s_cms(&format!("{ns}-absent")), cm_body("nowhere"))
    })
    .await;
    s.step("get absent: 404", |_| get(s_cm(&ns, "absent"))).await;
    for i in 0..3 {
        let name = format!("list-{i}");
        s.step(&format!("create {name}"), |_| post(s_cms(&ns), cm_body(&name))).await;
    }
    let cms = s.cms();
    s.step("list limit=2", |_| get(format!("{cms}?limit=2"))).await;
    s.step("list page 2", |side| get(format!("{cms}?limit=2&continue={}", side.continue_token())))
        .await;
    s.step("list page 3", |side| get(format!("{cms}?limit=2&continue={}", side.continue_token())))
        .await;
    s.step("list labelSelector, no match", |_| get(format!("{cms}?labelSelector=x%3Dy"))).await;

    // --- update with a stale resourceVersion -------------------------------------------------
    let a = s.cm("a");
    let with_rv = |side: &Side, data: &str| json!({"metadata": {"name": "a", "resourceVersion": side.rv("a")}, "data": {"k": data}});
    s.step("get a (its resourceVersion)", |_| get(a.clone())).await;
    // Both sides remember a's resourceVersion from here; the first update makes it stale.
    let stale: Vec<String> = s.sides.iter().map(|side| side.rv("a")).collect();
    s.step("update a at its resourceVersion", |side| put(a.clone(), with_rv(side, "w"))).await;
    s.step("update a at a stale resourceVersion: 409", |side| {
        let i = usize::from(side.label == "sim");
        put(
            a.clone(),
            json!({"metadata": {"name": "a", "resourceVersion": stale[i]}, "data": {"k": "x"}}),
        )
    })
    .await;
    s.step("update a without a resourceVersion", |_| put(a.clone(), cm_body("a"))).await;

    // --- patches on ownerReferences and finalizers --------------------------------------------
    s.step("merge patch: finalizers", |_| {
        patch(MERGE, a.clone(), json!({"metadata": {"finalizers": ["example.com/x"]}}))
    })
    .await;
    s.step("merge patch: ownerReferences", |side| {
        patch(
            MERGE,
            a.clone(),
            json!({"metadata": {"ownerReferences": [owner_ref(side, "owner")]}}),
        )
    })
    .await;
    s.step("json patch: add a finalizer", |_| {
        patch(
            JSON_PATCH,
            a.clone(),
            json!([{"op": "add", "path": "/metadata/finalizers/-", "value": "example.com/y"}]),
        )
    })
    .await;
    s.step("json patch: failing test: 422", |_| {
        patch(
            JSON_PATCH,
            a.clone(),
            json!([{"op": "test", "path": "/metadata/name", "value": "b"}]),
        )
    })
    .await;
    s.step("json patch: test then remove finalizers", |side| {
        patch(
            JSON_PATCH,
            a.clone(),
            json!([
            {"op": "test", "path": "/metadata/uid", "value": side.uid("a")},
            {"op": "remove", "path": "/metadata/finalizers"}]),
        )
    })
    .await;
    s.step("strategic merge: add a second owner (merged by uid)", |side| {
        let mut r = owner_ref(side, "owner2");
        r["controller"] = true.into();
        r["blockOwnerDeletion"] = true.into();
        patch(STRATEGIC, a.clone(), json!({"metadata": {"ownerReferences": [r]}}))
    })
    .await;
    s.step("strategic merge: $patch delete an owner", |side| {
        patch(STRATEGIC, a.clone(), json!({"metadata": {"ownerReferences": [{"$patch": "delete", "uid": side.uid("owner")}]}}))
    })
    .await;
    s.step("strategic merge: finalizers merge", |_| {
        patch(
            STRATEGIC,
            a.clone(),
            json!({"metadata": {"finalizers": ["example.com/p", "example.com/q"]}}),
        )
    })
    .await;
    s.step("strategic merge: $deleteFromPrimitiveList", |_| {
        patch(
            STRATEGIC,
            a.clone(),
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/p"]}}),
        )
    })
    .await;
    s.step("strategic merge: a second controller: 422", |side| {
        let mut r = owner_ref(side, "owner");
        r["controller"] = true.into();
        patch(STRATEGIC, a.clone(), json!({"metadata": {"ownerReferences": [r]}}))
    })
    .await;
    s.step("merge patch: uid change: 422", |_| {
        patch(
            MERGE,
            a.clone(),
            json!({"metadata": {"uid": "00000000-0000-4000-8000-000000000000"}}),
        )
    })
    .await;
    s.step("merge patch: stale resourceVersion: 409", |side| {
        let i = usize::from(side.label == "sim");
        patch(MERGE, a.clone(), json!({"metadata": {"resourceVersion": stale[i]}}))
    })
    .await;
    s.step("merge patch: clear finalizers", |_| {
        patch(MERGE, a.clone(), json!({"metadata": {"finalizers": null}}))
    })
    .await;

    // --- invalid ownerReferences ---------------------------------------------------------------
    s.step("create with an ownerReference without uid: 422", |_| {
        post(
            s_cms(&ns),
            json!({"metadata": {"name": "bad", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner"}]}}),
        )
    })
    .await;
    s.step("create with two controllers: 422", |side| {
        let mut r1 = owner_ref(side, "owner");
        r1["controller"] = true.into();
        let mut r2 = owner_ref(side, "owner2");
        r2["controller"] = true.into();
        post(s_cms(&ns), json!({"metadata": {"name": "bad", "ownerReferences": [r1, r2]}}))
    })
    .await;
    s.step("merge patch: an ownerReference without a name: 422", |side| {
        let mut r = owner_ref(side, "owner");
        r["name"] = "".into();
        patch(MERGE, a.clone(), json!({"metadata": {"ownerReferences": [r]}}))
    })
    .await;

    // --- a custom resource: strategic merge is 415 ------------------------------------------
    // A group of this run's own, so that a reused testenv does not have it yet.
    let group = format!("f{}.fidelity.example.com", std::process::id());
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    });
    s.step("create a CRD", |_| {
        post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions".into(), crd.clone())
    })
    .await;
    let widgets = format!("/apis/{group}/v1/namespaces/{ns}/widgets");
    s.wait_served(&widgets).await;
    let widget = |name: &str| json!({"apiVersion": format!("{group}/v1"), "kind": "Widget", "metadata": {"name": name}, "spec": {"size": 1}});
    s.step("create a widget", |_| post(widgets.clone(), widget("w"))).await;
    let w = format!("{widgets}/w");
    s.step("strategic merge on a widget: 415", |_| {
        patch(STRATEGIC, w.clone(), json!({"spec": {"size": 2}}))
    })
    .await;
    s.step("merge patch on a widget", |side| {
        patch(MERGE, w.clone(), json!({"metadata": {"finalizers": ["example.com/w"], "ownerReferences": [owner_ref(side, "owner")]}}))
    })
    .await;
    s.step("delete a widget with a finalizer", |_| delete(w.clone(), None)).await;
    s.step("clear the widget's finalizers", |_| {
        patch(MERGE, w.clone(), json!({"metadata": {"finalizers": null}}))
    })
    .await;
    s.step("get the widget: 404", |_| get(w.clone())).await;
    s.step("create a widget to delete", |_| post(widgets.clone(), widget("w2"))).await;
    s.step("delete a widget", |_| delete(format!("{widgets}/w2"), None)).await;

    // --- delete with each propagation policy, with and without dependents -------------------
    for (policy, opts) in [
        ("Background", json!({"propagationPolicy": "Background"})),
        ("Foreground", json!({"propagationPolicy": "Foreground"})),
        ("Orphan", json!({"propagationPolicy": "Orphan"})),
        ("orphanDependents=true", json!({"orphanDependents": true})),
        ("orphanDependents=false", json!({"orphanDependents": false})),
        ("no options", Value::Null),
    ] {
        let tag = policy.to_lowercase().replace([' ', '='], "-");
        let lone = format!("lone-{tag}");
        let parent = format!("parent-{tag}");
        let child = format!("child-{tag}");
        let body = (!opts.is_null()).then(|| json!({"kind": "DeleteOptions", "apiVersion": "v1"}));
        let body = body.map(|mut b| {
            b.as_object_mut().unwrap().extend(opts.as_object().unwrap().clone());
            b
        });
        s.step(&format!("{policy}: create {lone}"), |_| post(s_cms(&ns), cm_body(&lone))).await;
        s.step(&format!("{policy}: delete {lone} (no dependents)"), |_| {
            delete(s_cm(&ns, &lone), body.clone())
        })
        .await;
        s.step(&format!("{policy}: get {lone}"), |_| get(s_cm(&ns, &lone))).await;
        s.step(&format!("{policy}: create {parent}"), |_| post(s_cms(&ns), cm_body(&parent))).await;
        s.step(&format!("{policy}: create {child}"), |side| {
            let mut r = owner_ref(side, &parent);
            r["blockOwnerDeletion"] = true.into();
            post(s_cms(&ns), json!({"metadata": {"name": child, "ownerReferences": [r]}}))
        })
        .await;
        s.step(&format!("{policy}: delete {parent} (a dependent)"), |_| {
            delete(s_cm(&ns, &parent), body.clone())
        })
        .await;
        s.step(&format!("{policy}: get {parent}"), |_| get(s_cm(&ns, &parent))).await;
        s.step(&format!("{policy}: get {child} (no collector: it stays)"), |_| {
            get(s_cm(&ns, &child))
        })
        .await;
    }
    s.step("propagationPolicy and orphanDependents both: 422", |_| {
        delete(
            s_cm(&ns, "owner"),
            Some(json!({"propagationPolicy": "Orphan", "orphanDependents": true})),
        )
    })
    .await;
    s.step("an unknown propagationPolicy: 422", |_| {
        delete(s_cm(&ns, "owner"), Some(json!({"propagationPolicy": "Sideways"})))
    })
    .await;
    s.step("propagationPolicy in the query", |_| {
        delete(format!("{}?propagationPolicy=Orphan", s_cm(&ns, "parent-background")), None)
    })
    .await;
    s.step("a second delete changes the policy (orphan → foreground)", |_| {
        delete(s_cm(&ns, "parent-orphan"), Some(json!({"propagationPolicy": "Foreground"})))
    })
    .await;

    // --- preconditions -------------------------------------------------------------------------
    s.step("create pre", |_| post(s_cms(&ns), cm_body("pre"))).await;
    s.step("delete pre, uid mismatch: 409", |_| {
        delete(
            s_cm(&ns, "pre"),
            Some(json!({"preconditions": {"uid": "00000000-0000-4000-8000-000000000000"}})),
        )
    })
    .await;
    s.step("delete pre, resourceVersion mismatch: 409", |_| {
        delete(s_cm(&ns, "pre"), Some(json!({"preconditions": {"resourceVersion": "1"}})))
    })
    .await;
    s.step("delete pre, both match", |side| {
        delete(s_cm(&ns, "pre"), Some(json!({"preconditions": {"uid": side.uid("pre"), "resourceVersion": side.rv("pre")}})))
    })
    .await;
    s.step("get pre: 404", |_| get(s_cm(&ns, "pre"))).await;

    // --- a custom finalizer: deletion waits for it; no new finalizers while deleting ----------
    s.step("create held (custom finalizer)", |_| {
        post(s_cms(&ns), json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}))
    })
    .await;
    s.step("delete held", |_| delete(s_cm(&ns, "held"), None)).await;
    s.step("get held: deleting", |_| get(s_cm(&ns, "held"))).await;
    s.step("add a finalizer to deleting held: 422", |_| {
        patch(
            MERGE,
            s_cm(&ns, "held"),
            json!({"metadata": {"finalizers": ["example.com/hold", "example.com/new"]}}),
        )
    })
    .await;
    s.step("strategic merge: add a finalizer to deleting held: 422", |_| {
        patch(
            STRATEGIC,
            s_cm(&ns, "held"),
            json!({"metadata": {"finalizers": ["example.com/new"]}}),
        )
    })
    .await;
    s.step("delete held again with Foreground", |_| {
        delete(s_cm(&ns, "held"), Some(json!({"propagationPolicy": "Foreground"})))
    })
    .await;
    s.step("delete held with orphanDependents=false: 202", |_| {
        delete(s_cm(&ns, "held"), Some(json!({"orphanDependents": false})))
    })
    .await;
    s.step("remove held's finalizers", |_| {
        patch(MERGE, s_cm(&ns, "held"), json!({"metadata": {"finalizers": null}}))
    })
    .await;
    s.step("get held: 404", |_| get(s_cm(&ns, "held"))).await;

    // --- ReplicationController: orphans by default ----------------------------------------------
    let rcs = format!("/api/v1/namespaces/{ns}/replicationcontrollers");
    let rc = json!({"metadata": {"name": "rc"}, "spec": {"replicas": 0, "selector": {"app": "rc"},
        "template": {"metadata": {"labels": {"app": "rc"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
    s.step("create an RC", |_| post(rcs.clone(), rc.clone())).await;
    s.step("delete the RC without options", |_| delete(format!("{rcs}/rc"), None)).await;
    s.step("get the RC: orphan finalizer", |_| get(format!("{rcs}/rc"))).await;
    let mut rc2 = rc.clone();
    rc2["metadata"]["name"] = "rc2".into();
    s.step("create rc2", |_| post(rcs.clone(), rc2.clone())).await;
    s.step("delete rc2 with Background", |_| {
        delete(format!("{rcs}/rc2"), Some(json!({"propagationPolicy": "Background"})))
    })
    .await;
    s.step("get rc2: 404", |_| get(format!("{rcs}/rc2"))).await;

    // --- batch/v1 Job: orphans by default too ---------------------------------------------------
    let jobs = format!("/apis/batch/v1/namespaces/{ns}/jobs");
    let job = json!({"metadata": {"name": "job"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}});
    s.step("create a Job", |_| post(jobs.clone(), job.clone())).await;
    s.step("delete the Job without options", |_| delete(format!("{jobs}/job"), None)).await;
    s.step("get the Job: orphan finalizer", |_| get(format!("{jobs}/job"))).await;

    // --- deletecollection --------------------------------------------------------------------
    for (name, finalizers) in
        [("dc-0", json!([])), ("dc-1", json!([])), ("dc-2", json!(["example.com/hold"]))]
    {
        s.step(&format!("create {name}"), |_| {
            post(s_cms(&ns), json!({"metadata": {"name": name, "labels": {"set": "dc"}, "finalizers": finalizers}}))
        })
        .await;
    }
    s.step("deletecollection set=dc", |_| {
        delete(format!("{}?labelSelector=set%3Ddc", s_cms(&ns)), None)
    })
    .await;
    s.step("list set=dc: the held one is left", |_| {
        get(format!("{}?labelSelector=set%3Ddc", s_cms(&ns)))
    })
    .await;
    s.step("get dc-2: deleting", |_| get(s_cm(&ns, "dc-2"))).await;

    // --- the verdict ---------------------------------------------------------------------------
    let differed: BTreeSet<&str> = s.differences.iter().map(|(w, _, _)| w.as_str()).collect();
    let known: BTreeSet<&str> = KNOWN_DIFFERENCES.iter().map(|(w, _)| *w).collect();
    let unexpected: Vec<_> =
        s.differences.iter().filter(|(w, _, _)| !known.contains(w.as_str())).collect();
    let fixed: Vec<_> = known.difference(&differed).collect();
    eprintln!(
        "[fidelity] {} steps, {} differences ({} known)",
        s.steps,
        differed.len(),
        known.len()
    );
    assert!(
        unexpected.is_empty(),
        "simcluster answered differently from the real server:\n{}",
        unexpected
            .iter()
            .map(|(w, r, m)| format!("  {w}\n    real: {r}\n    sim:  {m}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(fixed.is_empty(), "known differences that no longer differ (remove them): {fixed:?}");
    drop(sim);
    drop(real);
}

fn s_cms(ns: &str) -> String {
    format!("/api/v1/namespaces/{ns}/configmaps")
}

fn s_cm(ns: &str, name: &str) -> String {
    format!("{}/{name}", s_cms(ns))
}
