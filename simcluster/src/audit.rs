//! The audit of every write, and the wrongful-deletion oracle.
//!
//! The [`Store`](crate::Store) records each successful write (create, update, patch, delete,
//! deletecollection) as a [`WriteRecord`]: who (the request's `User-Agent`, or the caller label
//! of a direct store write, see [`with_actor`]), what (verb, resource, namespace/name, uid),
//! when (the resourceVersion it produced and an [`Instant`]), the preconditions sent, and the
//! object's ownerReferences at that moment (before the write; the created object's for a
//! create). Records are kept in a ring of [`Audit::set_capacity`] entries (default
//! [`DEFAULT_CAPACITY`]); [`Audit::clear`] forgets everything.
//!
//! # The oracle
//!
//! A **wrongful deletion** is a delete issued by the collector (an actor whose name starts with
//! [`Audit::collector_agent`], `kube-gc` by default: kube-gc's client sends
//! `User-Agent: kube-gc/<version>`) that upstream's decision on the object at that moment
//! would not make (see [`Wrongful`]): of an object
//!
//! * with no ownerReferences (upstream's attemptToDeleteItem returns at once), or
//! * with an ownerReference to an existing object with the same uid that was not being deleted
//!   in foreground (`deletionTimestamp` and the `foregroundDeletion` finalizer: such an owner
//!   waits for its dependents to go), or was being deleted with the orphan policy (the `orphan`
//!   finalizer: its dependents must be orphaned, never deleted), or
//! * with an ownerReference to a namespaced kind from a cluster-scoped object (upstream gives
//!   up on such an object, GC-SPEC §3.3 step 5), or
//! * with a propagationPolicy upstream would not send: Background on an object carrying
//!   `orphan` or `foregroundDeletion` (which the API server would then strip), or Orphan on
//!   one without `orphan` (GC-SPEC §3.2). Foreground is not judged: with no owner holding the
//!   object, each is waiting for its dependents or gone, perhaps since the collector read it
//!   waiting.
//!
//! A collector's patch or update that removes an ownerReference to an owner that holds its
//! dependent (alive, and neither deleted in foreground nor with orphan) is flagged too
//! ([`Wrongful::RemovedReference`]): upstream removes references only to owners that are
//! absent, wait for their dependents' deletion, or orphan them. (Its removals of `orphan` and
//! `foregroundDeletion` are not judged here: whether one was early depends on the dependents
//! the collector's graph had seen, which the stale-view property test judges.)
//!
//! An owner that is absent, or present with another uid, does not hold its dependent (GC-SPEC
//! §3.3, `isDangling`). The owners are looked up where the collector must look them up: in the
//! dependent's namespace for a namespaced owner kind, cluster-wide for a cluster-scoped one;
//! by group and kind, any version. An owner of a kind not served is taken for absent: upstream
//! may still find it so in its absent-owner cache (a custom resource deleted with its CRD).
//!
//! The store evaluates it **atomically**: under its write lock, just before the delete is
//! applied, once the delete's preconditions have held (a delete refused with 409 deletes
//! nothing and is not checked). Only `DELETE` requests (and deletecollection) are checked; an
//! update that removes the last finalizer of an object being deleted removes it too, but that
//! completes a deletion someone asked for (the collector's removal of `orphan` /
//! `foregroundDeletion`), so it is recorded, not judged.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use serde_json::Value;

/// Records kept by default.
pub const DEFAULT_CAPACITY: usize = 10_000;

/// Wrongful deletions kept (each one is a bug report; more add nothing).
const WRONGFUL_CAPACITY: usize = 1_000;

/// The actor of a direct store write made outside [`with_actor`].
pub const DIRECT_ACTOR: &str = "direct";

/// The default [`Audit::collector_agent`]: kube-gc's `User-Agent` starts with it.
pub const COLLECTOR_AGENT: &str = "kube-gc";

tokio::task_local! {
    static ACTOR: Arc<str>;
}

