//! The stale-view property test's second, independently written version (issue #11, "Trust";
//! the first is `stale_view.rs`): two oracles written apart, over other resources (a
//! cluster-scoped Node, a custom Widget, a ConfigMap in another namespace, referenced across
//! namespaces both ways) and references whose UID lives under another kind and name, with the
//! events taken from [`MemoryCluster`]'s own watch log instead of snapshot diffs, and a variant
//! with early collection. Random object histories, watch events delivered to the graph with
//! random lag, the collector's workers running against the live [`MemoryCluster`] between user
//! actions, and, at every write the cluster serves, an oracle asking whether upstream's
//! attemptToDeleteItem / attemptToOrphan, reading the live object and its live owners at that
//! moment, would make that same write (DESIGN.md "Safety model", GC-SPEC.md §3-5). After the
//! history everything is delivered, the workers run to quiescence and liveness is checked: no
//! GC finalizer left, no garbage left unless orphaned.
//!
//! `PROPTEST_CASES` scales the run (default 2000, ~1.5 s in debug when passing); a failure
//! shrinks to a minimal history. The minimal histories found against the code before the
//! issue's fixes are kept below as plain tests.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::executor::block_on;
use kube_gc_engine::GraphChanges;
use kube_gc_engine::cluster::{Cluster, DeleteOptions, PatchType, PropagationPolicy, Resource};
use kube_gc_engine::collector::{Collector, CollectorOptions, ProofWaits};
use kube_gc_engine::meta::{FINALIZER_DELETE_DEPENDENTS, FINALIZER_ORPHAN};
use kube_gc_engine::{Event, Graph, Ingester, ObjectMeta, ObjectType, OwnerReference, Uid};
use kube_gc_testkit::MemoryCluster;
use kube_gc_testkit::memory_cluster::{Call, Request, resource};
use kube_gc_testkit::patch::apply_patch;
use parking_lot::Mutex;
use proptest::prelude::*;

mod support;

/// Another controller's finalizer, which the collector must never remove.
const KEEP: &str = "example.com/keep";
const NS: &str = "ns1";
const OTHER_NS: &str = "ns2";

/// The object slots a history works on: (resource, name). Names are reused across
/// recreations; each creation gets a fresh UID.
fn slots() -> Vec<(Resource, &'static str)> {
    let deployments = resource("apps/v1", "deployments", "Deployment", true);
    let replicasets = resource("apps/v1", "replicasets", "ReplicaSet", true);
    let pods = resource("v1", "pods", "Pod", true);
    vec![
        (deployments, "d"),
        (replicasets.clone(), "r1"),
        (replicasets, "r2"),
        (pods.clone(), "p1"),
        (pods, "p2"),
        (resource("v1", "nodes", "Node", false), "n"),
        (widgets(), "w"),
        // In another namespace: references to it from ns1, and its own to ns1's objects,
        // cross namespaces (looked up in the dependent's namespace, so never found).
        (configmaps(), "c"),
    ]
}

fn configmaps() -> Resource {
    resource("v1", "configmaps", "ConfigMap", true)
}

fn widgets() -> Resource {
    resource("acme.example/v1", "widgets", "Widget", true)
}

/// The namespace of a slot's resource: ConfigMaps live in another namespace than the rest.
fn ns_of(r: &Resource) -> &'static str {
    match (r.namespaced, r.resource == "configmaps") {
        (false, _) => "",
        (true, true) => OTHER_NS,
        (true, false) => NS,
    }
}

/// One step of a history.
#[derive(Clone, Debug)]
enum Op {
    /// Create the object of slot `slot` (if absent) with references to `owners`: (slot, block
    /// owner deletion, reference the slot's current UID (else a stale or never-used one)).
    Create { slot: usize, owners: Vec<(usize, bool, bool)> },
    /// Another controller adds a reference (adoption when the owner is live); `repeat` adds it
    /// even if the UID is already referenced (repeated UIDs).
    AddRef { slot: usize, owner: usize, block: bool, repeat: bool },
    /// Another controller adds a reference with the UID of slot `owner`'s object (its current
    /// one, or a stale or never-used one) under slot `named`'s kind and name: a UID under
    /// another identity, which upstream's graph holds under the UID's own.
    AddRefAs { slot: usize, owner: usize, named: usize, current: bool },
    /// Another controller removes the `index`-th reference.
    RemoveRef { slot: usize, index: usize },
    /// A user deletes the object with a propagation policy.
    Delete { slot: usize, policy: Option<PropagationPolicy> },
    /// Another controller adds or removes its finalizer.
    Finalizer { slot: usize, add: bool },
    /// The informers deliver a prefix (`per_256` of 256) of the undelivered events.
    Deliver { per_256: u8 },
    /// One resource's informer (the `slot`'s resource) delivers a prefix of its undelivered
    /// events, ahead of the others': watches of different resources are not ordered with each
    /// other, so a dependent may be observed before an owner created earlier.
    DeliverResource { slot: usize, per_256: u8 },
    /// The workers process up to `n` items of the attemptToDelete (or attemptToOrphan) queue.
    Work { n: u8, orphan: bool },
    /// Every watcher has synced (only with early collection).
    FinishWarmUp,
    /// A round of absence proofs (consistent lists of the resources of waiting virtual
    /// owners); with `listed`, every resource is first reported listed, whatever the graph
    /// holds, so that lists run during warm-up too.
    Prove { listed: bool },
}

