//! kubectl against simcluster: `get` (table, JSON, YAML), `create -f`, `delete --cascade=…` and
//! `get -w`, over real HTTP, with the server state checked through the store.
//!
//! kubectl is `$KUBE_GC_KUBECTL` (set by scripts/install-test-clients: Debian's
//! kubernetes-client, v1.20.2) or `kubectl` on `PATH`; without either, each test prints
//! `SKIPPED …` and passes.

#[path = "common/clients.rs"]
mod clients;
mod common;

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use clients::{Guard, Output, TempDir};
use kube_gc_simcluster::SimCluster;
use kube_gc_simcluster::store::Resolved;
use serde_json::{Value, json};

/// A simcluster, kubectl and a kubeconfig for it; `None` (after printing why) without kubectl.
struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    dir: TempDir,
    sim: SimCluster,
}

async fn setup(test: &str) -> Option<Kubectl> {
    let Some(bin) = clients::find("KUBE_GC_KUBECTL", &["kubectl"]) else {
        clients::skip(test, "kubectl", "KUBE_GC_KUBECTL");
        return None;
    };
    let sim = common::start().await;
    let dir = TempDir::new("kubectl");
    let kubeconfig = dir.write("kubeconfig", &sim.kubeconfig());
    Some(Kubectl { bin, kubeconfig, dir, sim })
}

impl Kubectl {
    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--request-timeout=30s")
            // kubectl caches discovery under $HOME/.kube: keep each test's apart.
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        clients::run(&mut self.command(args))
    }

    fn resolved(&self, api_version: &str, plural: &str) -> Resolved {
        self.sim.store().resolve_api_version(api_version, plural).expect("served")
    }

    fn create(&self, plural: &str, obj: Value) {
        let r = self.resolved("v1", plural);
        self.sim.store().create(&r, Some("default"), obj).expect("create");
    }

    /// The stored object, if present.
    fn stored(&self, api_version: &str, plural: &str, name: &str) -> Option<Value> {
        let r = self.resolved(api_version, plural);
        let bytes = self.sim.store().get(&r, Some("default"), name).ok()?;
        Some(serde_json::from_slice(&bytes).expect("stored JSON"))
    }
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|a| a.iter().map(|f| f.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_should_print_a_table_json_and_yaml() {
    let Some(k) = setup("get_should_print_a_table_json_and_yaml").await else { return };
    k.create("configmaps", json!({"metadata": {"name": "alpha"}, "data": {"k": "v"}}));
    k.create("configmaps", json!({"metadata": {"name": "beta"}}));

    // The default printing: the server's Table (Name, Created At).
    let table = k.run(&["get", "configmaps"]).ok().stdout;
    let header = table.lines().next().unwrap_or_default();
    assert!(header.starts_with("NAME") && header.contains("CREATED AT"), "table:\n{table}");
    let names: Vec<&str> =
        table.lines().skip(1).filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(names, ["alpha", "beta"], "table:\n{table}");
    let one = k.run(&["get", "configmap", "alpha"]).ok().stdout;
    assert_eq!(one.lines().count(), 2, "one row under the header:\n{one}");
    let all = k.run(&["get", "namespaces"]).ok().stdout;
    assert!(all.contains("kube-system"), "namespaces:\n{all}");

    // -o json: a list, and a single object.
    let list: Value = serde_json::from_str(&k.run(&["get", "cm", "-o", "json"]).ok().stdout)
        .expect("kubectl prints JSON");
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    assert_eq!(list["items"][0]["kind"], "ConfigMap");
    let obj: Value =
        serde_json::from_str(&k.run(&["get", "cm", "alpha", "-o", "json"]).ok().stdout)
            .expect("kubectl prints JSON");
    assert_eq!(obj["data"], json!({"k": "v"}));
    assert_eq!(obj["metadata"]["uid"].as_str().map(str::len), Some(36));

    // -o yaml.
    let yaml = k.run(&["get", "cm", "alpha", "-o", "yaml"]).ok().stdout;
    assert!(yaml.contains("kind: ConfigMap") && yaml.contains("name: alpha"), "yaml:\n{yaml}");
    assert!(yaml.contains("k: v"), "yaml:\n{yaml}");

    // A missing object: NotFound, exit status 1.
    let missing = k.run(&["get", "cm", "absent"]);
    assert!(!missing.status.success());
    assert!(missing.stderr.contains("NotFound"), "stderr: {}", missing.stderr);
}

const MANIFEST: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: example.com/web:1}]
---
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web-1
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: example.com/web:1}]
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1-abcde
  labels: {app: web}
