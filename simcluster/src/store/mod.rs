//! Object storage with the API server's write semantics (GC-SPEC §5.6): one global
//! resourceVersion, uids, creation and deletion timestamps, finalizers, and a bounded history
//! of changes for watches.
//!
//! # Representation
//!
//! Each resource's objects live in one table, a `BTreeMap` keyed by `namespace/name` (`name` for
//! cluster-scoped objects), so that listing one namespace is a range and pagination by key is
//! stable. An object is stored as its serialized JSON *without* `apiVersion` and `kind` (they
//! belong to the resource and to the version it is read at), with its metadata's protobuf
//! encoding once a list has asked for it, in an `Arc<StoredObject>` shared with the watch
//! history: well under a kilobyte per object, no tree.
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

mod types;
mod validation;
mod writes;

pub use types::*;
use validation::*;
pub(crate) use validation::{parse_stored, with_type};
use writes::*;

/// `Option` table: `None` once its resource is gone (CRD deleted).
type Table = Option<BTreeMap<Box<str>, Arc<StoredObject>>>;

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
    pub fn get(
        &self,
        r: &Resolved,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Arc<StoredObject>> {
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
        self.audit_write(&s, namespace, Verb::Update, r, &current, sent, &out);
        Ok(out)
    }

    /// Records an applied update or patch of `before` in the audit (under the write lock `s`,
    /// the write applied), and judges the ownerReferences a collector's write removed.
    #[allow(clippy::too_many_arguments)] // one private recording path
    fn audit_write(
        &self,
        s: &State,
        namespace: Option<&str>,
        verb: Verb,
        r: &Resolved,
        before: &Value,
        sent: Option<String>,
        out: &(Value, ChangeKind),
    ) {
        let actor = self.audit.actor();
        let removed = out.1 == ChangeKind::Deleted;
        let judged = self.audit.is_collector(&actor);
        let record =
            self.audit.record(actor, verb, r.def.group_resource(), before, s.rv, sent, removed);
        if judged {
            let kept = OwnerRef::of(&out.0);
            // The write changed only the object itself: its owners are as they were before it.
            let removed_refs: Vec<(OwnerRef, OwnerState)> = OwnerRef::of(before)
                .into_iter()
                .filter(|o| !kept.iter().any(|k| k.uid == o.uid))
                .map(|o| {
                    let state = s.owner_state(namespace, &o);
                    (o, state)
                })
                .collect();
            self.audit.judge_reference_removal(record, removed_refs);
        }
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
        self.audit_write(&s, namespace, Verb::Patch, r, &current, sent, &out);
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
        let audited = self.audit_delete(&s, namespace, &current, policy);
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
    fn audit_delete(
        &self,
        s: &State,
        namespace: Option<&str>,
        current: &Value,
        policy: Option<PropagationPolicy>,
    ) -> AuditedDelete {
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
        let policy = policy.map(PropagationPolicy::as_str);
        AuditedDelete { actor, before: current.clone(), owners, policy }
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
            let finalizers: Vec<String> = a.before["metadata"]["finalizers"]
                .as_array()
                .map(|fs| fs.iter().filter_map(|f| f.as_str().map(str::to_owned)).collect())
                .unwrap_or_default();
            self.audit.judge(record, owners, a.policy, &finalizers);
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
        let keys: Vec<(Box<str>, Arc<StoredObject>)> = s
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
            let audited = self.audit_delete(&s, ns.as_deref(), &current, policy);
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
        objects: impl IntoIterator<Item = (Box<str>, Arc<StoredObject>, u64)>,
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
