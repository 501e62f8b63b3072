//! The chaos suite: random garbage-collection scenarios from a seed, run by kube-gc (in this
//! process, over HTTP) against a simcluster that injects seeded faults, with collector
//! restarts; then, faults off, every scenario must reach the final state GC semantics
//! (GC-SPEC) prescribe, and the audit must show no wrongful deletion.
//!
//! # A run, per seed
//!
//! 1. A simcluster with [`ChaosConfig::faults`] (their seed: the run's seed) and
//!    [`ChaosConfig::fillers`] ConfigMaps, so that the collector's lists (pages of 500) carry
//!    continue tokens; some are owned by a live Deployment.
//! 2. [`ChaosConfig::scenarios`] scenarios drawn from the seed (see `scenarios::Shape`), each
//!    in its own namespace, written straight to the store (no faults on the test's own writes).
//! 3. kube-gc starts; during [`ChaosConfig::chaos`], at times drawn from the seed, each
//!    scenario's user deletes its root with its propagation policy, a CustomResourceDefinition
//!    is created and the custom-resource scenarios built on it, and the collector is stopped
//!    and a fresh one started [`ChaosConfig::restarts`] times.
//! 4. Faults off; every object must reach its expected state within
//!    [`ChaosConfig::converge_timeout`]: gone, or kept with the expected owners, not being
//!    deleted; no object may be left with the `orphan` or `foregroundDeletion` finalizer.
//! 5. The audit ([`kube_gc_simcluster::audit`]) must hold no wrongful deletion.
//!
//! Everything is bounded: each wait has a deadline, and a collector that does not stop in
//! time is aborted.

use std::fmt;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use kube_gc_simcluster::audit::with_actor;
use kube_gc_simcluster::faults::{FaultCounts, Faults};
use kube_gc_simcluster::store::{DeleteOptions, ListOptions, Resolved, Store};
use kube_gc_simcluster::{Config, SimCluster};

use crate::in_process::{InProcess, TempFile};

mod scenarios;

use kube_gc_workload::SplitMix64;
use scenarios::*;

/// The actor of the scenario setup's writes.
pub const SETUP_ACTOR: &str = "chaos-setup";
/// The actor of the scenario's user deletes.
pub const USER_ACTOR: &str = "chaos-user";

/// What to run.
#[derive(Clone, Debug)]
pub struct ChaosConfig {
    /// Scenarios per seed.
    pub scenarios: usize,
    /// The seeds, one simcluster and one kube-gc each.
    pub seeds: Vec<u64>,
    /// Fault rates (the seed is replaced by the run's).
    pub faults: Faults,
    /// How long the faults, the user deletes and the restarts go on.
    pub chaos: Duration,
    /// Collector restarts during the chaos.
    pub restarts: usize,
    /// Bound of the wait for the expected final state once faults stop.
    pub converge_timeout: Duration,
    /// Unowned ConfigMaps added, so that lists have several pages (kube-gc asks 500 a page).
    pub fillers: usize,
    /// Further kube-gc flags.
    pub kube_gc_args: Vec<String>,
    /// Run kube-gc (default). Without it, nothing collects: the suite's own check that its
    /// checks fail when nothing converges.
    pub collector: bool,
}

