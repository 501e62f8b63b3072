//! Faults, kube-gc only: `kill -9` of kube-gc in the middle of a cascade (and again during
//! its warm-up), and kube-apiserver going away during kube-gc's warm-up and during a
//! cascade. After recovery all garbage must be collected, and nothing with a live owner may
//! have been deleted at any point (a deleted object never comes back with its UID, so the
//! final state shows it).

use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use kube::api::{Api, DynamicObject, ListParams};
use serde_json::json;

use super::cluster::{Ctx, Del, Kind, OwnerRef, Snapshot, Wait, config_map, pod, workload};

/// The flags that make a cascade slow enough to interrupt: each collected pod costs a GET
/// and a DELETE.
const SLOW: [&str; 2] = ["--kube-api-qps=25", "--kube-api-burst=5"];

fn labelled(mut body: serde_json::Value, chain: &str) -> serde_json::Value {
    body["metadata"]["labels"] = json!({"chain": chain});
    body
}

/// Builds `doomed` (Deployment → ReplicaSet → `n` pods, controller + blocking refs, as the
/// workload controllers write them) and a control group that must survive: `kept`
/// (Deployment → ReplicaSet → 20 pods, 5 ConfigMaps owned by a kept pod) and 10 pods owned
/// by both ReplicaSets. Returns the state wanted once `doomed` is deleted.
async fn doomed_and_control(cx: &mut Ctx<'_>, n: usize) -> anyhow::Result<Snapshot> {
    let mut want = Snapshot::new();
    for d in ["doomed", "kept"] {
        cx.create(d, Kind::deployment(), workload(&[], d)).await?;
        let owner = cx.owner(d).controller(true).block(true);
        cx.create(&format!("{d}-rs"), Kind::replica_set(), workload(&[owner], d)).await?;
    }
    let doomed_rs = cx.owner("doomed-rs").controller(true).block(true);
    let kept_rs = cx.owner("kept-rs");
    let mut items = Vec::new();
    for i in 0..n {
        items.push((
            format!("doomed-pod-{i:03}"),
            Kind::pod(),
            labelled(pod(std::slice::from_ref(&doomed_rs), &[]), "doomed"),
        ));
    }
    for i in 0..20 {
        let body = labelled(pod(&[kept_rs.clone().controller(true).block(true)], &[]), "kept");
        items.push((format!("kept-pod-{i:02}"), Kind::pod(), body));
    }
    for i in 0..10 {
        let body = labelled(pod(&[doomed_rs.clone(), kept_rs.clone()], &[]), "shared");
        items.push((format!("shared-pod-{i:02}"), Kind::pod(), body));
    }
    cx.create_many(items).await?;
    let kept_pod = cx.owner("kept-pod-00");
    let cms = (0..5).map(|i| {
        (
            format!("kept-cm-{i}"),
            Kind::config_map(),
            config_map(std::slice::from_ref(&kept_pod), &[]),
        )
    });
    cx.create_many(cms.collect()).await?;
    for l in cx.named("") {
        let state = if l.starts_with("doomed") {
            "gone"
        } else if l.starts_with("shared-pod") {
            "live owners=[ReplicaSet/kept-rs]"
        } else if l.starts_with("kept-pod") {
            "live owners=[ReplicaSet/kept-rs!]"
        } else if l.starts_with("kept-cm") {
            "live owners=[Pod/kept-pod-00]"
        } else if l == "kept-rs" {
            "live owners=[Deployment/kept!]"
        } else if l == "kept" {
            "live"
        } else {
            bail!("unexpected object {l}")
        };
        want.insert(l, state.to_owned());
    }
    let mut wait_for: Vec<String> = cx.named("doomed-pod");
    wait_for.extend(cx.named("shared-pod"));
    wait_for.extend(cx.named("kept-cm"));
    let wait_for: Vec<&str> = wait_for.iter().map(String::as_str).collect();
    cx.wait_observed(&wait_for, Duration::from_secs(60)).await?;
    Ok(want)
}

async fn count(cx: &Ctx<'_>, chain: &str) -> anyhow::Result<usize> {
    let api: Api<DynamicObject> = Api::namespaced_with(cx.client.clone(), &cx.ns, &Kind::pod().ar);
    Ok(api.list(&ListParams::default().labels(&format!("chain={chain}"))).await?.items.len())
}

