//! Faults, kube-gc only: `kill -9` of kube-gc in the middle of a cascade (and again during
//! its warm-up), kube-apiserver going away during kube-gc's warm-up and during a cascade,
//! and both killed during a warm-up with `--early-collection`. After recovery all garbage must be collected, and nothing with a live owner may
//! have been deleted at any point (a deleted object never comes back with its UID, so the
//! final state shows it).

use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::json;

use super::cluster::{Ctx, Del, Kind, OwnerRef, Snapshot, Wait, config_map, pod, rc, workload};

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
    finish_crashed_pod_deletions(cx).await?;
    cx.note("killed", "doomed pods left at kill -9", "between 1 and 189".into());
    cx.collector.spawn(&[])?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    cx.collector.kill9()?;
    eprintln!(
        "    · kill -9 again 300 ms into warm-up, {} doomed pods left",
        count(cx, "doomed").await?
    );
    finish_crashed_pod_deletions(cx).await?;
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
    finish_crashed_pod_deletions(cx).await?;
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
    restart_during_cascade(cx, &[]).await
}

/// The same with the watchers reading JSON (`--kube-api-content-type=application/json`)
/// instead of the default protobuf: both relist and resume.
pub async fn apiserver_restart_during_cascade_json_watchers(
    cx: &mut Ctx<'_>,
) -> anyhow::Result<()> {
    restart_during_cascade(cx, &["--kube-api-content-type=application/json"]).await
}