fn op() -> impl Strategy<Value = Op> {
    let n = slots().len();
    let policy = prop_oneof![
        Just(None),
        Just(Some(PropagationPolicy::Orphan)),
        Just(Some(PropagationPolicy::Foreground)),
        Just(Some(PropagationPolicy::Background)),
    ];
    prop_oneof![
        3 => (0..n, prop::collection::vec((0..n, any::<bool>(), prop::bool::weighted(0.8)), 0..3))
            .prop_map(|(slot, owners)| Op::Create { slot, owners }),
        1 => (0..n, 0..n, any::<bool>(), prop::bool::weighted(0.2))
            .prop_map(|(slot, owner, block, repeat)| Op::AddRef { slot, owner, block, repeat }),
        1 => (0..n, 0..n, 0..n, any::<bool>())
            .prop_map(|(slot, owner, named, current)| Op::AddRefAs { slot, owner, named, current }),
        1 => (0..n, 0..3usize).prop_map(|(slot, index)| Op::RemoveRef { slot, index }),
        2 => (0..n, policy).prop_map(|(slot, policy)| Op::Delete { slot, policy }),
        1 => (0..n, any::<bool>()).prop_map(|(slot, add)| Op::Finalizer { slot, add }),
        2 => any::<u8>().prop_map(|per_256| Op::Deliver { per_256 }),
        2 => (0..n, any::<u8>()).prop_map(|(slot, per_256)| Op::DeliverResource { slot, per_256 }),
        3 => (1..6u8, prop::bool::weighted(0.3)).prop_map(|(n, orphan)| Op::Work { n, orphan }),
        1 => Just(Op::FinishWarmUp),
        2 => any::<bool>().prop_map(|listed| Op::Prove { listed }),
    ]
}

/// What the oracle remembers across calls.
#[derive(Default)]
struct OracleState {
    /// Writes the oracle refused, with the live state.
    violations: Vec<String>,
    /// UIDs of owners whose `orphan` finalizer the collector removed: the engine may later
    /// remove references to them (its bounded orphan memory, beyond upstream and safe: the
    /// user asked for those dependents to be kept).
    orphaned: HashSet<String>,
}

/// How upstream classifies one live owner reference (GC-SPEC §3).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    Dangling,
    Waiting,
    Solid,
    /// A cluster-scoped dependent's reference to a namespaced kind: upstream's
    /// attemptToDeleteItem fails on it (namespacedOwnerOfClusterScopedObjectErr) and writes
    /// nothing for the item, for ever.
    Invalid,
}

fn classify(cluster: &MemoryCluster, dependent: &ObjectMeta, r: &OwnerReference) -> Class {
    let Ok(res) = cluster.resource_for(ObjectType::new(&r.api_version, &r.kind)) else {
        return Class::Solid; // unmapped: upstream does not delete on it
    };
    if res.namespaced && dependent.namespace.is_empty() {
        return Class::Invalid;
    }
    let ns = if res.namespaced { dependent.namespace.as_str() } else { "" };
    match cluster.object(&res, ns, &r.name) {
        Some(o) if o.uid == r.uid => {
            if o.deletion_timestamp && o.has_finalizer(FINALIZER_DELETE_DEPENDENTS) {
                Class::Waiting
            } else {
                Class::Solid
            }
        }
        _ => Class::Dangling,
    }
}

/// Live objects that reference `uid` (with `blocking`, only through blockOwnerDeletion=true).
fn live_dependents(cluster: &MemoryCluster, uid: &str, blocking: bool) -> Vec<String> {
    cluster
        .objects()
        .into_iter()
        .filter(|(_, m)| {
            m.owner_references
                .iter()
                .any(|r| r.uid == uid && (!blocking || r.block_owner_deletion == Some(true)))
        })
        .map(|(res, m)| format!("{}/{}", res.resource, m.name))
        .collect()
}

/// Of [`live_dependents`], those the graph holds as dependents of `uid`.
fn observed_dependents(
    cluster: &MemoryCluster,
    graph: &Graph,
    uid: &str,
    blocking: bool,
) -> Vec<String> {
    let in_graph: HashSet<String> = Uid::lookup(uid)
        .map(|u| graph.dependents(u).iter().map(|d| d.uid.to_string()).collect())
        .unwrap_or_default();
    cluster
        .objects()
        .into_iter()
        .filter(|(_, m)| {
            in_graph.contains(&m.uid)
                && m.owner_references
                    .iter()
                    .any(|r| r.uid == uid && (!blocking || r.block_owner_deletion == Some(true)))
        })
        .map(|(res, m)| format!("{}/{}", res.resource, m.name))
        .collect()
}