/// Runs `f` with its store writes attributed to `actor` (e.g. `"chaos-user"`); writes made
/// outside any actor are attributed to [`DIRECT_ACTOR`].
pub fn with_actor<R>(actor: &str, f: impl FnOnce() -> R) -> R {
    ACTOR.sync_scope(Arc::from(actor), f)
}

/// Runs `fut` with its store writes attributed to `actor` (the HTTP layer: the User-Agent).
pub(crate) async fn scope<F: std::future::Future>(actor: Arc<str>, fut: F) -> F::Output {
    ACTOR.scope(actor, fut).await
}

fn current_actor() -> Arc<str> {
    ACTOR.try_with(Arc::clone).unwrap_or_else(|_| Arc::from(DIRECT_ACTOR))
}

/// A write verb.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verb {
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection (one record per object).
    DeleteCollection,
}

/// One ownerReference, as the audit keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerRef {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `name`.
    pub name: String,
    /// `uid`.
    pub uid: String,
    /// `blockOwnerDeletion`.
    pub block_owner_deletion: bool,
}

impl OwnerRef {
    /// The ownerReferences of `obj` (a whole object).
    pub fn of(obj: &Value) -> Vec<OwnerRef> {
        let text = |r: &Value, f: &str| r[f].as_str().unwrap_or_default().to_owned();
        obj.pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .map(|r| OwnerRef {
                        api_version: text(r, "apiVersion"),
                        kind: text(r, "kind"),
                        name: text(r, "name"),
                        uid: text(r, "uid"),
                        block_owner_deletion: r["blockOwnerDeletion"] == true,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The owner's API group (`""` for core).
    pub fn group(&self) -> &str {
        self.api_version.split_once('/').map_or("", |(g, _)| g)
    }
}

/// An owner's state at the moment its dependent was deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerState {
    /// No object of that kind and name where the collector must look.
    Absent,
    /// An object of that kind and name, with another uid (the owner was recreated).
    OtherUid,
    /// The owner, not being deleted (or being deleted without a GC finalizer): it holds its
    /// dependents. (Stricter than upstream in one race chaos never makes: an owner that was
    /// waiting or orphaning when the collector read it, whose GC finalizer someone else then
    /// removed while another finalizer holds it, counts as live at the write.)
    Live,
    /// The owner, being deleted in foreground (`deletionTimestamp` + `foregroundDeletion`).
    Foreground,
    /// The owner, being deleted with the orphan policy (`deletionTimestamp` + `orphan`).
    Orphaning,
    /// A namespaced owner kind named by a cluster-scoped object: upstream never looks it up
    /// and never deletes the object.
    NamespacedOwnerOfClusterScoped,
}

impl OwnerState {
    /// The state of `owner` (its stored object, if one was found) for a reference to `uid`.
    pub fn of(owner: Option<&Value>, uid: &str) -> OwnerState {
        let Some(owner) = owner else { return OwnerState::Absent };
        let meta = &owner["metadata"];
        if meta["uid"].as_str() != Some(uid) {
            return OwnerState::OtherUid;
        }
        let deleting = meta.get("deletionTimestamp").is_some_and(|t| !t.is_null());
        let has = |f: &str| {
            meta["finalizers"].as_array().is_some_and(|fs| fs.iter().any(|x| x.as_str() == Some(f)))
        };
        if deleting && has("foregroundDeletion") {
            OwnerState::Foreground
        } else if deleting && has("orphan") {
            OwnerState::Orphaning
        } else {
            OwnerState::Live
        }
    }

    /// Whether an owner in this state forbids deleting its dependent.
    pub fn holds_dependent(self) -> bool {
        matches!(
            self,
            OwnerState::Live | OwnerState::Orphaning | OwnerState::NamespacedOwnerOfClusterScoped
        )
    }
}

/// Why the oracle flagged a delete (see the [module documentation](self)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wrongful {
    /// This owner, in this state, held the object.
    HeldBy(OwnerRef, OwnerState),
    /// The object had no ownerReferences.
    NoOwners,
    /// A patch (or update) removed the reference to this owner, which held the object:
    /// upstream removes references only to owners absent, waiting for their dependents'
    /// deletion, or being deleted with the orphan policy.
    RemovedReference(OwnerRef, OwnerState),
    /// The propagationPolicy sent is not one upstream's decision would send for the object's
    /// GC finalizers and its owners.
    Policy {
        /// The policy sent.
        sent: String,
        /// The object's finalizers.
        finalizers: Vec<String>,
    },
}

impl std::fmt::Display for Wrongful {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Wrongful::HeldBy(o, state) => {
                write!(f, "held by {} {} (uid {}): {state:?}", o.kind, o.name, o.uid)
            }
            Wrongful::NoOwners => write!(f, "it had no ownerReferences"),
            Wrongful::RemovedReference(o, state) => {
                write!(
                    f,
                    "removed the reference to {} {} (uid {}): {state:?}",
                    o.kind, o.name, o.uid
                )
            }
            Wrongful::Policy { sent, finalizers } => {
                write!(f, "propagationPolicy {sent} on an object with finalizers {finalizers:?}")
            }
        }
    }
}

