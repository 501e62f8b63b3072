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
//! 2. [`ChaosConfig::scenarios`] scenarios drawn from the seed (see [`Shape`]), each in its own
//!    namespace, written straight to the store (no faults on the test's own writes).
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
use kube_gc_workload::SplitMix64;

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
    /// Scenarios per seed.
    #[arg(long, default_value_t = 12)]
    pub scenarios: usize,
    /// How many seeds to run, from --first-seed on (one simcluster and one kube-gc each).
    #[arg(long, default_value_t = 4)]
    pub seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    pub first_seed: u64,
    /// Seconds of faults, user deletes and restarts per seed.
    #[arg(long, default_value_t = 5.0)]
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
                watch_delay_rate: self.fault_watch_delay_rate,
                watch_delay: Duration::from_millis(self.fault_watch_delay_ms),
            },
            chaos: Duration::from_secs_f64(self.chaos_secs.max(0.0)),
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
// Scenarios

/// A kind of object the scenarios use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Kind {
    api_version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
}

const fn kind(api_version: &'static str, plural: &'static str, k: &'static str) -> Kind {
    Kind { api_version, plural, kind: k, namespaced: true }
}

const CONFIGMAP: Kind = kind("v1", "configmaps", "ConfigMap");
const SECRET: Kind = kind("v1", "secrets", "Secret");
const POD: Kind = kind("v1", "pods", "Pod");
const RC: Kind = kind("v1", "replicationcontrollers", "ReplicationController");
const DEPLOYMENT: Kind = kind("apps/v1", "deployments", "Deployment");
const REPLICASET: Kind = kind("apps/v1", "replicasets", "ReplicaSet");
const JOB: Kind = kind("batch/v1", "jobs", "Job");
const NODE: Kind = Kind { api_version: "v1", plural: "nodes", kind: "Node", namespaced: false };
const CRD: Kind = Kind {
    api_version: "apiextensions.k8s.io/v1",
    plural: "customresourcedefinitions",
    kind: "CustomResourceDefinition",
    namespaced: false,
};
/// The custom resource, served once the chaos run creates its CRD.
const WIDGET: Kind = kind("chaos.example.com/v1", "widgets", "Widget");

const KINDS: [Kind; 6] = [CONFIGMAP, SECRET, POD, DEPLOYMENT, REPLICASET, JOB];

/// How a user deletes a scenario's root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    Background,
    Foreground,
    Orphan,
    /// No policy: the kind's default (orphan for ReplicationControllers, else background).
    Default,
}

impl Policy {
    fn options(self) -> DeleteOptions {
        let policy = match self {
            Policy::Background => Some("Background"),
            Policy::Foreground => Some("Foreground"),
            Policy::Orphan => Some("Orphan"),
            Policy::Default => None,
        };
        DeleteOptions { propagation_policy: policy.map(str::to_owned), ..DeleteOptions::default() }
    }

    /// Whether deleting a `root` of this kind with this policy orphans its dependents.
    fn orphans(self, root: Kind) -> bool {
        self == Policy::Orphan || (self == Policy::Default && root == RC)
    }
}

/// A scenario's shape (what is built, and what the user deletes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// root ← level 1 ← … ← level `depth` (`fanout` objects at the last level); with `cycle`,
    /// the root is also owned by the first object of the last level. The user deletes the root.
    Chain { root: Kind, depth: usize, fanout: usize, cycle: bool },
    /// A dependent with two owners; the user deletes one, the other stays (solid).
    MultiOwner,
    /// A cluster-scoped owner (Node) of namespaced Pods, which the user deletes; and a Node
    /// owned by a namespaced ConfigMap (invalid: never collected, GC-SPEC §3.2 step 3).
    ClusterOwner,
    /// A Pod owned by a live ConfigMap of another namespace (invalid: the owner is looked up in
    /// the Pod's namespace, so the Pod is collected), beside a valid dependent of the same owner.
    CrossNamespace,
    /// Widgets (a CRD created at run time) owning a Widget and a ConfigMap; the user deletes
    /// the owner; and a Widget whose owner never existed.
    CustomResource,
    /// Dependents of an owner that never existed, and of a recreated owner (same name,
    /// another uid), beside a dependent of the live owner.
    Dangling,
    /// The user deletes an owner and, 0 to 50 ms later, a live owner adopts its dependent
    /// (upstream's race #114603): the dependent may go only if deleted before the adoption.
    Adoption,
}

