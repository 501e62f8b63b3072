//! The demo (`kube-gc-lab demo`): kube-gc warming up on a simcluster of a million objects,
//! then collecting garbage and honouring each propagation policy, measured and checked.
//!
//! 1. **preload** WORKLOAD.md's objects (shape `deploy-rs-pods`) straight into a [`Store`];
//! 2. serve it over HTTP on a free loopback port and start [`kube_gc::Controller`] in-process on
//!    a kube-rs client built from its kubeconfig, with flags parsed by kube-gc's own parser (so
//!    every default is the real binary's, except where the demo says otherwise);
//! 3. **warm-up**: progress per resource (list pages received), events ingested per second,
//!    graph nodes, until kube-gc is ready; then time to synced, graph nodes, RSS;
//! 4. **garbage**: the 1% of Pods whose ReplicaSet never existed (WORKLOAD.md's V) are
//!    collected; time until every one is gone from the store, and nothing else is;
//! 5. **background / foreground / orphan**: sample Deployments deleted through the API with each
//!    propagation policy, as a user would, each waited for until its expected final state;
//! 6. a summary table, with a verdict per phase.
//!
//! Every wait is bounded by `--timeout`. [`run`] returns the [`Report`]; the binary prints
//! [`Report::table`] and exits non-zero unless [`Report::ok`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser as _;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams};
use kube_gc::kube_cluster::ApiCallCounts;
use kube_gc::{Controller, Flags};
use serde::Deserialize;

use kube_gc_simcluster::preload::{Preload, Shape, preload};
use kube_gc_simcluster::store::{ListOptions, Resolved, StoredObject};
use kube_gc_simcluster::{Config, SimCluster, Store};

/// The demo's `--kube-api-qps` default. kube-gc's own is 20 (kube-controller-manager's, the
/// collector running at twice that): at 40 requests per second the 10,000 garbage Pods of a
/// 1M-object cluster (a DELETE each, and the proof LISTs) take over 4 minutes, which measures
/// the rate limiter, not the collector.
pub const DEMO_KUBE_API_QPS: f64 = 1000.0;
/// The demo's `--kube-api-burst` default (kube-gc's own: 30).
pub const DEMO_KUBE_API_BURST: u32 = 1000;

/// The page size of kube-gc's watchers' initial lists (client-go's informer default).
const LIST_PAGE: u64 = 500;

/// `kube-gc-lab demo`: preload a simcluster, run kube-gc against it over HTTP, watch it
/// warm up, collect garbage and honour each propagation policy; print a summary table.
#[derive(clap::Args, Debug, Clone)]
pub struct DemoArgs {
    /// Objects to preload (WORKLOAD.md's N).
    #[arg(long, default_value_t = 1_000_000)]
    pub objects: usize,
    /// Shape of the preloaded objects (WORKLOAD.md).
    #[arg(long, default_value = "deploy-rs-pods")]
    pub shape: String,
    /// WORKLOAD.md's seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// WORKLOAD.md's namespace count.
    #[arg(long, default_value_t = 1000)]
    pub namespaces: usize,
    /// Sample Deployments deleted with each propagation policy (background, foreground,
    /// orphan).
    #[arg(long, default_value_t = 3)]
    pub samples: usize,
    /// kube-gc's `--concurrent-gc-syncs` [default: kube-gc's, 20].
    #[arg(long)]
    pub concurrent_gc_syncs: Option<u32>,
    /// kube-gc's `--kube-api-qps` (kube-gc's own default is 20).
    #[arg(long, default_value_t = DEMO_KUBE_API_QPS)]
    pub kube_api_qps: f64,
    /// kube-gc's `--kube-api-burst` (kube-gc's own default is 30).
    #[arg(long, default_value_t = DEMO_KUBE_API_BURST)]
    pub kube_api_burst: u32,
    /// kube-gc's `--shards` [default: kube-gc's, 64].
    #[arg(long)]
    pub shards: Option<usize>,
    /// kube-gc's `--batch-size` [default: kube-gc's, 4096].
    #[arg(long)]
    pub batch_size: Option<u32>,
    /// Bound of each wait (warm-up, garbage, each policy), in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Further kube-gc flags, after `--` (e.g. `-- --bulk-absence-proof=false`).
    #[arg(last = true)]
    pub kube_gc_args: Vec<String>,
}

