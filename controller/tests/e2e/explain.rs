//! kube-gc's answers about one object against the real kube-apiserver, tried as an operator
//! would: `…/explain` of a foreground deletion held by a blocking dependent with a foreign
//! finalizer names that dependent and its finalizer; `…/blast-radius` of a Deployment whose
//! second Pod has another live owner equals what a real background delete then removes; the
//! standalone plugin, run by kubectl itself (`kubectl gc …`), answers the same, and explains
//! an orphaning delete no collector has processed yet by the dependents it waits for.

use std::time::Duration;

use anyhow::{Context, ensure};
use serde_json::Value;

use super::cluster::{Ctx, Del, Kind, OwnerRef, Wait, config_map, pod, rc, workload};
use super::collector::http_get;

/// Runs the plugin as kubectl runs it (`kubectl gc ARGS -o json`, the plugin found on the
/// `PATH`), or directly where no kubectl was installed; its JSON answer.
fn plugin_json(cx: &Ctx<'_>, args: &[&str]) -> anyhow::Result<Value> {
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_kubectl-gc"));
    let kubeconfig = cx.collector.testenv().kubeconfig.clone();
    let mut command = match std::env::var_os("KUBE_GC_KUBECTL") {
        Some(kubectl) => {
            let dir = binary.parent().context("the plugin's directory")?;
            let path = std::env::join_paths(
                std::iter::once(dir.to_owned())
                    .chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
            )?;
            let mut c = std::process::Command::new(kubectl);
            c.env("PATH", path).arg("gc");
            c
        }
        None => std::process::Command::new(binary),
    };
    let out = command.env("KUBECONFIG", &kubeconfig).args(args).args(["-o", "json"]).output()?;
    ensure!(
        out.status.success(),
        "kubectl gc {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).context("kubectl gc: not JSON")
}

const RC: &str = "ReplicationController";
const BASE: &str = "/debug/controllers/garbagecollector";

fn rc_ref(cx: &Ctx<'_>, logical: &str) -> OwnerRef {
    OwnerRef::new("v1", RC, &cx.obj(logical).name, &cx.uid(logical))
}

/// `states` as `Ctx::expect` takes them.
fn want(states: &[(String, String)]) -> Vec<(&str, &str)> {
    states.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// GETs a debug endpoint of the running kube-gc as JSON.
fn debug_json(cx: &Ctx<'_>, path: &str) -> anyhow::Result<Value> {
    let (code, body) = http_get(cx.collector.debug_port, path)?;
    ensure!(code == 200, "{path}: {code} {body:.300}");
    serde_json::from_str(&body).with_context(|| format!("{path}: not JSON: {body:.300}"))
}

/// See the module docs.
pub async fn explain_and_blast_radius_match_the_cluster(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    // 1. A foreground deletion held by a blocking dependent with a finalizer of its own.
    cx.create("held-owner", Kind::rc(), rc(&[], &[])).await?;
    let owner = rc_ref(cx, "held-owner").block(true);
    cx.create("held", Kind::pod(), pod(&[owner], &["example.com/hold"])).await?;
    cx.wait_observed(&["held"], Duration::from_secs(60)).await?;
    cx.delete("held-owner", Del::Foreground).await?;
    let held_state = format!("deleting fin=[example.com/hold] owners=[{RC}/held-owner!]");
    let mut states = vec![
        ("held-owner".to_owned(), "deleting fin=[foregroundDeletion]".to_owned()),
        ("held".to_owned(), held_state),
    ];
    cx.expect("blocked", &want(&states), Wait::HOLD).await?;

    let owner_uid = cx.uid("held-owner");
    let e = debug_json(cx, &format!("{BASE}/explain?uid={owner_uid}"))?;
    ensure!(e["beingDeleted"] == true, "the owner is being deleted: {e}");
    ensure!(e["next"]["action"] == "waitForBlockingDependents", "the owner waits: {e}");
    let foreground = &e["finalizers"][0];
    ensure!(foreground["name"] == "foregroundDeletion", "{e}");
    ensure!(foreground["removedBy"] == "the garbage collector", "{e}");
    let blocker = &foreground["waitingFor"][0];
    ensure!(blocker["name"] == cx.obj("held").name.as_str(), "names the blocking Pod: {e}");
    ensure!(blocker["finalizers"][0] == "example.com/hold", "names its finalizer: {e}");
    ensure!(blocker["beingDeleted"] == true, "{e}");
    // The Pod's own explanation: deleted, held by a finalizer that is not the collector's.
    let p = debug_json(cx, &format!("{BASE}/explain?uid={}", cx.uid("held")))?;
    ensure!(p["next"]["action"] == "none", "{p}");
    ensure!(p["finalizers"][0]["name"] == "example.com/hold", "{p}");
    ensure!(p["finalizers"][0]["removedBy"].as_str().is_some_and(|s| s.starts_with("not")), "{p}");
    ensure!(p["owners"][0]["state"] == "waitingForDependentsDeletion", "{p}");
    eprintln!("    ✓ explain names the blocking Pod and its finalizer example.com/hold");
    // The standalone plugin, from its own list of the cluster, says the same.
    let target = format!("rc/{}", cx.obj("held-owner").name);
    let plugin = plugin_json(cx, &["explain", &target, "-n", &cx.ns])?;
    for field in ["object", "owners", "next", "finalizers"] {
        ensure!(plugin[field] == e[field], "kubectl gc explain's {field} differs: {plugin} vs {e}");
    }
    eprintln!("    ✓ kubectl gc explain {target} answers the same, standalone");
    cx.clear_finalizers("held").await?;
    states = vec![("held-owner".into(), "gone".into()), ("held".into(), "gone".into())];
    cx.expect("unblocked", &want(&states), Wait::DEFAULT).await?;

    // 2. The blast radius of a Deployment (→ ReplicaSet → two Pods, one also owned by a
    // ConfigMap that stays), then the background delete it predicts.
    cx.create("web", Kind::deployment(), workload(&[], "web")).await?;
    let web = OwnerRef::new("apps/v1", "Deployment", &cx.obj("web").name, &cx.uid("web"));
    cx.create("web-rs", Kind::replica_set(), workload(&[web], "web")).await?;
    cx.create("keep", Kind::config_map(), config_map(&[], &[])).await?;
    let rs = OwnerRef::new("apps/v1", "ReplicaSet", &cx.obj("web-rs").name, &cx.uid("web-rs"));
    let keep = OwnerRef::new("v1", "ConfigMap", &cx.obj("keep").name, &cx.uid("keep"));
    cx.create("only-web", Kind::pod(), pod(std::slice::from_ref(&rs), &[])).await?;
    cx.create("shared", Kind::pod(), pod(&[rs, keep], &[])).await?;
    cx.wait_observed(&["only-web", "shared"], Duration::from_secs(60)).await?;
    let r =
        debug_json(cx, &format!("{BASE}/blast-radius?uid={}&policy=background", cx.uid("web")))?;
    let names = |v: &Value| -> Vec<String> {
        let mut n: Vec<String> = v
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| o["name"].as_str().map(str::to_owned))
            .collect();
        n.sort();
        n
    };
    let mut predicted: Vec<String> =
        ["web", "web-rs", "only-web"].iter().map(|l| cx.obj(l).name.clone()).collect();
    predicted.sort();
    ensure!(names(&r["deleted"]) == predicted, "radius: {r}");
    ensure!(names(&r["kept"]) == [cx.obj("shared").name.clone()], "kept: {r}");
    let target = format!("deploy/{}", cx.obj("web").name);
    let plugin = plugin_json(cx, &["blast-radius", &target, "-n", &cx.ns])?;
    ensure!(plugin == r, "kubectl gc blast-radius differs: {plugin} vs {r}");
    cx.delete("web", Del::Background).await?;
    let shared_state = "live owners=[ConfigMap/keep]".to_owned();
    states.extend([
        ("web".into(), "gone".into()),
        ("web-rs".into(), "gone".into()),
        ("keep".into(), "live".into()),
        ("only-web".into(), "gone".into()),
        ("shared".into(), shared_state),
    ]);
    cx.expect("deleted as predicted", &want(&states), Wait::DEFAULT).await?;
    eprintln!(
        "    ✓ the blast radius ({}) is what the background delete removed",
        predicted.join(", ")
    );

    // 3. An orphaning delete while no collector runs: the standalone plugin explains what its
    // `orphan` finalizer waits for; once kube-gc runs, the orphaning completes.
    cx.create("orphaner", Kind::rc(), rc(&[], &[])).await?;
    let orphaner = rc_ref(cx, "orphaner");
    cx.create("orphan-a", Kind::pod(), pod(std::slice::from_ref(&orphaner), &[])).await?;
    cx.create("orphan-b", Kind::pod(), pod(&[orphaner], &[])).await?;
    cx.wait_observed(&["orphan-a", "orphan-b"], Duration::from_secs(60)).await?;
    cx.collector.stop()?;
    cx.delete("orphaner", Del::Orphan).await?;
    let target = format!("rc/{}", cx.obj("orphaner").name);
    let o = plugin_json(cx, &["explain", &target, "-n", &cx.ns])?;
    let started = cx.collector.start(&[]);
    ensure!(o["next"]["action"] == "orphanDependents", "{o}");
    ensure!(o["finalizers"][0]["name"] == "orphan", "{o}");
    let mut waiting = names(&o["finalizers"][0]["waitingFor"]);
    waiting.sort();
    let mut dependents: Vec<String> =
        ["orphan-a", "orphan-b"].iter().map(|l| cx.obj(l).name.clone()).collect();
    dependents.sort();
    ensure!(waiting == dependents, "the orphan finalizer waits for {waiting:?}: {o}");
    started?;
    states.extend([
        ("orphaner".into(), "gone".into()),
        ("orphan-a".into(), "live".into()),
        ("orphan-b".into(), "live".into()),
    ]);
    cx.expect("orphaned", &want(&states), Wait::DEFAULT).await?;
    eprintln!("    ✓ kubectl gc explain names the dependents an orphan finalizer waits for");
    Ok(())
}
