//! Object storage with the API server's write semantics (GC-SPEC §5.6): one global
//! resourceVersion, uids, creation and deletion timestamps, finalizers, and a bounded history
//! of changes for watches.
//!
//! # Representation
//!
//! Each resource's objects live in one table, a `BTreeMap` keyed by `namespace/name` (`name` for
//! cluster-scoped objects), so that listing one namespace is a range and pagination by key is
//! stable. An object is stored as its serialized JSON *without* `apiVersion` and `kind` (they
//! belong to the resource and to the version it is read at), in an `Arc<[u8]>` shared with the
//! watch history: a few hundred bytes per object, no tree.
//!
//! # Concurrency
//!
//! One `RwLock` around the whole state. Every write takes it exclusively, assigns the next
//! resourceVersion, appends the change to the history and broadcasts it *under the lock*, so a
//! watch that starts under the read lock (backlog from the history + subscription) never misses
//! nor repeats a change.
//!
//! # Divergence from the real server
//!
//! * Deletion is never graceful (`gracePeriodSeconds` is ignored), as for unscheduled pods.
//! * Namespaces are deleted at once, without deleting their contents, and creating an object in
//!   a namespace that does not exist is allowed.
//! * A list reports the resourceVersion at its first page, then pages through the *current*
//!   state by key: an object changed between pages is shown as changed (a watch from the list's
//!   resourceVersion then repeats the change, which informers tolerate); nothing present
//!   throughout is skipped or repeated.
//! * Deleting a CRD removes its resources and objects at once, without DELETED events.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

use kube_gc_engine::cluster::PropagationPolicy;
use kube_gc_testkit::registry::deletion_finalizers_for_garbage_collection;
use parking_lot::RwLock;
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::sync::broadcast;

use crate::audit::{self, Audit, OwnerRef, OwnerState, Verb};
use crate::error::{Error, Result};
use crate::patch::{self, PatchType, string_list};
use crate::resources::{self, Registry, ResourceDef};
use crate::time::now_rfc3339;
use kube_gc_workload::SplitMix64;

/// What a change did to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// Created (`ADDED`).
    Added,
    /// Updated (`MODIFIED`).
    Modified,
    /// Removed (`DELETED`); the object is its last state at the deletion's resourceVersion.
    Deleted,
}

impl ChangeKind {
    /// The watch event type.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "ADDED",
            ChangeKind::Modified => "MODIFIED",
            ChangeKind::Deleted => "DELETED",
        }
    }
}

/// One write, as the watch history keeps it.
#[derive(Debug)]
pub struct Change {
    /// The resourceVersion the write produced.
    pub rv: u64,
    /// The storage table (resource) it happened in.
    pub(crate) table: usize,
    /// The object's namespace (empty for cluster-scoped objects).
    pub namespace: Box<str>,
    /// What happened.
    pub kind: ChangeKind,
    /// The object, in stored form (no `apiVersion` / `kind`).
    pub object: Arc<[u8]>,
}

/// Knobs of the store.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// How many changes the watch history keeps; a watch from an older resourceVersion gets
    /// 410 Expired.
    pub history: usize,
    /// Capacity of the live change channel; a watcher that falls this far behind is ended with
    /// 410 Expired (the real server ends slow watchers too).
    pub channel: usize,
    /// Seed of the uid and generated-name generator (deterministic by default).
    pub seed: u64,
}

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig { history: 10_000, channel: 65_536, seed: 0x5eed }
    }
}

/// A resolved resource: its definition and its table.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The resource as served at the requested version.
    pub def: Arc<ResourceDef>,
    pub(crate) table: usize,
}

/// `DeleteOptions` (body) merged with the query's `propagationPolicy` / `orphanDependents`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptions {
    /// `Orphan`, `Background` or `Foreground`.
    pub propagation_policy: Option<String>,
    /// Deprecated: `true` orphans, `false` does not (and must not be combined with a policy).
    pub orphan_dependents: Option<bool>,
    /// `preconditions.uid` / `preconditions.resourceVersion`.
    pub preconditions: Option<Preconditions>,
    /// Accepted and ignored: deletion is never graceful here.
    pub grace_period_seconds: Option<i64>,
    /// `dryRun` (`["All"]`): refused with 400, simcluster has no dry run.
    #[serde(default)]
    pub dry_run: Vec<String>,
}

/// Delete preconditions (409 on mismatch).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    /// The uid the object must have.
    pub uid: Option<String>,
    /// The resourceVersion the object must be at.
    pub resource_version: Option<String>,
}