impl DemoArgs {
    /// The demo's defaults for `objects` objects (what `demo --objects N` gives).
    pub fn new(objects: usize) -> DemoArgs {
        let objects = objects.to_string();
        #[derive(clap::Parser)]
        struct Wrap {
            #[command(flatten)]
            args: DemoArgs,
        }
        Wrap::parse_from(["demo", "--objects", objects.as_str()]).args
    }

    /// kube-gc's argv for these options (`--debug-addr` on a free port; the initial sync
    /// timeout is the demo's `--timeout`, so that "ready" means "synced").
    pub fn kube_gc_argv(&self) -> Vec<String> {
        let mut argv: Vec<String> = vec![
            "kube-gc".into(),
            "--debug-addr=127.0.0.1:0".into(),
            "--secure-port=0".into(),
            // At least a second: kube-gc refuses zero (`--timeout 0`).
            format!("--initial-sync-timeout={}s", self.timeout.max(1)),
            format!("--kube-api-qps={}", self.kube_api_qps),
            format!("--kube-api-burst={}", self.kube_api_burst),
        ];
        if let Some(n) = self.concurrent_gc_syncs {
            argv.push(format!("--concurrent-gc-syncs={n}"));
        }
        if let Some(n) = self.shards {
            argv.push(format!("--shards={n}"));
        }
        if let Some(n) = self.batch_size {
            argv.push(format!("--batch-size={n}"));
        }
        argv.extend(self.kube_gc_args.iter().cloned());
        argv
    }
}

/// Where the demo's progress goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Progress bars on a terminal's stderr; periodic lines on stderr otherwise.
    Stderr,
    /// Nothing (tests).
    Hidden,
}

mod garbage;
mod objects;
mod policies;
mod report;
mod ui;
mod warm_up;

use garbage::collect_garbage;
use objects::*;
use policies::*;
pub use report::{Calls, Phase, Report, WarmUp};
use report::{reset_peak_rss, rss, thousands};
use ui::*;
use warm_up::warm_up;

/// Runs the demo; see the [module documentation](self).
pub async fn run(args: &DemoArgs, progress: Progress) -> anyhow::Result<Report> {
    let shape: Shape = args.shape.parse()?;
    let timeout = Duration::from_secs(args.timeout.max(1));
    let mut report = Report { kube_gc_argv: args.kube_gc_argv(), ..Report::default() };
    let flags = Flags::try_parse_from(&report.kube_gc_argv)?;
    flags.validate().map_err(|e| anyhow::anyhow!("kube-gc flags: {e}"))?;
    let families = args.objects * 79 / 1000;
    anyhow::ensure!(
        args.samples * Policy::ALL.len() <= families,
        "--samples {} needs {} Deployments; {} objects have {families}",
        args.samples,
        args.samples * Policy::ALL.len(),
        args.objects
    );

    let demo = Demo { args, ui: Ui::new(progress), timeout };
    let (preloaded, config) = preload_store(&demo, shape, &mut report).await?;
    let gc = start_kube_gc(&demo, &preloaded, config, flags, &report).await?;
    let Some(synced) = warm_up(&demo, &preloaded, &gc, &mut report).await else {
        report.collector_deleted = gc.collector.stats().deleted.load(Ordering::Relaxed);
        gc.stop().await;
        return Ok(report);
    };
    collect_garbage(&demo, &preloaded, &gc, synced, &mut report).await;
    delete_samples(&demo, families, &preloaded, &gc, &mut report).await?;
    report.collector_deleted = gc.collector.stats().deleted.load(Ordering::Relaxed);
    gc.stop().await;
    Ok(report)
}