/// The live object and the classification of its references, for messages.
fn describe(cluster: &MemoryCluster, live: &ObjectMeta) -> String {
    let classes: Vec<String> = live
        .owner_references
        .iter()
        .map(|r| format!("{}:{:?}", r.uid, classify(cluster, live, r)))
        .collect();
    format!(
        "live uid={} rv={} finalizers={:?} deleting={} refs=[{}]",
        live.uid,
        live.resource_version,
        live.finalizers,
        live.deletion_timestamp,
        classes.join(", ")
    )
}

/// THE ORACLE: judges `call` on the live state, before it is served. `None` if upstream would
/// make this write (or it is not a write: a GET, or a request the server will reject), else
/// why not.
fn judge(
    cluster: &MemoryCluster,
    graph: &Graph,
    call: &Call,
    orphaned: &mut HashSet<String>,
) -> Option<String> {
    let live = cluster.object(&call.resource, &call.namespace, &call.name)?; // 404: no write
    let what = format!("{} {}", call.action(), describe(cluster, &live));
    match &call.request {
        Request::Get | Request::List { .. } => None,
        Request::Delete(options) => {
            judge_delete(cluster, &live, options).map(|e| format!("{e}: {what}"))
        }
        Request::Patch(patch) => {
            if patch.patch_type == PatchType::StrategicMerge && call.resource == widgets() {
                return None; // 415
            }
            let mut next = live.clone();
            if apply_patch(&mut next, patch).is_err() {
                return None; // precondition failed (409 / 422): no write
            }
            judge_patch(cluster, graph, &live, &next, orphaned)
                .map(|e| format!("{e}: {what} patch={}", patch.body))
        }
    }
}

fn judge_delete(
    cluster: &MemoryCluster,
    live: &ObjectMeta,
    options: &DeleteOptions,
) -> Option<String> {
    if options.precondition_uid.as_ref().is_some_and(|u| *u != live.uid)
        || options
            .precondition_resource_version
            .as_ref()
            .is_some_and(|rv| *rv != live.resource_version)
    {
        return None; // 409: no write
    }
    if live.owner_references.is_empty() {
        return Some("DELETE of an object without owner references".into());
    }
    let classes: Vec<Class> =
        live.owner_references.iter().map(|r| classify(cluster, live, r)).collect();
    if classes.contains(&Class::Solid) {
        return Some("DELETE of an object with a live owner".into());
    }
    if classes.contains(&Class::Invalid) {
        return Some("DELETE of an object upstream cannot decide on (invalid reference)".into());
    }
    let from_finalizers = if live.has_finalizer(FINALIZER_ORPHAN) {
        PropagationPolicy::Orphan
    } else if live.has_finalizer(FINALIZER_DELETE_DEPENDENTS) {
        PropagationPolicy::Foreground
    } else {
        PropagationPolicy::Background
    };
    let mut allowed = vec![from_finalizers];
    // Upstream deletes in the foreground an item with waiting owners and dependents; whether it
    // has dependents is its graph's view, which may lag a dependent's deletion exactly as ours
    // may, so Foreground is upstream's write whenever some owner is waiting.
    if classes.contains(&Class::Waiting) {
        allowed.push(PropagationPolicy::Foreground);
    }
    let policy = options.propagation_policy.unwrap_or(PropagationPolicy::Background);
    (!allowed.contains(&policy))
        .then(|| format!("DELETE with {policy:?}, upstream would use {allowed:?}"))
}