/// `kube-gc-lab chaos`: random GC scenarios from seeds, under seeded faults and
/// collector restarts; then faults off, every scenario must converge and the audit must show
/// no wrongful deletion. The last line printed is the totals (exit status 1 if any failed).
#[derive(clap::Args, Debug, Clone)]
pub struct ChaosArgs {
    /// Scenarios per seed (at least one: a run of none would pass having checked nothing).
    #[arg(long, default_value_t = 12,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub scenarios: usize,
    /// How many seeds to run, from --first-seed on (one simcluster and one kube-gc each).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    pub seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    pub first_seed: u64,
    /// Seconds of faults, user deletes and restarts per seed (0 to a day).
    #[arg(long, default_value_t = 5.0, value_parser = parse_chaos_secs)]
    pub chaos_secs: f64,
    /// Collector restarts per seed.
    #[arg(long, default_value_t = 2)]
    pub restarts: usize,
    /// Seconds allowed, once faults stop, to reach the expected state.
    #[arg(long, default_value_t = 120)]
    pub converge_timeout: u64,
    /// Unowned ConfigMaps, so that lists have several pages (kube-gc asks 500 a page).
    #[arg(long, default_value_t = 520)]
    pub fillers: usize,
    /// Probability of a 429 / 500 / 503 per request.
    #[arg(long, default_value_t = 0.05, value_parser = kube_gc_simcluster::faults::parse_rate)]
    pub fault_error_rate: f64,
    /// Latency added to every request, in milliseconds.
    #[arg(long, default_value_t = 1)]
    pub fault_latency_ms: u64,
    /// Random latency, 0 to this many milliseconds, on top.
    #[arg(long, default_value_t = 4)]
    pub fault_latency_jitter_ms: u64,
    /// Probability that a watch is cut mid-stream.
    #[arg(long, default_value_t = 0.2, value_parser = kube_gc_simcluster::faults::parse_rate)]
    pub fault_watch_drop_rate: f64,
    /// Probability of 410 Expired per watch from a resourceVersion and per continued list page.
    #[arg(long, default_value_t = 0.1, value_parser = kube_gc_simcluster::faults::parse_rate)]
    pub fault_expire_rate: f64,
    /// Probability of 409 Conflict per update, patch and delete.
    #[arg(long, default_value_t = 0.1, value_parser = kube_gc_simcluster::faults::parse_rate)]
    pub fault_conflict_rate: f64,
    /// Probability that an update, patch or delete is applied and then answered 504 (the
    /// collector cannot tell whether its write happened).
    #[arg(long, default_value_t = 0.05, value_parser = kube_gc_simcluster::faults::parse_rate)]
    pub fault_answer_lost_rate: f64,
    /// Probability that a watch event is held back (the collector's graph then lags).
    #[arg(long, default_value_t = 0.3, value_parser = kube_gc_simcluster::faults::parse_rate)]
    pub fault_watch_delay_rate: f64,
    /// The longest a watch event is held back, in milliseconds.
    #[arg(long, default_value_t = 300)]
    pub fault_watch_delay_ms: u64,
    /// Further kube-gc flags, after `--`.
    #[arg(last = true)]
    pub kube_gc_args: Vec<String>,
}

/// `--chaos-secs`: a number of seconds from 0 to a day.
fn parse_chaos_secs(text: &str) -> Result<f64, String> {
    let secs: f64 = text.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=86_400.0).contains(&secs) {
        Ok(secs)
    } else {
        Err(format!("{text} is not between 0 and 86400 seconds"))
    }
}

impl ChaosArgs {
    /// The run these arguments ask for.
    pub fn config(&self) -> ChaosConfig {
        ChaosConfig {
            scenarios: self.scenarios,
            seeds: (self.first_seed..self.first_seed.saturating_add(self.seeds)).collect(),
            faults: Faults {
                seed: 0,
                error_rate: self.fault_error_rate,
                latency: Duration::from_millis(self.fault_latency_ms),
                latency_jitter: Duration::from_millis(self.fault_latency_jitter_ms),
                watch_drop_rate: self.fault_watch_drop_rate,
                expire_rate: self.fault_expire_rate,
                conflict_rate: self.fault_conflict_rate,
                answer_lost_rate: self.fault_answer_lost_rate,
                watch_delay_rate: self.fault_watch_delay_rate,
                watch_delay: Duration::from_millis(self.fault_watch_delay_ms),
            },
            // `--chaos-secs` is checked; built in code, a value no Duration holds means none.
            chaos: Duration::try_from_secs_f64(self.chaos_secs).unwrap_or_default(),
            restarts: self.restarts,
            converge_timeout: Duration::from_secs(self.converge_timeout),
            fillers: self.fillers,
            kube_gc_args: self.kube_gc_args.clone(),
            collector: true,
        }
    }
}

