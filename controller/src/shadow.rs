//! Shadow mode (`--dry-run`): kube-gc runs beside the collector in charge, with read-only
//! permissions, decides everything and writes nothing. Each write it would make (a DELETE, a
//! PATCH of ownerReferences or finalizers, a Warning event) is logged
//! (`dry run: would …`, JSON with `--logging-format=json`), counted
//! (`kube_gc_dry_run_writes_total{verb}`) and kept for the report at
//! `/debug/controllers/garbagecollector/shadow`, which compares the would-be deletions with the
//! deletions the watches saw meanwhile:
//!
//! - `deletedAsPlanned`: objects it would have deleted that were deleted (by the collector in
//!   charge, or anyone). When the other collector deletes an object before kube-gc has come
//!   to it, kube-gc judges it as its delete event arrives, from the graph at that moment:
//!   garbage if none of its owners is there and staying (each is gone, being deleted in the
//!   foreground, or never observed); those are marked `decidedAtDeletion`. One with owners
//!   staying is judged again after each batch for 60 s (`OWNER_DELETION_LATE_BY_SECS`; the
//!   owners' own deletions may arrive later), then final; one seen in warm-up is `unsettled`
//!   until the graph has synced;
//! - `notDeleted`: objects it would have deleted that are still there (the other collector
//!   disagrees, or has not got to them yet);
//! - `deletedNotPlanned`: objects with owner references deleted while kube-gc never decided to
//!   delete them: garbage the other collector took and kube-gc would have kept, or dependents a
//!   user deleted by hand (the watch cannot tell who deleted).
//!
//! `seenDeleted` lists every deletion the watches delivered, or a relist found (judged from
//! what the graph last held of the object): an object that is in neither list was never seen
//! by kube-gc, which cannot judge what it never watched.
//!
//! A patch is not sent: the collector carries on with the object as it is (a live read), as
//! if the other collector had not made that change yet; the watches then show what the other
//! collector really did.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::SystemTime;

use kube_gc_engine::cluster::{DeleteOptions, Patch, PropagationPolicy, Resource, WarningEvent};
use kube_gc_engine::graph::NodeView;
use kube_gc_engine::{Graph, ObjectMeta, OwnerRef};
use lru::LruCache;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde_json::{Value, json};

/// Most deletions remembered from the watches, and most would-be deletions kept.
const REMEMBERED: usize = 100_000;
/// Most objects listed per category in the report (the counts are complete).
const LISTED: usize = 1_000;

/// One object, as the report names it: its resource as `plural.group` (`pods`,
/// `replicasets.apps`), its namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Named {
    resource: String,
    namespace: String,
    name: String,
}

impl Named {
    fn json(&self, uid: &str) -> Value {
        json!({"resource": self.resource, "namespace": self.namespace, "name": self.name, "uid": uid})
    }
}

/// A would-be deletion.
#[derive(Clone, Debug)]
struct WouldDelete {
    object: Named,
    policy: &'static str,
    at: f64,
}

/// How kube-gc judged an object whose deletion a watch delivered.
#[derive(Clone, Debug, PartialEq, Eq)]
enum AtDeletion {
    /// It had no owner references: not a collector's business.
    Unowned,
    /// Garbage by the graph at that moment: no owner staying, every watcher synced.
    Garbage,
    /// These owners were there and staying. Watches of different resources are not ordered,
    /// so the owners' own deletions may arrive later: judged again (see [`Shadow::settle`]).
    OwnersStaying(Vec<OwnerRef>),
    /// No owner staying, but the graph was still warming up (an owner's resource may not have
    /// been listed yet): judged again once it has synced.
    Unsettled(Vec<OwnerRef>),
}

/// A deletion the watches delivered.
#[derive(Clone, Debug)]
struct Seen {
    object: Named,
    judged: AtDeletion,
    /// When it was seen (Unix seconds).
    at: f64,
    /// When the time its owners have to stop staying began: `at`, or the sync for a deletion
    /// seen in warm-up.
    window_from: f64,
}