impl DeleteOptions {
    fn policy(&self) -> Result<Option<PropagationPolicy>> {
        let policy = match self.propagation_policy.as_deref() {
            None => None,
            Some("Orphan") => Some(PropagationPolicy::Orphan),
            Some("Background") => Some(PropagationPolicy::Background),
            Some("Foreground") => Some(PropagationPolicy::Foreground),
            Some(other) => {
                return Err(Error::Invalid(format!(
                    "DeleteOptions.propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
                )));
            }
        };
        match (self.orphan_dependents, policy) {
            (Some(_), Some(_)) => Err(Error::Invalid(
                "DeleteOptions.propagationPolicy: Invalid value: orphanDependents and deletionPropagation cannot be both set".into(),
            )),
            (Some(true), None) => Ok(Some(PropagationPolicy::Orphan)),
            (Some(false), None) => Ok(Some(PropagationPolicy::Background)),
            (None, policy) => Ok(policy),
        }
    }
}

/// A label or field selector: `key=value`, `key==value`, `key!=value`, `key`, `!key`, joined
/// by commas (set-based `in` / `notin` are not supported: 400).
#[derive(Clone, Debug, Default)]
pub struct Selector {
    terms: Vec<(String, SelectorOp)>,
}

#[derive(Clone, Debug)]
enum SelectorOp {
    Eq(String),
    Ne(String),
    Exists,
    Absent,
}

impl Selector {
    /// Parses a selector; an empty string selects everything.
    pub fn parse(text: &str) -> Result<Selector> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let parsed = if let Some((k, v)) = term.split_once("!=") {
                (k, SelectorOp::Ne(v.trim().to_owned()))
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (k, SelectorOp::Eq(v.trim().to_owned()))
            } else if let Some(k) = term.strip_prefix('!') {
                (k, SelectorOp::Absent)
            } else if term.contains(' ') || term.contains('(') {
                return Err(Error::BadRequest(format!("unsupported selector {term:?}")));
            } else {
                (term, SelectorOp::Exists)
            };
            terms.push((parsed.0.trim().to_owned(), parsed.1));
        }
        Ok(Selector { terms })
    }

    fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    fn matches(&self, lookup: impl Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|(key, op)| {
            let value = lookup(key);
            match op {
                SelectorOp::Eq(v) => value.as_deref() == Some(v.as_str()),
                SelectorOp::Ne(v) => value.as_deref() != Some(v.as_str()),
                SelectorOp::Exists => value.is_some(),
                SelectorOp::Absent => value.is_none(),
            }
        })
    }
}

/// What to list.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// The namespace, or `None` for all (and for cluster-scoped resources).
    pub namespace: Option<String>,
    /// `limit` (0: no limit).
    pub limit: usize,
    /// `continue`, from a previous page.
    pub continue_token: Option<String>,
    /// `labelSelector`.
    pub labels: Selector,
    /// `fieldSelector` (`metadata.name`, `metadata.namespace`).
    pub fields: Selector,
}

/// One page of a list.
#[derive(Debug)]
pub struct ListPage {
    /// The objects, in stored form.
    pub items: Vec<Arc<[u8]>>,
    /// The list's resourceVersion (that of its first page).
    pub resource_version: u64,
    /// The token for the next page, if any.
    pub continue_token: Option<String>,
}

/// Where a watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchFrom {
    /// `resourceVersion` unset or `0`: every current object as ADDED, then changes.
    Current,
    /// After this resourceVersion: changes only (410 if older than the history).
    After(u64),
}

/// A started watch: the changes to send first, then the live channel.
#[derive(Debug)]
pub struct WatchStart {
    /// Changes (or synthetic ADDED events) to deliver before the live ones.
    pub backlog: Vec<Arc<Change>>,
    /// Live changes of the whole store (filter by [`Resolved`] and namespace).
    pub live: broadcast::Receiver<Arc<Change>>,
    /// The store's resourceVersion when the watch started.
    pub resource_version: u64,
}

/// `Option` table: `None` once its resource is gone (CRD deleted).
type Table = Option<BTreeMap<Box<str>, Arc<[u8]>>>;

struct State {
    rv: u64,
    registry: Registry,
    tables: Vec<Table>,
    history: VecDeque<Arc<Change>>,
    history_limit: usize,
    /// Every change with `rv > floor` is in `history`.
    floor: u64,
    rng: SplitMix64,
}

/// The object store; see the [module documentation](self).
pub struct Store {
    state: RwLock<State>,
    tx: broadcast::Sender<Arc<Change>>,
    /// Every write, and the wrongful-deletion oracle (see [`audit`]).
    audit: Audit,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.state.read();
        f.debug_struct("Store").field("resource_version", &s.rv).finish_non_exhaustive()
    }
}

/// The key of an object in its table (`namespace/name`, or `name` when cluster-scoped), as
/// [`Store::preload`] takes it.
pub fn object_key(namespace: Option<&str>, name: &str) -> Box<str> {
    match namespace {
        Some(ns) => format!("{ns}/{name}").into_boxed_str(),
        None => name.into(),
    }
}

