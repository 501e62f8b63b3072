//! `kube-gc-lab tune`: how long kube-gc takes to collect the dependents of deleted
//! owners, for each `--concurrent-gc-syncs`, simulated API latency and client rate limit.
//!
//! For every combination of `--workers` × `--latency-ms` × `--qps` ([`run`]):
//!
//! 1. a fresh simcluster gets N Pods owned by N / 10 ReplicaSets, written straight into its
//!    [`Store`] (no HTTP, no events: setup takes well under a second for 100k Pods);
//! 2. kube-gc starts in-process (`--concurrent-gc-syncs W`, `--kube-api-qps`/`--kube-api-burst`
//!    from the limit, every other flag the real binary's default) and lists everything;
//! 3. once it is ready, the latency fault is set (fixed, no jitter, no errors; requests already
//!    open, the watches, are not delayed) and every ReplicaSet is deleted through the store
//!    with background propagation (one deletecollection: no GC finalizer is involved);
//! 4. the clock runs until the store holds no Pod, bounded by `--timeout`; a run that hits the
//!    bound reports what it collected so far, and its rate.
//!
//! The collector's API calls over the collection come from kube-gc's own counters
//! (`kube_gc_api_calls_total`, [`ApiCallCounts`](kube_gc::kube_cluster::ApiCallCounts)). [`markdown`] and [`plot_svg`] render the
//! samples; the README's "Tuning --concurrent-gc-syncs" section shows them.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Parser as _;
use kube_gc::{Controller, Flags};
use serde::{Deserialize, Serialize};

use crate::demo::Calls;
use kube_gc_simcluster::store::{DeleteOptions, ListOptions, Resolved, StoredObject, object_key};
use kube_gc_simcluster::{Config, Faults, SimCluster, Store};

/// `--qps off`: a limit no run reaches (kube-gc's limiter needs a positive rate).
pub const UNLIMITED: f64 = 100_000.0;

/// The `--qps` limits measured by default: none, and the demo's 1000 (kube-gc's own default
/// of 20 is the same for every worker count; see the README).
pub const DEFAULT_QPS: &str = "off,1000:1000";

/// `kube-gc-lab tune`: time to collect the dependents of deleted owners, per
/// `--concurrent-gc-syncs`, API latency and rate limit.
#[derive(clap::Args, Debug, Clone)]
pub struct TuneArgs {
    /// Dependents (Pods) collected per run.
    #[arg(long, default_value_t = 100_000,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub dependents: usize,
    /// Pods per owner (ReplicaSet).
    #[arg(long, default_value_t = 10,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub pods_per_owner: usize,
    /// kube-gc's `--concurrent-gc-syncs` values.
    #[arg(long, value_delimiter = ',', default_value = "1,2,5,10,20,50,100",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub workers: Vec<u32>,
    /// Simulated latency of every API request, in milliseconds.
    #[arg(long, value_delimiter = ',', default_value = "0,5,20")]
    pub latency_ms: Vec<u64>,
    /// Client rate limits, `QPS:BURST` (kube-gc's `--kube-api-qps` and `--kube-api-burst`) or
    /// `off`.
    #[arg(long, value_delimiter = ',', default_value = DEFAULT_QPS, value_parser = parse_limit)]
    pub qps: Vec<Limit>,
    /// Bound of each run's collection (and of its warm-up), in seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// Write every sample here, as JSON.
    #[arg(long)]
    pub out_json: Option<PathBuf>,
    /// Write the plot here, as SVG.
    #[arg(long)]
    pub out_svg: Option<PathBuf>,
    /// Measure nothing: read the samples of earlier `--out-json` files (comma-separated; a
    /// later file's sample replaces an earlier one of the same combination) and print / write
    /// their table, JSON and plot.
    #[arg(long, value_delimiter = ',')]
    pub from_json: Vec<PathBuf>,
}

/// A client rate limit: kube-gc's `--kube-api-qps` and `--kube-api-burst`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    /// `off`, or `QPS:BURST` as given.
    pub label: String,
    /// `--kube-api-qps`.
    pub qps: f64,
    /// `--kube-api-burst`.
    pub burst: u32,
}

impl Limit {
    /// No limit that a run can reach.
    pub fn off() -> Limit {
        Limit { label: "off".into(), qps: UNLIMITED, burst: UNLIMITED as u32 }
    }
}

