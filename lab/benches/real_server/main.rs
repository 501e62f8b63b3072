//! kube-gc and upstream's garbage collector, side by side on the same real kube-apiserver.
//!
//! ```sh
//! cargo bench -p kube-gc-lab --bench real_server -- --objects 100000
//! ```
//!
//! Starts `scripts/testenv` (kube-apiserver v1.20.2 + etcd on loopback; or reuses
//! `--testenv DIR`), loads WORKLOAD.md's objects as real objects through the API (Deployments,
//! ReplicaSets, Pods, ConfigMaps, and 1% Pods whose ReplicaSet never existed: the garbage), then
//! for each `--qps` rate and each collector, as its own process on a cluster in the same state:
//!
//! * **warm-up**: from process start to synced (kube-gc: `/readyz`; upstream: its "all resource
//!   monitors have synced" log line), and to the deletion of the first and of the last garbage
//!   Pod (a metadata watch on them);
//! * **cascade** (at the `--cascade-qps` rates): the collector synced, `--cascade` Deployments
//!   are deleted through the API with background propagation; the time until every one of
//!   their ReplicaSets and Pods is gone;
//! * API calls by verb (the server's `apiserver_request_total`, the benchmark's own calls left
//!   out), peak RSS of the collector's process (`VmHWM`), and a check that nothing else was
//!   deleted.
//!
//! Between runs the deleted objects are created again. The table goes to stdout; `--json`
//! writes the figures too. A benchmark, not a test: it asserts only that each run completes and
//! deletes exactly the garbage.

#[path = "../../../controller/tests/e2e/env.rs"]
#[allow(dead_code)]
mod env;

mod calls;
mod collector;
mod load;
mod track;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, ListParams, PartialObjectMeta};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use calls::{Calls, VERBS};
use collector::{Rate, Running, Which};
use load::{CASCADE_LABEL, Counts, GARBAGE_LABEL, Plan};
use track::Tracker;