impl Store {
    /// An empty store serving `resources`.
    pub fn new(config: StoreConfig, resources: impl IntoIterator<Item = ResourceDef>) -> Store {
        let (tx, _) = broadcast::channel(config.channel.max(16));
        let store = Store {
            state: RwLock::new(State {
                rv: 0,
                registry: Registry::default(),
                tables: Vec::new(),
                history: VecDeque::new(),
                history_limit: config.history.max(1),
                floor: 0,
                rng: SplitMix64::new(config.seed),
            }),
            tx,
            audit: Audit::default(),
        };
        for r in resources {
            store.add_resource(r);
        }
        store
    }

    /// Serves `def` (replacing a resource at the same group/version/plural).
    pub fn add_resource(&self, def: ResourceDef) {
        let mut s = self.state.write();
        s.add_resource(def);
    }

    /// The audit of this store's writes and its wrongful-deletion oracle.
    pub fn audit(&self) -> &Audit {
        &self.audit
    }

    /// The current (last assigned) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.state.read().rv
    }

    /// Every served resource.
    pub fn resources(&self) -> Vec<Arc<ResourceDef>> {
        self.state.read().registry.all().cloned().collect()
    }

    /// Non-core groups with their versions, in registration order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        self.state.read().registry.groups()
    }

    /// The number of objects stored, all resources together.
    pub fn len(&self) -> usize {
        self.state.read().tables.iter().flatten().map(BTreeMap::len).sum()
    }

    /// Whether no object is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves `group/version/plural`; 404 if not served.
    pub fn resolve(&self, group: &str, version: &str, plural: &str) -> Result<Resolved> {
        let s = self.state.read();
        s.registry.lookup(group, version, plural).map(|(def, table)| Resolved { def, table }).ok_or(
            Error::NotFound {
                resource: if group.is_empty() {
                    plural.into()
                } else {
                    format!("{plural}.{group}")
                },
                name: String::new(),
            },
        )
    }

    /// Resolves a resource by apiVersion (`apps/v1`) and plural.
    pub fn resolve_api_version(&self, api_version: &str, plural: &str) -> Result<Resolved> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        self.resolve(group, version, plural)
    }

    /// The object `name`, in stored form.
    pub fn get(&self, r: &Resolved, namespace: Option<&str>, name: &str) -> Result<Arc<[u8]>> {
        let s = self.state.read();
        s.table(r)?.get(&object_key(namespace, name)).cloned().ok_or_else(|| not_found(r, name))
    }

    /// A page of objects.
    pub fn list(&self, r: &Resolved, opts: &ListOptions) -> Result<ListPage> {
        let s = self.state.read();
        let table = s.table(r)?;
        let prefix = opts.namespace.as_ref().map(|ns| format!("{ns}/"));
        let (list_rv, start) = match &opts.continue_token {
            Some(token) => {
                let (rv, key) = token
                    .split_once('|')
                    .and_then(|(rv, key)| Some((rv.parse::<u64>().ok()?, key)))
                    .ok_or_else(|| {
                        Error::BadRequest(format!("invalid continue token {token:?}"))
                    })?;
                (rv, Bound::Excluded(key.to_owned().into_boxed_str()))
            }
            None => match &prefix {
                Some(p) => (s.rv, Bound::Included(p.clone().into_boxed_str())),
                None => (s.rv, Bound::Unbounded),
            },
        };
        let filtered = !opts.labels.is_empty() || !opts.fields.is_empty();
        let mut items = Vec::new();
        let mut continue_token = None;
        let mut last_key: Option<&str> = None;
        for (key, obj) in table.range::<Box<str>, _>((start, Bound::Unbounded)) {
            if let Some(p) = &prefix {
                if !key.starts_with(p.as_str()) {
                    break;
                }
            }
            if filtered && !selected(obj, &opts.labels, &opts.fields) {
                continue;
            }
            if opts.limit > 0 && items.len() == opts.limit {
                continue_token = last_key.map(|k| format!("{list_rv}|{k}"));
                break;
            }
            items.push(obj.clone());
            last_key = Some(key);
        }
        Ok(ListPage { items, resource_version: list_rv, continue_token })
    }

    /// Starts a watch on `r` (in `namespace`, or all).
    pub fn watch(
        &self,
        r: &Resolved,
        namespace: Option<&str>,
        from: WatchFrom,
    ) -> Result<WatchStart> {
        let s = self.state.read();
        let table = s.table(r)?;
        let backlog = match from {
            WatchFrom::Current => {
                let prefix = namespace.map(|ns| format!("{ns}/"));
                table
                    .iter()
                    .filter(|(k, _)| prefix.as_ref().is_none_or(|p| k.starts_with(p.as_str())))
                    .map(|(k, obj)| {
                        Arc::new(Change {
                            rv: s.rv,
                            table: r.table,
                            namespace: k.split_once('/').map_or("", |(ns, _)| ns).into(),
                            kind: ChangeKind::Added,
                            object: obj.clone(),
                        })
                    })
                    .collect()
            }
            WatchFrom::After(rv) => {
                if rv < s.floor {
                    return Err(Error::Expired(format!(
                        "too old resource version: {rv} ({})",
                        s.floor + 1
                    )));
                }
                s.history
                    .iter()
                    .filter(|c| c.rv > rv && c.table == r.table)
                    .filter(|c| namespace.is_none_or(|ns| &*c.namespace == ns))
                    .cloned()
                    .collect()
            }
        };
        Ok(WatchStart { backlog, live: self.tx.subscribe(), resource_version: s.rv })
    }

    /// Creates `obj` (a whole object; `apiVersion` and `kind` are ignored) in `namespace`.
    /// Returns the stored object.
    pub fn create(&self, r: &Resolved, namespace: Option<&str>, mut obj: Value) -> Result<Value> {
        let mut s = self.state.write();
        s.table(r)?;
        let meta = metadata_mut(&mut obj)?;
        let name = match meta.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
            Some(n) => n.to_owned(),
            None => match meta.get("generateName").and_then(Value::as_str) {
                Some(prefix) if !prefix.is_empty() => {
                    let suffix = s.rng.suffix(5);
                    format!("{prefix}{suffix}")
                }
                _ => {
                    return Err(Error::Invalid(
                        "metadata.name: Required value: name or generateName is required".into(),
                    ));
                }
            },
        };
        validate_name(&name)?;
        let namespace = scope(r, namespace, meta.get("namespace").and_then(Value::as_str))?;
        let key = object_key(namespace.as_deref(), &name);
        if s.table(r)?.contains_key(&key) {
            return Err(Error::AlreadyExists { resource: r.def.group_resource(), name });
        }
        meta.insert("name".into(), name.into());
        match &namespace {
            Some(ns) => meta.insert("namespace".into(), ns.clone().into()),
            None => meta.remove("namespace"),
        };
        let uid = s.rng.uid();
        meta.insert("uid".into(), uid.into());
        meta.insert("creationTimestamp".into(), now_rfc3339().into());
        meta.insert("generation".into(), 1.into());
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        validate_owner_references(meta)?;
        if r.def.plural == "namespaces" && r.def.group.is_empty() {
            obj["status"] = serde_json::json!({"phase": "Active"});
        }
        if resources::is_crd_resource(&r.def) {
            let defs = resources::from_crd(&obj)?;
            for d in defs {
                s.add_resource(d);
            }
            obj["status"] = crd_status(&obj);
        }
        let stored = s.write_object(r, namespace.as_deref(), key, obj, ChangeKind::Added, &self.tx);
        let actor = self.audit.actor();
        self.audit.record(actor, Verb::Create, r.def.group_resource(), &stored, s.rv, None, false);
        Ok(stored)
    }

    /// Replaces the object `name` with `obj` (PUT).
    pub fn update(
        &self,
        r: &Resolved,
        namespace: Option<&str>,
        name: &str,
        obj: Value,
    ) -> Result<(Value, ChangeKind)> {
        let mut s = self.state.write();
        let key = object_key(namespace, name);
        let current = s.current(r, &key, name)?;
        let sent = metadata_preconditions(&obj);
        let out = s.update_object(r, namespace, key, &current, obj, false, &self.tx)?;
        self.audit_write(Verb::Update, r, &current, s.rv, sent, &out);
        Ok(out)
    }

    /// Records an applied update or patch of `before` in the audit.
    fn audit_write(
        &self,
        verb: Verb,
        r: &Resolved,
        before: &Value,
        rv: u64,
        sent: Option<String>,
        out: &(Value, ChangeKind),
    ) {
        let removed = out.1 == ChangeKind::Deleted;
        self.audit.record(
            self.audit.actor(),
            verb,
            r.def.group_resource(),
            before,
            rv,
            sent,
            removed,
        );
    }

    /// Patches the object `name`.
    pub fn patch(
        &self,
        r: &Resolved,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        body: &[u8],
    ) -> Result<(Value, ChangeKind)> {
        let mut s = self.state.write();
        let key = object_key(namespace, name);
        let current = s.current(r, &key, name)?;
        let next = patch::apply(&r.def, patch_type, &current, body).map_err(|e| match e {
            Error::Conflict { message, .. } => conflict(r, name, message),
            other => other,
        })?;
        let sent =
            serde_json::from_slice::<Value>(body).ok().and_then(|p| metadata_preconditions(&p));
        let out = s.update_object(r, namespace, key, &current, next, true, &self.tx)?;
        self.audit_write(Verb::Patch, r, &current, s.rv, sent, &out);
        Ok(out)
    }

    /// Deletes the object `name` with the generic registry store's semantics (GC-SPEC §5.6).
    /// Returns the object's last state and whether it is gone (`false`: kept, being deleted,
    /// until its finalizers are removed).
    pub fn delete(
        &self,
        r: &Resolved,
        namespace: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<(Value, bool)> {
        let policy = opts.policy()?;
        let mut s = self.state.write();
        let key = object_key(namespace, name);
        let current = s.current(r, &key, name)?;
        let audited = self.audit_delete(&s, namespace, &current);
        let out = s.delete_object(
            r,
            namespace,
            key,
            current,
            policy,
            opts.preconditions.as_ref(),
            &self.tx,
        )?;
        let sent = opts
            .preconditions
            .as_ref()
            .and_then(|p| audit::preconditions(p.uid.as_deref(), p.resource_version.as_deref()));
        self.audited_delete(audited, Verb::Delete, r, s.rv, sent, out.1);
        Ok(out)
    }

    /// What the audit needs of a delete, taken before it is applied (under the write lock, so
    /// the owners' states are those of the delete's moment): the actor, the object, and its
    /// owners' states if the collector deletes it.
    fn audit_delete(&self, s: &State, namespace: Option<&str>, current: &Value) -> AuditedDelete {
        let actor = self.audit.actor();
        let owners = self.audit.is_collector(&actor).then(|| {
            OwnerRef::of(current)
                .into_iter()
                .map(|o| {
                    let state = s.owner_state(namespace, &o);
                    (o, state)
                })
                .collect()
        });
        AuditedDelete { actor, before: current.clone(), owners }
    }

    /// Records an applied delete, and judges it if the collector made it.
    fn audited_delete(
        &self,
        a: AuditedDelete,
        verb: Verb,
        r: &Resolved,
        rv: u64,
        sent: Option<String>,
        removed: bool,
    ) {
        let record =
            self.audit.record(a.actor, verb, r.def.group_resource(), &a.before, rv, sent, removed);
        if let Some(owners) = a.owners {
            self.audit.judge(record, owners);
        }
    }

    /// Deletes every selected object of `r` (in `namespace`, or all), each as [`Store::delete`]
    /// would; returns their last states.
    pub fn delete_collection(
        &self,
        r: &Resolved,
        opts: &ListOptions,
        delete: &DeleteOptions,
    ) -> Result<Vec<Value>> {
        let policy = delete.policy()?;
        let mut s = self.state.write();
        let prefix = opts.namespace.as_ref().map(|ns| format!("{ns}/"));
        let keys: Vec<(Box<str>, Arc<[u8]>)> = s
            .table(r)?
            .iter()
            .filter(|(k, _)| prefix.as_ref().is_none_or(|p| k.starts_with(p.as_str())))
            .filter(|(_, o)| selected(o, &opts.labels, &opts.fields))
            .map(|(k, o)| (k.clone(), o.clone()))
            .collect();
        let mut out = Vec::with_capacity(keys.len());
        for (key, bytes) in keys {
            let current = parse_stored(&bytes)?;
            let ns = key.split_once('/').map(|(ns, _)| ns.to_owned());
            let audited = self.audit_delete(&s, ns.as_deref(), &current);
            let (obj, removed) =
                s.delete_object(r, ns.as_deref(), key, current, policy, None, &self.tx)?;
            self.audited_delete(audited, Verb::DeleteCollection, r, s.rv, None, removed);
            out.push(obj);
        }
        Ok(out)
    }

    /// Inserts objects straight into storage, without events (bulk preload): each
    /// `(namespace, name, object)` gets the next resourceVersion, already written in the
    /// object by the caller as `resource_version_base + i`. Advances the store's
    /// resourceVersion and the watch history's floor past them.
    pub fn preload(
        &self,
        r: &Resolved,
        objects: impl IntoIterator<Item = (Box<str>, Arc<[u8]>, u64)>,
    ) -> Result<usize> {
        let mut s = self.state.write();
        let mut max_rv = s.rv;
        let mut n = 0;
        let table = s.table_mut(r)?;
        for (key, obj, rv) in objects {
            table.insert(key, obj);
            max_rv = max_rv.max(rv);
            n += 1;
        }
        s.rv = max_rv;
        s.floor = s.floor.max(max_rv);
        s.history.clear();
        Ok(n)
    }
}