impl Shape {
    fn draw(rng: &mut SplitMix64) -> Shape {
        match rng.next() % 7 {
            0 | 1 => {
                let depth = 1 + (rng.next() % 3) as usize;
                let roots = [CONFIGMAP, DEPLOYMENT, REPLICASET, RC, JOB, SECRET];
                Shape::Chain {
                    root: roots[(rng.next() % roots.len() as u64) as usize],
                    depth,
                    fanout: 1 + (rng.next() % 2) as usize,
                    cycle: rng.next() % 4 == 0,
                }
            }
            // Owner cycles under foreground deletion.
            2 => Shape::Chain {
                root: DEPLOYMENT,
                depth: 1 + (rng.next() % 3) as usize,
                fanout: 1,
                cycle: true,
            },
            3 => Shape::MultiOwner,
            4 => {
                if rng.next() % 2 == 0 {
                    Shape::ClusterOwner
                } else {
                    Shape::CrossNamespace
                }
            }
            5 => Shape::CustomResource,
            _ if rng.next() % 2 == 0 => Shape::Adoption,
            _ => Shape::Dangling,
        }
    }

    fn needs_crd(self) -> bool {
        self == Shape::CustomResource
    }
}

/// An object's expected final state.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Expect {
    Gone,
    /// Kept, not being deleted, with owner references to exactly these uids.
    Kept(Vec<String>),
    /// Either (a race decides).
    GoneOrKept(Vec<String>),
}

/// An object a scenario created.
#[derive(Debug)]
struct Tracked {
    scenario: usize,
    kind: Kind,
    r: Resolved,
    namespace: Option<String>,
    name: String,
    uid: String,
    expect: Expect,
}

/// One scenario of a run.
#[derive(Debug)]
struct Scenario {
    shape: Shape,
    policy: Policy,
    namespace: String,
    /// The object the user deletes (set once built).
    delete: Option<usize>,
    /// [`Shape::Adoption`]: the dependent and its adopter.
    adopt: Option<(usize, usize)>,
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.shape {
            Shape::Chain { root, depth, fanout, cycle } => write!(
                f,
                "{}: chain(root {}, depth {depth}, fanout {fanout}{}) deleted {:?}",
                self.namespace,
                root.kind,
                if cycle { ", cycle" } else { "" },
                self.policy
            ),
            shape => write!(f, "{}: {shape:?} deleted {:?}", self.namespace, self.policy),
        }
    }
}

/// The objects of a run, and how to create them.
struct World<'a> {
    store: &'a Store,
    objects: Vec<Tracked>,
    rng: SplitMix64,
}

