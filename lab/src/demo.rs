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
use kube_gc_simcluster::store::{ListOptions, Resolved};
use kube_gc_simcluster::{Config, SimCluster, Store};

/// The demo's `--kube-api-qps` default. kube-gc's own is 20 (kube-controller-manager's): at 20
/// requests per second the 10,000 garbage Pods of a 1M-object cluster (two calls each: the
/// owner's GET, the Pod's DELETE) take about 17 minutes, which measures the rate limiter, not
/// the collector.
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
    /// Further kube-gc flags, after `--` (e.g. `-- --early-collection`).
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
            format!("--initial-sync-timeout={}s", self.timeout),
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

/// API calls the collector made, by verb (kube-gc's `kube_gc_api_calls_total`); also the
/// tuning runs' figures (`tune`, which saves them as JSON).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct Calls {
    /// GETs.
    pub get: u64,
    /// PATCHes.
    pub patch: u64,
    /// DELETEs.
    pub delete: u64,
    /// Events created.
    pub event: u64,
}

impl Calls {
    pub(crate) fn read(c: &ApiCallCounts) -> Calls {
        Calls {
            get: c.get.load(Ordering::Relaxed),
            patch: c.patch.load(Ordering::Relaxed),
            delete: c.delete.load(Ordering::Relaxed),
            event: c.event.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn since(self, before: Calls) -> Calls {
        Calls {
            get: self.get - before.get,
            patch: self.patch - before.patch,
            delete: self.delete - before.delete,
            event: self.event - before.event,
        }
    }

    /// All calls together.
    pub fn total(&self) -> u64 {
        self.get + self.patch + self.delete + self.event
    }
}

/// One row of the summary.
#[derive(Clone, Debug)]
pub struct Phase {
    /// `preload`, `warm-up`, `garbage`, `background`, `foreground`, `orphan`.
    pub name: &'static str,
    /// Objects the phase is about (listed, collected, or in the sample families).
    pub objects: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// The collector's API calls during the phase (none for the preload).
    pub calls: Option<Calls>,
    /// `Ok`, or what was wrong.
    pub verdict: Result<(), String>,
}

/// Warm-up figures.
#[derive(Clone, Debug, Default)]
pub struct WarmUp {
    /// Seconds from `Controller::start` to ready (every resource synced).
    pub seconds_to_synced: f64,
    /// Graph nodes when the initial lists were all ingested.
    pub graph_nodes: u64,
    /// Whether `graph_nodes` was counted before the collector's first API call (on a loaded
    /// machine the observer may count only after: then it is a lower bound).
    pub graph_nodes_exact: bool,
    /// What WORKLOAD.md predicts: listed objects + virtual owners.
    pub expected_nodes: u64,
    /// Events applied per second over the warm-up.
    pub events_per_second: f64,
    /// Resident memory before kube-gc started (simcluster with its preloaded store), bytes.
    pub rss_before: u64,
    /// Peak resident memory from kube-gc's start to synced (VmHWM), bytes.
    pub rss_peak: u64,
    /// Resident memory once synced, bytes.
    pub rss_synced: u64,
}

/// What the demo measured and checked.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The rows of the summary table, in order.
    pub phases: Vec<Phase>,
    /// Warm-up figures.
    pub warm_up: WarmUp,
    /// Objects listed by kube-gc (the store's objects when it started).
    pub listed: u64,
    /// The collector's `stats().deleted` at the end.
    pub collector_deleted: u64,
    /// kube-gc's argv.
    pub kube_gc_argv: Vec<String>,
    /// Remarks for the reader (what bounded a phase).
    pub notes: Vec<String>,
}

impl Report {
    /// Whether every phase's verdict is ok.
    pub fn ok(&self) -> bool {
        !self.phases.is_empty() && self.phases.iter().all(|p| p.verdict.is_ok())
    }