/// Waits until fewer than `below` pods of `chain` remain; returns how many remain.
async fn wait_below(
    cx: &Ctx<'_>,
    chain: &str,
    below: usize,
    timeout: Duration,
) -> anyhow::Result<usize> {
    let deadline = Instant::now() + timeout;
    loop {
        let n = count(cx, chain).await?;
        if n < below {
            return Ok(n);
        }
        ensure!(
            Instant::now() < deadline,
            "the cascade did not start: {n} pods left after {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `kill -9` of kube-gc after the first deletions of a 200-pod foreground cascade, a second
/// `kill -9` 300 ms into the restarted process's warm-up, then a normal start: the cascade
/// completes; the control group (live owners, including pods shared with the doomed
/// ReplicaSet) is intact.
pub async fn kill_9_mid_cascade_resumes_after_restart(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    cx.collector.stop()?;
    cx.collector.start(&SLOW)?;
    let want = doomed_and_control(cx, 200).await?;
    cx.delete("doomed", Del::Foreground).await?;
    let left = wait_below(cx, "doomed", 190, Duration::from_secs(30)).await?;
    cx.collector.kill9()?;
    let at_kill = count(cx, "doomed").await?;
    eprintln!("    · kill -9 with {left}..{at_kill} doomed pods left");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let later = count(cx, "doomed").await?;
    ensure!(later == at_kill, "pods were deleted while kube-gc was dead ({at_kill} -> {later})");
    cx.note("killed", "doomed pods left at kill -9", "between 1 and 189".into());
    cx.collector.spawn(&[])?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    cx.collector.kill9()?;
    eprintln!(
        "    · kill -9 again 300 ms into warm-up, {} doomed pods left",
        count(cx, "doomed").await?
    );
    cx.collector.start(&[])?;
    cx.expect_snapshot(
        "cascade completed after restarts",
        want,
        Wait { timeout: Duration::from_secs(120), ..Wait::DEFAULT },
    )
    .await
}

/// kube-apiserver down when kube-gc starts (its first discovery fails), then back: kube-gc
/// recovers by itself, collects the garbage that was there, keeps the rest.
pub async fn apiserver_down_during_warm_up(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let te = cx.collector.testenv();
    cx.collector.stop()?;
    let want = garbage_and_control(cx, "a").await?;
    te.apiserver_stop()?;
    cx.collector.spawn(&[])?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    ensure!(
        cx.collector.is_running(),
        "kube-gc exited while the apiserver was down:\n{}",
        cx.collector.log_tail(20)
    );
    te.apiserver_start()?;
    let back = Instant::now();
    cx.expect_snapshot(
        "garbage collected",
        want,
        Wait { timeout: Duration::from_secs(60), ..Wait::DEFAULT },
    )
    .await?;
    eprintln!(
        "    · collected {:.1} s after the apiserver came back",
        back.elapsed().as_secs_f64()
    );
    ensure!(cx.collector.is_running(), "kube-gc exited");
    Ok(())
}

/// kube-apiserver killed (`kill -9`, a crash) 100 ms after kube-gc starts, while kube-gc
/// runs discovery and its initial lists, then started again.
pub async fn apiserver_restart_during_warm_up(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let te = cx.collector.testenv();
    cx.collector.stop()?;
    let want = garbage_and_control(cx, "b").await?;
    cx.collector.spawn(&[])?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let ready =
        matches!(super::collector::http_get(cx.collector.debug_port, "/readyz"), Ok((200, _)));
    te.apiserver_kill()?;
    eprintln!("    · kube-apiserver killed 100 ms after kube-gc started (kube-gc ready: {ready})");
    te.apiserver_start()?;
    let back = Instant::now();
    let wait = Wait { timeout: Duration::from_secs(90), ..Wait::DEFAULT };
    cx.expect_snapshot("garbage collected", want, wait).await?;
    eprintln!(
        "    · collected {:.1} s after the apiserver came back",
        back.elapsed().as_secs_f64()
    );
    ensure!(cx.collector.is_running(), "kube-gc exited");
    cx.collector.wait_ready(Duration::from_secs(60))?;
    Ok(())
}

/// 20 pods with a dangling owner; a live RC with 10 pods; and eight owners of different
/// kinds (RC, ConfigMap, PodTemplate, ServiceAccount, Secret, Endpoints, LimitRange,
/// ResourceQuota), each with a custom finalizer and one
/// blocking Pod dependent, deleted in the foreground while no collector runs. Their
/// foreground deletion must wait for the dependents, whichever watcher delivers first when
/// the collector comes up (the owner kinds have few objects and list fast, Pods list last).
async fn garbage_and_control(cx: &mut Ctx<'_>, tag: &str) -> anyhow::Result<Snapshot> {
    let ghost = OwnerRef::new("v1", "ReplicationController", "ghost", &cx.fake_uuid("ghost"));
    cx.create("live-rc", Kind::rc(), super::cluster::rc(&[], &[])).await?;
    let keep = super::cluster::config_map(&[], &["x/keep"]);
    let owners = [
        ("fg-rc", Kind::rc(), super::cluster::rc(&[], &["x/keep"])),
        ("fg-cm", Kind::config_map(), keep.clone()),
        (
            "fg-podtemplate",
            Kind::new("", "v1", "PodTemplate", "podtemplates", true),
            json!({
                "metadata": {"finalizers": ["x/keep"]},
                "template": {"spec": {"containers": [{"name": "c", "image": "fakeimage"}]}}
            }),
        ),
        ("fg-sa", Kind::new("", "v1", "ServiceAccount", "serviceaccounts", true), keep.clone()),
        ("fg-secret", Kind::secret(), keep.clone()),
        ("fg-endpoints", Kind::new("", "v1", "Endpoints", "endpoints", true), keep.clone()),
        (
            "fg-limitrange",
            Kind::new("", "v1", "LimitRange", "limitranges", true),
            json!({"metadata": {"finalizers": ["x/keep"]}, "spec": {"limits": []}}),
        ),
        ("fg-quota", Kind::new("", "v1", "ResourceQuota", "resourcequotas", true), keep),
    ];
    let mut items = Vec::new();
    for (name, kind, body) in owners.iter().cloned() {
        cx.create(name, kind, body).await?;
        let fg = cx.owner(name).block(true);
        items.push((format!("{name}-dependent-{tag}"), Kind::pod(), pod(&[fg], &[])));
    }
    let live = cx.owner("live-rc");
    for i in 0..20 {
        items.push((
            format!("garbage-{tag}-{i:02}"),
            Kind::pod(),
            pod(std::slice::from_ref(&ghost), &[]),
        ));
    }
    for i in 0..10 {
        items.push((
            format!("live-{tag}-{i:02}"),
            Kind::pod(),
            pod(std::slice::from_ref(&live), &[]),
        ));
    }
    cx.create_many(items).await?;
    // Deleted while no collector runs: the foreground deletions wait for the collector.
    for (name, _, _) in &owners {
        cx.delete(name, Del::Foreground).await?;
    }
    let mut want = Snapshot::new();
    for l in cx.named("") {
        let state = if l.starts_with("garbage") || l.contains("-dependent-") {
            "gone"
        } else if l.starts_with("live-") && l != "live-rc" {
            "live owners=[ReplicationController/live-rc]"
        } else if l.starts_with("fg-") {
            "deleting fin=[x/keep]"
        } else {
            "live"
        };
        want.insert(l, state.into());
    }
    Ok(want)
}

/// kube-apiserver restarted in the middle of a 100-pod foreground cascade: kube-gc's watches
/// and workers recover and the cascade completes; the control group is intact.
pub async fn apiserver_restart_during_cascade(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let te = cx.collector.testenv();
    cx.collector.stop()?;
    cx.collector.start(&SLOW)?;
    let want = doomed_and_control(cx, 100).await?;
    cx.delete("doomed", Del::Foreground).await?;
    let left = wait_below(cx, "doomed", 90, Duration::from_secs(30)).await?;
    te.apiserver_stop()?;
    eprintln!("    · apiserver stopped with about {left} doomed pods left");
    tokio::time::sleep(Duration::from_secs(1)).await;
    te.apiserver_start()?;
    eprintln!("    · apiserver back, {} doomed pods left", count(cx, "doomed").await?);
    cx.expect_snapshot(
        "cascade completed",
        want,
        Wait { timeout: Duration::from_secs(120), ..Wait::DEFAULT },
    )
    .await?;
    ensure!(cx.collector.is_running(), "kube-gc exited:\n{}", cx.collector.log_tail(30));
    cx.collector.stop()?;
    cx.collector.start(&[])?;
    Ok(())
}