impl World<'_> {
    fn resolve(&self, k: Kind) -> anyhow::Result<Resolved> {
        Ok(self.store.resolve_api_version(k.api_version, k.plural)?)
    }

    /// An ownerReference to object `idx`.
    fn owner_ref(&self, idx: usize, block: bool, controller: bool) -> Value {
        let o = &self.objects[idx];
        json!({
            "apiVersion": o.kind.api_version, "kind": o.kind.kind, "name": o.name, "uid": o.uid,
            "blockOwnerDeletion": block, "controller": controller,
        })
    }

    /// An ownerReference to an object that never existed.
    fn phantom_ref(&mut self, k: Kind, name: &str, block: bool) -> Value {
        let uid = self.rng.uid();
        json!({"apiVersion": k.api_version, "kind": k.kind, "name": name, "uid": uid,
               "blockOwnerDeletion": block})
    }

    fn create(
        &mut self,
        scenario: usize,
        k: Kind,
        namespace: Option<&str>,
        name: &str,
        owners: Vec<Value>,
        expect: Expect,
    ) -> anyhow::Result<usize> {
        let r = self.resolve(k)?;
        let namespace = namespace.filter(|_| k.namespaced);
        let mut obj = json!({"metadata": {"name": name}});
        if !owners.is_empty() {
            obj["metadata"]["ownerReferences"] = owners.into();
        }
        let created = with_actor(SETUP_ACTOR, || self.store.create(&r, namespace, obj))?;
        let uid = created["metadata"]["uid"].as_str().unwrap_or_default().to_owned();
        self.objects.push(Tracked {
            scenario,
            kind: k,
            r,
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
            uid,
            expect,
        });
        Ok(self.objects.len() - 1)
    }

    fn uid(&self, idx: usize) -> String {
        self.objects[idx].uid.clone()
    }

    fn block(&mut self) -> bool {
        self.rng.next() % 2 == 0
    }

    fn pick(&mut self, kinds: &[Kind]) -> Kind {
        kinds[(self.rng.next() % kinds.len() as u64) as usize]
    }

    /// Builds scenario `i`; returns the object the user deletes.
    fn build(&mut self, i: usize, s: &Scenario) -> anyhow::Result<usize> {
        let ns = Some(s.namespace.as_str());
        let keep = || Expect::Kept(Vec::new());
        match s.shape {
            Shape::Chain { root, depth, fanout, cycle } => {
                let orphan = s.policy.orphans(root);
                let root_idx = self.create(i, root, ns, "root", Vec::new(), Expect::Gone)?;
                let mut level = vec![root_idx];
                for d in 1..=depth {
                    let width = if d == depth { fanout } else { 1 };
                    let mut next = Vec::new();
                    for j in 0..width {
                        let k = self.pick(&KINDS);
                        let block = self.block();
                        let owner = self.owner_ref(level[0], block, true);
                        let expect = match (orphan, d) {
                            (false, _) => Expect::Gone,
                            (true, 1) => keep(),
                            (true, _) => Expect::Kept(vec![self.uid(level[0])]),
                        };
                        next.push(self.create(
                            i,
                            k,
                            ns,
                            &format!("l{d}-{j}"),
                            vec![owner],
                            expect,
                        )?);
                    }
                    level = next;
                }
                if cycle {
                    // The root owned by the first object of the last level (blocking).
                    let last = self.owner_ref(level[0], true, false);
                    let root = &self.objects[root_idx];
                    let patch = json!({"metadata": {"ownerReferences": [last]}}).to_string();
                    let (r, name) = (root.r.clone(), root.name.clone());
                    with_actor(SETUP_ACTOR, || {
                        self.store.patch(
                            &r,
                            ns,
                            &name,
                            kube_gc_simcluster::patch::PatchType::Merge,
                            patch.as_bytes(),
                        )
                    })?;
                }
                Ok(root_idx)
            }
            Shape::MultiOwner => {
                let (k1, k2, kd) = (self.pick(&KINDS), self.pick(&KINDS), self.pick(&KINDS));
                let o1 = self.create(i, k1, ns, "owner-deleted", Vec::new(), Expect::Gone)?;
                let o2 = self.create(i, k2, ns, "owner-solid", Vec::new(), keep())?;
                let (b1, b2) = (self.block(), self.block());
                let refs = vec![self.owner_ref(o1, b1, false), self.owner_ref(o2, b2, true)];
                self.create(i, kd, ns, "shared", refs, Expect::Kept(vec![self.uid(o2)]))?;
                let only = vec![self.owner_ref(o2, b2, true)];
                self.create(i, kd, ns, "bystander", only, Expect::Kept(vec![self.uid(o2)]))?;
                Ok(o1)
            }
            Shape::ClusterOwner => {
                let orphan = s.policy.orphans(NODE);
                let node = format!("{}-node", s.namespace);
                let owner = self.create(i, NODE, None, &node, Vec::new(), Expect::Gone)?;
                for j in 0..2 {
                    let block = self.block();
                    let r = vec![self.owner_ref(owner, block, true)];
                    let expect = if orphan { keep() } else { Expect::Gone };
                    self.create(i, POD, ns, &format!("on-node-{j}"), r, expect)?;
                }
                // A cluster-scoped object naming a namespaced owner: never collected.
                let cm = self.create(i, CONFIGMAP, ns, "namespaced-owner", Vec::new(), keep())?;
                let r = vec![self.owner_ref(cm, false, false)];
                let bad = format!("{}-invalid", s.namespace);
                self.create(i, NODE, None, &bad, r, Expect::Kept(vec![self.uid(cm)]))?;
                Ok(owner)
            }
            Shape::CrossNamespace => {
                let other = format!("{}-other", s.namespace);
                let owner = self.create(i, CONFIGMAP, ns, "owner", Vec::new(), keep())?;
                let block = self.block();
                let r = vec![self.owner_ref(owner, block, true)];
                self.create(i, POD, Some(&other), "cross", r, Expect::Gone)?;
                let r = vec![self.owner_ref(owner, block, true)];
                self.create(i, POD, ns, "valid", r, Expect::Kept(vec![self.uid(owner)]))?;
                // The user deletes an unrelated object of the scenario (the owner stays).
                self.create(i, SECRET, ns, "unrelated", Vec::new(), Expect::Gone)
            }
            Shape::CustomResource => {
                let orphan = s.policy.orphans(WIDGET);
                let owner = self.create(i, WIDGET, ns, "owner", Vec::new(), Expect::Gone)?;
                let expect = if orphan { keep() } else { Expect::Gone };
                for (k, name) in [(WIDGET, "child"), (CONFIGMAP, "child-cm")] {
                    let block = self.block();
                    let r = vec![self.owner_ref(owner, block, true)];
                    self.create(i, k, ns, name, r, expect.clone())?;
                }
                let block = self.block();
                let r = vec![self.phantom_ref(WIDGET, "never", block)];
                self.create(i, WIDGET, ns, "dangling", r, Expect::Gone)?;
                Ok(owner)
            }
            Shape::Dangling => {
                let k = self.pick(&KINDS);
                let block = self.block();
                let r = vec![self.phantom_ref(k, "never", block)];
                self.create(i, POD, ns, "dangling", r, Expect::Gone)?;
                let live = self.create(i, k, ns, "recreated", Vec::new(), keep())?;
                let mut stale = self.owner_ref(live, block, true);
                stale["uid"] = self.rng.uid().into();
                self.create(i, POD, ns, "stale", vec![stale], Expect::Gone)?;
                let r = vec![self.owner_ref(live, block, true)];
                self.create(i, POD, ns, "held", r, Expect::Kept(vec![self.uid(live)]))?;
                self.create(i, SECRET, ns, "unrelated", Vec::new(), Expect::Gone)
            }
            Shape::Adoption => {
                let (k1, k2, kd) = (self.pick(&KINDS), self.pick(&KINDS), self.pick(&KINDS));
                let owner = self.create(i, k1, ns, "owner", Vec::new(), Expect::Gone)?;
                let adopter = self.create(i, k2, ns, "adopter", Vec::new(), keep())?;
                let block = self.block();
                let r = vec![self.owner_ref(owner, block, true)];
                let expect = Expect::GoneOrKept(vec![self.uid(adopter)]);
                self.create(i, kd, ns, "adopted", r, expect)?;
                Ok(owner)
            }
        }
    }

    /// The user's adoption of `dependent` by `adopter` (a merge patch adding a reference, with
    /// the dependent's uid as precondition); a dependent already gone is not adopted.
    fn adopt(&self, dependent: usize, adopter: usize) -> anyhow::Result<()> {
        let o = &self.objects[dependent];
        let Ok(current) = self.store.get(&o.r, o.namespace.as_deref(), &o.name) else {
            return Ok(());
        };
        let current: Value = serde_json::from_slice(&current)?;
        let mut refs =
            current["metadata"]["ownerReferences"].as_array().cloned().unwrap_or_default();
        refs.push(self.owner_ref(adopter, false, false));
        let patch = json!({"metadata": {"uid": o.uid, "ownerReferences": refs}}).to_string();
        let patched = with_actor(USER_ACTOR, || {
            self.store.patch(
                &o.r,
                o.namespace.as_deref(),
                &o.name,
                kube_gc_simcluster::patch::PatchType::Merge,
                patch.as_bytes(),
            )
        });
        match patched {
            Ok(_) | Err(kube_gc_simcluster::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The user's delete of object `idx`.
    fn delete(&self, idx: usize, policy: Policy) -> anyhow::Result<()> {
        let o = &self.objects[idx];
        let opts = policy.options();
        with_actor(USER_ACTOR, || self.store.delete(&o.r, o.namespace.as_deref(), &o.name, &opts))?;
        Ok(())
    }

    /// Every object not in its expected state, and every object stuck with a GC finalizer.
    fn failures(&self, scenarios: &[Scenario]) -> Vec<String> {
        let mut out = Vec::new();
        for o in &self.objects {
            let got = self
                .store
                .get(&o.r, o.namespace.as_deref(), &o.name)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .filter(|v| v["metadata"]["uid"] == o.uid.as_str());
            let what = || {
                let at = o.namespace.as_deref().map_or(String::new(), |ns| format!("{ns}/"));
                let scenario =
                    scenarios.get(o.scenario).map_or("fillers".into(), ToString::to_string);
                format!("[{scenario}] {} {at}{}", o.kind.kind, o.name)
            };
            match (&o.expect, got) {
                (Expect::Gone | Expect::GoneOrKept(_), None) => {}
                (Expect::Gone, Some(v)) => {
                    out.push(format!("{}: expected gone, still there: {}", what(), meta(&v)));
                }
                (Expect::Kept(_), None) => out.push(format!("{}: expected kept, deleted", what())),
                (Expect::Kept(owners) | Expect::GoneOrKept(owners), Some(v)) => {
                    let mut got: Vec<String> = kube_gc_simcluster::audit::OwnerRef::of(&v)
                        .into_iter()
                        .map(|r| r.uid)
                        .collect();
                    let mut want = owners.clone();
                    got.sort();
                    want.sort();
                    let deleting = v["metadata"].get("deletionTimestamp").is_some();
                    if got != want || deleting {
                        out.push(format!(
                            "{}: expected kept with owners {want:?}, got {}",
                            what(),
                            meta(&v)
                        ));
                    }
                }
            }
        }
        out.extend(stuck_finalizers(self.store));
        out
    }
}

fn meta(v: &Value) -> String {
    let m = &v["metadata"];
    format!(
        "ownerReferences {}, finalizers {}, deletionTimestamp {}",
        m["ownerReferences"], m["finalizers"], m["deletionTimestamp"]
    )
}

/// Objects (of any served resource) still carrying `orphan` or `foregroundDeletion`.
fn stuck_finalizers(store: &Store) -> Vec<String> {
    let mut out = Vec::new();
    for def in store.resources() {
        let Ok(r) = store.resolve(&def.group, &def.version, &def.plural) else { continue };
        let Ok(page) = store.list(&r, &ListOptions::default()) else { continue };
        for item in page.items {
            let Ok(v) = serde_json::from_slice::<Value>(&item) else { continue };
            let fs = v["metadata"]["finalizers"].as_array().cloned().unwrap_or_default();
            if fs.iter().any(|f| f == "orphan" || f == "foregroundDeletion") {
                out.push(format!(
                    "{} {}/{}: stuck with a GC finalizer: {}",
                    def.kind,
                    v["metadata"]["namespace"].as_str().unwrap_or_default(),
                    v["metadata"]["name"].as_str().unwrap_or_default(),
                    meta(&v)
                ));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The collector

/// Starts kube-gc in this process against the scenario's simcluster.
async fn start_collector(
    kubeconfig: &std::path::Path,
    extra: &[String],
) -> anyhow::Result<InProcess> {
    let mut args: Vec<String> = [
        "kube-gc",
        "--kubeconfig",
        &kubeconfig.display().to_string(),
        "--debug-addr",
        "127.0.0.1:0",
        "--kube-api-qps",
        "1000",
        "--kube-api-burst",
        "1000",
        "--concurrent-gc-syncs",
        "4",
        "--initial-sync-timeout",
        "10s",
        // Discovers the CRD created at run time within a second.
        "--resync-period",
        "1s",
    ]
    .map(str::to_owned)
    .to_vec();
    args.extend(extra.iter().cloned());
    InProcess::start(args).await
}

// ---------------------------------------------------------------------------------------------
// A run

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
    for (t, step) in steps {
        tokio::time::sleep_until(started + t).await;
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
mod tests {
    use super::*;

    #[test]
    fn scenarios_should_be_drawn_from_the_seed() {
        let draw = |seed| {
            let mut rng = SplitMix64::new(seed);
            (0..32).map(|_| Shape::draw(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
        let all = draw(5);
        assert!(all.iter().any(|s| matches!(s, Shape::Chain { cycle: true, .. })));
        assert!(all.iter().any(|s| s.needs_crd()));
    }

    #[test]
    fn policy_should_orphan_for_orphan_and_legacy_default() {
        assert!(Policy::Orphan.orphans(CONFIGMAP));
        assert!(Policy::Default.orphans(RC));
        assert!(!Policy::Default.orphans(DEPLOYMENT));
        assert!(!Policy::Foreground.orphans(RC));
    }

    #[test]
    fn report_totals_should_be_one_line_with_the_verdict() {
        let report = Report {
            seeds: vec![SeedReport {
                seed: 1,
                scenarios: vec!["a".into(), "b".into()],
                converged_in: Some(Duration::from_secs(1)),
                deletions_checked: 3,
                ..SeedReport::default()
            }],
        };
        let line = report.totals();
        assert!(!line.contains('\n'));
        assert!(line.contains("scenarios=2 seeds=1"), "{line}");
        assert!(line.contains("deletions_checked=3 wrongful_deletions=0"), "{line}");
        assert!(line.ends_with("verdict=ok"), "{line}");
    }
}