/// Parses `off` or `QPS:BURST` (e.g. `1000:1000`).
pub fn parse_limit(s: &str) -> Result<Limit, String> {
    let s = s.trim();
    if s == "off" {
        return Ok(Limit::off());
    }
    let (q, b) = s.split_once(':').ok_or_else(|| format!("{s:?}: expected QPS:BURST or off"))?;
    let qps: f64 = q.parse().map_err(|e| format!("{s:?}: QPS: {e}"))?;
    let burst: u32 = b.parse().map_err(|e| format!("{s:?}: BURST: {e}"))?;
    if !(qps > 0.0 && qps.is_finite()) || burst == 0 {
        return Err(format!("{s:?}: QPS and BURST must be positive"));
    }
    Ok(Limit { label: s.to_owned(), qps, burst })
}

/// One run: one combination, measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// `--concurrent-gc-syncs`.
    pub workers: u32,
    /// Simulated API latency, milliseconds.
    pub latency_ms: u64,
    /// The client rate limit.
    pub limit: Limit,
    /// Dependents to collect.
    pub dependents: usize,
    /// Their owners, deleted.
    pub owners: usize,
    /// Seconds from kube-gc's start to ready.
    pub sync_seconds: f64,
    /// Seconds from the owners' deletion to the last dependent gone (or to the bound).
    pub seconds: f64,
    /// Dependents gone when the clock stopped.
    pub collected: usize,
    /// Whether every dependent was gone before the bound.
    pub complete: bool,
    /// The collector's API calls over the collection.
    pub calls: Calls,
}

impl Sample {
    /// Dependents collected per second.
    pub fn per_second(&self) -> f64 {
        self.collected as f64 / self.seconds.max(1e-9)
    }
}

/// Writes `dependents` Pods owned by `pods_per_owner`-sized groups of ReplicaSets into
/// `store` (namespace `default`), without events. Returns the number of ReplicaSets.
pub fn fill(
    store: &Store,
    dependents: usize,
    pods_per_owner: usize,
) -> kube_gc_simcluster::Result<usize> {
    let per = pods_per_owner.max(1);
    let owners = dependents.div_ceil(per);
    let uid = |i: usize| format!("00000000-0000-4000-8000-{i:012x}");
    let created = kube_gc_simcluster::time::now_rfc3339();
    let mut rv = store.resource_version() + 1;
    let mut replicasets = Vec::with_capacity(owners);
    for o in 0..owners {
        let json = format!(
            r#"{{"metadata":{{"name":"rs-{o:06}","namespace":"default","uid":"{}","resourceVersion":"{rv}","generation":1,"creationTimestamp":"{created}"}}}}"#,
            uid(o)
        );
        replicasets.push((object_key(Some("default"), &format!("rs-{o:06}")), json, rv));
        rv += 1;
    }
    let mut pods = Vec::with_capacity(dependents);
    for p in 0..dependents {
        let o = p / per;
        let name = format!("rs-{o:06}-{:04}", p % per);
        let json = format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"default","uid":"{}","resourceVersion":"{rv}","creationTimestamp":"{created}","ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs-{o:06}","uid":"{}","controller":true,"blockOwnerDeletion":true}}]}}}}"#,
            uid(owners + p),
            uid(o)
        );
        pods.push((object_key(Some("default"), &name), json, rv));
        rv += 1;
    }
    for (api_version, plural, objects) in
        [("apps/v1", "replicasets", replicasets), ("v1", "pods", pods)]
    {
        let r = store.resolve_api_version(api_version, plural)?;
        store.preload(
            &r,
            objects
                .into_iter()
                .map(|(k, json, rv)| (k, Arc::new(StoredObject::new(json.into_bytes())), rv)),
        )?;
    }
    Ok(owners)
}

/// Pods left in the store (`limit` 1 for "any left?", 0 for all of them).
fn pods_left(store: &Store, pods: &Resolved, limit: usize) -> kube_gc_simcluster::Result<usize> {
    Ok(store.list(pods, &ListOptions { limit, ..ListOptions::default() })?.items.len())
}

/// kube-gc's argv for one run: kube-gc's defaults but for the workers and the limit.
pub fn kube_gc_argv(workers: u32, limit: &Limit, timeout: Duration) -> Vec<String> {
    vec![
        "kube-gc".into(),
        "--debug-addr=127.0.0.1:0".into(),
        "--secure-port=0".into(),
        format!("--initial-sync-timeout={}s", timeout.as_secs().max(1)),
        format!("--concurrent-gc-syncs={workers}"),
        format!("--kube-api-qps={}", limit.qps),
        format!("--kube-api-burst={}", limit.burst),
    ]
}