    /// The summary: a plain-text table, then the warm-up figures.
    pub fn table(&self) -> String {
        let mut rows: Vec<[String; 8]> = vec![[
            "phase".into(),
            "objects".into(),
            "seconds".into(),
            "get".into(),
            "patch".into(),
            "delete".into(),
            "event".into(),
            "verdict".into(),
        ]];
        for p in &self.phases {
            let c = |v: fn(&Calls) -> u64| p.calls.as_ref().map_or("-".into(), |c| thousands(v(c)));
            rows.push([
                p.name.into(),
                thousands(p.objects),
                format!("{:.2}", p.seconds),
                c(|c| c.get),
                c(|c| c.patch),
                c(|c| c.delete),
                c(|c| c.event),
                match &p.verdict {
                    Ok(()) => "ok".into(),
                    Err(e) => format!("FAILED: {e}"),
                },
            ]);
        }
        let widths: Vec<usize> =
            (0..7).map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0)).collect();
        let mut out = String::new();
        for r in &rows {
            let _ = write!(out, "{:<w$}", r[0], w = widths[0]);
            for i in 1..7 {
                let _ = write!(out, "  {:>w$}", r[i], w = widths[i]);
            }
            let _ = writeln!(out, "  {}", r[7]);
        }
        let w = &self.warm_up;
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let per = |b: u64| b as f64 / self.listed.max(1) as f64;
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "time to synced      {:.2} s ({} events/s ingested)",
            w.seconds_to_synced,
            thousands(w.events_per_second as u64)
        );
        let _ = writeln!(
            out,
            "graph nodes         {} (expected {}: {} listed + virtual owners){}",
            thousands(w.graph_nodes),
            thousands(w.expected_nodes),
            thousands(self.listed),
            if w.graph_nodes_exact { "" } else { "; counted after collection started" }
        );
        let _ = writeln!(
            out,
            "peak RSS            {:.0} MiB (VmHWM, simcluster + kube-gc in one process); {:.0} MiB before kube-gc started",
            mib(w.rss_peak),
            mib(w.rss_before)
        );
        let _ = writeln!(
            out,
            "RSS per object      {:.0} B at peak, {:.0} B once synced (above the preloaded simcluster, per listed object)",
            per(w.rss_peak.saturating_sub(w.rss_before)),
            per(w.rss_synced.saturating_sub(w.rss_before))
        );
        let _ = writeln!(out, "collector deleted   {}", thousands(self.collector_deleted));
        let _ = writeln!(out, "kube-gc flags       {}", self.kube_gc_argv[1..].join(" "));
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        out
    }
}

/// `1234567` → `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `VmRSS` and `VmHWM` of this process, bytes (0 where /proc is not there).
fn rss() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets VmHWM to the current RSS (Linux ≥ 4.0), so that the peak measured is kube-gc's.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The stored metadata the demo reads.
#[derive(Deserialize)]
struct Stored {
    metadata: StoredMeta,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredMeta {
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    owner_references: Vec<StoredOwner>,
}

#[derive(Deserialize)]
struct StoredOwner {
    uid: String,
}

fn meta(bytes: &[u8]) -> anyhow::Result<StoredMeta> {
    Ok(serde_json::from_slice::<Stored>(bytes)?.metadata)
}

/// Progress output: bars on a terminal, lines elsewhere, nothing when hidden.
struct Ui {
    mp: MultiProgress,
    quiet: bool,
}

impl Ui {
    fn new(progress: Progress) -> Ui {
        let target = match progress {
            Progress::Stderr => ProgressDrawTarget::stderr_with_hz(10),
            Progress::Hidden => ProgressDrawTarget::hidden(),
        };
        Ui { mp: MultiProgress::with_draw_target(target), quiet: progress == Progress::Hidden }
    }

    /// Whether bars are drawn (else periodic lines stand in for them).
    fn bars(&self) -> bool {
        !self.quiet && !self.mp.is_hidden()
    }