/// A delete, as [`Store::audit_delete`] saw it before it was applied.
struct AuditedDelete {
    actor: Arc<str>,
    before: Value,
    /// The owners' states, for a delete the collector makes (the oracle judges it).
    owners: Option<Vec<(OwnerRef, OwnerState)>>,
}

impl State {
    /// The state of `owner`, referenced by an object in `namespace`, where a collector looks
    /// for it (GC-SPEC §3.3): by group and kind (any served version), in the dependent's
    /// namespace for a namespaced kind, cluster-wide for a cluster-scoped one.
    fn owner_state(&self, namespace: Option<&str>, owner: &OwnerRef) -> OwnerState {
        let group = owner.group();
        let Some(def) = self.registry.all().find(|d| d.group == group && d.kind == owner.kind)
        else {
            return OwnerState::Absent;
        };
        let Some((_, table)) = self.registry.lookup(&def.group, &def.version, &def.plural) else {
            return OwnerState::Absent;
        };
        let ns = match (def.namespaced, namespace) {
            (true, Some(ns)) => Some(ns),
            // A namespaced owner of a cluster-scoped object: never looked up.
            (true, None) => return OwnerState::Absent,
            (false, _) => None,
        };
        let found = self
            .tables
            .get(table)
            .and_then(Option::as_ref)
            .and_then(|t| t.get(&object_key(ns, &owner.name)))
            .and_then(|bytes| parse_stored(bytes).ok());
        OwnerState::of(found.as_ref(), &owner.uid)
    }