impl Default for ChaosConfig {
    fn default() -> ChaosConfig {
        ChaosConfig {
            scenarios: 12,
            seeds: vec![1, 2, 3, 4],
            faults: default_faults(),
            chaos: Duration::from_secs(5),
            restarts: 2,
            converge_timeout: Duration::from_secs(120),
            fillers: 520,
            kube_gc_args: Vec::new(),
            collector: true,
        }
    }
}

/// The default fault rates of a chaos run.
pub fn default_faults() -> Faults {
    Faults {
        seed: 0,
        error_rate: 0.05,
        latency: Duration::from_millis(1),
        latency_jitter: Duration::from_millis(4),
        watch_drop_rate: 0.2,
        expire_rate: 0.1,
        conflict_rate: 0.1,
        // Writes whose outcome the collector cannot know: it must decide again from a read.
        answer_lost_rate: 0.05,
        // Stale views: events reach the collector late, so it often decides on a graph that
        // lags the store, while the scenario's own writes race it.
        watch_delay_rate: 0.3,
        watch_delay: Duration::from_millis(300),
    }
}

/// What one seed's run found.
#[derive(Debug, Default)]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// Each scenario, described.
    pub scenarios: Vec<String>,
    /// Faults injected, by kind.
    pub faults: FaultCounts,
    /// The collector's deletes the oracle judged.
    pub deletions_checked: u64,
    /// Wrongful deletions, described.
    pub wrongful: Vec<String>,
    /// Objects not in their expected state at the deadline (and objects stuck with a GC
    /// finalizer), described.
    pub failures: Vec<String>,
    /// Collector restarts done.
    pub restarts: usize,
    /// Time from faults off to the expected state (`None`: not reached).
    pub converged_in: Option<Duration>,
    /// For a seed that failed: what happened when, to tell a bug from a race, the chaos's
    /// steps as they ran and every write to the failed scenarios' objects (from the audit),
    /// in milliseconds from the first collector's start.
    pub trace: Vec<String>,
}

impl SeedReport {
    /// Whether the seed passed.
    pub fn ok(&self) -> bool {
        self.wrongful.is_empty() && self.failures.is_empty() && self.converged_in.is_some()
    }
}

impl fmt::Display for SeedReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let converged = match self.converged_in {
            Some(d) => format!("converged in {:.2} s", d.as_secs_f64()),
            None => "did NOT converge".to_owned(),
        };
        write!(
            f,
            "seed {}: {} scenarios, {} restarts, faults [{}], deletions checked {}, wrongful {}, {converged}",
            self.seed,
            self.scenarios.len(),
            self.restarts,
            self.faults,
            self.deletions_checked,
            self.wrongful.len()
        )?;
        for w in &self.wrongful {
            write!(f, "\n  WRONGFUL: {w}")?;
        }
        for x in &self.failures {
            write!(f, "\n  FAILED: {x}")?;
        }
        for line in &self.trace {
            write!(f, "\n    {line}")?;
        }
        Ok(())
    }
}

/// Every seed's report.
#[derive(Debug, Default)]
pub struct Report {
    /// One per seed, in order.
    pub seeds: Vec<SeedReport>,
}

impl Report {
    /// Whether every seed passed.
    pub fn ok(&self) -> bool {
        self.seeds.iter().all(SeedReport::ok)
    }