    fn say(&self, line: impl AsRef<str>) {
        if self.quiet {
        } else if self.mp.is_hidden() {
            eprintln!("{}", line.as_ref());
        } else {
            let _ = self.mp.println(line);
        }
    }

    /// A line standing in for bars, when they are not drawn.
    fn tick(&self, line: impl AsRef<str>) {
        if !self.quiet && self.mp.is_hidden() {
            eprintln!("{}", line.as_ref());
        }
    }

    fn bar(&self, len: u64, prefix: &str, template: &str) -> ProgressBar {
        let pb = self.mp.add(ProgressBar::new(len));
        pb.set_style(
            ProgressStyle::with_template(template).expect("a valid template").progress_chars("=> "),
        );
        pb.set_prefix(prefix.to_owned());
        pb
    }
}

const BAR: &str = "{prefix:>24} [{bar:32}] {human_pos:>9}/{human_len:<9} {msg}";
const SPINNER: &str = "{spinner} {prefix} {elapsed} {msg}";

/// Counts the list requests (pages) kube-gc's watchers make, per resource (`resource_key`).
#[derive(Debug, Default)]
struct ListPages(Mutex<HashMap<String, u64>>);

impl ListPages {
    fn observe(&self, uri: &http::Uri) {
        let query = uri.query().unwrap_or("");
        if !query.contains("limit=") || query.contains("watch=") {
            return;
        }
        let parts: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
        let key = match parts.as_slice() {
            ["api", _, plural] => (*plural).to_owned(),
            ["apis", group, _, plural] => format!("{plural}.{group}"),
            _ => return,
        };
        *self.0.lock().expect("pages lock").entry(key).or_default() += 1;
    }

    fn get(&self, key: &str) -> u64 {
        self.0.lock().expect("pages lock").get(key).copied().unwrap_or(0)
    }
}

/// A kube-rs client for `sim`, from the kubeconfig it writes; `pages` (if any) counts list
/// requests.
async fn client(sim: &SimCluster, pages: Option<Arc<ListPages>>) -> anyhow::Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig())?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(match pages {
        None => builder.build(),
        Some(pages) => builder
            .with_layer(&tower::util::MapRequestLayer::new(
                move |req: http::Request<kube::client::Body>| {
                    pages.observe(req.uri());
                    req
                },
            ))
            .build(),
    })
}

/// Resolved handles of the resources the demo reads in the store.
struct Res {
    deployments: Resolved,
    replicasets: Resolved,
    pods: Resolved,
}

impl Res {
    fn new(store: &Store) -> anyhow::Result<Res> {
        Ok(Res {
            deployments: store.resolve_api_version("apps/v1", "deployments")?,
            replicasets: store.resolve_api_version("apps/v1", "replicasets")?,
            pods: store.resolve_api_version("v1", "pods")?,
        })
    }
}

/// Every stored object's count, by `resource_key` (`pods`, `replicasets.apps`), the empty left
/// out.
fn counts(store: &Store) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for def in store.resources() {
        let r = store.resolve(&def.group, &def.version, &def.plural)?;
        let n = store.list(&r, &ListOptions::default())?.items.len() as u64;
        if n > 0 {
            out.insert(def.group_resource(), n);
        }
    }
    Ok(out)
}

/// The Pods whose owner (a ReplicaSet) is not stored: WORKLOAD.md's V virtual-owner Pods.
fn garbage_pods(store: &Store, res: &Res) -> anyhow::Result<Vec<(String, String)>> {
    let rs_uids: HashSet<String> = store
        .list(&res.replicasets, &ListOptions::default())?
        .items
        .iter()
        .map(|b| meta(b).map(|m| m.uid))
        .collect::<anyhow::Result<_>>()?;
    let mut out = Vec::new();
    for b in store.list(&res.pods, &ListOptions::default())?.items {
        let m = meta(&b)?;
        if !m.owner_references.is_empty()
            && m.owner_references.iter().all(|o| !rs_uids.contains(&o.uid))
        {
            out.push((m.namespace.unwrap_or_default(), m.name));
        }
    }
    Ok(out)
}

