//! Shadow mode (`--dry-run`) beside upstream's kube-controller-manager: kube-gc decides while
//! upstream's collector is stopped, and nothing happens (it writes nothing: the garbage stays,
//! its client made no request but GETs, and the API server's audit log holds no write by
//! its user agent); upstream's collector is started, deletes the garbage, and kube-gc's report
//! finds every deletion it would have made made, none it would not have, and nothing left.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use serde_json::Value;

use super::cluster::{Ctx, Del, Kind, OwnerRef, Wait, config_map, pod, rc};
use super::collector::{Collector, Which, http_get};
use super::env::TestEnv;

const RC: &str = "ReplicationController";

fn report(shadow: &Collector) -> anyhow::Result<Value> {
    let (code, body) = http_get(shadow.debug_port, "/debug/controllers/garbagecollector/shadow")?;
    ensure!(code == 200, "shadow report: {code} {body:.300}");
    serde_json::from_str(&body).context("shadow report is not JSON")
}

fn names(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["name"].as_str().map(str::to_owned))
        .collect()
}

/// Waits until `check` accepts kube-gc's report.
async fn report_until(
    shadow: &Collector,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = report(shadow)?;
        if check(&r) {
            return Ok(r);
        }
        if Instant::now() > deadline {
            bail!("{what}: the report never got there: {r}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// See the module docs. `cx.collector` is upstream's collector, running.
pub async fn shadow_mode_beside_upstream(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    ensure!(cx.collector.which == Which::Upstream, "runs beside upstream's collector");
    cx.collector.stop()?;
    let mut shadow = Collector::new(Which::KubeGc, &cx.collector.testenv());
    shadow.start(&["--dry-run"])?;
    let result = run(cx, &mut shadow).await;
    if result.is_err() {
        eprintln!("    last lines of the shadow's log:\n{}", shadow.log_tail(15));
    }
    shadow.stop()?;
    if !cx.collector.is_running() {
        cx.collector.start(&[])?;
    }
    result
}

/// The audit log's entries from byte `from` on (the testenv audits writes only).
fn audit_since(te: &TestEnv, from: usize) -> anyhow::Result<Vec<Value>> {
    let log = std::fs::read(te.dir.join("audit.log")).context("the audit log")?;
    let text = String::from_utf8_lossy(log.get(from..).unwrap_or_default()).into_owned();
    text.lines().map(|l| serde_json::from_str(l).context("an audit line is not JSON")).collect()
}

/// Where the audit log ends now.
pub fn audit_len(te: &TestEnv) -> usize {
    std::fs::metadata(te.dir.join("audit.log")).map_or(0, |m| m.len() as usize)
}

/// The audited writes of kube-gc's user agent.
fn by_kube_gc(audit: &[Value]) -> Vec<&Value> {
    audit
        .iter()
        .filter(|e| e["userAgent"].as_str().is_some_and(|a| a.starts_with("kube-gc/")))
        .collect()
}

/// An object as the shadow report keys it: (`plural.group`, namespace, name).
type Key = (String, String, String);

fn keys(v: &Value) -> BTreeSet<Key> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            let s = |f: &str| o[f].as_str().unwrap_or_default().to_owned();
            (s("resource"), s("namespace"), s("name"))
        })
        .collect()
}

/// The name of the scenario that runs kube-gc in shadow through all of upstream's runs.
pub const THROUGH_THE_SCENARIOS: &str = "shadow_mode_through_the_differential_scenarios";

/// Starts kube-gc in shadow beside upstream's collector, before its scenarios run.
pub fn start_beside(te: &TestEnv) -> anyhow::Result<Collector> {
    let mut shadow = Collector::new(Which::KubeGc, te);
    shadow.start(&["--dry-run"])?;
    Ok(shadow)
}