/// What every phase reads: the arguments, the progress display, the bound of every wait.
struct Demo<'a> {
    args: &'a DemoArgs,
    ui: Ui,
    timeout: Duration,
}

/// What the preload left: the store, and what the later phases check against.
struct Preloaded {
    store: Arc<Store>,
    res: Res,
    /// The Pods whose ReplicaSet never existed, `(namespace, name)`.
    garbage: Vec<(String, String)>,
    /// Objects per resource before kube-gc started.
    before: BTreeMap<String, u64>,
}

/// When kube-gc turned ready, and its calls until then.
#[derive(Clone, Copy, Debug)]
struct Synced {
    at: Instant,
    calls: Calls,
}

/// Phase 1: Preloads WORKLOAD.md's objects straight into a store.
async fn preload_store(
    demo: &Demo<'_>,
    shape: Shape,
    report: &mut Report,
) -> anyhow::Result<(Preloaded, Config)> {
    let (args, ui) = (demo.args, &demo.ui);
    let config = Config::default();
    let store = Arc::new(Store::new(config.store.clone(), config.resources.clone()));
    let ns = store.resolve("", "v1", "namespaces")?;
    for name in &config.namespaces {
        store.create(&ns, None, serde_json::json!({"metadata": {"name": name}}))?;
    }
    ui.say(format!(
        "kube-gc demo: {} objects ({}, seed {}, {} namespaces); sample Deployments per policy: {}",
        thousands(args.objects as u64),
        args.shape,
        args.seed,
        args.namespaces,
        args.samples
    ));
    let spinner = ui.bar(0, "preloading simcluster", SPINNER);
    spinner.enable_steady_tick(Duration::from_millis(100));
    let started = Instant::now();
    let p = Preload {
        shape,
        seed: args.seed,
        namespaces: args.namespaces,
        ..Preload::new(args.objects)
    };
    let (preloaded, garbage, res) = {
        let store = store.clone();
        tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
            let out = preload(&store, &p)?;
            let res = Res::new(&store)?;
            let garbage = garbage_pods(&store, &res)?;
            Ok((out, garbage, res))
        })
        .await??
    };
    let preload_seconds = started.elapsed().as_secs_f64();
    spinner.finish_and_clear();
    let expected_garbage = args.objects as u64 / 100;
    report.phases.push(Phase {
        name: "preload",
        objects: args.objects as u64,
        seconds: preload_seconds,
        calls: None,
        verdict: if garbage.len() as u64 == expected_garbage {
            Ok(())
        } else {
            Err(format!(
                "{} Pods without their ReplicaSet, WORKLOAD.md says {expected_garbage}",
                garbage.len()
            ))
        },
    });
    let before = counts(&store)?;
    report.listed = store.len() as u64;
    reset_peak_rss();
    let (rss_before, _) = rss();
    report.warm_up.rss_before = rss_before;
    ui.say(format!(
        "preloaded {} objects in {preload_seconds:.2} s ({:.0} MiB of JSON); RSS {:.0} MiB",
        thousands(report.listed),
        preloaded.json_bytes as f64 / 1048576.0,
        rss_before as f64 / 1048576.0
    ));

    Ok((Preloaded { store, res, garbage, before }, config))
}