async fn restart_during_cascade(cx: &mut Ctx<'_>, extra: &[&str]) -> anyhow::Result<()> {
    let te = cx.collector.testenv();
    cx.collector.stop()?;
    let flags: Vec<&str> = SLOW.iter().chain(extra).copied().collect();
    cx.collector.start(&flags)?;
    let want = doomed_and_control(cx, 100).await?;
    cx.delete("doomed", Del::Foreground).await?;
    let left = wait_below(cx, "doomed", 90, Duration::from_secs(30)).await?;
    te.apiserver_stop()?;
    eprintln!("    · apiserver stopped with about {left} doomed pods left");
    tokio::time::sleep(Duration::from_secs(1)).await;
    te.apiserver_start()?;
    // The stop may end in SIGKILL (a server that ignores SIGTERM for 10 s).
    finish_crashed_pod_deletions(cx).await?;
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

/// A CRD whose preferred version cannot be read, so that kube-gc's warm-up cannot end until
/// [`Stall::repair`]: objects are stored as `v1`, discovery prefers `v2`, and converting to
/// `v2` goes through a webhook whose service does not exist (every list and get at `v2`
/// answers 500). Not tracked by the scenario (its snapshots never list it).
struct Stall {
    name: String,
    group: String,
}

impl Stall {
    fn api(cx: &Ctx<'_>) -> Api<DynamicObject> {
        Api::all_with(cx.client.clone(), &Kind::crd().ar)
    }

    fn version(name: &str) -> serde_json::Value {
        json!({
            "name": name, "served": true, "storage": name == "v1",
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
        })
    }

    /// Creates the CRD (group `<tag><suffix>.stall.e2e.kube-gc.io`, kind `Stall`), serving
    /// `v1` and `v2`, and waits until it is Established. `v2` stalls (cannot be listed) once
    /// an object is stored: see [`Stall::check_stalls`].
    async fn create(cx: &Ctx<'_>, tag: &str) -> anyhow::Result<Stall> {
        Stall::create_serving(cx, tag, &["v1", "v2"]).await
    }

    /// As [`Stall::create`], serving only `versions`.
    async fn create_serving(cx: &Ctx<'_>, tag: &str, versions: &[&str]) -> anyhow::Result<Stall> {
        let group = format!("{tag}{}.stall.e2e.kube-gc.io", cx.suffix);
        let name = format!("stalls.{group}");
        let crd: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"plural": "stalls", "singular": "stall", "kind": "Stall", "listKind": "StallList"},
                "versions": versions.iter().map(|v| Stall::version(v)).collect::<Vec<_>>(),
                "conversion": {"strategy": "Webhook", "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"service": {"namespace": "default", "name": "e2e-no-such-service", "path": "/convert"}}
                }}
            }
        }))?;
        Stall::api(cx).create(&Default::default(), &crd).await?;
        let stall = Stall { name, group };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let crd = Stall::api(cx).get(&stall.name).await?;
            let established = crd.data["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter().any(|c| c["type"] == "Established" && c["status"] == "True")
            });
            if established {
                return Ok(stall);
            }
            ensure!(Instant::now() < deadline, "CRD {} not Established", stall.name);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn kind(&self, version: &str) -> Kind {
        Kind::new(&self.group, version, "Stall", "stalls", true)
    }

    /// Checks that listing at `v2` fails once an object is stored (the premise of the
    /// scenarios that use it).
    async fn check_stalls(&self, cx: &Ctx<'_>) -> anyhow::Result<()> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(cx.client.clone(), &cx.ns, &self.kind("v2").ar);
        match api.list(&ListParams::default()).await {
            Err(kube::Error::Api(e)) if e.code >= 500 => Ok(()),
            other => bail!("listing {}/v2 should fail on conversion, got {other:?}", self.group),
        }
    }

    /// Serves `v2` beside `v1` (discovery then prefers `v2`): a CRD created by
    /// [`Stall::create_serving`] with `v1` only, whose objects are already stored, stalls from
    /// the moment a client sees `v2`.
    async fn serve_v2(&self, cx: &Ctx<'_>) -> anyhow::Result<()> {
        let patch = json!({"spec": {"versions": [Stall::version("v1"), Stall::version("v2")]}});
        Stall::api(cx)
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("serve v2 of CRD {}", self.name))?;
        // The apiserver serves the new version a moment after the patch.
        let api: Api<DynamicObject> =
            Api::namespaced_with(cx.client.clone(), &cx.ns, &self.kind("v2").ar);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match api.list(&ListParams::default()).await {
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    ensure!(Instant::now() < deadline, "{}/v2 still not served", self.group);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                _ => return Ok(()),
            }
        }
    }

    /// Makes every version readable: conversion `None`, and a `v3` that discovery now
    /// prefers, so that kube-gc replaces its `v2` watcher (in backoff) by a `v3` one at its
    /// next discovery.
    async fn repair(&self, cx: &Ctx<'_>) -> anyhow::Result<()> {
        let patch = json!({"spec": {
            "conversion": {"strategy": "None", "webhook": null},
            "versions": [Stall::version("v1"), Stall::version("v2"), Stall::version("v3")]
        }});
        Stall::api(cx)
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("repair CRD {}", self.name))?;
        Ok(())
    }

    /// Repairs and deletes the CRD (its objects go with it).
    async fn remove(&self, cx: &Ctx<'_>) -> anyhow::Result<()> {
        self.repair(cx).await?;
        match Stall::api(cx).delete(&self.name, &Default::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e).with_context(|| format!("delete CRD {}", self.name)),
        }
    }
}

/// [`garbage_and_control`] plus 100 more garbage pods, and a live `Stall` owning 5 pods through
/// its unreadable `v2` (during warm-up every read of that owner fails: it must not count as
/// absent). Returns the final state wanted and the state wanted while the warm-up is stalled:
/// the garbage (`garbage-*`, dangling owner) gone, everything else as it was (foreground
/// deletions and their dependents wait for sync).
async fn early_garbage_and_control(
    cx: &mut Ctx<'_>,
    stall: &Stall,
    tag: &str,
) -> anyhow::Result<(Snapshot, Snapshot)> {
    let mut want = garbage_and_control(cx, tag).await?;
    let ghost = OwnerRef::new("v1", "ReplicationController", "ghost", &cx.fake_uuid("ghost"));
    let owner = cx.create("stall-owner", stall.kind("v1"), json!({})).await?;
    stall.check_stalls(cx).await?;
    let via_v2 = OwnerRef::new(&format!("{}/v2", stall.group), "Stall", &owner.name, &owner.uid);
    let mut items = Vec::new();
    for i in 0..100 {
        let body = pod(std::slice::from_ref(&ghost), &[]);
        items.push((format!("garbage-{tag}-bulk-{i:03}"), Kind::pod(), body));
    }
    for i in 0..5 {
        let body = pod(std::slice::from_ref(&via_v2), &[]);
        items.push((format!("stall-dependent-{i}"), Kind::pod(), body));
    }
    cx.create_many(items).await?;
    for l in cx.named("") {
        let state = if l.starts_with("garbage-") {
            "gone"
        } else if l.starts_with("stall-dependent-") {
            "live owners=[Stall/stall-owner]"
        } else if l == "stall-owner" {
            "live"
        } else {
            continue;
        };
        want.insert(l, state.to_owned());
    }
    let mut warm = cx.snapshot().await?;
    for (l, state) in warm.iter_mut() {
        if l.starts_with("garbage-") {
            *state = "gone".to_owned();
        }
    }
    Ok((want, warm))
}