/// After upstream's scenarios ran with kube-gc in shadow beside it (audit log from byte
/// `audit_from`): kube-gc wrote nothing; every object upstream's collector deleted is one
/// kube-gc would have deleted, none of them one it would have kept; nothing it would have
/// deleted is left.
pub async fn check_through_the_scenarios(
    shadow: &Collector,
    te: &TestEnv,
    audit_from: usize,
) -> anyhow::Result<()> {
    let audit = audit_since(te, audit_from)?;
    let writes = by_kube_gc(&audit);
    ensure!(writes.is_empty(), "the API server audited writes by kube-gc --dry-run: {writes:?}");
    let upstream: BTreeSet<Key> = audit
        .iter()
        .filter(|e| e["verb"] == "delete")
        .filter(|e| {
            e["userAgent"].as_str().is_some_and(|a| a.ends_with("generic-garbage-collector"))
        })
        .map(|e| {
            let r = &e["objectRef"];
            let s = |f: &str| r[f].as_str().unwrap_or_default().to_owned();
            let group = s("apiGroup");
            let resource =
                if group.is_empty() { s("resource") } else { format!("{}.{group}", s("resource")) };
            (resource, s("namespace"), s("name"))
        })
        .collect();
    ensure!(!upstream.is_empty(), "the audit shows no deletion by upstream's collector");
    // What kube-gc saw die: upstream deletions of objects it never watched (a custom resource
    // created and collected before kube-gc's resync discovered its CRD) it cannot judge.
    let seen = |r: &Value| -> BTreeSet<Key> {
        let mut seen = keys(&r["seenDeleted"]);
        seen.extend(keys(&r["deletedAsPlanned"]));
        seen
    };
    let settled = report_until(shadow, "upstream's deletions all planned", |r| {
        let judged: BTreeSet<Key> = upstream.intersection(&seen(r)).cloned().collect();
        keys(&r["deletedAsPlanned"]).is_superset(&judged) && r["summary"]["notDeleted"] == 0
    })
    .await;
    let r = match settled {
        Ok(r) => r,
        Err(e) => {
            let r = report(shadow)?;
            let planned = keys(&r["deletedAsPlanned"]);
            let missing: Vec<&Key> = upstream.difference(&planned).collect();
            bail!("{e:#}\nupstream deleted, kube-gc had not planned: {missing:?}");
        }
    };
    let kept: Vec<Key> = keys(&r["deletedNotPlanned"]).intersection(&upstream).cloned().collect();
    ensure!(kept.is_empty(), "upstream deleted what kube-gc would have kept: {kept:?}");
    let seen_now = seen(&r);
    let unseen: Vec<&Key> = upstream.difference(&seen_now).collect();
    ensure!(
        unseen.len() * 10 <= upstream.len(),
        "kube-gc saw too few of upstream's deletions ({} of {} unseen): {unseen:?}",
        unseen.len(),
        upstream.len()
    );
    eprintln!(
        "    ✓ {} audited writes, none by kube-gc; upstream's collector deleted {} objects: every one kube-gc saw ({}) was in its plan ({} decided as their delete arrived), none it would keep; none of its plan left{}",
        audit.len(),
        upstream.len(),
        upstream.len() - unseen.len(),
        r["summary"]["decidedAtDeletion"],
        if unseen.is_empty() {
            String::new()
        } else {
            format!("; never seen by kube-gc: {unseen:?}")
        }
    );
    Ok(())
}

