//! `/metrics` as Prometheus reads it: kube-gc on simcluster collects garbage on a tight API
//! budget, and its exposition is parsed by the OpenMetrics parser of Prometheus's Python
//! client (`prometheus_client.openmetrics.parser`, strict about types, suffixes and the
//! closing `# EOF`). Every upstream family must be there with upstream's labels, and the
//! client-side rate limiter's histogram must move when the budget binds.
//!
//! Python is `$KUBE_GC_PYTHON` (scripts/install-test-clients installs the parser there) or a
//! `python3` on `PATH` that has it; without either the test prints `SKIPPED …` and passes.

#[path = "../../simcluster/tests/common/clients.rs"]
mod clients;
#[path = "../../simcluster/tests/common/mod.rs"]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use common::{client, eventually, start};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use kube_gc_lab::InProcess;
use kube_gc_lab::in_process::TempFile;
use kube_gc_simcluster::SimCluster;
use serde_json::{Value, json};

const PARSE: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
families = {}
for f in text_string_to_metric_families(open(sys.argv[1]).read()):
    families[f.name] = {"type": f.type, "samples": [[s.name, s.labels, s.value] for s in f.samples]}
print(json.dumps(families))
"#;

fn python() -> Option<PathBuf> {
    let python = clients::find("KUBE_GC_PYTHON", &["python3"])?;
    let has_parser = clients::run(
        Command::new(&python).args(["-c", "import prometheus_client.openmetrics.parser"]),
    );
    has_parser.status.success().then_some(python)
}

/// The families of `text`, as the parser reads them: name → (type, samples).
fn parse(python: &PathBuf, text: &str) -> BTreeMap<String, Value> {
    let dir = clients::TempDir::new("metrics");
    let file = dir.write("metrics.txt", text);
    let out = clients::run(Command::new(python).args(["-c", PARSE]).arg(&file));
    assert!(
        out.status.success(),
        "the OpenMetrics parser refused the exposition: {}\n{text}",
        out.stderr
    );
    serde_json::from_str(&out.stdout).expect("the parser's JSON")
}