/// A propagation policy the demo exercises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    Background,
    Foreground,
    Orphan,
}

impl Policy {
    const ALL: [Policy; 3] = [Policy::Background, Policy::Foreground, Policy::Orphan];

    fn name(self) -> &'static str {
        match self {
            Policy::Background => "background",
            Policy::Foreground => "foreground",
            Policy::Orphan => "orphan",
        }
    }

    fn params(self) -> DeleteParams {
        match self {
            Policy::Background => DeleteParams::background(),
            Policy::Foreground => DeleteParams::foreground(),
            Policy::Orphan => DeleteParams::orphan(),
        }
    }
}

/// One sample family: a Deployment, its ReplicaSet and its Pods.
#[derive(Debug)]
struct Sample {
    namespace: String,
    deployment: String,
    replicaset: String,
    pods: Vec<String>,
}

impl Sample {
    /// Family `f` of WORKLOAD.md's shape, found in the store.
    fn find(store: &Store, res: &Res, f: usize, namespaces: usize) -> anyhow::Result<Sample> {
        let namespace = kube_gc_workload::namespace_name(f % namespaces.max(1));
        let deployment = format!("app-{f:08}");
        let d = meta(&store.get(&res.deployments, Some(&namespace), &deployment)?)?;
        let in_ns = |r: &Resolved| {
            store.list(r, &ListOptions { namespace: Some(namespace.clone()), ..Default::default() })
        };
        let owned_by = |uid: &str, items: Vec<Arc<[u8]>>| -> anyhow::Result<Vec<StoredMeta>> {
            let mut out = Vec::new();
            for b in items {
                let m = meta(&b)?;
                if m.owner_references.iter().any(|o| o.uid == uid) {
                    out.push(m);
                }
            }
            Ok(out)
        };
        let rs = owned_by(&d.uid, in_ns(&res.replicasets)?.items)?;
        let [rs] = <[StoredMeta; 1]>::try_from(rs).map_err(|v| {
            anyhow::anyhow!("{namespace}/{deployment} owns {} ReplicaSets, not 1", v.len())
        })?;
        let pods = owned_by(&rs.uid, in_ns(&res.pods)?.items)?;
        Ok(Sample {
            namespace,
            deployment,
            replicaset: rs.name,
            pods: pods.into_iter().map(|m| m.name).collect(),
        })
    }

    fn objects(&self) -> u64 {
        2 + self.pods.len() as u64
    }

    fn observe(&self, store: &Store, res: &Res) -> Observed {
        let ns = Some(self.namespace.as_str());
        Observed {
            deployment: store.get(&res.deployments, ns, &self.deployment).is_ok(),
            replicaset: store
                .get(&res.replicasets, ns, &self.replicaset)
                .ok()
                .and_then(|b| meta(&b).ok())
                .map(|m| m.owner_references.len()),
            pods: self.pods.iter().filter(|p| store.get(&res.pods, ns, p.as_str()).is_ok()).count(),
        }
    }
}

/// What a sample family looks like in the store.
#[derive(Clone, Copy, Debug)]
struct Observed {
    deployment: bool,
    /// The ReplicaSet's owner reference count, if it is there.
    replicaset: Option<usize>,
    pods: usize,
}

impl std::fmt::Display for Observed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Deployment {}, ReplicaSet {}, {} Pods",
            if self.deployment { "present" } else { "gone" },
            match self.replicaset {
                None => "gone".to_owned(),
                Some(n) => format!("present with {n} ownerReferences"),
            },
            self.pods
        )
    }
}