/// The oracle's rule for a collector's delete of an object whose owners were in these states,
/// sent with `policy` (`None`: none sent), the object carrying `finalizers`: why it is
/// wrongful, if it is.
pub fn wrongful(
    owners: &[(OwnerRef, OwnerState)],
    policy: Option<&str>,
    finalizers: &[String],
) -> Option<Wrongful> {
    if owners.is_empty() {
        return Some(Wrongful::NoOwners);
    }
    if let Some((o, state)) = owners.iter().find(|(_, state)| state.holds_dependent()) {
        return Some(Wrongful::HeldBy(o.clone(), *state));
    }
    let has = |f: &str| finalizers.iter().any(|x| x == f);
    // Foreground is not judged: it is upstream's policy for an object of an owner waiting for
    // its dependents, and every owner left here (none holds the object) is waiting or gone,
    // perhaps since the collector read it waiting.
    let policy_wrong = match policy {
        Some("Background") => has("orphan") || has("foregroundDeletion"),
        Some("Orphan") => !has("orphan"),
        _ => false,
    };
    policy_wrong.then(|| Wrongful::Policy {
        sent: policy.unwrap_or_default().to_owned(),
        finalizers: finalizers.to_vec(),
    })
}

/// One write, as the audit records it.
#[derive(Clone, Debug)]
pub struct WriteRecord {
    /// Who: the request's `User-Agent` (empty if none was sent), or the caller label of a
    /// direct store write.
    pub actor: Arc<str>,
    /// What.
    pub verb: Verb,
    /// `plural.group`.
    pub resource: String,
    /// The object's namespace (empty for cluster-scoped objects).
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The object's uid.
    pub uid: String,
    /// The store's resourceVersion once the write was applied.
    pub resource_version: u64,
    /// When.
    pub at: Instant,
    /// The preconditions sent: a delete's `preconditions`, an update's or patch's
    /// `metadata.uid` / `metadata.resourceVersion` (`uid=…,resourceVersion=…`).
    pub preconditions: Option<String>,
    /// The object's ownerReferences before the write (the new object's for a create).
    pub owner_references: Vec<OwnerRef>,
    /// Whether the write removed the object from storage (a delete without finalizers left,
    /// or an update that emptied the finalizers of an object being deleted).
    pub removed: bool,
}

/// A deletion the oracle flagged.
#[derive(Clone, Debug)]
pub struct WrongfulDeletion {
    /// The delete.
    pub record: WriteRecord,
    /// Every owner of the deleted object, with its state at that moment.
    pub owners: Vec<(OwnerRef, OwnerState)>,
    /// Why it was wrongful.
    pub reason: Wrongful,
}