async fn run(cx: &mut Ctx<'_>, shadow: &mut Collector) -> anyhow::Result<()> {
    let audit_from = audit_len(&cx.collector.testenv());
    // An owner with three Pods, one of them also owned by a ConfigMap that stays, and a Pod
    // whose owner never existed.
    cx.create("app", Kind::rc(), rc(&[], &[])).await?;
    cx.create("keep", Kind::config_map(), config_map(&[], &[])).await?;
    let app = OwnerRef::new("v1", RC, &cx.obj("app").name, &cx.uid("app"));
    let keep = OwnerRef::new("v1", "ConfigMap", &cx.obj("keep").name, &cx.uid("keep"));
    for p in ["pod-0", "pod-1"] {
        cx.create(p, Kind::pod(), pod(std::slice::from_ref(&app), &[])).await?;
    }
    cx.create("shared", Kind::pod(), pod(&[app, keep], &[])).await?;
    let never = OwnerRef::new("v1", RC, "never", &cx.fake_uuid("never"));
    cx.create("dangling", Kind::pod(), pod(&[never], &[])).await?;
    cx.delete("app", Del::Background).await?;

    // kube-gc alone, in shadow: it decides, and nothing changes.
    let planned: BTreeSet<String> =
        ["pod-0", "pod-1", "dangling"].iter().map(|l| cx.obj(l).name.clone()).collect();
    let r =
        report_until(shadow, "every garbage Pod decided", |r| names(&r["notDeleted"]) == planned)
            .await?;
    ensure!(r["summary"]["deletedNotPlanned"] == 0, "{r}");
    let app_rc = format!("live owners=[{RC}/app]");
    let shared = format!("live owners=[{RC}/app,ConfigMap/keep]");
    let untouched = [
        ("app", "gone"),
        ("keep", "live"),
        ("pod-0", app_rc.as_str()),
        ("pod-1", app_rc.as_str()),
        ("shared", shared.as_str()),
        ("dangling", "live owners=[ReplicationController/?never]"),
    ];
    cx.expect("shadow decided, nothing written", &untouched, Wait::HOLD).await?;
    let writes = shadow.metrics_text()?;
    let sent_writes: Vec<&str> = writes
        .lines()
        .filter(|l| l.starts_with("rest_client_requests_total{") && !l.contains("method=\"GET\""))
        .collect();
    ensure!(sent_writes.is_empty(), "kube-gc sent requests other than GETs: {sent_writes:?}");
    // Its would-be deletions are counted as such, never as deletions.
    ensure!(
        writes.lines().any(|l| l.starts_with("kube_gc_dry_run_writes_total{verb=\"delete\"}")),
        "no would-be deletion counted"
    );
    let deletions: Vec<&str> =
        writes.lines().filter(|l| l.starts_with("kube_gc_deleted_total")).collect();
    ensure!(deletions.is_empty(), "shadow mode reports deletions: {deletions:?}");
    let audit = audit_since(&cx.collector.testenv(), audit_from)?;
    let app = cx.obj("app").name.clone();
    ensure!(
        audit.iter().any(|e| e["verb"] == "create" && e["objectRef"]["name"] == app.as_str()),
        "the audit log does not show the test's own writes ({} entries): is auditing on?",
        audit.len()
    );
    let writes = by_kube_gc(&audit);
    ensure!(writes.is_empty(), "the API server audited writes by kube-gc: {writes:?}");
    eprintln!(
        "    ✓ shadow decided {} deletions; it sent only GETs, and the audit ({} writes by others) has none of its",
        planned.len(),
        audit.len()
    );

    // Upstream's collector does the work; kube-gc's would-be deletions are what it did.
    cx.collector.start(&[])?;
    let done = [
        ("app", "gone"),
        ("keep", "live"),
        ("pod-0", "gone"),
        ("pod-1", "gone"),
        ("shared", "live owners=[ConfigMap/keep]"),
        ("dangling", "gone"),
    ];
    cx.expect("upstream collected", &done, Wait::DEFAULT).await?;
    let r = report_until(shadow, "upstream's deletions seen", |r| {
        names(&r["deletedAsPlanned"]) == planned
    })
    .await?;
    ensure!(r["summary"]["notDeleted"] == 0, "{r}");
    ensure!(
        r["summary"]["deletedNotPlanned"] == 0,
        "upstream deleted what kube-gc would keep: {r}"
    );
    eprintln!("    ✓ upstream deleted exactly the {} objects kube-gc would have", planned.len());
    Ok(())
}