/// Starts kube-gc with `--early-collection` (slow client, so that collecting takes seconds)
/// and waits until it has deleted something while still warming up.
async fn start_early_collection(cx: &mut Ctx<'_>) -> anyhow::Result<f64> {
    // The stall must hold the warm-up open for the whole scenario: past the initial sync
    // timeout, kube-gc would proceed with every decision.
    let mut flags = vec!["--early-collection", "--initial-sync-timeout=600s"];
    flags.extend(SLOW);
    cx.collector.spawn(&flags)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        ensure!(cx.collector.is_running(), "kube-gc exited:\n{}", cx.collector.log_tail(20));
        if let Ok(n) = cx.collector.metric("kube_gc_deleted_total") {
            if n >= 1.0 {
                ensure_warming_up(cx)?;
                return Ok(n);
            }
        }
        ensure!(
            Instant::now() < deadline,
            "no early deletion within 60 s:\n{}",
            cx.collector.log_tail(20)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Fails unless kube-gc's current run is still warming up (not every watcher synced).
fn ensure_warming_up(cx: &Ctx<'_>) -> anyhow::Result<()> {
    let log = cx.collector.log_since_start();
    ensure!(
        !log.contains("all resource monitors have synced"),
        "kube-gc finished warming up: the stalled CRD did not stall it"
    );
    Ok(())
}

/// The end of both early-collection scenarios: still warming up, the garbage is collected
/// and nothing else changed; once the stall is repaired, everything is collected.
async fn finish_early_collection(
    cx: &mut Ctx<'_>,
    stall: &Stall,
    want: Snapshot,
    warm: Snapshot,
) -> anyhow::Result<()> {
    let wait = Wait { timeout: Duration::from_secs(90), ..Wait::DEFAULT };
    cx.expect_snapshot("garbage collected during warm-up, nothing else", warm, wait).await?;
    ensure_warming_up(cx)?;
    stall.repair(cx).await?;
    cx.expect_snapshot("everything collected after sync", want, wait).await?;
    ensure!(cx.collector.is_running(), "kube-gc exited:\n{}", cx.collector.log_tail(30));
    cx.collector.wait_ready(Duration::from_secs(60))?;
    Ok(())
}

/// Runs `body` over a [`Stall`] with kube-gc stopped, then removes the stall (on failure
/// too) and restarts kube-gc with the default flags.
async fn with_stall<F>(cx: &mut Ctx<'_>, tag: &str, body: F) -> anyhow::Result<()>
where
    F: for<'a, 'b> FnOnce(
        &'b mut Ctx<'a>,
        &'b Stall,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = anyhow::Result<()>> + 'b>,
    >,
{
    cx.collector.stop()?;
    let stall = Stall::create(cx, tag).await?;
    let result = body(cx, &stall).await;
    let removed = stall.remove(cx).await;
    result?;
    removed?;
    cx.collector.stop()?;
    cx.collector.start(&[])
}

/// Issue #11's confirmed stall: with kube-gc synced and collecting, a CRD whose preferred
/// version cannot be listed (a [`Stall`]) is added. Its watcher never syncs; re-discovery used
/// to put the whole collector back in warm-up for ever, so that no orphan or foreground deletion
/// completed and no dangling reference beside a live owner was removed. Now the new resource
/// holds those decisions for `--initial-sync-timeout` only (5 s here), then kube-gc proceeds as
/// upstream >= v1.32 does: each case completes within its usual time, and nothing live is
/// deleted.
///
/// The CRD first serves `v1` only, and `v2` once its object is stored: had it served `v2` from
/// the start, kube-gc could list the (then empty) `v2` before the object existed and sync it.
pub async fn unlistable_crd_added_while_running(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    cx.collector.stop()?;
    cx.collector.start(&["--initial-sync-timeout=5s"])?;
    let stall = Stall::create_serving(cx, "w", &["v1"]).await?;
    let result = unlistable_crd_cases(cx, &stall).await;
    let removed = stall.remove(cx).await;
    ensure!(cx.collector.is_running(), "kube-gc exited:\n{}", cx.collector.log_tail(30));
    cx.collector.stop()?;
    cx.collector.start(&[])?;
    result?;
    removed
}

async fn unlistable_crd_cases(cx: &mut Ctx<'_>, stall: &Stall) -> anyhow::Result<()> {
    cx.create("stall-owner", stall.kind("v1"), json!({})).await?;
    stall.serve_v2(cx).await?;
    stall.check_stalls(cx).await?;
    // Re-discovery (every 2 s here, and on the CRD's change) replaces the `v1` watcher by a
    // `v2` one, whose list fails.
    let deadline = Instant::now() + Duration::from_secs(30);
    let resource = format!("stalls.{}", stall.group);
    let list_failed =
        |log: &str| log.lines().any(|l| l.contains("list failed") && l.contains(&resource));
    while !list_failed(&cx.collector.log_since_start()) {
        ensure!(Instant::now() < deadline, "kube-gc never failed to list {resource} at v2");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    const RC: &str = "ReplicationController";
    cx.create("orphan-owner", Kind::rc(), rc(&[], &[])).await?;
    cx.create("fg-owner", Kind::rc(), rc(&[], &[])).await?;
    cx.create("solid", Kind::rc(), rc(&[], &[])).await?;
    let orphan_owner = cx.owner("orphan-owner");
    let fg_owner = cx.owner("fg-owner").block(true);
    let solid = cx.owner("solid");
    let ghost = OwnerRef::new("v1", RC, "ghost", &cx.fake_uuid("ghost"));
    cx.create("orphaned", Kind::pod(), pod(&[orphan_owner], &[])).await?;
    cx.create("fg-dep", Kind::pod(), pod(&[fg_owner], &[])).await?;
    cx.create("dangling", Kind::pod(), pod(&[solid.clone(), ghost], &[])).await?;
    cx.create("control", Kind::pod(), pod(&[solid], &[])).await?;
    cx.wait_observed(&["orphaned", "fg-dep", "dangling", "control"], Duration::from_secs(60))
        .await?;
    cx.delete("orphan-owner", Del::Orphan).await?;
    cx.delete("fg-owner", Del::Foreground).await?;
    let solid_only = format!("live owners=[{RC}/solid]");
    cx.expect(
        "orphan, foreground and dangling cases complete beside an unsynced resource",
        &[
            ("orphan-owner", "gone"),
            ("orphaned", "live"),
            ("fg-owner", "gone"),
            ("fg-dep", "gone"),
            ("solid", "live"),
            ("dangling", &solid_only),
            ("control", &solid_only),
            ("stall-owner", "live"),
        ],
        Wait::DEFAULT,
    )
    .await?;
    let log = cx.collector.log_since_start();
    ensure!(
        log.contains("not all resource monitors could be synced, proceeding anyways"),
        "kube-gc did not say it proceeds without the stalled resource"
    );
    let metrics = cx.collector.metrics_text()?;
    ensure!(
        metrics
            .lines()
            .any(|l| l.starts_with("kube_gc_unsynced_resource{") && l.contains(&stall.group)),
        "the unsynced resource is not exported"
    );
    Ok(())
}

/// `--early-collection`, kube-apiserver killed (`kill -9`) once kube-gc has started deleting
/// during its warm-up (held open by a [`Stall`]), then started again: during the rest of the
/// warm-up only the garbage goes (not the dependents of an owner whose reads fail, nor
/// foreground deletions); after sync everything is collected and the control group is intact.
pub async fn early_collection_apiserver_kill_9_during_warm_up(
    cx: &mut Ctx<'_>,
) -> anyhow::Result<()> {
    with_stall(cx, "e", |cx, stall| {
        Box::pin(async move {
            let te = cx.collector.testenv();
            let (want, warm) = early_garbage_and_control(cx, stall, "e").await?;
            let deleted = start_early_collection(cx).await?;
            te.apiserver_kill()?;
            eprintln!("    · kube-apiserver killed during warm-up, {deleted} deletions in");
            te.apiserver_start()?;
            finish_crashed_pod_deletions(cx).await?;
            finish_early_collection(cx, stall, want, warm).await
        })
    })
    .await
}

/// Does what kube-controller-manager's pod garbage collector (not the garbage collector under
/// test, and not run here) does for a pod left terminating: the apiserver deletes an
/// unscheduled pod in two steps (set deletionTimestamp, then remove), and a `kill -9` between
/// them, of the apiserver or of the client whose DELETE it is serving (the client's disconnect
/// cancels the request before its second step), leaves the pod with a deletionTimestamp, no
/// finalizers, and nobody to finish it. Both collectors skip such a pod, as being deleted
/// (upstream's `attemptToDeleteItem` returns at once for it); a second DELETE (grace period 0)
/// finishes it, as the pod GC's `gcUnscheduledTerminating` would.
async fn finish_crashed_pod_deletions(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let pods: Api<DynamicObject> = Api::namespaced_with(
        cx.client.clone(),
        &cx.ns,
        &kube::discovery::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    let list = loop {
        match pods.list_metadata(&ListParams::default()).await {
            Ok(list) => break list,
            Err(e) if Instant::now() < deadline => {
                eprintln!("    · listing pods to finish their deletions: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e).context("list pods to finish their deletions"),
        }
    };
    for p in list.items {
        let m = &p.metadata;
        let stuck =
            m.deletion_timestamp.is_some() && m.finalizers.as_ref().is_none_or(Vec::is_empty);
        if stuck {
            let name = m.name.clone().unwrap_or_default();
            eprintln!("    · pod {name} left terminating by the crash: finishing its deletion");
            let params = kube::api::DeleteParams::default().grace_period(0);
            match pods.delete(&name, &params).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e).with_context(|| format!("finish deleting pod {name}")),
            }
        }
    }
    Ok(())
}

/// `--early-collection`, kube-gc killed (`kill -9`) once it has started deleting during its
/// warm-up (held open by a [`Stall`]), and again as soon as the restarted process starts its
/// warm-up; then started again: as
/// [`early_collection_apiserver_kill_9_during_warm_up`].
pub async fn early_collection_kube_gc_kill_9_during_warm_up(
    cx: &mut Ctx<'_>,
) -> anyhow::Result<()> {
    with_stall(cx, "g", |cx, stall| {
        Box::pin(async move {
            let (want, warm) = early_garbage_and_control(cx, stall, "g").await?;
            let deleted = start_early_collection(cx).await?;
            cx.collector.kill9()?;
            eprintln!("    · kube-gc killed during warm-up, {deleted} deletions in");
            finish_crashed_pod_deletions(cx).await?;
            // The stall must hold the warm-up open for the whole scenario: past the initial sync
            // timeout, kube-gc would proceed with every decision.
            let mut flags = vec!["--early-collection", "--initial-sync-timeout=600s"];
            flags.extend(SLOW);
            cx.collector.spawn(&flags)?;
            let deadline = Instant::now() + Duration::from_secs(60);
            while !cx.collector.log_since_start().contains("early collection: collecting") {
                ensure!(
                    cx.collector.is_running(),
                    "kube-gc exited:\n{}",
                    cx.collector.log_tail(20)
                );
                ensure!(Instant::now() < deadline, "kube-gc did not start warming up in 60 s");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            cx.collector.kill9()?;
            eprintln!("    · kube-gc killed again as its warm-up started");
            finish_crashed_pod_deletions(cx).await?;
            cx.collector.spawn(&flags)?;
            finish_early_collection(cx, stall, want, warm).await
        })
    })
    .await
}