impl std::fmt::Display for WrongfulDeletion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = &self.record;
        let did = match r.verb {
            Verb::Patch => "patched",
            Verb::Update => "updated",
            Verb::Create => "created",
            Verb::Delete | Verb::DeleteCollection => "deleted",
        };
        write!(
            f,
            "{} {did} {} {}/{} (uid {}) at resourceVersion {} ({}) while its owners were",
            r.actor, r.resource, r.namespace, r.name, r.uid, r.resource_version, self.reason
        )?;
        for (o, state) in &self.owners {
            write!(f, " {} {} (uid {}): {state:?};", o.kind, o.name, o.uid)?;
        }
        Ok(())
    }
}

#[derive(Debug)]
struct Inner {
    records: VecDeque<WriteRecord>,
    capacity: usize,
    dropped: u64,
    wrongful: Vec<WrongfulDeletion>,
    collector_agent: String,
}

/// The audit of a store's writes; see the [module documentation](self).
#[derive(Debug)]
pub struct Audit {
    inner: Mutex<Inner>,
    writes: AtomicU64,
    deletions: AtomicU64,
    checked: AtomicU64,
    wrongful: AtomicU64,
}

impl Default for Audit {
    fn default() -> Audit {
        Audit {
            inner: Mutex::new(Inner {
                records: VecDeque::new(),
                capacity: DEFAULT_CAPACITY,
                dropped: 0,
                wrongful: Vec::new(),
                collector_agent: COLLECTOR_AGENT.to_owned(),
            }),
            writes: AtomicU64::new(0),
            deletions: AtomicU64::new(0),
            checked: AtomicU64::new(0),
            wrongful: AtomicU64::new(0),
        }
    }
}

impl Audit {
    /// The records kept, oldest first.
    pub fn records(&self) -> Vec<WriteRecord> {
        self.inner.lock().records.iter().cloned().collect()
    }

    /// Keeps at most `capacity` records (the oldest go first); 0 keeps none (the counts and
    /// the oracle go on).
    pub fn set_capacity(&self, capacity: usize) {
        let mut inner = self.inner.lock();
        inner.capacity = capacity;
        while inner.records.len() > capacity {
            inner.records.pop_front();
            inner.dropped += 1;
        }
    }

    /// Records that did not fit in the capacity.
    pub fn dropped(&self) -> u64 {
        self.inner.lock().dropped
    }

    /// Forgets every record, wrongful deletion and count.
    pub fn clear(&self) {
        let mut inner = self.inner.lock();
        inner.records.clear();
        inner.wrongful.clear();
        inner.dropped = 0;
        for c in [&self.writes, &self.deletions, &self.checked, &self.wrongful] {
            c.store(0, Ordering::Relaxed);
        }
    }

    /// The prefix that identifies the collector's actor (default [`COLLECTOR_AGENT`]).
    pub fn collector_agent(&self) -> String {
        self.inner.lock().collector_agent.clone()
    }

    /// Changes [`Audit::collector_agent`].
    pub fn set_collector_agent(&self, prefix: &str) {
        prefix.clone_into(&mut self.inner.lock().collector_agent);
    }

    /// Whether `actor` is the collector.
    pub fn is_collector(&self, actor: &str) -> bool {
        actor.starts_with(self.inner.lock().collector_agent.as_str())
    }

    /// Writes recorded (all verbs, records dropped or not).
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// Deletes recorded (every actor).
    pub fn deletions(&self) -> u64 {
        self.deletions.load(Ordering::Relaxed)
    }

    /// The collector's deletes the oracle checked.
    pub fn deletions_checked(&self) -> u64 {
        self.checked.load(Ordering::Relaxed)
    }

    /// The wrongful deletions found (the first `WRONGFUL_CAPACITY` kept).
    pub fn wrongful_deletions(&self) -> Vec<WrongfulDeletion> {
        self.inner.lock().wrongful.clone()
    }

    /// How many wrongful deletions were found.
    pub fn wrongful_count(&self) -> u64 {
        self.wrongful.load(Ordering::Relaxed)
    }