    fn add_resource(&mut self, def: ResourceDef) {
        let table = self.registry.add(def);
        if self.tables.len() < self.registry.table_count() {
            self.tables.resize_with(self.registry.table_count(), || None);
        }
        if self.tables[table].is_none() {
            self.tables[table] = Some(BTreeMap::new());
        }
    }

    fn table(&self, r: &Resolved) -> Result<&BTreeMap<Box<str>, Arc<[u8]>>> {
        self.tables.get(r.table).and_then(Option::as_ref).ok_or_else(|| gone_resource(r))
    }

    fn table_mut(&mut self, r: &Resolved) -> Result<&mut BTreeMap<Box<str>, Arc<[u8]>>> {
        self.tables.get_mut(r.table).and_then(Option::as_mut).ok_or_else(|| gone_resource(r))
    }

    fn current(&self, r: &Resolved, key: &str, name: &str) -> Result<Value> {
        let bytes = self.table(r)?.get(key).ok_or_else(|| not_found(r, name))?;
        parse_stored(bytes)
    }

    /// Writes `obj` at the next resourceVersion, records and broadcasts the change. Returns the
    /// object as stored, with `apiVersion` and `kind`.
    fn write_object(
        &mut self,
        r: &Resolved,
        namespace: Option<&str>,
        key: Box<str>,
        mut obj: Value,
        kind: ChangeKind,
        tx: &broadcast::Sender<Arc<Change>>,
    ) -> Value {
        self.rv += 1;
        let rv = self.rv;
        if let Some(o) = obj.as_object_mut() {
            o.remove("apiVersion");
            o.remove("kind");
        }
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), rv.to_string().into());
        }
        let bytes: Arc<[u8]> = serde_json::to_vec(&obj).expect("a Value serializes").into();
        let table = self.table_mut(r).expect("checked by the caller");
        if kind == ChangeKind::Deleted {
            table.remove(&key);
        } else {
            table.insert(key, bytes.clone());
        }
        let change = Arc::new(Change {
            rv,
            table: r.table,
            namespace: namespace.unwrap_or_default().into(),
            kind,
            object: bytes,
        });
        self.history.push_back(change.clone());
        while self.history.len() > self.history_limit {
            let old = self.history.pop_front().expect("non-empty");
            self.floor = old.rv;
        }
        // No receiver is not an error: nobody watches.
        let _ = tx.send(change);
        with_type(&r.def, obj)
    }

    #[allow(clippy::too_many_arguments)] // one private write path; the arguments are its inputs
    fn update_object(
        &mut self,
        r: &Resolved,
        namespace: Option<&str>,
        key: Box<str>,
        current: &Value,
        mut next: Value,
        is_patch: bool,
        tx: &broadcast::Sender<Arc<Change>>,
    ) -> Result<(Value, ChangeKind)> {
        let name = current["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let cur_meta = current["metadata"].as_object().cloned().unwrap_or_default();
        let meta = metadata_mut(&mut next)?;
        // Identity: name and namespace come from the URL.
        let sent_name = meta.get("name").and_then(Value::as_str).unwrap_or_default();
        if !sent_name.is_empty() && sent_name != name {
            let msg = format!(
                "the name of the object ({sent_name}) does not match the name on the URL ({name})"
            );
            return Err(if is_patch { Error::Invalid(msg) } else { Error::BadRequest(msg) });
        }
        let sent_ns = meta.get("namespace").and_then(Value::as_str).unwrap_or_default();
        if !sent_ns.is_empty() && Some(sent_ns) != namespace {
            return Err(Error::BadRequest(
                "the namespace of the provided object does not match the namespace sent on the request".into(),
            ));
        }
        // Optimistic concurrency, then immutability (the store's GuaranteedUpdate order).
        let current_rv =
            cur_meta.get("resourceVersion").and_then(Value::as_str).unwrap_or_default();
        let sent_rv = meta.get("resourceVersion").and_then(Value::as_str).unwrap_or_default();
        if !sent_rv.is_empty() && sent_rv != current_rv {
            return Err(conflict(
                r,
                &name,
                "the object has been modified; please apply your changes to the latest version and try again".into(),
            ));
        }
        let uid = cur_meta.get("uid").and_then(Value::as_str).unwrap_or_default();
        let sent_uid = meta.get("uid").and_then(Value::as_str).unwrap_or_default();
        if !sent_uid.is_empty() && sent_uid != uid {
            return Err(Error::Invalid(format!(
                "metadata.uid: Invalid value: {sent_uid:?}: field is immutable"
            )));
        }
        // System fields are the server's.
        for field in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ] {
            match cur_meta.get(field) {
                Some(v) => meta.insert(field.into(), v.clone()),
                None => meta.remove(field),
            };
        }
        validate_owner_references(meta)?;
        let finalizers = string_list(meta.get("finalizers"))?;
        let deleting = cur_meta.get("deletionTimestamp").is_some_and(|v| !v.is_null());
        if deleting {
            let old = string_list(cur_meta.get("finalizers"))?;
            if let Some(added) = finalizers.iter().find(|f| !old.contains(f)) {
                return Err(Error::Invalid(format!(
                    "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers [{added:?}]"
                )));
            }
        }
        if let Some(o) = next.as_object_mut() {
            o.remove("apiVersion");
            o.remove("kind");
        }
        // ShouldDeleteDuringUpdate: an update that empties the finalizers of an object being
        // deleted (grace period 0 here, always) removes it.
        if deleting && finalizers.is_empty() {
            let out = self.write_object(r, namespace, key, next, ChangeKind::Deleted, tx);
            return Ok((out, ChangeKind::Deleted));
        }
        if &next == current {
            return Ok((with_type(&r.def, next), ChangeKind::Modified)); // no-op: no new version
        }
        let out = self.write_object(r, namespace, key, next, ChangeKind::Modified, tx);
        Ok((out, ChangeKind::Modified))
    }

    #[allow(clippy::too_many_arguments)] // one private write path; the arguments are its inputs
    fn delete_object(
        &mut self,
        r: &Resolved,
        namespace: Option<&str>,
        key: Box<str>,
        mut current: Value,
        policy: Option<PropagationPolicy>,
        preconditions: Option<&Preconditions>,
        tx: &broadcast::Sender<Arc<Change>>,
    ) -> Result<(Value, bool)> {
        let name = current["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let text =
            |v: &Value, field: &str| v["metadata"][field].as_str().unwrap_or_default().to_owned();
        if let Some(p) = preconditions {
            let uid = text(&current, "uid");
            if let Some(want) = p.uid.as_deref().filter(|u| *u != uid) {
                return Err(conflict(
                    r,
                    &name,
                    format!(
                        "Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
                    ),
                ));
            }
            let rv = text(&current, "resourceVersion");
            if let Some(want) = p.resource_version.as_deref().filter(|v| *v != rv) {
                return Err(conflict(
                    r,
                    &name,
                    format!(
                        "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rv}"
                    ),
                ));
            }
        }
        let finalizers = string_list(current["metadata"].get("finalizers"))?;
        let next_finalizers =
            deletion_finalizers_for_garbage_collection(&finalizers, policy, r.def.default_orphan);
        let finalizers = next_finalizers.clone().unwrap_or(finalizers);
        if finalizers.is_empty() {
            let out = self.write_object(r, namespace, key, current, ChangeKind::Deleted, tx);
            if resources::is_crd_resource(&r.def) {
                self.remove_crd(&out);
            }
            return Ok((out, true));
        }
        // Keep the object, being deleted, until its finalizers are gone (markAsDeleting).
        let before = current.clone();
        let meta = metadata_mut(&mut current)?;
        meta.insert("finalizers".into(), finalizers.into_iter().map(Value::String).collect());
        if meta.get("deletionTimestamp").is_none_or(Value::is_null) {
            meta.insert("deletionTimestamp".into(), now_rfc3339().into());
            let generation = meta.get("generation").and_then(Value::as_i64).unwrap_or(0);
            meta.insert("generation".into(), (generation + 1).into());
        }
        meta.insert("deletionGracePeriodSeconds".into(), 0.into());
        if current == before {
            return Ok((with_type(&r.def, current), false));
        }
        let out = self.write_object(r, namespace, key, current, ChangeKind::Modified, tx);
        Ok((out, false))
    }

    fn remove_crd(&mut self, crd: &Value) {
        let group = crd.pointer("/spec/group").and_then(Value::as_str).unwrap_or_default();
        let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str).unwrap_or_default();
        if let Some(table) = self.registry.remove(group, plural) {
            self.tables[table] = None;
        }
    }
}

