//! The scenarios: the kinds they use, their shapes (owner chains, cycles, several owners,
//! cluster-scoped and cross-namespace owners, custom resources, dangling owners, adoption
//! races), the world they are built in, and what each must end as.

use super::*;

/// A kind of object the scenarios use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Kind {
    pub(super) api_version: &'static str,
    pub(super) plural: &'static str,
    pub(super) kind: &'static str,
    pub(super) namespaced: bool,
}

pub(super) const fn kind(api_version: &'static str, plural: &'static str, k: &'static str) -> Kind {
    Kind { api_version, plural, kind: k, namespaced: true }
}

pub(super) const CONFIGMAP: Kind = kind("v1", "configmaps", "ConfigMap");
pub(super) const SECRET: Kind = kind("v1", "secrets", "Secret");
pub(super) const POD: Kind = kind("v1", "pods", "Pod");
pub(super) const RC: Kind = kind("v1", "replicationcontrollers", "ReplicationController");
pub(super) const DEPLOYMENT: Kind = kind("apps/v1", "deployments", "Deployment");
pub(super) const REPLICASET: Kind = kind("apps/v1", "replicasets", "ReplicaSet");
pub(super) const JOB: Kind = kind("batch/v1", "jobs", "Job");
pub(super) const NODE: Kind =
    Kind { api_version: "v1", plural: "nodes", kind: "Node", namespaced: false };
pub(super) const CRD: Kind = Kind {
    api_version: "apiextensions.k8s.io/v1",
    plural: "customresourcedefinitions",
    kind: "CustomResourceDefinition",
    namespaced: false,
};
/// The custom resource, served once the chaos run creates its CRD.
pub(super) const WIDGET: Kind = kind("chaos.example.com/v1", "widgets", "Widget");

pub(super) const KINDS: [Kind; 6] = [CONFIGMAP, SECRET, POD, DEPLOYMENT, REPLICASET, JOB];

/// How a user deletes a scenario's root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Policy {
    Background,
    Foreground,
    Orphan,
    /// No policy: the kind's default (orphan for ReplicationControllers, else background).
    Default,
}

impl Policy {
    pub(super) fn options(self) -> DeleteOptions {
        let policy = match self {
            Policy::Background => Some("Background"),
            Policy::Foreground => Some("Foreground"),
            Policy::Orphan => Some("Orphan"),
            Policy::Default => None,
        };
        DeleteOptions { propagation_policy: policy.map(str::to_owned), ..DeleteOptions::default() }
    }

    /// Whether deleting a `root` of this kind with this policy orphans its dependents.
    pub(super) fn orphans(self, root: Kind) -> bool {
        // ReplicationControllers and batch/v1 Jobs orphan by default (as the API server).
        self == Policy::Orphan || (self == Policy::Default && (root == RC || root == JOB))
    }
}

/// A scenario's shape (what is built, and what the user deletes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shape {
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
    pub(super) fn draw(rng: &mut SplitMix64) -> Shape {
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

    pub(super) fn needs_crd(self) -> bool {
        self == Shape::CustomResource
    }
}

/// An object's expected final state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Expect {
    Gone,
    /// Kept, not being deleted, with owner references to exactly these uids.
    Kept(Vec<String>),
    /// Either (a race decides).
    GoneOrKept(Vec<String>),
}

/// An object a scenario created.
#[derive(Debug)]
pub(super) struct Tracked {
    pub(super) scenario: usize,
    pub(super) kind: Kind,
    pub(super) r: Resolved,
    pub(super) namespace: Option<String>,
    pub(super) name: String,
    pub(super) uid: String,
    pub(super) expect: Expect,
}

/// One scenario of a run.
#[derive(Debug)]
pub(super) struct Scenario {
    pub(super) shape: Shape,
    pub(super) policy: Policy,
    pub(super) namespace: String,
    /// The object the user deletes (set once built).
    pub(super) delete: Option<usize>,
    /// [`Shape::Adoption`]: the dependent and its adopter.
    pub(super) adopt: Option<(usize, usize)>,
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
pub(super) struct World<'a> {
    pub(super) store: &'a Store,
    pub(super) objects: Vec<Tracked>,
    pub(super) rng: SplitMix64,
}

impl World<'_> {
    pub(super) fn resolve(&self, k: Kind) -> anyhow::Result<Resolved> {
        Ok(self.store.resolve_api_version(k.api_version, k.plural)?)
    }

    /// An ownerReference to object `idx`.
    pub(super) fn owner_ref(&self, idx: usize, block: bool, controller: bool) -> Value {
        let o = &self.objects[idx];
        json!({
            "apiVersion": o.kind.api_version, "kind": o.kind.kind, "name": o.name, "uid": o.uid,
            "blockOwnerDeletion": block, "controller": controller,
        })
    }

    /// An ownerReference to an object that never existed.
    pub(super) fn phantom_ref(&mut self, k: Kind, name: &str, block: bool) -> Value {
        let uid = self.rng.uid();
        json!({"apiVersion": k.api_version, "kind": k.kind, "name": name, "uid": uid,
               "blockOwnerDeletion": block})
    }

    pub(super) fn create(
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

    pub(super) fn uid(&self, idx: usize) -> String {
        self.objects[idx].uid.clone()
    }

    pub(super) fn block(&mut self) -> bool {
        self.rng.next() % 2 == 0
    }

    pub(super) fn pick(&mut self, kinds: &[Kind]) -> Kind {
        kinds[(self.rng.next() % kinds.len() as u64) as usize]
    }

    /// Builds scenario `i`; returns the object the user deletes.
    pub(super) fn build(&mut self, i: usize, s: &Scenario) -> anyhow::Result<usize> {
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
    pub(super) fn adopt(&self, dependent: usize, adopter: usize) -> anyhow::Result<()> {
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
    pub(super) fn delete(&self, idx: usize, policy: Policy) -> anyhow::Result<()> {
        let o = &self.objects[idx];
        let opts = policy.options();
        with_actor(USER_ACTOR, || self.store.delete(&o.r, o.namespace.as_deref(), &o.name, &opts))?;
        Ok(())
    }

    /// Every object not in its expected state, and every object stuck with a GC finalizer.
    pub(super) fn failures(&self, scenarios: &[Scenario]) -> Vec<String> {
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

pub(super) fn meta(v: &Value) -> String {
    let m = &v["metadata"];
    format!(
        "ownerReferences {}, finalizers {}, deletionTimestamp {}",
        m["ownerReferences"], m["finalizers"], m["deletionTimestamp"]
    )
}

/// Objects (of any served resource) still carrying `orphan` or `foregroundDeletion`.
pub(super) fn stuck_finalizers(store: &Store) -> Vec<String> {
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