    /// The actor of the write being made now (see [`with_actor`]).
    pub(crate) fn actor(&self) -> Arc<str> {
        current_actor()
    }

    /// Records a write of `obj` (before the write; the new object for a create).
    #[allow(clippy::too_many_arguments)] // one private recording path; the arguments are the record's fields
    pub(crate) fn record(
        &self,
        actor: Arc<str>,
        verb: Verb,
        resource: String,
        obj: &Value,
        resource_version: u64,
        preconditions: Option<String>,
        removed: bool,
    ) -> WriteRecord {
        let text = |f: &str| obj["metadata"][f].as_str().unwrap_or_default().to_owned();
        let record = WriteRecord {
            actor,
            verb,
            resource,
            namespace: text("namespace"),
            name: text("name"),
            uid: text("uid"),
            resource_version,
            at: Instant::now(),
            preconditions,
            owner_references: OwnerRef::of(obj),
            removed,
        };
        self.writes.fetch_add(1, Ordering::Relaxed);
        if matches!(verb, Verb::Delete | Verb::DeleteCollection) {
            self.deletions.fetch_add(1, Ordering::Relaxed);
        }
        let mut inner = self.inner.lock();
        if inner.capacity > 0 {
            if inner.records.len() == inner.capacity {
                inner.records.pop_front();
                inner.dropped += 1;
            }
            inner.records.push_back(record.clone());
        } else {
            inner.dropped += 1;
        }
        record
    }

    /// Judges the ownerReferences a collector's patch or update (`record`) removed, with their
    /// owners' states at that moment: a reference to an owner that holds its dependent
    /// (alive, not deleted in foreground nor with orphan) is one upstream never removes.
    pub(crate) fn judge_reference_removal(
        &self,
        record: WriteRecord,
        removed: Vec<(OwnerRef, OwnerState)>,
    ) {
        let held = removed.iter().find(|(_, state)| {
            matches!(state, OwnerState::Live | OwnerState::NamespacedOwnerOfClusterScoped)
        });
        let Some((owner, state)) = held else { return };
        let reason = Wrongful::RemovedReference(owner.clone(), *state);
        self.flag(WrongfulDeletion { record, owners: removed, reason });
    }

    /// Counts and keeps a wrongful write.
    fn flag(&self, found: WrongfulDeletion) {
        self.wrongful.fetch_add(1, Ordering::Relaxed);
        tracing::error!(%found, "simcluster audit: wrongful write");
        let mut inner = self.inner.lock();
        if inner.wrongful.len() < WRONGFUL_CAPACITY {
            inner.wrongful.push(found);
        }
    }

    /// Judges a collector's delete (`record`) given its owners' states at that moment, the
    /// propagationPolicy sent and the object's finalizers.
    pub(crate) fn judge(
        &self,
        record: WriteRecord,
        owners: Vec<(OwnerRef, OwnerState)>,
        policy: Option<&str>,
        finalizers: &[String],
    ) {
        self.checked.fetch_add(1, Ordering::Relaxed);
        let Some(reason) = wrongful(&owners, policy, finalizers) else { return };
        self.flag(WrongfulDeletion { record, owners, reason });
    }
}