fn judge_patch(
    cluster: &MemoryCluster,
    graph: &Graph,
    live: &ObjectMeta,
    next: &ObjectMeta,
    orphaned: &mut HashSet<String>,
) -> Option<String> {
    let count =
        |m: &ObjectMeta, uid: &str| m.owner_references.iter().filter(|r| r.uid == uid).count();
    let classes: Vec<(String, Class)> =
        live.owner_references.iter().map(|r| (r.uid.clone(), classify(cluster, live, r))).collect();
    let class_of = |uid: &str| classes.iter().find(|(u, _)| u == uid).map(|(_, c)| *c);
    for r in &next.owner_references {
        if count(next, &r.uid) > count(live, &r.uid) {
            return Some(format!("patch adds a reference to {}", r.uid));
        }
    }
    // Upstream removes references by UID: every reference with a UID it found dangling or
    // waiting goes, beside a solid owner found among the live references, even a solid
    // reference repeating that UID under its owner's own name (a UID can be named under
    // another identity, where it is dangling).
    let has_solid = classes.iter().any(|(_, c)| *c == Class::Solid);
    let not_solid_under = |uid: &str| {
        classes.iter().any(|(u, c)| u == uid && matches!(c, Class::Dangling | Class::Waiting))
    };
    for (r, (_, class)) in live.owner_references.iter().zip(&classes) {
        if count(next, &r.uid) == count(live, &r.uid) {
            // Kept: only unblocking a reference to a waiting owner may change it. References
            // repeating a UID are compared as the sequence of those with that UID.
            let with_uid = |m: &ObjectMeta| -> Vec<OwnerReference> {
                m.owner_references.iter().filter(|n| n.uid == r.uid).cloned().collect()
            };
            // Upstream's unblockOwnerReferences, before a foreground DELETE (some owner waiting,
            // none solid), sets blockOwnerDeletion=false on every blocking reference of the
            // item, dangling ones included.
            let unblocked = |m: &ObjectMeta| -> Vec<OwnerReference> {
                with_uid(m)
                    .into_iter()
                    .map(|mut n| {
                        n.block_owner_deletion = n.block_owner_deletion.map(|_| false);
                        n
                    })
                    .collect()
            };
            let before_foreground_delete = classes.iter().any(|(_, c)| *c == Class::Waiting)
                && classes.iter().all(|(_, c)| matches!(c, Class::Waiting | Class::Dangling));
            let only_unblocks = before_foreground_delete && with_uid(next) == unblocked(live);
            if with_uid(next) != with_uid(live)
                && class_of(&r.uid) != Some(Class::Waiting)
                && !only_unblocks
            {
                return Some(format!("patch changes the reference to non-waiting owner {}", r.uid));
            }
            continue;
        }
        let class = *class;
        let dangling_beside_solid = not_solid_under(&r.uid)
            && has_solid
            && classes.iter().all(|(_, c)| *c != Class::Invalid);
        // The memory of orphaned owners removes a reference only once its owner is gone.
        let orphaned_and_gone = class == Class::Dangling && orphaned.contains(&r.uid);
        if !dangling_beside_solid && !is_orphaning(cluster, r) && !orphaned_and_gone {
            return Some(format!(
                "patch removes the {class:?} reference to {} (a solid owner: {has_solid})",
                r.uid
            ));
        }
    }
    for f in &next.finalizers {
        if !live.has_finalizer(f) {
            return Some(format!("patch adds finalizer {f}"));
        }
    }
    for f in &live.finalizers {
        if next.has_finalizer(f) {
            continue;
        }
        if !live.deletion_timestamp {
            return Some(format!("patch removes {f} from an object not being deleted"));
        }
        // Upstream decides on the dependents its graph holds: one whose reference no watch
        // has delivered yet (its resource's watcher lags the owner's) is upstream's own race,
        // not a departure.
        if f == FINALIZER_ORPHAN {
            let left = observed_dependents(cluster, graph, &live.uid, false);
            if !left.is_empty() {
                return Some(format!(
                    "patch removes orphan while dependents {left:?} still reference it"
                ));
            }
            orphaned.insert(live.uid.clone());
        } else if f == FINALIZER_DELETE_DEPENDENTS {
            let left = observed_dependents(cluster, graph, &live.uid, true);
            if !left.is_empty() {
                return Some(format!("patch removes foregroundDeletion while {left:?} block it"));
            }
        } else {
            return Some(format!("patch removes another controller's finalizer {f}"));
        }
    }
    None
}

/// Upstream's attemptToOrphan on the owner `r` points to would remove `r` from `dependent`:
/// the live object with that UID is being deleted with the orphan finalizer. Upstream's graph
/// keys owners by UID, so this holds whatever namespace the reference resolves to (a
/// cluster-scoped dependent's reference to a namespaced owner included).
fn is_orphaning(cluster: &MemoryCluster, r: &OwnerReference) -> bool {
    cluster
        .objects()
        .into_iter()
        .any(|(_, o)| o.uid == r.uid && o.deletion_timestamp && o.has_finalizer(FINALIZER_ORPHAN))
}

struct World {
    cluster: Arc<MemoryCluster>,
    ingester: Ingester,
    collector: Collector<MemoryCluster>,
    changes: Arc<GraphChanges>,
    /// Watch events not yet delivered to the graph.
    undelivered: Vec<Event>,
    user: Arc<AtomicBool>,
    oracle: Arc<Mutex<OracleState>>,
    slots: Vec<(Resource, &'static str)>,
    /// Per slot, the UIDs it has had (the last is current if the object exists).
    uids: Vec<Vec<String>>,
    next_uid: u64,
}

impl World {
    fn new(options: CollectorOptions) -> World {
        let cluster = Arc::new(MemoryCluster::new());
        let slots = slots();
        for (res, _) in &slots {
            if *res == widgets() {
                cluster.register_custom(res.clone());
            } else {
                cluster.register(res.clone());
            }
        }
        let user = Arc::new(AtomicBool::new(false));
        let oracle = Arc::new(Mutex::new(OracleState::default()));
        let graph = Arc::new(Graph::new(2).unwrap());
        {
            let (user, oracle, graph) = (user.clone(), oracle.clone(), graph.clone());
            cluster.on_call(move |cluster, call| {
                if !user.load(Ordering::SeqCst) {
                    let mut state = oracle.lock();
                    if let Some(v) = judge(cluster, &graph, call, &mut state.orphaned) {
                        let calls = cluster.calls();
                        let recent: Vec<String> = calls
                            .iter()
                            .skip(calls.len().saturating_sub(6))
                            .map(|c| match &c.request {
                                Request::Get | Request::List { .. } => c.action(),
                                Request::Patch(p) => format!("{} {}", c.action(), p.body),
                                Request::Delete(o) => format!("{} {o:?}", c.action()),
                            })
                            .collect();
                        state.violations.push(format!("{v}\n  calls before: {recent:#?}"));
                    }
                }
                None
            });
        }
        let (collector, changes) = support::immediate_collector(&graph, &cluster, options);
        if options.early_collection {
            collector.begin_warm_up();
        }
        let uids = vec![Vec::new(); slots.len()];
        World {
            ingester: Ingester::new(graph, 2),
            cluster,
            collector,
            changes,
            undelivered: Vec::new(),
            user,
            oracle,
            slots,
            uids,
            next_uid: 1,
        }
    }