spec:
  containers: [{name: c, image: example.com/web:1}]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  key: value
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_from_a_manifest_should_create_every_object() {
    let Some(k) = setup("create_from_a_manifest_should_create_every_object").await else { return };
    let manifest = k.dir.write("manifest.yaml", MANIFEST);
    let out = k.run(&["create", "-f", manifest.to_str().unwrap()]).ok().stdout;
    for line in [
        "deployment.apps/web created",
        "replicaset.apps/web-1 created",
        "pod/web-1-abcde created",
        "configmap/web-config created",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    let deploy = k.stored("apps/v1", "deployments", "web").expect("the Deployment is stored");
    assert_eq!(deploy["spec"]["template"]["spec"]["containers"][0]["image"], "example.com/web:1");
    assert!(k.stored("apps/v1", "replicasets", "web-1").is_some());
    assert!(k.stored("v1", "pods", "web-1-abcde").is_some());
    let cm = k.stored("v1", "configmaps", "web-config").expect("the ConfigMap is stored");
    assert_eq!(cm["data"], json!({"key": "value"}));

    // Again: every object already exists (409), and kubectl says so.
    let again = k.run(&["create", "-f", manifest.to_str().unwrap()]);
    assert!(!again.status.success());
    assert!(again.stderr.contains("AlreadyExists"), "stderr: {}", again.stderr);
}

/// The `--cascade` values this kubectl accepts, with the propagation policy each sends
/// (kubectl ≥ 1.20: background / foreground / orphan; older: true / false).
fn cascade_values(k: &Kubectl) -> Vec<(&'static str, &'static str)> {
    let help = k.run(&["delete", "--help"]).ok().stdout;
    if help.contains("foreground") {
        vec![("background", "Background"), ("foreground", "Foreground"), ("orphan", "Orphan")]
    } else {
        vec![("true", "Background"), ("false", "Orphan")]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_should_apply_each_cascade_policy() {
    let Some(k) = setup("delete_should_apply_each_cascade_policy").await else { return };
    for (i, (cascade, policy)) in cascade_values(&k).into_iter().enumerate() {
        // Without finalizers: background removes the object; foreground and orphan keep it,
        // being deleted, with their finalizer (no garbage collector runs to remove it).
        let plain = format!("plain-{cascade}");
        k.create("configmaps", json!({"metadata": {"name": plain}}));
        let flag = format!("--cascade={cascade}");
        let out = k.run(&["delete", "cm", &plain, &flag, "--wait=false"]).ok().stdout;
        assert!(out.contains(&format!("\"{plain}\" deleted")), "#{i}: {out}");
        let expected = match policy {
            "Background" => None,
            "Foreground" => Some(vec!["foregroundDeletion".to_owned()]),
            _ => Some(vec!["orphan".to_owned()]),
        };
        let got = k.stored("v1", "configmaps", &plain);
        assert_eq!(got.as_ref().map(finalizers), expected, "#{i} --cascade={cascade}: {got:?}");
        if let Some(obj) = got {
            assert!(obj["metadata"]["deletionTimestamp"].is_string(), "#{i}: {obj}");
        }

        // With a custom finalizer the object stays whatever the policy; the policy's
        // finalizer is added after it.
        let held = format!("held-{cascade}");
        k.create(
            "configmaps",
            json!({"metadata": {"name": held, "finalizers": ["example.com/hold"]}}),
        );
        k.run(&["delete", "cm", &held, &flag, "--wait=false"]).ok();
        let obj = k.stored("v1", "configmaps", &held).expect("held by its finalizer");
        let mut want = vec!["example.com/hold".to_owned()];
        want.extend(expected.unwrap_or_default());
        assert_eq!(finalizers(&obj), want, "#{i} --cascade={cascade}");
        assert!(obj["metadata"]["deletionTimestamp"].is_string(), "#{i}: {obj}");
    }
    // Deleting what is not there: NotFound.
    let missing = k.run(&["delete", "cm", "absent"]);
    assert!(!missing.status.success() && missing.stderr.contains("NotFound"), "{missing:?}");
}

/// Reads `child`'s stdout lines into a channel (the thread ends when the child is killed).
fn lines_of(child: &mut Guard) -> mpsc::Receiver<String> {
    let stdout = child.0.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits for a line containing `needle`, at most [`clients::DEADLINE`]; returns the lines read.
fn wait_for_line(rx: &mpsc::Receiver<String>, needle: &str, seen: &mut Vec<String>) {
    let deadline = Instant::now() + clients::DEADLINE;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let found = line.contains(needle);
                seen.push(line);
                if found {
                    return;
                }
            }
            Err(e) => panic!("no line with {needle:?} ({e}); kubectl printed: {seen:#?}"),
        }
    }
}

fn spawn_watch(k: &Kubectl, args: &[&str]) -> Guard {
    let child = k
        .command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start kubectl get -w");
    Guard(child)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_should_print_changes_as_they_happen() {
    let Some(k) = setup("get_watch_should_print_changes_as_they_happen").await else { return };
    k.create("configmaps", json!({"metadata": {"name": "existing"}}));
    let mut child = spawn_watch(&k, &["get", "configmaps", "--watch"]);
    let rx = lines_of(&mut child);
    let mut seen = Vec::new();
    wait_for_line(&rx, "existing", &mut seen);
    // A change made after the watch started is printed.
    k.create("configmaps", json!({"metadata": {"name": "added-later"}}));
    wait_for_line(&rx, "added-later", &mut seen);
    drop(child); // killed
    assert!(!seen.iter().any(|l| l.contains("error")), "{seen:#?}");

    // --output-watch-events names each event.
    let mut child =
        spawn_watch(&k, &["get", "configmaps", "--watch-only", "--output-watch-events"]);
    let rx = lines_of(&mut child);
    // The watch-only request starts when kubectl has listed: retry the change until it shows.
    let r = k.resolved("v1", "configmaps");
    let deadline = Instant::now() + clients::DEADLINE;
    let mut seen = Vec::new();
    let mut n = 0;
    'outer: loop {
        assert!(Instant::now() < deadline, "no MODIFIED event; kubectl printed: {seen:#?}");
        n += 1;
        let patch = format!(r#"{{"data":{{"n":"{n}"}}}}"#);
        k.sim
            .store()
            .patch(
                &r,
                Some("default"),
                "existing",
                kube_gc_simcluster::patch::PatchType::Merge,
                patch.as_bytes(),
            )
            .expect("patch");
        while let Ok(line) = rx.recv_timeout(std::time::Duration::from_millis(500)) {
            let done = line.contains("MODIFIED") && line.contains("existing");
            seen.push(line);
            if done {
                break 'outer;
            }
        }
    }
    drop(child);
}