/// Phase 2: Serves the store over HTTP and starts kube-gc in this process against it.
async fn start_kube_gc(
    demo: &Demo<'_>,
    preloaded: &Preloaded,
    config: Config,
    flags: Flags,
    report: &Report,
) -> anyhow::Result<Running> {
    let (ui, store) = (&demo.ui, &preloaded.store);
    let sim =
        SimCluster::serve(Config { listen: ([127, 0, 0, 1], 0).into(), ..config }, store.clone())
            .await?;
    let pages = Arc::new(ListPages::default());
    let gc_client = client(&sim, Some(pages.clone())).await?;
    let user = client(&sim, None).await?;
    ui.say(format!(
        "simcluster serving {}; kube-gc {}",
        sim.url(),
        report.kube_gc_argv[1..].join(" ")
    ));
    let started = Instant::now();
    let batch_size = flags.batch_size as u64;
    let controller = Controller::start(flags, gc_client).await?;
    let graph = controller.graph.clone();
    let collector = controller.collector.clone();
    let ready = controller.ready.clone();
    let metrics = controller.metrics.clone();
    let calls = controller.cluster.calls.clone();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let gc_task = tokio::spawn(controller.run(async move {
        let _ = stop_rx.await;
    }));

    Ok(Running {
        stop: stop_tx,
        task: gc_task,
        sim,
        user,
        pages,
        graph,
        collector,
        ready,
        metrics,
        calls,
        batch_size,
        started,
    })
}

/// kube-gc and simcluster, running, and the handles the phases watch kube-gc through.
struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    sim: SimCluster,
    /// A client as a user (deletes the sample Deployments).
    user: kube::Client,
    /// The list pages kube-gc's watchers received, per resource.
    pages: Arc<ListPages>,
    graph: Arc<kube_gc_engine::Graph>,
    collector: Arc<kube_gc_engine::collector::Collector<kube_gc::kube_cluster::KubeCluster>>,
    ready: Arc<AtomicBool>,
    metrics: Arc<kube_gc::metrics::Metrics>,
    calls: Arc<ApiCallCounts>,
    batch_size: u64,
    /// When kube-gc started.
    started: Instant,
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(Duration::from_secs(10), self.task).await;
        self.sim.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_010_004), "1,010,004");
    }

    #[test]
    fn list_pages_are_counted_per_resource() {
        let p = ListPages::default();
        for uri in [
            "/api/v1/pods?limit=500",
            "/api/v1/pods?limit=500&continue=x",
            "/apis/apps/v1/replicasets?limit=500",
            "/api/v1/pods?watch=true&resourceVersion=1",
            "/api/v1/namespaces/a/pods/b",
        ] {
            p.observe(&uri.parse().unwrap());
        }
        assert_eq!((p.get("pods"), p.get("replicasets.apps"), p.get("x")), (2, 1, 0));
    }

    #[test]
    fn judge_follows_each_policy() {
        let o = |deployment, replicaset, pods| Observed { deployment, replicaset, pods };
        assert_eq!(judge(Policy::Background, o(false, Some(1), 8), 8), Ok(false));
        assert_eq!(judge(Policy::Background, o(false, None, 0), 8), Ok(true));
        assert_eq!(judge(Policy::Foreground, o(true, None, 0), 8), Ok(false));
        assert!(judge(Policy::Foreground, o(false, None, 1), 8).is_err());
        assert_eq!(judge(Policy::Orphan, o(true, Some(1), 8), 8), Ok(false));
        assert_eq!(judge(Policy::Orphan, o(false, Some(0), 8), 8), Ok(true));
        assert!(judge(Policy::Orphan, o(false, Some(1), 8), 8).is_err());
        assert!(judge(Policy::Orphan, o(true, Some(1), 7), 8).is_err());
    }

    #[test]
    fn kube_gc_flags_keep_kube_gc_defaults_unless_given() {
        let mut a = DemoArgs::new(1000);
        let f = Flags::parse_from(a.kube_gc_argv());
        assert_eq!((f.concurrent_gc_syncs, f.shards, f.batch_size), (20, 64, 4096));
        assert_eq!((f.kube_api_qps, f.kube_api_burst), (DEMO_KUBE_API_QPS, DEMO_KUBE_API_BURST));
        a.shards = Some(8);
        a.kube_gc_args = vec!["--early-collection=false".into()];
        let f = Flags::parse_from(a.kube_gc_argv());
        assert!(f.shards == 8 && !f.early_collection);
    }
}