    fn live(&self, slot: usize) -> Option<ObjectMeta> {
        let (res, name) = &self.slots[slot];
        self.cluster.object(res, ns_of(res), name)
    }

    /// A reference to the object of slot `owner`, or `None` where the reference would race
    /// upstream's own graph: a new reference to an owner whose deletion already began with
    /// `orphan` (upstream's attemptToOrphan may have listed the dependents before this one was
    /// seen and then removes the finalizer) or to one being deleted in the foreground while
    /// blocking (upstream may have found no blocking dependent already). Upstream's decision
    /// there depends on its graph's lag, not on the live state, so the oracle could not judge
    /// it; the generator does not produce it. References made before the deletion began are
    /// still generated (events are delivered in order, so upstream would see them first).
    fn owner_ref(&mut self, owner: usize, block: bool, current: bool) -> Option<OwnerReference> {
        let (res, name) = self.slots[owner].clone();
        let uid = match (current, self.live(owner)) {
            (true, Some(o)) => o.uid,
            // A stale UID of this name if there is one, else one never used.
            _ => self.uids[owner].first().cloned().unwrap_or_else(|| {
                self.next_uid += 1;
                format!("00000000-0000-4000-8000-{:012}", self.next_uid)
            }),
        };
        let racing = self.cluster.objects().into_iter().any(|(_, o)| {
            o.uid == uid
                && o.deletion_timestamp
                && (o.has_finalizer(FINALIZER_ORPHAN)
                    || (block && o.has_finalizer(FINALIZER_DELETE_DEPENDENTS)))
        });
        (!racing).then(|| OwnerReference {
            api_version: res.api_version(),
            kind: res.kind.clone(),
            name: name.to_owned(),
            uid,
            controller: None,
            block_owner_deletion: Some(block),
        })
    }

    fn user_action(&mut self, op: &Op) {
        self.user.store(true, Ordering::SeqCst);
        match op {
            Op::Create { slot, owners } if self.live(*slot).is_none() => {
                let refs: Vec<OwnerReference> = owners
                    .iter()
                    .filter(|(o, _, _)| o != slot)
                    .filter_map(|&(o, block, current)| self.owner_ref(o, block, current))
                    .collect();
                self.next_uid += 1;
                let uid = format!("00000000-0000-4000-8000-{:012}", self.next_uid);
                let (res, name) = &self.slots[*slot];
                let meta = ObjectMeta {
                    uid: uid.clone(),
                    name: (*name).to_owned(),
                    namespace: ns_of(res).to_owned(),
                    owner_references: refs,
                    ..ObjectMeta::default()
                };
                self.cluster.create(res, meta).unwrap();
                self.uids[*slot].push(uid);
            }
            Op::AddRef { slot, owner, block, repeat }
                if slot != owner && self.live(*slot).is_some() =>
            {
                if let Some(r) = self.owner_ref(*owner, *block, true) {
                    let (res, name) = &self.slots[*slot];
                    self.cluster.update_object(res, ns_of(res), name, |m| {
                        if *repeat || m.owner_references.iter().all(|o| o.uid != r.uid) {
                            m.owner_references.push(r);
                        }
                    });
                }
            }
            Op::AddRefAs { slot, owner, named, current }
                if slot != owner && owner != named && self.live(*slot).is_some() =>
            {
                let uid = self.owner_ref(*owner, false, *current).map(|r| r.uid);
                if let (Some(uid), Some(r)) = (uid, self.owner_ref(*named, false, true)) {
                    let r = OwnerReference { uid, ..r };
                    let (res, name) = &self.slots[*slot];
                    self.cluster.update_object(res, ns_of(res), name, |m| {
                        if m.owner_references.iter().all(|o| o.uid != r.uid) {
                            m.owner_references.push(r);
                        }
                    });
                }
            }
            Op::RemoveRef { slot, index } => {
                let (res, name) = &self.slots[*slot];
                self.cluster.update_object(res, ns_of(res), name, |m| {
                    if *index < m.owner_references.len() {
                        m.owner_references.remove(*index);
                    }
                });
            }
            // A user's second delete of an object already being deleted, with another policy,
            // is not generated: it can turn an orphan request into a foreground one after the
            // collector queued the owner for orphaning, and upstream's attemptToOrphan (which
            // does not re-read the owner) would then orphan its dependents too: an inherent
            // race of upstream's own lagging graph, not a departure of ours.
            Op::Delete { slot, .. } if self.live(*slot).is_some_and(|m| m.deletion_timestamp) => {}
            Op::Delete { slot, policy } => {
                let (res, name) = &self.slots[*slot];
                let options =
                    DeleteOptions { propagation_policy: *policy, ..DeleteOptions::default() };
                let _ = block_on(self.cluster.delete(res, ns_of(res), name, &options));
            }
            Op::Finalizer { slot, add } => {
                let (res, name) = &self.slots[*slot];
                let add = *add;
                self.cluster.update_object(res, ns_of(res), name, |m| {
                    if add && !m.deletion_timestamp && !m.has_finalizer(KEEP) {
                        m.finalizers.push(KEEP.to_owned());
                    } else if !add {
                        m.finalizers.retain(|f| f != KEEP);
                    }
                });
            }
            _ => {}
        }
        self.user.store(false, Ordering::SeqCst);
    }