/// How long after a dependent's deletion its owners may stop staying (their own deletions, or
/// foreground deletions, seen late: watches of different resources are not ordered, and a
/// watcher may be behind) and still make it garbage: the default catch-up timeout. Past it
/// the judgement is final, so that an owner deleted later (a rollout's cleanup, days on) does
/// not turn an earlier disagreement into agreement.
const OWNER_DELETION_LATE_BY_SECS: f64 = 60.0;

/// A deletion judged with owners staying, or in warm-up, is judged again on `graph` (the
/// graph `synced` or not): garbage once no owner stays (an owner never observed counts as
/// absent once synced), the owners still staying otherwise; `None` while unsettled.
fn judge_again(graph: &Graph, judged: &AtDeletion, synced: bool) -> Option<AtDeletion> {
    match judged {
        AtDeletion::OwnersStaying(owners) | AtDeletion::Unsettled(owners) => {
            let still: Vec<OwnerRef> =
                owners.iter().filter(|o| staying(graph, o)).cloned().collect();
            if !still.is_empty() {
                Some(AtDeletion::OwnersStaying(still))
            } else if synced || matches!(judged, AtDeletion::OwnersStaying(_)) {
                Some(AtDeletion::Garbage)
            } else {
                None
            }
        }
        settled => Some(settled.clone()),
    }
}

/// Whether `owner` is in `graph`, observed under its coordinates, and not being deleted in the
/// foreground: an owner that keeps its dependents.
fn staying(graph: &Graph, owner: &OwnerRef) -> bool {
    graph.node(owner.uid).is_some_and(|n| {
        !n.is_virtual && !n.deleting_dependents && n.identity.matches_coordinates(owner)
    })
}

/// What shadow mode records (see the module docs).
#[derive(Debug)]
pub struct Shadow {
    would_delete: Mutex<LruCache<String, WouldDelete>>,
    /// Deletions the watches saw, by UID.
    deleted: Mutex<LruCache<String, Seen>>,
    /// The UIDs of deletions still to be judged again ([`Shadow::settle`]), oldest first.
    unsettled: Mutex<std::collections::VecDeque<String>>,
    writes: Family<[(&'static str, String); 1], Counter>,
    /// Would-be and seen deletions pushed out of the memories (each holds [`REMEMBERED`]).
    forgotten: std::sync::atomic::AtomicU64,
}

impl Default for Shadow {
    fn default() -> Self {
        Shadow::remembering(NonZeroUsize::new(REMEMBERED).expect("non-zero"))
    }
}

impl Shadow {
    /// Keeps at most `size` would-be deletions, and as many seen.
    fn remembering(size: NonZeroUsize) -> Self {
        Shadow {
            would_delete: Mutex::new(LruCache::new(size)),
            deleted: Mutex::new(LruCache::new(size)),
            unsettled: Mutex::default(),
            writes: Family::default(),
            forgotten: Default::default(),
        }
    }
}

fn now() -> f64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn policy_name(options: &DeleteOptions) -> &'static str {
    options.propagation_policy.map_or("default", PropagationPolicy::as_str)
}

/// The report's counts at scrape time, `kube_gc_shadow_deletions{judgement}`.
#[derive(Debug)]
struct ReportCounts {
    shadow: std::sync::Arc<Shadow>,
    graph: std::sync::Arc<Graph>,
}

/// The report's summary fields exported as `judgement` labels.
const JUDGEMENTS: [&str; 6] = [
    "deletedAsPlanned",
    "decidedAtDeletion",
    "notDeleted",
    "deletedNotPlanned",
    "unsettled",
    "forgotten",
];

impl prometheus_client::collector::Collector for ReportCounts {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> std::fmt::Result {
        use prometheus_client::encoding::EncodeMetric;
        let summary = self.shadow.report(&self.graph)["summary"].take();
        let mut family = encoder.encode_descriptor(
            "kube_gc_shadow_deletions",
            "Shadow mode (--dry-run): the report's counts of would-be and seen deletions, by how they compare (see /debug/controllers/garbagecollector/shadow)",
            None,
            prometheus_client::metrics::MetricType::Gauge,
        )?;
        for judgement in JUDGEMENTS {
            let count = summary[judgement].as_u64().unwrap_or(0);
            let labels = [("judgement", judgement)];
            let sample = family.encode_family(&labels)?;
            prometheus_client::metrics::gauge::ConstGauge::new(count as i64).encode(sample)?;
        }
        Ok(())
    }
}

impl Shadow {
    /// Adds `kube_gc_dry_run_writes_total{verb}` to `registry`, and
    /// `kube_gc_shadow_deletions{judgement}`: the report's counts on `graph`, at scrape time, so
    /// that a shadow run can be watched (and alerted on: `deletedNotPlanned` above what people
    /// delete by hand) without reading the report.
    pub fn register(
        self: &std::sync::Arc<Self>,
        registry: &mut Registry,
        graph: std::sync::Arc<Graph>,
    ) {
        registry.register(
            "kube_gc_dry_run_writes",
            "Writes kube-gc would have made, not sent (--dry-run)",
            self.writes.clone(),
        );
        registry.register_collector(Box::new(ReportCounts { shadow: self.clone(), graph }));
    }