/// The label names of `family`'s samples named `sample`.
fn label_names(families: &BTreeMap<String, Value>, family: &str, sample: &str) -> BTreeSet<String> {
    let f = families.get(family).unwrap_or_else(|| panic!("no family {family}"));
    f["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s[0] == sample)
        .flat_map(|s| s[1].as_object().unwrap().keys().cloned())
        .collect()
}

/// The summed values of `sample`'s series whose labels include `labels` (0 without any: a
/// family with no series yet is not in the parser's answer).
fn value(
    families: &BTreeMap<String, Value>,
    family: &str,
    sample: &str,
    labels: &[(&str, &str)],
) -> f64 {
    let Some(f) = families.get(family) else { return 0.0 };
    f["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s[0] == sample && labels.iter().all(|(k, v)| s[1][*k] == *v))
        .map(|s| s[2].as_f64().unwrap())
        .sum()
}

/// kube-gc's command line against `sim` (and the kubeconfig file it names, removed when
/// dropped), on a budget that binds: 2 calls/s (twice --kube-api-qps) with a burst of 1.
fn on_a_budget_that_binds(sim: &SimCluster, tag: &str) -> (TempFile, Vec<String>) {
    let path = std::env::temp_dir().join(format!(
        "kube-gc-metrics-{tag}-{}-{}.kubeconfig",
        std::process::id(),
        sim.addr().port()
    ));
    let kubeconfig = TempFile::write(path, &sim.kubeconfig()).unwrap();
    let mut args = InProcess::simcluster_args(&kubeconfig.0);
    for (flag, value) in [("--kube-api-qps", "1"), ("--kube-api-burst", "1")] {
        let at = args.iter().position(|a| a == flag).expect("the flag is set") + 1;
        args[at] = value.to_owned();
    }
    (kubeconfig, args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_with_upstreams_families_and_the_rate_limiter_moves() {
    let Some(python) = python() else {
        clients::skip(
            "metrics_parse_with_upstreams_families_and_the_rate_limiter_moves",
            "a python3 with prometheus_client",
            "KUBE_GC_PYTHON",
        );
        return;
    };
    let sim = start().await;
    let c = client(&sim).await;
    let (_kubeconfig, args) = on_a_budget_that_binds(&sim, "parse");
    let gc = InProcess::start(args).await.unwrap();
    let registry = gc.debug().registry.clone();
    let scrape = || parse(&python, &kube_gc::metrics::encode(&registry));

    eventually("kube-gc synced", || async {
        gc.debug().ready.load(std::sync::atomic::Ordering::Acquire)
    })
    .await;
    let before = scrape();
    let waited_before = value(
        &before,
        "rest_client_rate_limiter_duration_seconds",
        "rest_client_rate_limiter_duration_seconds_sum",
        &[],
    );

    // Six Pods whose owner never existed: a verification and a delete each.
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    for i in 0..6 {
        let pod: Pod = serde_json::from_value(
            json!({"metadata": {"name": format!("garbage-{i}"), "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "never",
                "uid": format!("00000000-0000-4000-8000-00000000000{i}")
            }]}}),
        )
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    eventually("the garbage collected", || async {
        pods.list(&ListParams::default()).await.is_ok_and(|l| l.items.is_empty())
    })
    .await;
    let after = scrape();
    gc.stop().await;

    // client-go's workqueue families, for both of the collector's queues.
    for (family, sample, kind) in [
        ("workqueue_depth", "workqueue_depth", "gauge"),
        ("workqueue_adds", "workqueue_adds_total", "counter"),
        ("workqueue_retries", "workqueue_retries_total", "counter"),
        (
            "workqueue_queue_duration_seconds",
            "workqueue_queue_duration_seconds_bucket",
            "histogram",
        ),
        ("workqueue_work_duration_seconds", "workqueue_work_duration_seconds_bucket", "histogram"),
        ("workqueue_unfinished_work_seconds", "workqueue_unfinished_work_seconds", "gauge"),
        (
            "workqueue_longest_running_processor_seconds",
            "workqueue_longest_running_processor_seconds",
            "gauge",
        ),
    ] {
        assert_eq!(after[family]["type"], kind, "{family}");
        let mut want = BTreeSet::from(["name".to_owned()]);
        if kind == "histogram" {
            want.insert("le".to_owned());
        }
        assert_eq!(label_names(&after, family, sample), want, "{family}'s labels");
        for queue in ["garbage_collector_attempt_to_delete", "garbage_collector_attempt_to_orphan"]
        {
            let series = after[family]["samples"].as_array().unwrap();
            assert!(series.iter().any(|s| s[1]["name"] == queue), "{family} has no {queue}");
        }
    }
    let delete_queue = [("name", "garbage_collector_attempt_to_delete")];
    let taken = value(
        &after,
        "workqueue_queue_duration_seconds",
        "workqueue_queue_duration_seconds_count",
        &delete_queue,
    );
    let worked = value(
        &after,
        "workqueue_work_duration_seconds",
        "workqueue_work_duration_seconds_count",
        &delete_queue,
    );
    assert!(
        taken >= 6.0 && worked >= 6.0,
        "each garbage Pod waited and was worked on: {taken} {worked}"
    );

    // client-go's REST client families.
    assert_eq!(after["rest_client_requests"]["type"], "counter");
    assert_eq!(
        label_names(&after, "rest_client_requests", "rest_client_requests_total"),
        BTreeSet::from(["code", "host", "method"].map(str::to_owned))
    );
    assert!(
        value(
            &after,
            "rest_client_requests",
            "rest_client_requests_total",
            &[("code", "200"), ("method", "DELETE")]
        ) >= 6.0
    );
    for family in
        ["rest_client_request_duration_seconds", "rest_client_rate_limiter_duration_seconds"]
    {
        assert_eq!(after[family]["type"], "histogram", "{family}");
        assert_eq!(
            label_names(&after, family, &format!("{family}_bucket")),
            BTreeSet::from(["host", "le", "verb"].map(str::to_owned)),
            "{family}'s labels"
        );
    }
    // Twelve calls or more at 2/s with a burst of 1: several seconds of waiting, all of it
    // after the first scrape.
    let waited = value(
        &after,
        "rest_client_rate_limiter_duration_seconds",
        "rest_client_rate_limiter_duration_seconds_sum",
        &[],
    ) - waited_before;
    assert!(waited >= 2.0, "the rate limiter's histogram moved by {waited} s only");

    // The process, upstream's own counter, and kube-gc's.
    for (family, kind) in [
        ("process_cpu_seconds", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_virtual_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_max_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
        ("garbagecollector_controller_resources_sync_error", "counter"),
        ("kube_gc_api_calls", "counter"),
        ("kube_gc_deleted", "counter"),
        ("kube_gc_first_deletion_seconds", "gauge"),
    ] {
        assert_eq!(after.get(family).map(|f| &f["type"]), Some(&json!(kind)), "{family}");
    }
    assert!(
        value(&after, "process_resident_memory_bytes", "process_resident_memory_bytes", &[]) > 1e6
    );
    assert_eq!(value(&after, "kube_gc_deleted", "kube_gc_deleted_total", &[]), 6.0);
    // The interned sets against their caps (the defaults): the Pods' and ConfigMaps' types
    // among the held type strings, each set below its cap.
    for set in ["non_uuid_uids", "owner_type_strings", "owner_type_pairs"] {
        let held = value(&after, "kube_gc_interned", "kube_gc_interned", &[("set", set)]);
        let cap =
            value(&after, "kube_gc_interned_limit", "kube_gc_interned_limit", &[("set", set)]);
        assert!(held < cap, "{set}: {held} held, cap {cap}");
    }
    let types = [("set", "owner_type_strings")];
    assert!(value(&after, "kube_gc_interned", "kube_gc_interned", &types) >= 3.0);
    assert_eq!(value(&after, "kube_gc_interned_limit", "kube_gc_interned_limit", &types), 16384.0);
    assert_eq!(
        label_names(&after, "kube_gc_api_calls", "kube_gc_api_calls_total"),
        BTreeSet::from(["purpose", "verb"].map(str::to_owned))
    );
}

/// Every metric the README names (its "Metrics" list, its alerts, the flags and the figures)
/// is one kube-gc exposes: a renamed or removed family would silently break a dashboard or an
/// alert written from the README. Some families have series only once something happened (a
/// deletion, a wait for the budget, a write withheld by `--dry-run`), so each run here collects
/// a garbage Pod, on a budget that binds, once for real and once in dry-run mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_readme_names_is_exposed() {
    let readme = include_str!("../../README.md");
    let prefixes = ["kube_gc_", "workqueue_", "rest_client_", "leader_election_"];
    let mut named = BTreeSet::new();
    for (at, _) in readme.match_indices(|c: char| c.is_ascii_lowercase()) {
        let rest = &readme[at..];
        let starts_a_word = at == 0 || !readme.as_bytes()[at - 1].is_ascii_alphanumeric();
        if !starts_a_word || !prefixes.iter().any(|p| rest.starts_with(p)) {
            continue;
        }
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(0);
        let name = &rest[..end];
        // `kube_gc_ingest_*` and the like name a group, not one family.
        if !name.ends_with('_') {
            named.insert(name.to_owned());
        }
    }
    assert!(named.len() > 20, "the README's metric names were not found: {named:?}");

    let sim = start().await;
    let c = client(&sim).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), "default");
    let mut exposed = BTreeSet::new();
    for (run, dry_run) in [(0, false), (1, true)] {
        let (_kubeconfig, mut args) = on_a_budget_that_binds(&sim, &format!("readme-{run}"));
        if dry_run {
            args.extend(["--dry-run", "--leader-elect=false"].map(str::to_owned));
        }
        let gc = InProcess::start(args).await.unwrap();
        let name = format!("garbage-{run}");
        let pod: Pod =
            serde_json::from_value(json!({"metadata": {"name": name, "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "never",
                "uid": format!("00000000-0000-4000-8000-00000000010{run}")
            }]}}))
            .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let registry = gc.debug().registry.clone();
        let done =
            if dry_run { "kube_gc_dry_run_writes_total{" } else { "kube_gc_deleted_total 1" };
        eventually("the garbage Pod collected (or its delete withheld)", || async {
            kube_gc::metrics::encode(&registry).contains(done)
        })
        .await;
        let text = kube_gc::metrics::encode(&registry);
        gc.stop().await;
        for line in text.lines() {
            if let Some(family) = line.strip_prefix("# TYPE ").and_then(|l| l.split(' ').next()) {
                exposed.insert(family.to_owned());
            }
        }
    }
    // A sample's name is its family's, with the suffix of its type.
    let family = |name: &str| {
        let suffixes = ["_total", "_bucket", "_sum", "_count"];
        (suffixes.iter()).find_map(|s| name.strip_suffix(s)).unwrap_or(name).to_owned()
    };
    // Set by the binary's leader election, which in-process runs leave out; the e2e suite's
    // leader-election test reads it from the binary (controller/tests/e2e/leader.rs).
    exposed.insert("leader_election_master_status".to_owned());
    let missing: Vec<&String> =
        named.iter().filter(|n| !exposed.contains(*n) && !exposed.contains(&family(n))).collect();
    assert!(missing.is_empty(), "the README names metrics kube-gc does not expose: {missing:?}");
}