    fn ingest(&mut self, events: &[Event]) {
        let out = self.ingester.ingest(events);
        self.collector.apply_ingest_output(out);
    }

    /// Delivers the first `count` undelivered watch events.
    fn deliver(&mut self, count: usize) {
        self.undelivered.extend(self.cluster.take_watch_events());
        let count = count.min(self.undelivered.len());
        let batch: Vec<Event> = self.undelivered.drain(..count).collect();
        if !batch.is_empty() {
            self.ingest(&batch);
        }
    }

    /// Feeds the collector's virtual delete events back into the graph.
    fn apply_graph_changes(&mut self) {
        if !self.changes.is_empty() {
            let events = self.changes.drain(usize::MAX);
            self.ingest(&events);
        }
    }

    /// Runs up to `n` items of one queue; returns how many ran.
    fn work(&mut self, n: usize, orphan: bool) -> usize {
        for i in 0..n {
            self.apply_graph_changes();
            let queue = if orphan {
                self.collector.attempt_to_orphan_queue()
            } else {
                self.collector.attempt_to_delete_queue()
            };
            if queue.is_empty() {
                return i;
            }
            if orphan {
                block_on(self.collector.process_attempt_to_orphan_worker());
            } else {
                block_on(self.collector.process_attempt_to_delete_worker());
            }
        }
        n
    }

    fn step(&mut self, op: &Op) {
        match op {
            Op::Deliver { per_256 } => {
                self.undelivered.extend(self.cluster.take_watch_events());
                let count = self.undelivered.len() * usize::from(*per_256) / 256;
                self.deliver(count);
            }
            Op::DeliverResource { slot, per_256 } => {
                self.undelivered.extend(self.cluster.take_watch_events());
                let ty = self.slots[*slot].0.object_type();
                let (mine, others): (Vec<Event>, Vec<Event>) =
                    std::mem::take(&mut self.undelivered)
                        .into_iter()
                        .partition(|e| e.object_type == ty);
                let count = mine.len() * usize::from(*per_256) / 256;
                let mut mine = mine.into_iter();
                let batch: Vec<Event> = mine.by_ref().take(count).collect();
                // The rest keeps its order within each resource.
                self.undelivered = others;
                self.undelivered.extend(mine);
                if !batch.is_empty() {
                    self.ingest(&batch);
                }
            }
            Op::Work { n, orphan } => {
                self.work(usize::from(*n), *orphan);
            }
            Op::FinishWarmUp => {
                if self.collector.is_warming_up() {
                    self.deliver(usize::MAX);
                    self.collector.finish_warm_up();
                }
            }
            Op::Prove { listed } => {
                if *listed {
                    for (res, _) in &self.slots {
                        self.collector.note_listed(res.object_type(), self.slots.len());
                    }
                }
                self.prove();
            }
            _ => self.user_action(op),
        }
    }

    /// One round of absence proofs, settling at once.
    fn prove(&mut self) -> usize {
        let round = block_on(self.collector.prove_absences(ProofWaits::NONE));
        round.lists + round.handed_back
    }

    /// Other controllers finish (their finalizers go), everything is delivered and the workers
    /// run until nothing is left to do (bounded). Returns whether they became idle.
    fn settle(&mut self) -> bool {
        for slot in 0..self.slots.len() {
            self.user_action(&Op::Finalizer { slot, add: false });
        }
        if self.collector.is_warming_up() {
            self.deliver(usize::MAX);
            self.collector.finish_warm_up();
        }
        for _ in 0..200 {
            self.deliver(usize::MAX);
            let ran = self.work(50, false) + self.work(50, true) + self.prove();
            self.deliver(usize::MAX);
            self.apply_graph_changes();
            if ran == 0
                && self.collector.pending_proofs() == 0
                && self.undelivered.is_empty()
                && self.changes.is_empty()
                && self.collector.attempt_to_delete_queue().is_empty()
                && self.collector.attempt_to_orphan_queue().is_empty()
            {
                return true;
            }
        }
        false
    }