/// Measures one combination; see the [module documentation](self).
pub async fn run_one(
    dependents: usize,
    pods_per_owner: usize,
    workers: u32,
    latency_ms: u64,
    limit: &Limit,
    timeout: Duration,
) -> anyhow::Result<Sample> {
    let flags = Flags::try_parse_from(kube_gc_argv(workers, limit, timeout))?;
    flags.validate().map_err(|e| anyhow::anyhow!("kube-gc flags: {e}"))?;
    let config = Config::default();
    let store = Arc::new(Store::new(config.store.clone(), config.resources.clone()));
    let ns = store.resolve("", "v1", "namespaces")?;
    for name in &config.namespaces {
        store.create(&ns, None, serde_json::json!({"metadata": {"name": name}}))?;
    }
    let owners = fill(&store, dependents, pods_per_owner)?;
    let replicasets = store.resolve_api_version("apps/v1", "replicasets")?;
    let pods = store.resolve_api_version("v1", "pods")?;
    let sim = SimCluster::serve(config, store.clone()).await?;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig())?;
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?,
    )?;

    let started = Instant::now();
    let controller = Controller::start(flags, client).await?;
    let ready = controller.ready.clone();
    let calls = controller.cluster.calls.clone();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(controller.run(async move {
        let _ = stop_rx.await;
    }));
    let stop = |task| async move {
        let _ = stop_tx.send(());
        let mut task: tokio::task::JoinHandle<()> = task;
        if tokio::time::timeout(Duration::from_secs(10), &mut task).await.is_err() {
            task.abort();
        }
    };
    while !ready.load(Ordering::Acquire) {
        if started.elapsed() >= timeout || task.is_finished() {
            stop(task).await;
            sim.shutdown().await;
            anyhow::bail!("kube-gc not ready after {:.0} s", started.elapsed().as_secs_f64());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sync_seconds = started.elapsed().as_secs_f64();

    sim.set_faults(Faults { latency: Duration::from_millis(latency_ms), ..Faults::off() });
    let before = Calls::read(&calls);
    let started = Instant::now();
    let background =
        DeleteOptions { propagation_policy: Some("Background".into()), ..DeleteOptions::default() };
    let deleted = store.delete_collection(&replicasets, &ListOptions::default(), &background)?;
    anyhow::ensure!(deleted.len() == owners, "deleted {} owners of {owners}", deleted.len());
    let deadline = started + timeout;
    let complete = loop {
        if pods_left(&store, &pods, 1)? == 0 {
            break true;
        }
        if Instant::now() >= deadline || task.is_finished() {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let seconds = started.elapsed().as_secs_f64();
    let calls = Calls::read(&calls).since(before);
    let collected = dependents - pods_left(&store, &pods, 0)?;
    stop(task).await;
    sim.shutdown().await;
    Ok(Sample {
        workers,
        latency_ms,
        limit: limit.clone(),
        dependents,
        owners,
        sync_seconds,
        seconds,
        collected,
        complete,
        calls,
    })
}

/// Measures every combination, latency-major (then limit, then workers); `each` sees every
/// sample as it is taken.
pub async fn run(args: &TuneArgs, mut each: impl FnMut(&Sample)) -> anyhow::Result<Vec<Sample>> {
    let timeout = Duration::from_secs(args.timeout.max(1));
    let mut out = Vec::new();
    for &latency in &args.latency_ms {
        for limit in &args.qps {
            for &workers in &args.workers {
                let s =
                    run_one(args.dependents, args.pods_per_owner, workers, latency, limit, timeout)
                        .await?;
                each(&s);
                out.push(s);
            }
        }
    }
    Ok(out)
}

/// The samples of `--out-json` files, merged: a later file's sample replaces an earlier one
/// of the same workers, latency and limit.
pub fn read_json(paths: &[PathBuf]) -> anyhow::Result<Vec<Sample>> {
    let mut out: Vec<Sample> = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        merge(&mut out, serde_json::from_str(&text)?);
    }
    Ok(out)
}

fn merge(into: &mut Vec<Sample>, samples: Vec<Sample>) {
    for s in samples {
        let same = |o: &Sample| {
            (o.workers, o.latency_ms, &o.limit.label) == (s.workers, s.latency_ms, &s.limit.label)
        };
        match into.iter_mut().find(|o| same(o)) {
            Some(o) => *o = s,
            None => into.push(s),
        }
    }
}

/// One line per sample, for progress output.
pub fn line(s: &Sample) -> String {
    format!(
        "workers {:>3}  latency {:>3} ms  qps {:<11} {} of {} dependents in {:>8.2} s ({:>7.0}/s){}  calls: {} get, {} list, {} delete, {} patch, {} event  (synced in {:.1} s)",
        s.workers,
        s.latency_ms,
        s.limit.label,
        s.collected,
        s.dependents,
        s.seconds,
        s.per_second(),
        if s.complete { "" } else { " TIMED OUT" },
        s.calls.get,
        s.calls.list,
        s.calls.delete,
        s.calls.patch,
        s.calls.event,
        s.sync_seconds
    )
}

/// Distinct values in first-seen order.
fn distinct<T: PartialEq + Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for i in items {
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

/// A markdown table: one row per (limit, latency), one column per worker count; each cell the
/// seconds to collect every dependent and the rate (`>T s` where the bound stopped the run).
pub fn markdown(samples: &[Sample]) -> String {
    let workers = {
        let mut w = distinct(samples.iter().map(|s| s.workers));
        w.sort_unstable();
        w
    };
    let limits = distinct(samples.iter().map(|s| s.limit.label.clone()));
    let latencies = distinct(samples.iter().map(|s| s.latency_ms));
    let mut out = String::from("| qps:burst | latency |");
    for w in &workers {
        let _ = write!(out, " {w} workers |");
    }
    out.push_str("\n|---|---:|");
    out.push_str(&"---:|".repeat(workers.len()));
    out.push('\n');
    for limit in &limits {
        for l in &latencies {
            let _ = write!(out, "| {limit} | {l} ms |");
            for w in &workers {
                let cell = samples
                    .iter()
                    .find(|s| &s.limit.label == limit && s.latency_ms == *l && s.workers == *w)
                    .map_or_else(
                        || "–".to_owned(),
                        |s| {
                            let time = if s.complete {
                                format!("{:.1} s", s.seconds)
                            } else {
                                format!("&gt;{:.0} s", s.seconds)
                            };
                            format!("{time} ({:.0}/s)", s.per_second())
                        },
                    );
                let _ = write!(out, " {cell} |");
            }
            out.push('\n');
        }
    }
    out
}

/// The plot, as SVG: one panel per limit, x = workers (log), y = dependents collected per
/// second (log), one line per latency.
pub fn plot_svg(samples: &[Sample]) -> anyhow::Result<String> {
    use plotters::prelude::*;

    let limits = distinct(samples.iter().map(|s| s.limit.clone()));
    let latencies = distinct(samples.iter().map(|s| s.latency_ms));
    anyhow::ensure!(!limits.is_empty(), "no sample to plot");
    let max_w = samples.iter().map(|s| s.workers).max().unwrap_or(1).max(2) as f64;
    let rates: Vec<f64> = samples.iter().map(|s| s.per_second().max(1.0)).collect();
    let lo = rates.iter().copied().fold(f64::INFINITY, f64::min) / 1.5;
    let hi = rates.iter().copied().fold(0.0, f64::max) * 1.5;
    // Okabe–Ito: distinguishable in colour-blind vision and on white.
    let colors = [
        RGBColor(0, 114, 178),
        RGBColor(213, 94, 0),
        RGBColor(0, 158, 115),
        RGBColor(204, 121, 167),
        RGBColor(86, 180, 233),
        BLACK,
    ];
    let mut svg = String::new();
    {
        let width = 520 * limits.len() as u32;
        let root = SVGBackend::with_string(&mut svg, (width, 420)).into_drawing_area();
        root.fill(&WHITE)?;
        let root = root.titled(
            &format!(
                "kube-gc: dependents collected per second ({} Pods of deleted ReplicaSets)",
                samples[0].dependents
            ),
            ("sans-serif", 18),
        )?;
        for (panel, limit) in root.split_evenly((1, limits.len())).iter().zip(&limits) {
            let caption = if limit.label == "off" {
                "no client rate limit".to_owned()
            } else {
                format!("--kube-api-qps {} --kube-api-burst {}", limit.qps, limit.burst)
            };
            let mut chart = ChartBuilder::on(panel)
                .caption(caption, ("sans-serif", 15))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d((1.0..max_w).log_scale(), (lo..hi).log_scale())?;
            chart
                .configure_mesh()
                .x_desc("--concurrent-gc-syncs")
                .y_desc("dependents / s")
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&|y| format!("{y:.0}"))
                .draw()?;
            for (i, l) in latencies.iter().enumerate() {
                let mut points: Vec<(f64, f64)> = samples
                    .iter()
                    .filter(|s| s.limit.label == limit.label && s.latency_ms == *l)
                    .map(|s| (f64::from(s.workers), s.per_second().max(1.0)))
                    .collect();
                if points.is_empty() {
                    continue;
                }
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                let color = colors[i % colors.len()];
                chart
                    .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                    .label(format!("{l} ms latency"))
                    .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color));
                chart.draw_series(points.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
        }
        root.present()?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests;