#[derive(Parser, Debug)]
#[command(about = "kube-gc and upstream's garbage collector on the same real kube-apiserver")]
struct Args {
    /// WORKLOAD.md's N: objects loaded (1% of them garbage Pods).
    #[arg(long, default_value_t = 100_000)]
    objects: usize,
    /// Collectors to run, in order.
    #[arg(long, value_delimiter = ',', default_value = "kube-gc,upstream")]
    collectors: Vec<Which>,
    /// `--kube-api-qps:--kube-api-burst` of each warm-up run.
    #[arg(long, value_delimiter = ',', default_value = "20:30,1000:2000")]
    qps: Vec<Rate>,
    /// Deployments whose families the cascade benchmark deletes (0: no cascade).
    #[arg(long, default_value_t = 1000)]
    cascade: usize,
    /// The rates at which the cascade is measured too (after the warm-up of the same run).
    #[arg(long, value_delimiter = ',', default_value = "1000:2000")]
    cascade_qps: Vec<Rate>,
    /// Use (and keep) the testenv started in this directory instead of a fresh one.
    #[arg(long)]
    testenv: Option<PathBuf>,
    /// Bound of each wait, in seconds.
    #[arg(long, default_value_t = 1200)]
    timeout: u64,
    /// Also write the figures as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// An extra kube-gc flag (repeatable), e.g. `--kube-gc-arg=--early-collection`.
    #[arg(long = "kube-gc-arg", allow_hyphen_values = true)]
    kube_gc_args: Vec<String>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// CPU seconds spent from a collector's start to its sync, by process.
#[derive(Debug, Default, Clone, Copy, serde::Serialize)]
struct SyncCpu {
    collector: f64,
    apiserver: f64,
    etcd: f64,
}

/// How long the server is left alone before each collector starts.
const SETTLE: Duration = Duration::from_secs(5);

/// The control plane's processes, by their testenv pid files.
fn control_plane_cpu(testenv_dir: &std::path::Path) -> (f64, f64) {
    let cpu = |name: &str| {
        std::fs::read_to_string(testenv_dir.join(format!("{name}.pid")))
            .ok()
            .and_then(|pid| pid.trim().parse().ok())
            .and_then(kube_gc::metrics::process::cpu_seconds_of)
            .unwrap_or(0.0)
    };
    (cpu("kube-apiserver"), cpu("etcd"))
}

/// One collector's run at one rate.
#[derive(Debug, Default, serde::Serialize)]
struct Figures {
    collector: String,
    qps: u32,
    burst: u32,
    objects: usize,
    synced_s: f64,
    garbage_pods: usize,
    first_garbage_deleted_s: Option<f64>,
    all_garbage_deleted_s: f64,
    warm_up_calls: std::collections::BTreeMap<String, u64>,
    /// kube-gc's LISTs that proved owners absent (counted by the server among the LISTs).
    proof_lists: Option<u64>,
    peak_rss_bytes: u64,
    /// CPU seconds from the collector's start to its sync: the collector's own, kube-apiserver's
    /// and etcd's (what serving the collector's lists cost the control plane).
    sync_cpu_s: SyncCpu,
    cascade_deployments: usize,
    cascade_objects: usize,
    cascade_s: Option<f64>,
    cascade_calls: std::collections::BTreeMap<String, u64>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let scratch = std::env::temp_dir().join(format!("kube-gc-real-server-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let testenv = match &args.testenv {
        Some(dir) => env::TestEnv::adopt(&dir.canonicalize()?),
        None => env::TestEnv::start(&scratch.join("testenv"))?,
    };
    let client = testenv.client().await?;
    let plan = Plan::new(args.objects, args.cascade)?;
    eprintln!(
        "[bench] workload: {} objects ({} garbage Pods); cascade: {} Deployments ({} objects)",
        plan.objects(),
        plan.garbage_pods(),
        plan.cascade_families().0,
        plan.cascade_families().1,
    );
    load::load(&client, &plan).await?;

    let mut all = Vec::new();
    for &rate in &args.qps {
        for &which in &args.collectors {
            let cascade = args.cascade > 0 && args.cascade_qps.contains(&rate);
            let figures = one_run(&args, &client, &plan, which, rate, cascade, &testenv, &scratch)
                .await
                .with_context(|| format!("{which} at {rate}"))?;
            eprintln!("[bench] {}", serde_json::to_string(&figures)?);
            all.push(figures);
        }
    }
    print_table(&all, &plan);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&all)?)?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn one_run(
    args: &Args,
    client: &Client,
    plan: &Plan,
    which: Which,
    rate: Rate,
    cascade: bool,
    testenv: &env::TestEnv,
    scratch: &std::path::Path,
) -> anyhow::Result<Figures> {
    let kubeconfig = &testenv.kubeconfig;
    let timeout = Duration::from_secs(args.timeout);
    let restored = load::restore_garbage(client, plan).await?;
    if restored > 0 {
        eprintln!("[bench] {restored} garbage Pods created again");
    }
    let garbage = Tracker::start(Api::<PartialObjectMeta<Pod>>::all(client.clone()), GARBAGE_LABEL);
    wait_for(timeout, "the garbage watch", || garbage.present() == Some(plan.garbage_pods()))
        .await?;
    let counts_before = counts(client).await?;
    let before = Calls::scrape(client).await?;

    // Let the server settle after the restore (its CPU in the window below is the collector's
    // doing), and measure what it spends idle meanwhile.
    let (apiserver_idle, _) = control_plane_cpu(&testenv.dir);
    tokio::time::sleep(SETTLE).await;
    let (apiserver_before, etcd_before) = control_plane_cpu(&testenv.dir);
    let idle_rate = (apiserver_before - apiserver_idle) / SETTLE.as_secs_f64();
    eprintln!(
        "[bench] {which} at qps/burst {rate}: starting (kube-apiserver idle at {idle_rate:.2} CPU s/s)"
    );
    let mut running = Running::spawn(which, kubeconfig, rate, scratch, &args.kube_gc_args)?;
    let started = running.started;
    let deadline = Instant::now() + timeout;
    while !running.synced()? {
        if Instant::now() > deadline {
            bail!("{which} did not sync within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let synced_s = started.elapsed().as_secs_f64();
    let (apiserver_after, etcd_after) = control_plane_cpu(&testenv.dir);
    let sync_cpu_s = SyncCpu {
        collector: running.cpu_seconds().unwrap_or(0.0),
        apiserver: apiserver_after - apiserver_before,
        etcd: etcd_after - etcd_before,
    };
    eprintln!("[bench] {which}: synced after {synced_s:.2} s ({sync_cpu_s:?} CPU s)");
    wait_for(timeout, "the garbage Pods to be deleted", || garbage.present() == Some(0)).await?;
    let (first, last) = garbage.deletions();
    garbage.stop();
    let secs = |t: Option<Instant>| t.map(|t| t.duration_since(started).as_secs_f64());
    let all_garbage_deleted_s = secs(last).unwrap_or(0.0);
    eprintln!("[bench] {which}: all garbage deleted after {all_garbage_deleted_s:.2} s");
    let warm_up_calls = Calls::scrape(client).await?.since(&before);
    let proof_lists = running.proof_lists();

    let expected = Counts { pods: counts_before.pods - plan.garbage_pods(), ..counts_before };
    let after = counts(client).await?;
    if after != expected {
        bail!("{which} deleted something else: expected {expected:?}, found {after:?}");
    }

    let mut figures = Figures {
        collector: which.to_string(),
        qps: rate.qps,
        burst: rate.burst,
        objects: plan.objects(),
        synced_s,
        garbage_pods: plan.garbage_pods(),
        first_garbage_deleted_s: secs(first),
        all_garbage_deleted_s,
        warm_up_calls: warm_up_calls.0,
        proof_lists,
        sync_cpu_s,
        ..Figures::default()
    };
    if cascade {
        run_cascade(client, plan, which, timeout, &mut figures).await?;
    }
    figures.peak_rss_bytes = running.peak_rss().unwrap_or(0);
    running.stop();
    if cascade {
        load::restore_cascade(client, plan).await?;
    }
    Ok(figures)
}

/// Deletes the cascade Deployments (background propagation) and waits for their ReplicaSets
/// and Pods to go.
async fn run_cascade(
    client: &Client,
    plan: &Plan,
    which: Which,
    timeout: Duration,
    figures: &mut Figures,
) -> anyhow::Result<()> {
    let (deployments, objects) = plan.cascade_families();
    let pods = Tracker::start(Api::<PartialObjectMeta<Pod>>::all(client.clone()), CASCADE_LABEL);
    let replica_sets =
        Tracker::start(Api::<PartialObjectMeta<ReplicaSet>>::all(client.clone()), CASCADE_LABEL);
    let present = || Some(pods.present()? + replica_sets.present()?);
    wait_for(timeout, "the cascade watch", || present() == Some(objects)).await?;
    let counts_before = counts(client).await?;
    let before = Calls::scrape(client).await?;
    let t0 = Instant::now();
    let params = DeleteParams::background();
    stream::iter(plan.cascade_deployments())
        .map(|(ns, name)| {
            let api: Api<Deployment> = Api::namespaced(client.clone(), &ns);
            let params = params.clone();
            async move { api.delete(&name, &params).await.map(drop) }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await?;
    wait_for(timeout, "the cascade", || present() == Some(0)).await?;
    let last = [pods.deletions().1, replica_sets.deletions().1].into_iter().flatten().max();
    pods.stop();
    replica_sets.stop();
    let mut calls = Calls::scrape(client).await?.since(&before);
    calls.subtract("DELETE", deployments as u64);
    let seconds = last.map_or(0.0, |t| t.duration_since(t0).as_secs_f64());
    eprintln!("[bench] {which}: cascade of {deployments} Deployments done in {seconds:.2} s");
    let expected = Counts {
        deployments: counts_before.deployments - deployments,
        replica_sets: counts_before.replica_sets - deployments,
        pods: counts_before.pods - (objects - deployments),
        ..counts_before
    };
    let after = counts(client).await?;
    if after != expected {
        bail!("{which}'s cascade deleted something else: expected {expected:?}, found {after:?}");
    }
    figures.cascade_deployments = deployments;
    figures.cascade_objects = objects;
    figures.cascade_s = Some(seconds);
    figures.cascade_calls = calls.0;
    Ok(())
}

/// Objects of the workload's kinds in the cluster (metadata lists).
async fn counts(client: &Client) -> anyhow::Result<Counts> {
    async fn count<K>(client: &Client) -> anyhow::Result<usize>
    where
        K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
        K::DynamicType: Default,
    {
        Ok(Api::<K>::all(client.clone()).list_metadata(&ListParams::default()).await?.items.len())
    }
    Ok(Counts {
        deployments: count::<Deployment>(client).await?,
        replica_sets: count::<ReplicaSet>(client).await?,
        pods: count::<Pod>(client).await?,
        config_maps: count::<ConfigMap>(client).await?,
    })
}

async fn wait_for(
    timeout: Duration,
    what: &str,
    mut done: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

fn print_table(all: &[Figures], plan: &Plan) {
    println!(
        "\n{} objects, {} garbage Pods (their ReplicaSets never existed); times from process start",
        plan.objects(),
        plan.garbage_pods()
    );
    print!(
        "{:<16} {:>9} {:>8} {:>10} {:>10}",
        "collector", "qps/burst", "synced", "1st garb.", "all garb."
    );
    for v in VERBS {
        print!(" {:>7}", v.to_lowercase());
    }
    println!(" {:>8} {:>6} {:>9} {:>8}", "calls", "/garb.", "peak RSS", "B/object");
    for f in all {
        let calls = Calls(f.warm_up_calls.clone());
        // The collector's calls per garbage Pod: reads and writes, and kube-gc's proof LISTs
        // (the watchers' LISTs, kube-gc's and upstream's informers', not counted).
        let collecting = calls.total() - calls.get("LIST") + f.proof_lists.unwrap_or(0);
        print!(
            "{:<16} {:>9} {:>7.2}s {:>9.2}s {:>9.2}s",
            f.collector,
            format!("{}/{}", f.qps, f.burst),
            f.synced_s,
            f.first_garbage_deleted_s.unwrap_or(0.0),
            f.all_garbage_deleted_s
        );
        for v in VERBS {
            print!(" {:>7}", calls.get(v));
        }
        println!(
            " {:>8} {:>6.2} {:>7}Mi {:>8}",
            calls.total(),
            collecting as f64 / f.garbage_pods.max(1) as f64,
            f.peak_rss_bytes >> 20,
            f.peak_rss_bytes / f.objects.max(1) as u64
        );
    }
    for f in all {
        let c = f.sync_cpu_s;
        println!(
            "{} at {}/{}: CPU from start to synced: collector {:.2} s, kube-apiserver {:.2} s, etcd {:.2} s",
            f.collector, f.qps, f.burst, c.collector, c.apiserver, c.etcd
        );
    }
    for f in all.iter().filter(|f| f.proof_lists.is_some()) {
        println!(
            "{}: {} of the LISTs proved owners absent",
            f.collector,
            f.proof_lists.unwrap_or(0)
        );
    }
    // kube-controller-manager >= 1.23 runs its collector at twice --kube-api-qps: the least
    // time upstream's measured reads and writes would take there, after its sync.
    for f in all.iter().filter(|f| f.collector == "upstream") {
        let calls = Calls(f.warm_up_calls.clone());
        let collecting = (calls.total() - calls.get("LIST")) as f64;
        let floor =
            f.synced_s + (collecting - f64::from(f.burst)).max(0.0) / (2.0 * f64::from(f.qps));
        println!(
            "upstream >= 1.23 at {}/{} (its {} reads and writes at {}/s): all garbage >= {:.1} s",
            f.qps,
            f.burst,
            collecting,
            2 * f.qps,
            floor
        );
    }
    let cascades: Vec<_> = all.iter().filter(|f| f.cascade_s.is_some()).collect();
    if let Some(first) = cascades.first() {
        println!(
            "\ncascade: {} Deployments deleted (background), {} ReplicaSets + Pods to collect",
            first.cascade_deployments, first.cascade_objects
        );
        print!("{:<9} {:>9} {:>9}", "collector", "qps/burst", "seconds");
        for v in VERBS {
            print!(" {:>7}", v.to_lowercase());
        }
        println!(" {:>8}", "calls");
        for f in cascades {
            let calls = Calls(f.cascade_calls.clone());
            print!(
                "{:<9} {:>9} {:>8.2}s",
                f.collector,
                format!("{}/{}", f.qps, f.burst),
                f.cascade_s.unwrap_or(0.0)
            );
            for v in VERBS {
                print!(" {:>7}", calls.get(v));
            }
            println!(" {:>8}", calls.total());
        }
    }
}