/// Whether a family reached `policy`'s final state (`Ok(true)`), is on its way (`Ok(false)`),
/// or broke the policy's rules (`Err`).
fn judge(policy: Policy, o: Observed, pods: usize) -> Result<bool, String> {
    match policy {
        Policy::Background => Ok(!o.deployment && o.replicaset.is_none() && o.pods == 0),
        Policy::Foreground => {
            if !o.deployment && (o.replicaset.is_some() || o.pods > 0) {
                return Err(format!("the Deployment went before its dependents: {o}"));
            }
            Ok(!o.deployment && o.replicaset.is_none() && o.pods == 0)
        }
        Policy::Orphan => {
            if o.replicaset.is_none() || o.pods < pods {
                return Err(format!("orphaned dependents were deleted: {o}"));
            }
            match (o.deployment, o.replicaset) {
                (false, Some(0)) => Ok(true),
                (false, Some(_)) => {
                    Err(format!("the Deployment is gone but the ReplicaSet still names it: {o}"))
                }
                _ => Ok(false),
            }
        }
    }
}

/// Runs the demo; see the [module documentation](self).
pub async fn run(args: &DemoArgs, progress: Progress) -> anyhow::Result<Report> {
    let shape: Shape = args.shape.parse()?;
    let timeout = Duration::from_secs(args.timeout.max(1));
    let ui = Ui::new(progress);
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

    // 1. Preload.
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

    // 2. Serve, start kube-gc.
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

    // 3. Warm-up.
    let expected_events = report.listed;
    report.warm_up.expected_nodes = expected_events + garbage.len() as u64;
    // A thread that polls closely near the end reads the graph's nodes when the last
    // initial-list event is applied (before ready, so before any worker can change the graph),
    // then the moment kube-gc turns ready and the collector's calls then.
    let stop_catcher = Arc::new(AtomicBool::new(false));
    let catcher = {
        let (graph, metrics, ready, calls, stop) =
            (graph.clone(), metrics.clone(), ready.clone(), calls.clone(), stop_catcher.clone());
        std::thread::spawn(move || {
            let mut caught = Caught::default();
            while !stop.load(Ordering::Relaxed) {
                let ingested = metrics.ingest_events.get();
                if caught.nodes.is_none() && ingested >= expected_events {
                    let nodes = graph.len() as u64;
                    // The collector changes the graph only after an API call of its own (a
                    // virtual delete follows a GET; a Pod's delete, a DELETE): none yet, the
                    // count is the warm-up's.
                    caught.nodes = Some((nodes, Calls::read(&calls).total() > 0));
                }
                if ready.load(Ordering::Acquire) {
                    caught.ready = Some((Instant::now(), Calls::read(&calls)));
                    break;
                }
                if ingested + 2 * batch_size >= expected_events {
                    std::thread::yield_now();
                } else {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            caught
        })
    };
    let overall = ui.bar(expected_events, "events ingested", BAR);
    let mut bars: Vec<(String, u64, ProgressBar)> = before
        .iter()
        .map(|(key, n)| (key.clone(), *n, ui.bar(*n, &format!("{key} listed"), BAR)))
        .collect();
    let mut synced_resources: BTreeMap<String, f64> = BTreeMap::new();
    let queues = [collector.attempt_to_delete_queue(), collector.attempt_to_orphan_queue()];
    let deadline = started + timeout;
    let mut last_tick = Instant::now();
    let mut window = (Instant::now(), 0u64, 0.0f64);
    let synced = loop {
        let now = Instant::now();
        let is_ready = ready.load(Ordering::Acquire);
        let ingested = metrics.ingest_events.get();
        let dt = now.duration_since(window.0).as_secs_f64();
        if dt >= 1.0 {
            window = (now, ingested, (ingested - window.1) as f64 / dt);
        }
        for line in metrics
            .render(&graph, &[queues[0].as_ref(), queues[1].as_ref()], &calls)
            .lines()
            .filter_map(|l| l.strip_prefix("kube_gc_warmup_seconds{resource=\""))
        {
            if let Some((key, secs)) = line.split_once("\"} ") {
                synced_resources.insert(key.to_owned(), secs.parse().unwrap_or(0.0));
            }
        }
        let nodes = graph.len();
        overall.set_position(ingested.min(expected_events));
        overall.set_message(format!(
            "graph {} nodes · {} events/s · {} resources synced · {:.1} s",
            thousands(nodes as u64),
            thousands(window.2 as u64),
            synced_resources.len(),
            started.elapsed().as_secs_f64()
        ));
        for (key, n, pb) in &mut bars {
            match synced_resources.get(key.as_str()) {
                Some(s) => {
                    if !pb.is_finished() {
                        pb.set_position(*n);
                        pb.finish_with_message(format!("synced in {s:.2} s"));
                    }
                }
                None => pb.set_position((pages.get(key).saturating_sub(1) * LIST_PAGE).min(*n)),
            }
        }
        if last_tick.elapsed() >= Duration::from_secs(2) && !ui.bars() {
            last_tick = Instant::now();
            ui.tick(format!(
                "  warm-up {:>6.1} s: {}/{} events ingested, graph {} nodes, {} events/s, {} resources synced",
                started.elapsed().as_secs_f64(),
                thousands(ingested),
                thousands(expected_events),
                thousands(nodes as u64),
                thousands(window.2 as u64),
                synced_resources.len()
            ));
        }
        if is_ready {
            break Ok(started.elapsed().as_secs_f64());
        }
        if now >= deadline {
            break Err(format!(
                "not synced after {} s ({} of {} events ingested)",
                timeout.as_secs(),
                ingested,
                expected_events
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    stop_catcher.store(true, Ordering::Relaxed);
    let caught = catcher.join().unwrap_or_default();
    let (rss_synced, rss_peak) = rss();
    overall.finish_and_clear();
    for (_, _, pb) in bars.drain(..) {
        pb.finish_and_clear();
    }
    let (synced_at, calls_at_synced) =
        caught.ready.unwrap_or_else(|| (Instant::now(), Calls::read(&calls)));
    let synced = synced.map(|_| synced_at.duration_since(started).as_secs_f64());
    let w = &mut report.warm_up;
    w.rss_peak = rss_peak;
    w.rss_synced = rss_synced;
    w.seconds_to_synced = *synced.as_ref().unwrap_or(&timeout.as_secs_f64());
    w.events_per_second = expected_events as f64 / w.seconds_to_synced.max(1e-9);
    let warm_verdict = match (&synced, caught.nodes) {
        (Err(e), _) => Err(e.clone()),
        (Ok(_), None) => Err("the initial lists were never all ingested".into()),
        (Ok(_), Some((nodes, late))) => {
            w.graph_nodes = nodes;
            w.graph_nodes_exact = !late;
            if nodes == w.expected_nodes || (late && nodes < w.expected_nodes) {
                // (Counted after collection had started: a lower bound only.)
                Ok(())
            } else {
                Err(format!("graph has {nodes} nodes, expected {}", w.expected_nodes))
            }
        }
    };
    ui.say(format!(
        "synced in {:.2} s: graph {} nodes (expected {}), {} events/s; peak RSS {:.0} MiB, {:.0} B per object above the preloaded simcluster",
        w.seconds_to_synced,
        thousands(w.graph_nodes),
        thousands(w.expected_nodes),
        thousands(w.events_per_second as u64),
        rss_peak as f64 / 1048576.0,
        rss_peak.saturating_sub(rss_before) as f64 / report.listed.max(1) as f64
    ));
    report.phases.push(Phase {
        name: "warm-up",
        objects: report.listed,
        seconds: w.seconds_to_synced,
        calls: Some(calls_at_synced),
        verdict: warm_verdict,
    });
    let running = Running { stop: stop_tx, task: gc_task, sim };
    if synced.is_err() {
        report.collector_deleted = collector.stats().deleted.load(Ordering::Relaxed);
        running.stop().await;
        return Ok(report);
    }

    // 4. Garbage: the Pods whose ReplicaSet never existed (timed from ready, when the workers
    // start).
    let calls_before = calls_at_synced;
    let bar = ui.bar(garbage.len() as u64, "garbage Pods collected", BAR);
    let mut remaining = garbage.clone();
    let deadline = synced_at + timeout;
    let mut last_tick = Instant::now();
    let garbage_verdict = loop {
        remaining.retain(|(ns, name)| store.get(&res.pods, Some(ns), name).is_ok());
        let deleted = collector.stats().deleted.load(Ordering::Relaxed);
        bar.set_position((garbage.len() - remaining.len()) as u64);
        bar.set_message(format!("collector deleted {}", thousands(deleted)));
        if last_tick.elapsed() >= Duration::from_secs(2) && !ui.bars() {
            last_tick = Instant::now();
            ui.tick(format!(
                "  garbage {:>6.1} s: {}/{} collected",
                synced_at.elapsed().as_secs_f64(),
                thousands((garbage.len() - remaining.len()) as u64),
                thousands(garbage.len() as u64)
            ));
        }
        if remaining.is_empty() {
            break Ok(());
        }
        if Instant::now() >= deadline {
            break Err(format!(
                "{} of {} garbage Pods left after {} s",
                remaining.len(),
                garbage.len(),
                timeout.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let garbage_seconds = synced_at.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let garbage_calls = Calls::read(&calls).since(calls_before);
    // Nothing but the garbage went, and the graph followed (its virtual owners removed).
    let garbage_verdict = garbage_verdict.and_then(|()| {
        let mut expected = before.clone();
        if let Some(p) = expected.get_mut("pods") {
            *p -= garbage.len() as u64;
        }
        let now = counts(&store).map_err(|e| e.to_string())?;
        if now != expected {
            return Err(format!(
                "objects other than the garbage changed: {now:?}, expected {expected:?}"
            ));
        }
        Ok(())
    });
    let nodes_expected = report.listed - garbage.len() as u64;
    let graph_deadline = Instant::now() + timeout;
    while (graph.len() as u64) != nodes_expected && Instant::now() < graph_deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let garbage_verdict = garbage_verdict.and_then(|()| match graph.len() as u64 {
        n if n == nodes_expected => Ok(()),
        n => Err(format!("graph has {n} nodes after collection, expected {nodes_expected}")),
    });
    // A token bucket of `qps` lets through at most burst + qps × t calls in t seconds.
    let floor = garbage_calls.total().saturating_sub(u64::from(args.kube_api_burst)) as f64
        / args.kube_api_qps;
    if floor > 0.5 * garbage_seconds {
        report.notes.push(format!(
            "the garbage phase is bounded by --kube-api-qps {}: its {} calls take at least {floor:.1} s",
            args.kube_api_qps,
            thousands(garbage_calls.total())
        ));
    }
    ui.say(format!(
        "garbage: {} Pods collected in {garbage_seconds:.2} s ({} API calls)",
        thousands(garbage.len() as u64),
        thousands(garbage_calls.total())
    ));
    report.phases.push(Phase {
        name: "garbage",
        objects: garbage.len() as u64,
        seconds: garbage_seconds,
        calls: Some(garbage_calls),
        verdict: garbage_verdict,
    });

    // 5. One propagation policy at a time, on sample families spread over the Deployments.
    let total = args.samples * Policy::ALL.len();
    for (pi, policy) in Policy::ALL.into_iter().enumerate() {
        let samples: Vec<Sample> = (0..args.samples)
            .map(|i| {
                let f = (i * Policy::ALL.len() + pi) * families / total.max(1);
                Sample::find(&store, &res, f, args.namespaces)
            })
            .collect::<anyhow::Result<_>>()?;
        let objects: u64 = samples.iter().map(Sample::objects).sum();
        let calls_before = Calls::read(&calls);
        let bar = ui.bar(samples.len() as u64, &format!("{} deletions", policy.name()), BAR);
        let started = Instant::now();
        let mut verdict: Result<(), String> = Ok(());
        for s in &samples {
            let api: Api<Deployment> = Api::namespaced(user.clone(), &s.namespace);
            match api.delete(&s.deployment, &policy.params()).await {
                Ok(either) => {
                    let want = match policy {
                        Policy::Background => None,
                        Policy::Foreground => Some("foregroundDeletion"),
                        Policy::Orphan => Some("orphan"),
                    };
                    if let (Some(f), Some(d)) = (want, either.left()) {
                        let has = d.metadata.finalizers.unwrap_or_default().iter().any(|x| x == f);
                        if !has || d.metadata.deletion_timestamp.is_none() {
                            verdict = Err(format!(
                                "{}/{}: the {} delete did not set deletionTimestamp and the {f} finalizer",
                                s.namespace,
                                s.deployment,
                                policy.name()
                            ));
                        }
                    }
                }
                Err(e) => {
                    verdict = Err(format!("deleting {}/{}: {e}", s.namespace, s.deployment));
                }
            }
        }
        let deadline = started + timeout;
        let mut done: Vec<Option<f64>> = vec![None; samples.len()];
        while verdict.is_ok() && done.iter().any(Option::is_none) {
            for (s, d) in samples.iter().zip(done.iter_mut()).filter(|(_, d)| d.is_none()) {
                match judge(policy, s.observe(&store, &res), s.pods.len()) {
                    Ok(true) => *d = Some(started.elapsed().as_secs_f64()),
                    Ok(false) => {}
                    Err(e) => verdict = Err(format!("{}/{}: {e}", s.namespace, s.deployment)),
                }
            }
            bar.set_position(done.iter().flatten().count() as u64);
            if Instant::now() >= deadline {
                let late: Vec<String> = samples
                    .iter()
                    .zip(&done)
                    .filter(|(_, d)| d.is_none())
                    .map(|(s, _)| {
                        format!("{}/{} ({})", s.namespace, s.deployment, s.observe(&store, &res))
                    })
                    .collect();
                verdict =
                    Err(format!("timed out after {} s: {}", timeout.as_secs(), late.join("; ")));
            }
            if verdict.is_ok() && done.iter().any(Option::is_none) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        bar.finish_and_clear();
        let each: Vec<String> = done.iter().flatten().map(|s| format!("{s:.3}")).collect();
        ui.say(format!(
            "{}: {} Deployments ({} objects) in {seconds:.3} s (each: {} s){}",
            policy.name(),
            samples.len(),
            objects,
            each.join(", "),
            match &verdict {
                Ok(()) => String::new(),
                Err(e) => format!(" — FAILED: {e}"),
            }
        ));
        report.phases.push(Phase {
            name: policy.name(),
            objects,
            seconds,
            calls: Some(Calls::read(&calls).since(calls_before)),
            verdict,
        });
    }

    report.collector_deleted = collector.stats().deleted.load(Ordering::Relaxed);
    running.stop().await;
    Ok(report)
}

/// What the warm-up's close observer saw.
#[derive(Debug, Default)]
struct Caught {
    /// Graph nodes once every initial-list event was applied, and whether the collector had
    /// made API calls already when they were counted.
    nodes: Option<(u64, bool)>,
    /// When kube-gc turned ready, and the collector's calls then.
    ready: Option<(Instant, Calls)>,
}

/// kube-gc and simcluster, running.
struct Running {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    sim: SimCluster,
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
        a.kube_gc_args = vec!["--early-collection".into()];
        let f = Flags::parse_from(a.kube_gc_argv());
        assert!(f.shards == 8 && f.early_collection);
    }
}