    /// Liveness on the settled cluster: no GC finalizer left (its condition is met once the
    /// workers are idle), and no garbage left (an object whose owners are all absent) unless
    /// it refers to an owner the collector orphaned.
    fn liveness(&self) -> Vec<String> {
        let orphaned = self.oracle.lock().orphaned.clone();
        let mut problems = Vec::new();
        for (res, m) in self.cluster.objects() {
            // foregroundDeletion's condition is that no live dependent blocks it (one that
            // upstream can never delete, a cluster-scoped dependent's invalid reference, keeps
            // it for ever, upstream too); orphan's is always met once the workers are idle.
            let blocked = !live_dependents(&self.cluster, &m.uid, true).is_empty();
            for f in [FINALIZER_ORPHAN, FINALIZER_DELETE_DEPENDENTS] {
                if m.has_finalizer(f) && !(f == FINALIZER_DELETE_DEPENDENTS && blocked) {
                    problems.push(format!(
                        "{}/{} keeps {f}: {}",
                        res.resource,
                        m.name,
                        describe(&self.cluster, &m)
                    ));
                }
            }
            // An object being deleted is not garbage left: its deletion has begun (a
            // foreground one may wait for ever on a dependent upstream never deletes).
            let garbage = !m.deletion_timestamp
                && !m.owner_references.is_empty()
                && m.owner_references.iter().all(|r| {
                    classify(&self.cluster, &m, r) == Class::Dangling && !orphaned.contains(&r.uid)
                });
            if garbage {
                problems.push(format!(
                    "garbage {}/{} left: {}",
                    res.resource,
                    m.name,
                    describe(&self.cluster, &m)
                ));
            }
        }
        problems
    }
}

fn run(ops: &[Op], early: bool) -> Result<(), TestCaseError> {
    run_world(ops, early).map(drop)
}

/// [`run`], returning the settled world.
fn run_world(ops: &[Op], early: bool) -> Result<World, TestCaseError> {
    let options = CollectorOptions {
        read_items_from_graph: true,
        skip_observed_verification: true,
        garbage_first: true,
        early_collection: early,
        bulk_absence_proof: true,
    };
    let mut world = World::new(options);
    for op in ops {
        world.step(op);
        let violations = std::mem::take(&mut world.oracle.lock().violations);
        prop_assert!(violations.is_empty(), "after {op:?}: {violations:#?}");
    }
    let idle = world.settle();
    let violations = std::mem::take(&mut world.oracle.lock().violations);
    prop_assert!(violations.is_empty(), "while settling: {violations:#?}");
    prop_assert!(idle, "workers not idle after the bounded settle");
    let problems = world.liveness();
    prop_assert!(problems.is_empty(), "liveness: {problems:#?}");
    Ok(world)
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(2000);
    ProptestConfig { cases, max_shrink_iters: 10_000, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    /// Every write the collector makes on a stale graph is one upstream would make on the live
    /// state, with the controller's options on; and nothing is left stuck.
    #[test]
    fn writes_on_stale_views_are_upstreams(ops in prop::collection::vec(op(), 1..40)) {
        run(&ops, false)?;
    }

    /// The same with early collection (warm-up, then `finish_warm_up` at a random point).
    #[test]
    fn writes_on_stale_views_are_upstreams_with_early_collection(
        ops in prop::collection::vec(op(), 1..40),
    ) {
        run(&ops, true)?;
    }
}

#[test]
fn the_watch_log_records_every_change() {
    let cluster = MemoryCluster::new();
    let pods = resource("v1", "pods", "Pod", true);
    cluster.register(pods.clone());
    let meta = ObjectMeta {
        uid: "u1".into(),
        name: "p".into(),
        namespace: NS.into(),
        ..ObjectMeta::default()
    };
    cluster.create(&pods, meta).unwrap();
    cluster.update_object(&pods, NS, "p", |m| m.finalizers.push(KEEP.into()));
    let options = DeleteOptions::default();
    block_on(cluster.delete(&pods, NS, "p", &options)).unwrap();
    cluster.update_object(&pods, NS, "p", |m| m.finalizers.clear());
    let kinds: Vec<String> =
        cluster.take_watch_events().iter().map(|e| format!("{:?}", e.event_type)).collect();
    assert_eq!(kinds, ["Add", "Update", "Update", "Delete"]);
    assert!(cluster.take_watch_events().is_empty(), "take_watch_events clears");
}

// The minimal histories the property test shrank to against the code before the fixes,
// each a plain test so the finding stays pinned whatever the random seed.

fn create(slot: usize, owners: &[(usize, bool)]) -> Op {
    Op::Create { slot, owners: owners.iter().map(|&(o, block)| (o, block, false)).collect() }
}

/// delete_object's conflict retry reuses the Background policy decided from the graph's copy:
/// a user's orphan request is overridden (the confirmed bug).
#[test]
fn conflict_retry_keeps_the_users_orphan_request() {
    let ops = [
        create(0, &[(1, false)]),
        Op::Delete { slot: 0, policy: Some(PropagationPolicy::Orphan) },
        Op::Deliver { per_256: 128 },
        Op::Work { n: 2, orphan: false },
    ];
    run(&ops, false).unwrap();
}

/// Finding 1: the JSON-merge fallback (custom resource) pairs the graph's view (a solid owner
/// left) with a fresh read whose only reference is dangling, and patches where upstream would
/// delete, leaving the object ownerless.
#[test]
fn json_merge_fallback_does_not_patch_where_upstream_deletes() {
    let ops = [
        create(5, &[]),
        create(6, &[(5, false), (0, false)]),
        Op::RemoveRef { slot: 6, index: 0 },
        Op::Deliver { per_256: 171 },
        Op::Work { n: 2, orphan: false },
    ];
    run(&ops, false).unwrap();
}

/// Finding 2: a dependent referencing its owner twice is not orphaned: the orphan finalizer
/// goes while the dependent still references the owner (and it is later garbage).
#[test]
fn repeated_uid_dependent_is_orphaned() {
    let ops = [
        create(3, &[]),
        create(4, &[(3, true), (3, false)]),
        Op::Delete { slot: 3, policy: Some(PropagationPolicy::Orphan) },
    ];
    run(&ops, false).unwrap();
}

/// Finding 2: the second of two references to one owner blocks its foreground deletion;
/// the graph keeps only the first (non-blocking) and the owner goes first.
#[test]
fn repeated_uid_blocking_reference_blocks_foreground_deletion() {
    let ops = [
        create(4, &[]),
        create(0, &[(4, false), (4, true)]),
        Op::Delete { slot: 4, policy: Some(PropagationPolicy::Foreground) },
    ];
    run(&ops, false).unwrap();
}

/// Finding 2 (liveness): a dependent referencing a deleted owner twice is never collected.
#[test]
fn repeated_uid_garbage_is_collected() {
    let ops = [create(2, &[(0, false)]), create(0, &[(2, false), (2, false)])];
    run(&ops, false).unwrap();
}

/// Found after the fixes, by a new seed: the unblock patch of a foreground cycle was
/// built from the graph's owners and sent unpinned after a conflict. The object had lost the
/// owner meanwhile, and the strategic merge gave that reference back.
#[test]
fn unblocking_never_gives_back_a_removed_reference() {
    let ops = [
        create(2, &[]),
        create(1, &[(2, false)]),
        create(3, &[(0, false), (2, false)]),
        create(4, &[(1, false), (2, true)]),
        Op::Delete { slot: 2, policy: Some(PropagationPolicy::Foreground) },
        Op::AddRef { slot: 2, owner: 4, block: false, repeat: false },
    ];
    run(&ops, true).unwrap();
}

/// Liveness, repeated UIDs: a dependent references its foreground-deleted owner twice, and
/// its blocking reference is removed while kube-gc warms up; the owner's deletion completes.
#[test]
fn removing_the_blocking_one_of_two_references_lets_foreground_deletion_finish() {
    let ops = [
        create(2, &[]),
        create(5, &[(2, false), (2, true)]),
        Op::Delete { slot: 2, policy: Some(PropagationPolicy::Foreground) },
        Op::FinishWarmUp,
        create(0, &[]),
        Op::RemoveRef { slot: 5, index: 1 },
        Op::Work { n: 1, orphan: false },
    ];
    run(&ops, true).unwrap();
}

/// A cluster-scoped Node naming a Deployment (an invalid reference, which upstream never
/// decides on once it observes the Node), reached first as the virtual owner of that
/// Deployment because the Deployments' watch delivered before the Nodes': the Node is kept.
/// (Upstream classifies it in the Deployment's namespace there, finds the named Deployment
/// dangling, and deletes the Node; found by the long run of the property above.)
#[test]
fn a_cluster_scoped_object_reached_as_a_virtual_owner_keeps_its_invalid_reference() {
    let ops = [
        Op::Create { slot: 5, owners: vec![(0, false, false)] },
        Op::Create { slot: 0, owners: vec![(5, false, false)] },
        Op::DeliverResource { slot: 5, per_256: 0 },
        Op::Deliver { per_256: 128 },
        Op::Work { n: 1, orphan: false },
        Op::Prove { listed: false },
        Op::Work { n: 1, orphan: false },
    ];
    run(&ops, false).unwrap();
}

/// The generator's other identities, pinned: a Pod naming a ConfigMap of another namespace
/// (looked up in the Pod's own, so absent), and a ReplicaSet naming the live Deployment with a
/// Pod's UID (a live UID under another identity, which the graph files under the Pod). Upstream
/// finds both owners absent and collects both dependents; the owners named stay.
#[test]
fn references_across_namespaces_or_identities_are_dangling() {
    let ops = [
        create(7, &[]),
        Op::Create { slot: 3, owners: vec![(7, false, true)] },
        create(0, &[]),
        create(4, &[]),
        create(1, &[]),
        Op::AddRefAs { slot: 1, owner: 4, named: 0, current: true },
        Op::Deliver { per_256: 255 },
        Op::Work { n: 10, orphan: false },
    ];
    let world = run_world(&ops, false).unwrap();
    assert!(world.live(3).is_none(), "the Pod naming another namespace's ConfigMap stays");
    assert!(world.live(1).is_none(), "the ReplicaSet naming a UID under another identity stays");
    for (slot, what) in [(7, "ConfigMap"), (0, "Deployment"), (4, "Pod")] {
        assert!(world.live(slot).is_some(), "the {what} named went");
    }
}