fn crd_status(crd: &Value) -> Value {
    let names = crd.pointer("/spec/names").cloned().unwrap_or(Value::Null);
    let now = now_rfc3339();
    serde_json::json!({
        "acceptedNames": names,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
             "message": "no conflicts found", "lastTransitionTime": now},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
             "message": "the initial names have been accepted", "lastTransitionTime": now},
        ],
        "storedVersions": crd.pointer("/spec/versions").and_then(Value::as_array)
            .map(|vs| vs.iter().filter(|v| v["storage"] == true).map(|v| v["name"].clone()).collect::<Vec<_>>())
            .unwrap_or_default(),
    })
}

fn selected(obj: &[u8], labels: &Selector, fields: &Selector) -> bool {
    if labels.is_empty() && fields.is_empty() {
        return true;
    }
    let Ok(v) = serde_json::from_slice::<Value>(obj) else { return false };
    let meta = &v["metadata"];
    labels.matches(|k| meta["labels"][k].as_str().map(str::to_owned))
        && fields.matches(|k| match k {
            "metadata.name" => meta["name"].as_str().map(str::to_owned),
            "metadata.namespace" => Some(meta["namespace"].as_str().unwrap_or_default().to_owned()),
            _ => None,
        })
}

/// The namespace an object goes to: the URL's for namespaced resources (the body's must agree),
/// none for cluster-scoped ones.
fn scope(r: &Resolved, url: Option<&str>, body: Option<&str>) -> Result<Option<String>> {
    if !r.def.namespaced {
        return Ok(None);
    }
    let body = body.filter(|b| !b.is_empty());
    match (url, body) {
        (Some(u), Some(b)) if u != b => Err(Error::BadRequest(
            "the namespace of the provided object does not match the namespace sent on the request"
                .into(),
        )),
        (Some(u), _) => Ok(Some(u.to_owned())),
        (None, Some(b)) => Ok(Some(b.to_owned())),
        (None, None) => Err(Error::BadRequest(format!(
            "an empty namespace may not be set when a resource name is provided for {}",
            r.def.group_resource()
        ))),
    }
}