    /// Counts an entry pushed out of a full memory (not one replaced under its own key).
    fn count_forgotten<V>(&self, key: &str, pushed: Option<(String, V)>) {
        if pushed.is_some_and(|(old, _)| old != key) {
            self.forgotten.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn count(&self, verb: &str) {
        self.writes.get_or_create(&[("verb", verb.to_owned())]).inc();
    }

    /// A DELETE the collector would send.
    pub fn delete(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) {
        let policy = policy_name(options);
        tracing::info!(resource = %resource, namespace, name, uid = options.precondition_uid.as_deref().unwrap_or(""), propagation_policy = policy, "dry run: would delete");
        self.count("delete");
        let object = Named {
            resource: crate::discovery::resource_key(resource),
            namespace: namespace.into(),
            name: name.into(),
        };
        // The collector's deletes carry the UID as a precondition; key by it when it does.
        let key = options.precondition_uid.clone().unwrap_or_else(|| format!("{object:?}"));
        let pushed = self
            .would_delete
            .lock()
            .expect("shadow lock")
            .push(key.clone(), WouldDelete { object, policy, at: now() });
        self.count_forgotten(&key, pushed);
    }

    /// A PATCH the collector would send.
    pub fn patch(&self, resource: &Resource, namespace: &str, name: &str, patch: &Patch) {
        tracing::info!(resource = %resource, namespace, name, patch = %patch.body, "dry run: would patch");
        self.count("patch");
    }

    /// A Warning event the collector would record.
    pub fn event(&self, event: &WarningEvent) {
        tracing::info!(object = %event.involved, reason = event.reason, message = %event.message, "dry run: would record a Warning event");
        self.count("event");
    }

    /// A deletion a watch delivered (`resource`'s object in its last state), judged from
    /// `graph` once the batch holding it is applied: garbage if no owner it names is in the
    /// graph, observed under its coordinates, and not being deleted in the foreground, and the
    /// graph is `synced` (otherwise judged again by [`settle`](Self::settle)).
    pub fn observed_deletion(
        &self,
        resource: &str,
        meta: &ObjectMeta,
        graph: &Graph,
        synced: bool,
    ) {
        let object = Named {
            resource: resource.to_owned(),
            namespace: meta.namespace.clone(),
            name: meta.name.clone(),
        };
        // Interned as ingestion interns them (anyone can write a reference; see
        // `kube_gc_engine::identity`). A reference refused by the caps names a type or UID no
        // node has, so it can never be one that stays: leaving it out judges alike.
        let owners: Vec<OwnerRef> = meta
            .owner_references
            .iter()
            .filter_map(|r| kube_gc_engine::patch::try_owner_ref_from_api(r).ok())
            .collect();
        let owned = !meta.owner_references.is_empty();
        self.judge_deletion(&meta.uid, object, owned.then_some(owners), graph, synced);
    }

    /// A deletion a relist found (`resource`'s object, gone while its watch was down), as the
    /// graph held `node` before the relist's batch, judged as
    /// [`observed_deletion`](Self::observed_deletion) judges one from `graph` after it.
    pub fn relisted_deletion(&self, resource: &str, node: &NodeView, graph: &Graph, synced: bool) {
        let object = Named {
            resource: resource.to_owned(),
            namespace: node.identity.namespace.as_str().to_owned(),
            name: node.identity.name.clone(),
        };
        // A reference the graph holds as unrepresentable (past the caps) names no node, as in
        // `observed_deletion`; the object still had owners.
        let owned = !node.owners.is_empty();
        let owners = node.owners.clone();
        self.judge_deletion(
            &node.identity.uid.to_string(),
            object,
            owned.then_some(owners),
            graph,
            synced,
        );
    }

    /// Records the deletion of `uid`: unowned when `owners` is `None`, else judged as `settle`
    /// judges a deletion seen in warm-up (the same rule, first time).
    fn judge_deletion(
        &self,
        uid: &str,
        object: Named,
        owners: Option<Vec<OwnerRef>>,
        graph: &Graph,
        synced: bool,
    ) {
        let judged = match owners {
            None => AtDeletion::Unowned,
            Some(owners) => {
                let unjudged = AtDeletion::Unsettled(owners);
                judge_again(graph, &unjudged, synced).unwrap_or(unjudged)
            }
        };
        if matches!(judged, AtDeletion::OwnersStaying(_) | AtDeletion::Unsettled(_)) {
            self.unsettled.lock().expect("shadow lock").push_back(uid.to_owned());
        }
        let at = now();
        let seen = Seen { object, judged, at, window_from: at };
        let pushed = self.deleted.lock().expect("shadow lock").push(uid.to_owned(), seen);
        self.count_forgotten(uid, pushed);
    }

    /// After each batch: judges again the deletions judged with owners staying less than
    /// `OWNER_DELETION_LATE_BY_SECS` ago, and those judged in warm-up (see `judge_again`);
    /// past that time a judgement with owners staying is final.
    pub fn settle(&self, graph: &Graph, synced: bool) {
        self.settle_at(graph, synced, now());
    }

    fn settle_at(&self, graph: &Graph, synced: bool, now: f64) {
        let mut unsettled = self.unsettled.lock().expect("shadow lock");
        if unsettled.is_empty() {
            return;
        }
        let mut deleted = self.deleted.lock().expect("shadow lock");
        unsettled.retain(|uid| {
            let Some(seen) = deleted.peek_mut(uid) else { return false };
            let staying = matches!(seen.judged, AtDeletion::OwnersStaying(_));
            if staying && now > seen.window_from + OWNER_DELETION_LATE_BY_SECS {
                // Final, whatever the graph shows now (a batch may come long after).
                return false;
            }
            match judge_again(graph, &seen.judged, synced) {
                None => true,
                Some(judged) => {
                    if matches!(seen.judged, AtDeletion::Unsettled(_)) {
                        // Settled by the sync: its owners' time starts now.
                        seen.window_from = now;
                    }
                    let staying = matches!(judged, AtDeletion::OwnersStaying(_));
                    seen.judged = judged;
                    staying
                }
            }
        });
    }

    /// The report (see the module docs). An object the graph no longer holds counts as deleted
    /// even when its delete event was not seen (a relist found it gone). A deletion is judged
    /// as [`settle`](Self::settle) last left it: with owners staying, kube-gc would have kept
    /// it (a disagreement, final once `OWNER_DELETION_LATE_BY_SECS` have passed); judged in
    /// warm-up and not settled yet, it is listed as `unsettled`.
    pub fn report(&self, graph: &Graph) -> Value {
        let would: Vec<(String, WouldDelete)> = self
            .would_delete
            .lock()
            .expect("shadow lock")
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let deleted: BTreeMap<String, Seen> = self
            .deleted
            .lock()
            .expect("shadow lock")
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let gone = |uid: &str| {
            deleted.contains_key(uid)
                || kube_gc_engine::Uid::lookup(uid).is_some_and(|u| graph.node(u).is_none())
        };
        let (mut as_planned, mut not_deleted) = (Vec::new(), Vec::new());
        for (uid, w) in &would {
            let mut v = w.object.json(uid);
            v["propagationPolicy"] = json!(w.policy);
            v["decidedAt"] = json!(w.at);
            if gone(uid) { as_planned.push(v) } else { not_deleted.push(v) }
        }
        let planned: std::collections::HashSet<&String> = would.iter().map(|(k, _)| k).collect();
        let (mut at_deletion, mut not_planned, mut unsettled) =
            (Vec::new(), Vec::new(), Vec::new());
        for (uid, Seen { object, judged, at, .. }) in &deleted {
            if planned.contains(uid) {
                continue;
            }
            let mut v = object.json(uid);
            v["seenAt"] = json!(at);
            let garbage = match judged {
                AtDeletion::Unowned => continue,
                AtDeletion::Garbage => true,
                AtDeletion::OwnersStaying(_) => false,
                AtDeletion::Unsettled(_) => {
                    unsettled.push(v);
                    continue;
                }
            };
            if garbage {
                v["decidedAtDeletion"] = json!(true);
                at_deletion.push(v);
            } else {
                not_planned.push(v);
            }
        }
        let decided_at_deletion = at_deletion.len();
        as_planned.extend(at_deletion);
        let writes = |verb: &str| self.writes.get_or_create(&[("verb", verb.to_owned())]).get();
        json!({
            "summary": {
                "wouldDelete": would.len(),
                "deletedAsPlanned": as_planned.len(),
                "decidedAtDeletion": decided_at_deletion,
                "notDeleted": not_deleted.len(),
                "deletedNotPlanned": not_planned.len(),
                "unsettled": unsettled.len(),
                // Past the memories' size the oldest go, and the counts above miss them.
                "forgotten": self.forgotten.load(std::sync::atomic::Ordering::Relaxed),
                "wouldPatch": writes("patch"),
                "wouldRecordEvents": writes("event"),
            },
            "deletedAsPlanned": as_planned.into_iter().take(LISTED).collect::<Vec<_>>(),
            "notDeleted": not_deleted.into_iter().take(LISTED).collect::<Vec<_>>(),
            "deletedNotPlanned": not_planned.into_iter().take(LISTED).collect::<Vec<_>>(),
            // Deleted while kube-gc was still warming up, an owner's resource perhaps not
            // listed yet: judged once the graph has synced.
            "unsettled": unsettled.into_iter().take(LISTED).collect::<Vec<_>>(),
            // Every deletion the watches delivered (owned or not): an object deleted that is
            // neither here nor planned was never seen by kube-gc (it lived and went before
            // kube-gc watched its resource, e.g. a custom resource of a CRD not yet discovered).
            "seenDeleted": deleted.iter().take(LISTED).map(|(uid, seen)| seen.object.json(uid)).collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use kube_gc_engine::OwnerReference;

    use super::*;

    fn meta(uid: &str, name: &str, owned: bool) -> ObjectMeta {
        ObjectMeta {
            uid: uid.into(),
            name: name.into(),
            namespace: "ns".into(),
            owner_references: if owned { vec![OwnerReference::default()] } else { Vec::new() },
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn the_report_sorts_deletions_into_planned_missing_and_unplanned() {
        let shadow = Shadow::default();
        let pods = Resource::new("v1", "pods", "Pod", true);
        let delete = |uid: &str, name: &str| {
            let options = DeleteOptions {
                precondition_uid: Some(uid.into()),
                propagation_policy: Some(PropagationPolicy::Background),
                ..DeleteOptions::default()
            };
            shadow.delete(&pods, "ns", name, &options);
        };
        // A graph holding one live owner, `keep`.
        let keep_uid = "00000000-0000-4000-8000-00000000000a";
        let graph = std::sync::Arc::new(Graph::new(1).unwrap());
        let mut ingester = kube_gc_engine::Ingester::new(graph.clone(), 1);
        let keep = ObjectMeta {
            uid: keep_uid.into(),
            name: "keep".into(),
            namespace: "ns".into(),
            ..ObjectMeta::default()
        };
        let cm = kube_gc_engine::ObjectType::new("v1", "ConfigMap");
        let event = |t, m: &ObjectMeta| kube_gc_engine::Event::new(t, cm, m.clone());
        drop(ingester.ingest(&[event(kube_gc_engine::EventType::Add, &keep)]));
        let owned_by = |uid: &str, name: &str, owner_uid: &str, owner: &str| ObjectMeta {
            owner_references: vec![OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: owner.into(),
                uid: owner_uid.into(),
                ..OwnerReference::default()
            }],
            ..meta(uid, name, false)
        };
        let gone_owner = "00000000-0000-4000-8000-00000000000b";
        // Unknown to the graph, so only the watch's deletions count as deleted.
        let (a, b, c, d, e) =
            ("shadow-test-a", "shadow-test-b", "shadow-test-c", "shadow-test-d", "shadow-test-e");
        delete(a, "a");
        delete(b, "b");
        shadow.observed_deletion("pods", &owned_by(a, "a", gone_owner, "gone"), &graph, true);
        // Deleted before kube-gc came to it: its owner is gone, so garbage, decided then.
        shadow.observed_deletion("pods", &owned_by(c, "c", gone_owner, "gone"), &graph, true);
        // Its owner is there and staying: kube-gc would have kept it.
        shadow.observed_deletion("pods", &owned_by(e, "e", keep_uid, "keep"), &graph, true);
        shadow.observed_deletion("pods", &meta(d, "d", false), &graph, true);
        let r = shadow.report(&graph);
        assert_eq!(r["summary"]["wouldDelete"], 2);
        assert_eq!(r["summary"]["deletedAsPlanned"], 2, "{r}");
        assert_eq!(r["summary"]["decidedAtDeletion"], 1, "{r}");
        assert_eq!(r["deletedAsPlanned"][0]["name"], "a");
        assert_eq!(r["deletedAsPlanned"][0]["propagationPolicy"], "Background");
        assert_eq!(r["deletedAsPlanned"][1]["name"], "c");
        assert_eq!(r["notDeleted"][0]["name"], "b");
        // e had a staying owner; d had no owner: a user's, not counted.
        assert_eq!(r["summary"]["deletedNotPlanned"], 1);
        assert_eq!(r["deletedNotPlanned"][0]["name"], "e");
        shadow.patch(
            &pods,
            "ns",
            "e",
            &Patch { patch_type: kube_gc_engine::cluster::PatchType::JsonMerge, body: json!({}) },
        );
        assert_eq!(shadow.report(&graph)["summary"]["wouldPatch"], 1);
        // The owner's own deletion arrives after its dependent's (another watch): judged again
        // after that batch, the dependent was garbage.
        drop(ingester.ingest(&[event(kube_gc_engine::EventType::Delete, &keep)]));
        shadow.settle(&graph, true);
        let r = shadow.report(&graph);
        assert_eq!(r["summary"]["deletedNotPlanned"], 0, "{r}");
        assert_eq!(r["summary"]["decidedAtDeletion"], 2, "{r}");
    }

    /// A graph holding no owner yet, and a dependent of the ConfigMap `owner` with UID `uid`.
    fn one_owner(uid: &str) -> (std::sync::Arc<Graph>, kube_gc_engine::Ingester, ObjectMeta) {
        let graph = std::sync::Arc::new(Graph::new(1).unwrap());
        let ingester = kube_gc_engine::Ingester::new(graph.clone(), 1);
        let dependent = ObjectMeta {
            owner_references: vec![OwnerReference {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "owner".into(),
                uid: uid.into(),
                ..OwnerReference::default()
            }],
            ..meta("shadow-test-dependent", "dependent", false)
        };
        (graph, ingester, dependent)
    }

    fn owner_event(t: kube_gc_engine::EventType, uid: &str) -> kube_gc_engine::Event {
        let cm = kube_gc_engine::ObjectType::new("v1", "ConfigMap");
        kube_gc_engine::Event::new(t, cm, meta(uid, "owner", false))
    }

    /// A dependent deleted while its owner lived stays a disagreement once its owner has
    /// stayed past the time watches may lag: the owner deleted later (a rollout's cleanup,
    /// days on) does not turn it into agreement.
    #[test]
    fn an_owner_deleted_long_after_its_dependent_leaves_the_disagreement() {
        let owner = "00000000-0000-4000-8000-00000000001a";
        let (graph, mut ingester, dependent) = one_owner(owner);
        drop(ingester.ingest(&[owner_event(kube_gc_engine::EventType::Add, owner)]));
        let shadow = Shadow::default();
        shadow.observed_deletion("pods", &dependent, &graph, true);
        // No batch for a while, then the owner's deletion, long after.
        drop(ingester.ingest(&[owner_event(kube_gc_engine::EventType::Delete, owner)]));
        shadow.settle_at(&graph, true, now() + OWNER_DELETION_LATE_BY_SECS + 1.0);
        shadow.settle(&graph, true);
        let r = shadow.report(&graph);
        assert_eq!(r["summary"]["deletedNotPlanned"], 1, "{r}");
        assert_eq!(r["summary"]["decidedAtDeletion"], 0, "{r}");
    }

    /// Deleted while kube-gc warmed up, before its owner's resource was listed: unsettled
    /// until the graph syncs, then a disagreement if the owner turns out to live, garbage if
    /// it never shows up.
    #[test]
    fn a_deletion_seen_in_warm_up_waits_for_the_sync() {
        let owner = "00000000-0000-4000-8000-00000000002a";
        for owner_lives in [true, false] {
            let (graph, mut ingester, dependent) = one_owner(owner);
            let shadow = Shadow::default();
            shadow.observed_deletion("pods", &dependent, &graph, false);
            shadow.settle(&graph, false);
            let r = shadow.report(&graph);
            assert_eq!(r["summary"]["unsettled"], 1, "{r}");
            assert_eq!(r["summary"]["decidedAtDeletion"], 0, "{r}");
            if owner_lives {
                drop(ingester.ingest(&[owner_event(kube_gc_engine::EventType::Add, owner)]));
            }
            shadow.settle(&graph, true);
            let r = shadow.report(&graph);
            assert_eq!(r["summary"]["unsettled"], 0, "{r}");
            let (kept, garbage) = if owner_lives { (1, 0) } else { (0, 1) };
            assert_eq!(r["summary"]["deletedNotPlanned"], kept, "{r}");
            assert_eq!(r["summary"]["decidedAtDeletion"], garbage, "{r}");
        }
    }

    /// A deletion a relist found (no delete event came) is judged as one a watch delivered,
    /// from what the graph held: with its owner staying, a disagreement; with its owner never
    /// there, garbage; with no owner, not the collector's.
    #[test]
    fn deletions_a_relist_found_are_judged_too() {
        let owner = "00000000-0000-4000-8000-00000000003a";
        let (graph, mut ingester, dependent) = one_owner(owner);
        drop(ingester.ingest(&[owner_event(kube_gc_engine::EventType::Add, owner)]));
        let orphan = ObjectMeta {
            owner_references: vec![OwnerReference {
                uid: "00000000-0000-4000-8000-00000000003b".into(),
                name: "gone".into(),
                ..dependent.owner_references[0].clone()
            }],
            ..meta("00000000-0000-4000-8000-00000000003c", "orphan", false)
        };
        let unowned = meta("00000000-0000-4000-8000-00000000003d", "unowned", false);
        let dependent =
            ObjectMeta { uid: "00000000-0000-4000-8000-00000000003e".into(), ..dependent };
        let pod = kube_gc_engine::ObjectType::new("v1", "Pod");
        let events = |t| {
            [&dependent, &orphan, &unowned]
                .map(|m| kube_gc_engine::Event::new(t, pod, m.clone()))
                .to_vec()
        };
        drop(ingester.ingest(&events(kube_gc_engine::EventType::Add)));
        let held: Vec<_> = [&dependent, &orphan, &unowned]
            .map(|m| graph.node(kube_gc_engine::Uid::parse(&m.uid)).expect("in the graph"))
            .to_vec();
        drop(ingester.ingest(&events(kube_gc_engine::EventType::Delete)));
        let shadow = Shadow::default();
        for node in &held {
            shadow.relisted_deletion("pods", node, &graph, true);
        }
        let r = shadow.report(&graph);
        assert_eq!(r["summary"]["deletedNotPlanned"], 1, "{r}");
        assert_eq!(r["deletedNotPlanned"][0]["name"], "dependent", "{r}");
        assert_eq!(r["deletedNotPlanned"][0]["namespace"], "ns", "{r}");
        assert_eq!(r["summary"]["decidedAtDeletion"], 1, "{r}");
        assert_eq!(r["deletedAsPlanned"][0]["name"], "orphan", "{r}");
        assert_eq!(r["seenDeleted"].as_array().map(Vec::len), Some(3), "{r}");
    }

    /// The report's counts are metrics, read at scrape time.
    #[test]
    fn the_reports_counts_are_exported() {
        let owner = "00000000-0000-4000-8000-00000000004a";
        let (graph, mut ingester, dependent) = one_owner(owner);
        drop(ingester.ingest(&[owner_event(kube_gc_engine::EventType::Add, owner)]));
        let shadow = std::sync::Arc::new(Shadow::default());
        let mut registry = Registry::default();
        shadow.register(&mut registry, graph.clone());
        // Planned, and still in the graph.
        let options =
            DeleteOptions { precondition_uid: Some(owner.into()), ..DeleteOptions::default() };
        shadow.delete(
            &Resource::new("v1", "configmaps", "ConfigMap", true),
            "ns",
            "owner",
            &options,
        );
        shadow.observed_deletion("pods", &dependent, &graph, true);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for (judgement, count) in
            [("notDeleted", 1), ("deletedNotPlanned", 1), ("deletedAsPlanned", 0)]
        {
            let line = format!("kube_gc_shadow_deletions{{judgement=\"{judgement}\"}} {count}\n");
            assert!(text.contains(&line), "{line} in {text}");
        }
        assert!(text.contains("kube_gc_dry_run_writes_total{verb=\"delete\"} 1"), "{text}");
    }

    /// Past the memories' size the oldest entries go, and the report says how many (a
    /// deletion seen again under its own UID is not one).
    #[test]
    fn deletions_pushed_out_of_memory_are_counted() {
        let shadow = Shadow::remembering(NonZeroUsize::new(2).unwrap());
        let graph = Graph::new(1).unwrap();
        for uid in ["shadow-test-f1", "shadow-test-f2", "shadow-test-f2", "shadow-test-f3"] {
            shadow.observed_deletion("pods", &meta(uid, "f", false), &graph, true);
        }
        let pods = Resource::new("v1", "pods", "Pod", true);
        for uid in ["shadow-test-g1", "shadow-test-g2", "shadow-test-g3", "shadow-test-g4"] {
            let options =
                DeleteOptions { precondition_uid: Some(uid.into()), ..DeleteOptions::default() };
            shadow.delete(&pods, "ns", "g", &options);
        }
        let r = shadow.report(&graph);
        assert_eq!(r["summary"]["forgotten"], 1 + 2, "{r}");
        assert_eq!(r["summary"]["wouldDelete"], 2, "{r}");
    }

    #[test]
    fn a_reference_past_the_type_cap_is_judged_missing() {
        let shadow = Shadow::default();
        let graph = Graph::new(1).unwrap();
        let hostile = ObjectMeta {
            owner_references: vec![OwnerReference {
                api_version: "v1".into(),
                kind: "K".repeat(kube_gc_engine::identity::MAX_TYPE_STRING_LEN + 1),
                name: "x".into(),
                uid: "00000000-0000-4000-8000-00000000000c".into(),
                ..OwnerReference::default()
            }],
            ..meta("shadow-test-hostile", "h", false)
        };
        shadow.observed_deletion("pods", &hostile, &graph, true);
        // Owned, no owner staying: garbage, decided at deletion (not a user's deletion).
        let r = shadow.report(&graph);
        assert_eq!(r["summary"]["decidedAtDeletion"], 1, "{r}");
        assert_eq!(r["summary"]["deletedNotPlanned"], 0, "{r}");
    }
}