    /// The totals, one line: scenarios, seeds, faults by kind, deletions checked, wrongful
    /// deletions, failures.
    pub fn totals(&self) -> String {
        let mut faults = FaultCounts::default();
        for s in &self.seeds {
            faults.add(&s.faults);
        }
        format!(
            "chaos totals: scenarios={} seeds={} restarts={} faults=[{}] (total {}) deletions_checked={} wrongful_deletions={} failures={} verdict={}",
            self.seeds.iter().map(|s| s.scenarios.len()).sum::<usize>(),
            self.seeds.len(),
            self.seeds.iter().map(|s| s.restarts).sum::<usize>(),
            faults,
            faults.total(),
            self.seeds.iter().map(|s| s.deletions_checked).sum::<u64>(),
            self.seeds.iter().map(|s| s.wrongful.len()).sum::<usize>(),
            self.seeds.iter().map(|s| s.failures.len()).sum::<usize>(),
            if self.ok() { "ok" } else { "FAILED" },
        )
    }
}

/// Runs every seed in turn; `progress` gets each seed's report as it completes.
pub async fn run(
    config: &ChaosConfig,
    mut progress: impl FnMut(&SeedReport),
) -> anyhow::Result<Report> {
    let mut report = Report::default();
    for &seed in &config.seeds {
        let r = run_seed(config, seed).await?;
        progress(&r);
        report.seeds.push(r);
    }
    Ok(report)
}

// ---------------------------------------------------------------------------------------------
// The collector

/// Starts kube-gc in this process against the scenario's simcluster.
async fn start_collector(
    kubeconfig: &std::path::Path,
    extra: &[String],
) -> anyhow::Result<InProcess> {
    let mut args = InProcess::simcluster_args(kubeconfig);
    // A resync period of 1 s discovers the CRD created at run time within a second.
    args.extend(["--initial-sync-timeout", "10s", "--resync-period", "1s"].map(str::to_owned));
    args.extend(extra.iter().cloned());
    InProcess::start(args).await
}

// ---------------------------------------------------------------------------------------------
// A run

/// What a seed did when, kept to explain a failure (see [`SeedReport::trace`]).
struct Timeline {
    started: Instant,
    lines: Vec<(Duration, String)>,
}

impl Timeline {
    fn note(&mut self, what: String) {
        self.lines.push((self.started.elapsed(), what));
    }

    /// The steps, and the audit's records of the objects of the scenarios that `failures`
    /// name, merged in time order (writes before the start, the setup's, at 0).
    fn explain(
        self,
        failures: &[String],
        scenarios: &[Scenario],
        records: &[kube_gc_simcluster::audit::WriteRecord],
    ) -> Vec<String> {
        let failed: Vec<&str> = (scenarios.iter())
            .map(|s| s.namespace.as_str())
            .filter(|ns| failures.iter().any(|f| f.starts_with(&format!("[{ns}:"))))
            .collect();
        let mut lines = self.lines;
        for r in records {
            // A scenario's objects are in its namespace or in `<namespace>-other`, and its
            // cluster-scoped ones are named after it.
            let of = |ns: &str| {
                let ours = |name: &str| {
                    name == ns || name.strip_prefix(ns).is_some_and(|s| s.starts_with('-'))
                };
                ours(if r.namespace.is_empty() { &r.name } else { &r.namespace })
            };
            if !failed.iter().any(|ns| of(ns)) {
                continue;
            }
            let owners: Vec<&str> = r.owner_references.iter().map(|o| o.name.as_str()).collect();
            let at = r.at.saturating_duration_since(self.started);
            let object = match r.namespace.as_str() {
                "" => r.name.clone(),
                ns => format!("{ns}/{}", r.name),
            };
            lines.push((
                at,
                format!(
                    "{} {:?} {} {object} rv {} (owners before: [{}]){}",
                    r.actor,
                    r.verb,
                    r.resource,
                    r.resource_version,
                    owners.join(", "),
                    if r.removed { ", removed" } else { "" },
                ),
            ));
        }
        lines.sort_by_key(|(at, _)| *at);
        lines.into_iter().map(|(at, what)| format!("{:>6} ms  {what}", at.as_millis())).collect()
    }
}