fn validate_name(name: &str) -> Result<()> {
    if name.contains('/') || name.contains('%') || name == "." || name == ".." {
        return Err(Error::Invalid(format!(
            "metadata.name: Invalid value: {name:?}: may not contain '/' or '%'"
        )));
    }
    Ok(())
}

/// The checks `ValidateOwnerReferences` makes that matter to a collector: every reference has
/// apiVersion, kind, name and uid; at most one is the controller.
fn validate_owner_references(meta: &Map<String, Value>) -> Result<()> {
    let Some(refs) = meta.get("ownerReferences").filter(|v| !v.is_null()) else { return Ok(()) };
    let refs = refs
        .as_array()
        .ok_or_else(|| Error::BadRequest("metadata.ownerReferences: expected a list".into()))?;
    let mut controllers = 0;
    for (i, r) in refs.iter().enumerate() {
        for field in ["apiVersion", "kind", "name", "uid"] {
            if r.get(field).and_then(Value::as_str).is_none_or(str::is_empty) {
                return Err(Error::Invalid(format!(
                    "metadata.ownerReferences[{i}].{field}: Invalid value: \"\": {field} must not be empty"
                )));
            }
        }
        if r.get("controller") == Some(&Value::Bool(true)) {
            controllers += 1;
        }
    }
    if controllers > 1 {
        return Err(Error::Invalid(
            "metadata.ownerReferences: Invalid value: Only one reference can have Controller set to true".into(),
        ));
    }
    Ok(())
}