/// `uid=…,resourceVersion=…` from a delete's preconditions or an object's metadata, if any.
pub(crate) fn preconditions(uid: Option<&str>, resource_version: Option<&str>) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(u) = uid.filter(|u| !u.is_empty()) {
        parts.push(format!("uid={u}"));
    }
    if let Some(v) = resource_version.filter(|v| !v.is_empty()) {
        parts.push(format!("resourceVersion={v}"));
    }
    (!parts.is_empty()).then(|| parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::PatchType;
    use crate::resources;
    use crate::store::{DeleteOptions, Resolved, Store, StoreConfig};
    use serde_json::json;

    fn store() -> Store {
        Store::new(StoreConfig::default(), resources::builtin())
    }

    fn cm(store: &Store, ns: &str, name: &str) -> Value {
        let r = store.resolve("", "v1", "configmaps").unwrap();
        with_actor("test", || store.create(&r, Some(ns), json!({"metadata": {"name": name}})))
            .unwrap()
    }

    fn pod_owned_by(store: &Store, name: &str, owners: &[(&str, &str, &str, &str)]) -> Value {
        let r = store.resolve("", "v1", "pods").unwrap();
        let refs: Vec<Value> = owners
            .iter()
            .map(
                |(av, kind, n, uid)| json!({"apiVersion": av, "kind": kind, "name": n, "uid": uid}),
            )
            .collect();
        with_actor("test", || {
            store.create(
                &r,
                Some("ns"),
                json!({"metadata": {"name": name, "ownerReferences": refs}}),
            )
        })
        .unwrap()
    }

    fn uid(obj: &Value) -> String {
        obj["metadata"]["uid"].as_str().unwrap().to_owned()
    }

    fn delete_pod_as(store: &Store, actor: &str, name: &str) {
        let r = store.resolve("", "v1", "pods").unwrap();
        with_actor(actor, || store.delete(&r, Some("ns"), name, &DeleteOptions::default()))
            .unwrap();
    }

    fn delete_cm(store: &Store, name: &str, policy: &str) {
        let r = store.resolve("", "v1", "configmaps").unwrap();
        let opts = DeleteOptions { propagation_policy: Some(policy.into()), ..Default::default() };
        with_actor("user", || store.delete(&r, Some("ns"), name, &opts)).unwrap();
    }

    #[test]
    fn oracle_should_flag_the_collector_deleting_a_dependent_of_a_live_owner() {
        let s = store();
        let owner = cm(&s, "ns", "owner");
        pod_owned_by(&s, "dep", &[("v1", "ConfigMap", "owner", &uid(&owner))]);
        delete_pod_as(&s, "kube-gc/0.1.0", "dep");
        let found = s.audit().wrongful_deletions();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].record.name, "dep");
        assert_eq!(found[0].owners[0].1, OwnerState::Live);
        assert_eq!(s.audit().deletions_checked(), 1);
    }

    #[test]
    fn oracle_should_flag_deleting_a_dependent_of_an_orphaning_owner() {
        let s = store();
        let owner = cm(&s, "ns", "owner");
        pod_owned_by(&s, "dep", &[("v1", "ConfigMap", "owner", &uid(&owner))]);
        delete_cm(&s, "owner", "Orphan");
        delete_pod_as(&s, "kube-gc/0.1.0", "dep");
        let found = s.audit().wrongful_deletions();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].owners[0].1, OwnerState::Orphaning);
    }

    #[test]
    fn oracle_should_flag_one_live_owner_among_absent_ones() {
        let s = store();
        let owner = cm(&s, "ns", "solid");
        pod_owned_by(
            &s,
            "dep",
            &[
                ("v1", "ConfigMap", "gone", "00000000-0000-4000-8000-000000000001"),
                ("v1", "ConfigMap", "solid", &uid(&owner)),
            ],
        );
        delete_pod_as(&s, "kube-gc", "dep");
        assert_eq!(s.audit().wrongful_count(), 1);
    }

    #[test]
    fn oracle_should_not_flag_legitimate_deletions() {
        let s = store();
        // Owner absent.
        pod_owned_by(
            &s,
            "a",
            &[("v1", "ConfigMap", "never", "00000000-0000-4000-8000-00000000000a")],
        );
        delete_pod_as(&s, "kube-gc/0.1.0", "a");
        // Owner present with another uid (recreated).
        cm(&s, "ns", "recreated");
        pod_owned_by(
            &s,
            "b",
            &[("v1", "ConfigMap", "recreated", "00000000-0000-4000-8000-00000000000b")],
        );
        delete_pod_as(&s, "kube-gc/0.1.0", "b");
        // Owner being deleted in foreground.
        let fg = cm(&s, "ns", "fg");
        pod_owned_by(&s, "c", &[("v1", "ConfigMap", "fg", &uid(&fg))]);
        delete_cm(&s, "fg", "Foreground");
        delete_pod_as(&s, "kube-gc/0.1.0", "c");
        // Owner in another namespace: not where the collector looks.
        let other = cm(&s, "elsewhere", "far");
        pod_owned_by(&s, "d", &[("v1", "ConfigMap", "far", &uid(&other))]);
        delete_pod_as(&s, "kube-gc/0.1.0", "d");
        // Owner of a kind that is not served.
        pod_owned_by(
            &s,
            "e",
            &[("example.com/v1", "Widget", "w", "00000000-0000-4000-8000-00000000000e")],
        );
        delete_pod_as(&s, "kube-gc/0.1.0", "e");
        assert_eq!(s.audit().wrongful_deletions().len(), 0, "{:?}", s.audit().wrongful_deletions());
        assert_eq!(s.audit().deletions_checked(), 5);
    }

    /// Upstream never deletes an object without owners, nor a cluster-scoped one naming a
    /// namespaced owner kind, and sends the policy the object's GC finalizers ask for.
    #[test]
    fn oracle_should_flag_deletions_upstream_never_makes() {
        let s = store();
        let gc = |r: &Resolved, ns: Option<&str>, name: &str, policy: Option<&str>| {
            let opts =
                DeleteOptions { propagation_policy: policy.map(Into::into), ..Default::default() };
            with_actor("kube-gc/0.1.0", || s.delete(r, ns, name, &opts)).unwrap();
        };
        let pods = s.resolve("", "v1", "pods").unwrap();
        let gone = ("v1", "ConfigMap", "gone", "00000000-0000-4000-8000-0000000000a1");
        // No owners at all.
        cm(&s, "ns", "unowned");
        gc(&s.resolve("", "v1", "configmaps").unwrap(), Some("ns"), "unowned", Some("Background"));
        // A cluster-scoped object naming a namespaced owner kind.
        let nodes = s.resolve("", "v1", "nodes").unwrap();
        let node = json!({"metadata": {"name": "n1", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": gone.3}]}});
        with_actor("test", || s.create(&nodes, None, node)).unwrap();
        gc(&nodes, None, "n1", Some("Background"));
        // Background on an object asking for orphan (set at creation, not being deleted).
        let orphaning = json!({"metadata": {"name": "o", "finalizers": ["orphan"], "ownerReferences": [
            {"apiVersion": gone.0, "kind": gone.1, "name": gone.2, "uid": gone.3}]}});
        with_actor("test", || s.create(&pods, Some("ns"), orphaning)).unwrap();
        gc(&pods, Some("ns"), "o", Some("Background"));
        // Orphan on an object that does not ask for it.
        pod_owned_by(&s, "p", &[gone]);
        gc(&pods, Some("ns"), "p", Some("Orphan"));
        // Foreground with every owner gone: the one that waited may have gone since the
        // collector read it, so not judged.
        pod_owned_by(&s, "f", &[gone]);
        gc(&pods, Some("ns"), "f", Some("Foreground"));
        let reasons: Vec<Wrongful> =
            s.audit().wrongful_deletions().into_iter().map(|w| w.reason).collect();
        assert!(
            matches!(
                &reasons[..],
                [
                    Wrongful::NoOwners,
                    Wrongful::HeldBy(_, OwnerState::NamespacedOwnerOfClusterScoped),
                    Wrongful::Policy { .. },
                    Wrongful::Policy { .. },
                ]
            ),
            "{reasons:?}"
        );
        // The policies upstream sends: Background for plain garbage, Foreground for an item
        // of an owner deleted in foreground.
        pod_owned_by(&s, "b", &[gone]);
        gc(&pods, Some("ns"), "b", Some("Background"));
        let fg = cm(&s, "ns", "fg");
        pod_owned_by(&s, "c", &[("v1", "ConfigMap", "fg", &uid(&fg))]);
        delete_cm(&s, "fg", "Foreground");
        gc(&pods, Some("ns"), "c", Some("Foreground"));
        assert_eq!(s.audit().wrongful_count(), 4, "{:?}", s.audit().wrongful_deletions());
    }

    /// A collector's patch that removes a reference to a live owner is flagged; one removing a
    /// reference to an absent owner (a dangling reference) is not.
    #[test]
    fn oracle_should_flag_removing_a_reference_to_a_live_owner() {
        let s = store();
        let owner = cm(&s, "ns", "solid");
        let gone = "00000000-0000-4000-8000-0000000000b1";
        pod_owned_by(
            &s,
            "p",
            &[("v1", "ConfigMap", "gone", gone), ("v1", "ConfigMap", "solid", &uid(&owner))],
        );
        let pods = s.resolve("", "v1", "pods").unwrap();
        let remove = |owner_uid: &str| {
            let body =
                json!({"metadata": {"ownerReferences": [{"$patch": "delete", "uid": owner_uid}]}});
            with_actor("kube-gc/0.1.0", || {
                s.patch(&pods, Some("ns"), "p", PatchType::Strategic, body.to_string().as_bytes())
            })
            .unwrap();
        };
        remove(gone);
        assert_eq!(s.audit().wrongful_count(), 0, "{:?}", s.audit().wrongful_deletions());
        remove(&uid(&owner));
        let found = s.audit().wrongful_deletions();
        assert!(
            matches!(&found[..], [w] if matches!(w.reason, Wrongful::RemovedReference(_, OwnerState::Live))),
            "{found:?}"
        );
        assert!(found[0].to_string().contains("patched"), "{}", found[0]);
    }

    #[test]
    fn oracle_should_not_judge_other_actors() {
        let s = store();
        let owner = cm(&s, "ns", "owner");
        pod_owned_by(&s, "dep", &[("v1", "ConfigMap", "owner", &uid(&owner))]);
        delete_pod_as(&s, "kubectl/v1.33.0", "dep");
        assert_eq!(s.audit().wrongful_count(), 0);
        assert_eq!(s.audit().deletions_checked(), 0);
        assert_eq!(s.audit().deletions(), 1);
    }

    #[test]
    fn audit_should_record_who_what_and_owners_and_stay_bounded() {
        let s = store();
        s.audit().set_capacity(3);
        let owner = cm(&s, "ns", "owner");
        pod_owned_by(&s, "dep", &[("v1", "ConfigMap", "owner", &uid(&owner))]);
        let r = s.resolve("", "v1", "pods").unwrap();
        let opts = DeleteOptions {
            preconditions: Some(crate::store::Preconditions {
                uid: Some("x".into()),
                resource_version: None,
            }),
            ..Default::default()
        };
        // A refused delete is not a write.
        assert!(with_actor("kube-gc", || s.delete(&r, Some("ns"), "dep", &opts)).is_err());
        delete_pod_as(&s, "someone", "dep");
        let records = s.audit().records();
        assert_eq!(records.len(), 3);
        let last = records.last().unwrap();
        assert_eq!((&*last.actor, last.verb, last.name.as_str()), ("someone", Verb::Delete, "dep"));
        assert_eq!(last.owner_references[0].uid, uid(&owner));
        assert!(last.removed);
        assert_eq!(last.resource_version, s.resource_version());
        cm(&s, "ns", "more");
        assert_eq!(s.audit().records().len(), 3);
        assert_eq!(s.audit().dropped(), 1);
        assert_eq!(s.audit().writes(), 4);
        s.audit().clear();
        assert!(s.audit().records().is_empty());
        assert_eq!(s.audit().writes(), 0);
        // Outside any actor: a direct write.
        let r = s.resolve("", "v1", "configmaps").unwrap();
        s.create(&r, Some("ns"), json!({"metadata": {"name": "direct"}})).unwrap();
        assert_eq!(&*s.audit().records()[0].actor, DIRECT_ACTOR);
    }
}