/// What happens during the chaos, at a time drawn from the seed.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// The user deletes scenario `i`'s root.
    Delete(usize),
    /// The user adopts scenario `i`'s dependent.
    Adopt(usize),
    /// Stop the collector and start a fresh one.
    Restart,
    /// Create the CRD and build the custom-resource scenarios.
    CustomResources,
}

fn at(rng: &mut SplitMix64, from: Duration, to: Duration) -> Duration {
    let span = to.saturating_sub(from).as_millis() as u64;
    from + Duration::from_millis(if span == 0 { 0 } else { rng.next() % span })
}

/// Runs one seed; see the [module documentation](self).
pub async fn run_seed(config: &ChaosConfig, seed: u64) -> anyhow::Result<SeedReport> {
    let mut rng = SplitMix64::new(seed ^ 0x00c4_a05c_4a05);
    let sim = SimCluster::start(Config {
        bookmark_interval: Duration::from_millis(500),
        faults: Faults { seed, ..config.faults.clone() },
        ..Config::default()
    })
    .await?;
    let store = sim.store().clone();
    let path = std::env::temp_dir().join(format!(
        "kube-gc-chaos-{}-{}.kubeconfig",
        std::process::id(),
        sim.addr().port()
    ));
    std::fs::write(&path, sim.kubeconfig())?;
    let kubeconfig = TempFile(path);

    let mut world = World { store: &store, objects: Vec::new(), rng: SplitMix64::new(seed) };
    let mut scenarios: Vec<Scenario> = (0..config.scenarios)
        .map(|i| {
            let shape = Shape::draw(&mut rng);
            let policy = match (shape, rng.next() % 4) {
                (Shape::Chain { cycle: true, root: DEPLOYMENT, fanout: 1, .. }, _) => {
                    Policy::Foreground
                }
                (_, 0) => Policy::Background,
                (_, 1) => Policy::Foreground,
                (_, 2) => Policy::Orphan,
                _ => Policy::Default,
            };
            let namespace = format!("chaos-{seed}-{i}");
            Scenario { shape, policy, namespace, delete: None, adopt: None }
        })
        .collect();

    // Namespaces, fillers (lists of several pages), scenarios that need no CRD.
    let namespaces = store.resolve("", "v1", "namespaces")?;
    for s in &scenarios {
        for ns in [s.namespace.clone(), format!("{}-other", s.namespace)] {
            with_actor(SETUP_ACTOR, || {
                store.create(&namespaces, None, json!({"metadata": {"name": ns}}))
            })?;
        }
    }
    let filler_ns = format!("chaos-{seed}-fillers");
    let filler_owner = world.create(
        usize::MAX,
        DEPLOYMENT,
        Some(&filler_ns),
        "owner",
        Vec::new(),
        Expect::Kept(Vec::new()),
    )?;
    for j in 0..config.fillers {
        let (owners, expect) = if j % 10 == 0 {
            let b = world.block();
            (
                vec![world.owner_ref(filler_owner, b, true)],
                Expect::Kept(vec![world.uid(filler_owner)]),
            )
        } else {
            (Vec::new(), Expect::Kept(Vec::new()))
        };
        world.create(
            usize::MAX,
            CONFIGMAP,
            Some(&filler_ns),
            &format!("filler-{j}"),
            owners,
            expect,
        )?;
    }
    for (i, s) in scenarios.iter_mut().enumerate() {
        if !s.shape.needs_crd() {
            s.delete = Some(world.build(i, s)?);
        }
        if s.shape == Shape::Adoption {
            let n = world.objects.len();
            s.adopt = Some((n - 1, n - 2));
        }
    }

    // The chaos's steps, in time order.
    let chaos = config.chaos;
    let crd_at = at(&mut rng, Duration::ZERO, chaos / 3);
    let mut steps: Vec<(Duration, Step)> = Vec::new();
    if scenarios.iter().any(|s| s.shape.needs_crd()) {
        steps.push((crd_at, Step::CustomResources));
    }
    for (i, s) in scenarios.iter().enumerate() {
        let from =
            if s.shape.needs_crd() { crd_at + Duration::from_millis(1) } else { Duration::ZERO };
        let delete_at = at(&mut rng, from, chaos);
        steps.push((delete_at, Step::Delete(i)));
        if s.shape == Shape::Adoption {
            let delay = Duration::from_millis(rng.next() % 51);
            steps.push((delete_at + delay, Step::Adopt(i)));
        }
    }
    for _ in 0..config.restarts {
        steps.push((at(&mut rng, Duration::ZERO, chaos), Step::Restart));
    }
    steps.sort_by_key(|(t, _)| *t);

    let mut report = SeedReport { seed, ..SeedReport::default() };
    let start = || async {
        match config.collector {
            true => start_collector(&kubeconfig.0, &config.kube_gc_args).await.map(Some),
            false => Ok(None),
        }
    };
    let mut collector = start().await?;
    let started = tokio::time::Instant::now();
    let mut timeline = Timeline { started: started.into_std(), lines: Vec::new() };
    for (t, step) in steps {
        tokio::time::sleep_until(started + t).await;
        timeline.note(match step {
            Step::Delete(i) | Step::Adopt(i) => format!("{step:?}: [{}]", scenarios[i]),
            Step::Restart => "collector stopped".to_owned(),
            Step::CustomResources => "CRD created, then the custom-resource scenarios".to_owned(),
        });
        match step {
            Step::Delete(i) => {
                let s = &scenarios[i];
                let idx = s.delete.ok_or_else(|| anyhow::anyhow!("scenario {i} not built"))?;
                world.delete(idx, s.policy)?;
            }
            Step::Adopt(i) => {
                if let Some((dependent, adopter)) = scenarios[i].adopt {
                    world.adopt(dependent, adopter)?;
                }
            }
            Step::Restart => {
                if let Some(c) = collector.take() {
                    c.stop().await;
                }
                collector = start().await?;
                timeline.note("a new collector started".to_owned());
                report.restarts += 1;
            }
            Step::CustomResources => {
                let crd = json!({
                    "metadata": {"name": "widgets.chaos.example.com"},
                    "spec": {
                        "group": "chaos.example.com",
                        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                        "scope": "Namespaced",
                        "versions": [{"name": "v1", "served": true, "storage": true}],
                    },
                });
                let r = world.resolve(CRD)?;
                with_actor(SETUP_ACTOR, || store.create(&r, None, crd))?;
                for (i, s) in scenarios.iter_mut().enumerate() {
                    if s.shape.needs_crd() {
                        s.delete = Some(world.build(i, s)?);
                    }
                }
            }
        }
    }
    tokio::time::sleep_until(started + chaos).await;

    // Faults off: converge within the deadline.
    sim.faults_off();
    timeline.note("faults off".to_owned());
    let off = Instant::now();
    let deadline = tokio::time::Instant::now() + config.converge_timeout;
    let mut failures = world.failures(&scenarios);
    while !failures.is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        failures = world.failures(&scenarios);
    }
    if failures.is_empty() {
        report.converged_in = Some(off.elapsed());
    }
    if let Some(c) = collector.take() {
        c.stop().await;
    }
    if !failures.is_empty() {
        report.trace = timeline.explain(&failures, &scenarios, &sim.audit().records());
    }
    report.failures = failures;
    report.faults = sim.fault_counts();
    report.deletions_checked = sim.audit().deletions_checked();
    report.wrongful = sim.audit().wrongful_deletions().iter().map(ToString::to_string).collect();
    report.scenarios = scenarios.iter().map(ToString::to_string).collect();
    drop(world);
    sim.shutdown().await;
    drop(kubeconfig);
    Ok(report)
}

#[cfg(test)]
mod tests;