fn metadata_mut(obj: &mut Value) -> Result<&mut Map<String, Value>> {
    let o = obj
        .as_object_mut()
        .ok_or_else(|| Error::BadRequest("the object must be a JSON object".into()))?;
    let meta = o.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    meta.as_object_mut().ok_or_else(|| Error::BadRequest("metadata must be an object".into()))
}

pub(crate) fn parse_stored(bytes: &[u8]) -> Result<Value> {
    serde_json::from_slice(bytes)
        .map_err(|e| Error::Internal(format!("corrupt stored object: {e}")))
}

/// `obj` with `apiVersion` and `kind` of `def` first.
pub(crate) fn with_type(def: &ResourceDef, obj: Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), def.api_version().into());
    out.insert("kind".into(), def.kind.clone().into());
    if let Value::Object(m) = obj {
        out.extend(m);
    }
    Value::Object(out)
}

fn not_found(r: &Resolved, name: &str) -> Error {
    Error::NotFound { resource: r.def.group_resource(), name: name.to_owned() }
}

fn gone_resource(r: &Resolved) -> Error {
    Error::NotFound { resource: r.def.group_resource(), name: String::new() }
}

fn conflict(r: &Resolved, name: &str, message: String) -> Error {
    Error::Conflict { resource: r.def.group_resource(), name: name.to_owned(), message }
}

/// The preconditions a written body carries (`metadata.uid`, `metadata.resourceVersion`), as
/// the audit records them.
fn metadata_preconditions(body: &Value) -> Option<String> {
    audit::preconditions(
        body.pointer("/metadata/uid").and_then(Value::as_str),
        body.pointer("/metadata/resourceVersion").and_then(Value::as_str),
    )
}
