//! An in-memory API server implementing [`Cluster`] (upstream's fake metadata client plus the generic registry store, `store.go`); GC-SPEC.md §5.6.
//!
//! [`MemoryCluster`] serves the four calls the collector makes — GET, PATCH, DELETE and event
//! recording — over a map of objects' metadata, with the API server's semantics for what the
//! collector depends on:
//!
//! * a restMapper: [`register`](MemoryCluster::register) a [`Resource`] to map its
//!   apiVersion/kind; anything else is [`ClusterError::NoMapping`];
//! * a resourceVersion bumped on every write that changes the object;
//! * PATCH by strategic merge or JSON merge ([`crate::patch`]'s appliers), with 415 for strategic
//!   merge on a resource registered as custom, and an object whose finalizers a patch empties
//!   while it has a deletionTimestamp removed;
//! * DELETE with UID and resourceVersion preconditions (409) and propagation through the
//!   `orphan` and `foregroundDeletion` finalizers, as the generic registry store does.
//!
//! It also stands in for upstream's fake client in tests: every call is recorded, in order, both
//! structured ([`calls`](MemoryCluster::calls)) and as the fake client's action strings
//! ([`take_actions`](MemoryCluster::take_actions): `get /v1, Resource=pods ns=ns1
//! name=podname1`); faults can be injected ([`fail_next`](MemoryCluster::fail_next),
//! [`on_call`](MemoryCluster::on_call)); events are kept for
//! [`take_events`](MemoryCluster::take_events).
//!
//! # Deletion semantics (GC-SPEC §5.6)
//!
//! A DELETE first checks the preconditions (UID, then resourceVersion: 409 on mismatch). Then:
//!
//! 1. If a *graceful* deletion is already pending (the object has a deletionTimestamp and a
//!    grace period above 0), nothing changes: finalizers cannot be changed by DeleteOptions once
//!    a graceful deletion started. Only resources registered with
//!    [`ResourceOptions::grace_period_seconds`] are ever graceful.
//! 2. The finalizers are recomputed by [`deletion_finalizers_for_garbage_collection`]: both GC
//!    finalizers removed, then `orphan` appended if the delete orphans and `foregroundDeletion`
//!    if it deletes dependents first (policy, else the existing finalizer, else the resource's
//!    legacy default, [`ResourceOptions::default_orphan`]).
//! 3. If any finalizer remains (or the deletion is graceful), the object is kept, marked
//!    deleting (deletionTimestamp set); otherwise it is removed now.
//!
//! So a second DELETE of an object held by finalizers with grace period 0 (every non-graceful
//! resource) *does* recompute the GC finalizers, as the real store does; only a pending graceful
//! deletion is immune.
//!
//! # Divergences from a real API server
//!
//! * Each GroupVersionResource is its own store, as in the fake client: `roles` at
//!   `rbac.authorization.k8s.io/v1` and at `/v1beta1` are two objects (TestConflictingData #6
//!   creates both). A real server serves one object at every version.
//! * Requests are exact: a namespace given for a cluster-scoped resource (or none for a
//!   namespaced one) finds nothing (404), as the wrong URL would.
//! * No validation of owner references, no generation, no timestamps beyond the
//!   deletionTimestamp flag, no `orphanDependents` (deprecated) or grace period in DeleteOptions.
//!
//! # Concurrency
//!
//! Every method takes `&self`; state sits behind one mutex, taken once to
//! record a call and once to serve it, never across an `.await`. Hooks run between the two, under
//! their own lock.
//!
//! # Examples
//!
//! ```
//! use kube_gc_engine::{Cluster, ObjectMeta};
//! use kube_gc_engine::cluster::{DeleteOptions, PropagationPolicy};
//! use kube_gc_testkit::{MemoryCluster, resource};
//!
//! let cluster = MemoryCluster::new();
//! let deployments = resource("apps/v1", "deployments", "Deployment", true);
//! cluster.register(deployments.clone());
//! cluster
//!     .create(&deployments, ObjectMeta {
//!         uid: "deploymentuid1".into(),
//!         name: "deployment1".into(),
//!         namespace: "ns1".into(),
//!         ..ObjectMeta::default()
//!     })
//!     .unwrap();
//!
//! let foreground = DeleteOptions {
//!     precondition_uid: Some("deploymentuid1".into()),
//!     propagation_policy: Some(PropagationPolicy::Foreground),
//!     ..DeleteOptions::default()
//! };
//! futures::executor::block_on(async {
//!     cluster.delete(&deployments, "ns1", "deployment1", &foreground).await.unwrap();
//!     // Kept until the collector has deleted its dependents and removed the finalizer.
//!     let meta = cluster.get(&deployments, "ns1", "deployment1").await.unwrap();
//!     assert!(meta.deletion_timestamp);
//!     assert_eq!(meta.finalizers, vec!["foregroundDeletion".to_owned()]);
//! });
//! assert_eq!(cluster.take_actions(), [
//!     "delete apps/v1, Resource=deployments ns=ns1 name=deployment1",
//!     "get apps/v1, Resource=deployments ns=ns1 name=deployment1",
//! ]);
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use kube_gc_engine::cluster::{
    Cluster, ClusterError, DeleteOptions, Patch, PatchType, Resource, WarningEvent,
};
use kube_gc_engine::identity::ObjectType;
use kube_gc_engine::ingest::{Event, EventType, ObjectMeta};
use parking_lot::Mutex;

pub use crate::calls::{Call, Request, Verb, fake_recorder_string};
use crate::patch::apply_patch;
pub use crate::registry::deletion_finalizers_for_garbage_collection;

/// Builds a [`Resource`] from an apiVersion (`v1`, `apps/v1`), a plural resource name, a kind
/// and a scope ([`Resource::new`]).
pub fn resource(api_version: &str, plural: &str, kind: &str, namespaced: bool) -> Resource {
    Resource::new(api_version, plural, kind, namespaced)
}

/// How the server treats a registered resource.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct ResourceOptions {
    /// A custom resource (or aggregated API): strategic merge patches are refused with 415.
    /// Default false (a built-in kind).
    pub custom: bool,
    /// The resource's default garbage-collection policy is `OrphanDependents`: a delete with no
    /// propagation policy and no GC finalizer orphans. True upstream for core/v1
    /// ReplicationController and the extensions/apps beta workload kinds. Default false.
    pub default_orphan: bool,
    /// Deletion is graceful with this grace period (0, the default: not graceful). A graceful
    /// delete keeps the object, marked deleting, until
    /// [`expire_grace_period`](MemoryCluster::expire_grace_period) (the kubelet's final delete);
    /// meanwhile further deletes change nothing.
    pub grace_period_seconds: u32,
}

/// A hook consulted on every call; see [`MemoryCluster::on_call`].
type Hook = Box<dyn Fn(&MemoryCluster, &Call) -> Option<ClusterError> + Send + Sync>;

/// (group, version, plural resource): one store per GroupVersionResource.
type Gvr = (String, String, String);

fn gvr(resource: &Resource) -> Gvr {
    (resource.group.clone(), resource.version.clone(), resource.resource.clone())
}

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct ObjectKey {
    gvr: Gvr,
    namespace: String,
    name: String,
}

impl ObjectKey {
    fn new(resource: &Resource, namespace: &str, name: &str) -> ObjectKey {
        ObjectKey { gvr: gvr(resource), namespace: namespace.to_owned(), name: name.to_owned() }
    }
}

#[derive(Clone, Debug)]
struct Stored {
    resource: Resource,
    meta: ObjectMeta,
    /// `deletionGracePeriodSeconds`: `None` until deletion starts; 0 once marked deleting by
    /// finalizers; the resource's grace period during a graceful deletion.
    grace_period: Option<u32>,
}

#[derive(Debug)]
struct Fault {
    verb: Verb,
    resource: String,
    name: String,
    error: ClusterError,
}

#[derive(Default)]
struct State {
    /// The restMapper: apiVersion/kind → resource.
    mappings: HashMap<ObjectType, Resource>,
    /// Per-resource behaviour; unregistered resources get the defaults.
    options: HashMap<Gvr, ResourceOptions>,
    objects: BTreeMap<ObjectKey, Stored>,
    /// The last resourceVersion handed out (a cluster-wide counter, as etcd's revision).
    last_resource_version: u64,
    calls: Vec<Call>,
    faults: Vec<Fault>,
    events: Vec<WarningEvent>,
    /// Every change to an object, as a watch would deliver it, oldest first.
    watch: Vec<Event>,
}

impl State {
    fn options(&self, resource: &Resource) -> ResourceOptions {
        self.options.get(&gvr(resource)).copied().unwrap_or_default()
    }

    /// Appends the watch event for a change of an object of `resource` from `old` to `new`.
    fn log(&mut self, resource: &Resource, old: Option<ObjectMeta>, new: Option<ObjectMeta>) {
        let ty = resource.object_type();
        self.watch.push(match (old, new) {
            (None, Some(new)) => Event::new(EventType::Add, ty, new),
            (Some(old), Some(new)) => Event::update(ty, old, new),
            (Some(old), None) => Event::new(EventType::Delete, ty, old),
            (None, None) => return,
        });
    }

    /// Removes the object at `key`, logging its deletion with `last` as its final state (a
    /// fresh resourceVersion, as the API server's delete event carries).
    fn remove(&mut self, key: &ObjectKey, last: Option<ObjectMeta>) -> Option<ObjectMeta> {
        let stored = self.objects.remove(key)?;
        let mut last = last.unwrap_or(stored.meta);
        last.resource_version = self.next_resource_version();
        self.log(&stored.resource, Some(last.clone()), None);
        Some(last)
    }

    fn next_resource_version(&mut self) -> String {
        self.last_resource_version += 1;
        self.last_resource_version.to_string()
    }

    /// Stores `meta` (and `grace_period`) as the new state of `key`, bumping the
    /// resourceVersion only if something changed (the store skips no-op writes). Returns the
    /// stored metadata.
    fn write(
        &mut self,
        key: &ObjectKey,
        mut meta: ObjectMeta,
        grace_period: Option<u32>,
    ) -> ObjectMeta {
        let Some(stored) = self.objects.get(key) else { return meta };
        meta.resource_version = stored.meta.resource_version.clone();
        if stored.meta == meta && stored.grace_period == grace_period {
            return meta;
        }
        meta.resource_version = self.next_resource_version();
        let stored = self.objects.get_mut(key).expect("checked above");
        let old = std::mem::replace(&mut stored.meta, meta.clone());
        stored.grace_period = grace_period;
        let resource = stored.resource.clone();
        self.log(&resource, Some(old), Some(meta.clone()));
        meta
    }

    /// Writes an update, or removes the object if the update empties the finalizers of an
    /// object being deleted with grace period 0 (`ShouldDeleteDuringUpdate`).
    fn update(&mut self, key: &ObjectKey, meta: ObjectMeta) -> ObjectMeta {
        let grace_period = self.objects.get(key).and_then(|s| s.grace_period);
        if meta.deletion_timestamp && meta.finalizers.is_empty() && grace_period.unwrap_or(0) == 0 {
            return self.remove(key, Some(meta)).expect("an update reads the object first");
        }
        self.write(key, meta, grace_period)
    }

    fn take_fault(&mut self, call: &Call) -> Option<ClusterError> {
        let verb = call.verb();
        let i = self.faults.iter().position(|f| {
            f.verb == verb && f.resource == call.resource.resource && f.name == call.name
        })?;
        Some(self.faults.remove(i).error)
    }
}

/// An in-memory API server for tests; see the [module documentation](self).
pub struct MemoryCluster {
    state: Mutex<State>,
    hooks: Mutex<Vec<Hook>>,
}

impl Default for MemoryCluster {
    fn default() -> Self {
        MemoryCluster::new()
    }
}

impl fmt::Debug for MemoryCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.lock();
        f.debug_struct("MemoryCluster")
            .field("resources", &state.mappings.len())
            .field("objects", &state.objects.len())
            .field("calls", &state.calls.len())
            .field("events", &state.events.len())
            .finish_non_exhaustive()
    }
}

impl MemoryCluster {
    /// An empty cluster that maps no resource.
    pub fn new() -> MemoryCluster {
        MemoryCluster { state: Mutex::new(State::default()), hooks: Mutex::new(Vec::new()) }
    }

    /// A cluster mapping the resources upstream's unit tests use (GC-SPEC §9.A conventions):
    /// core/v1 pods, secrets, configmaps, services, replicationcontrollers (legacy default
    /// orphan) and cluster-scoped nodes and namespaces; `apps/v1` deployments, replicasets,
    /// statefulsets, daemonsets; `rbac.authorization.k8s.io` `v1` and `v1beta1` roles.
    /// `extensions/v1beta1` is deliberately not mappable.
    pub fn with_test_resources() -> MemoryCluster {
        let cluster = MemoryCluster::new();
        for (api_version, plural, kind, namespaced) in [
            ("v1", "pods", "Pod", true),
            ("v1", "secrets", "Secret", true),
            ("v1", "configmaps", "ConfigMap", true),
            ("v1", "services", "Service", true),
            ("v1", "nodes", "Node", false),
            ("v1", "namespaces", "Namespace", false),
            ("apps/v1", "deployments", "Deployment", true),
            ("apps/v1", "replicasets", "ReplicaSet", true),
            ("apps/v1", "statefulsets", "StatefulSet", true),
            ("apps/v1", "daemonsets", "DaemonSet", true),
            ("rbac.authorization.k8s.io/v1", "roles", "Role", true),
            ("rbac.authorization.k8s.io/v1beta1", "roles", "Role", true),
        ] {
            cluster.register(resource(api_version, plural, kind, namespaced));
        }
        cluster.register_with(
            resource("v1", "replicationcontrollers", "ReplicationController", true),
            ResourceOptions { default_orphan: true, ..ResourceOptions::default() },
        );
        cluster
    }

    /// Maps `resource`'s apiVersion/kind to it, as a built-in kind.
    pub fn register(&self, resource: Resource) {
        self.register_with(resource, ResourceOptions::default());
    }

    /// Maps `resource` as a custom resource: strategic merge patches get 415.
    pub fn register_custom(&self, resource: Resource) {
        self.register_with(
            resource,
            ResourceOptions { custom: true, ..ResourceOptions::default() },
        );
    }

    /// Maps `resource` with explicit options (replacing any earlier registration of its
    /// apiVersion/kind).
    pub fn register_with(&self, resource: Resource, options: ResourceOptions) {
        let ty = resource.object_type();
        let mut state = self.state.lock();
        state.options.insert(gvr(&resource), options);
        state.mappings.insert(ty, resource);
    }

    /// Removes the mapping of `api_version`/`kind` (objects stay), e.g. to simulate a CRD
    /// being uninstalled.
    pub fn unregister(&self, api_version: &str, kind: &str) {
        self.state.lock().mappings.remove(&ObjectType::new(api_version, kind));
    }

    /// Creates an object, as another client would: the UID is the caller's, the resourceVersion
    /// is assigned. Cluster-scoped objects are stored without namespace. Not recorded as a call.
    ///
    /// Fails with 409 ([`ClusterError::Other`] with code 409, "already exists") if the name is
    /// taken.
    pub fn create(
        &self,
        resource: &Resource,
        mut meta: ObjectMeta,
    ) -> Result<ObjectMeta, ClusterError> {
        if !resource.namespaced {
            meta.namespace.clear();
        }
        let key = ObjectKey::new(resource, &meta.namespace, &meta.name);
        let mut state = self.state.lock();
        if state.objects.contains_key(&key) {
            return Err(ClusterError::Other {
                code: 409,
                message: format!("{} {:?} already exists", resource.resource, meta.name),
            });
        }
        meta.resource_version = state.next_resource_version();
        state.objects.insert(
            key,
            Stored { resource: resource.clone(), meta: meta.clone(), grace_period: None },
        );
        state.log(resource, None, Some(meta.clone()));
        Ok(meta)
    }

    /// Changes an object as another client's update would. The resourceVersion is always
    /// bumped, even when `change` does nothing (unlike a real no-op update), so tests can make a
    /// version stale. An update that empties the finalizers of an object being deleted removes
    /// it. Not recorded. Returns the new metadata, or `None` if there is no such object.
    pub fn update_object(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&mut ObjectMeta),
    ) -> Option<ObjectMeta> {
        let key = ObjectKey::new(resource, namespace, name);
        let mut state = self.state.lock();
        let stored = state.objects.get(&key)?;
        let (mut meta, grace_period) = (stored.meta.clone(), stored.grace_period);
        change(&mut meta);
        if meta.deletion_timestamp && meta.finalizers.is_empty() && grace_period.unwrap_or(0) == 0 {
            return state.remove(&key, Some(meta));
        }
        meta.resource_version = state.next_resource_version();
        let old = std::mem::replace(&mut state.objects.get_mut(&key)?.meta, meta.clone());
        state.log(resource, Some(old), Some(meta.clone()));
        Some(meta)
    }

    /// Removes an object outright, as deleting it from upstream's fake client does (no
    /// finalizers, no preconditions). Not recorded. Returns its last metadata.
    pub fn delete_object(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Option<ObjectMeta> {
        let key = ObjectKey::new(resource, namespace, name);
        self.state.lock().remove(&key, None)
    }

    /// Ends a pending graceful deletion, as the kubelet's final delete with grace period 0: the
    /// object is removed if no finalizer remains, else kept with grace period 0 (so emptying
    /// its finalizers then removes it). Returns whether the object was removed; an object not
    /// being deleted is left alone.
    pub fn expire_grace_period(&self, resource: &Resource, namespace: &str, name: &str) -> bool {
        let key = ObjectKey::new(resource, namespace, name);
        let mut state = self.state.lock();
        let Some(stored) = state.objects.get(&key) else { return false };
        if !stored.meta.deletion_timestamp {
            return false;
        }
        if stored.meta.finalizers.is_empty() {
            state.remove(&key, None);
            return true;
        }
        let meta = stored.meta.clone();
        state.write(&key, meta, Some(0));
        false
    }

    /// An object's current metadata, without recording a call.
    pub fn object(&self, resource: &Resource, namespace: &str, name: &str) -> Option<ObjectMeta> {
        let key = ObjectKey::new(resource, namespace, name);
        self.state.lock().objects.get(&key).map(|s| s.meta.clone())
    }

    /// Every object, ordered by (group, version, resource, namespace, name).
    pub fn objects(&self) -> Vec<(Resource, ObjectMeta)> {
        self.state.lock().objects.values().map(|s| (s.resource.clone(), s.meta.clone())).collect()
    }

    /// Makes the next `verb` call on the object `name` of the resource whose plural name is
    /// `resource` (`pods`) fail with `error`, once, before it is served (it is still recorded).
    /// Several faults queue up in order.
    pub fn fail_next(&self, verb: Verb, resource: &str, name: &str, error: ClusterError) {
        self.state.lock().faults.push(Fault {
            verb,
            resource: resource.to_owned(),
            name: name.to_owned(),
            error,
        });
    }

    /// Adds a hook consulted on every call, after it is recorded and before it is served, in the
    /// order hooks were added: the first to return an error fails the call with it. A hook may
    /// change the cluster through the non-recording helpers ([`update_object`](Self::update_object),
    /// [`create`](Self::create), [`delete_object`](Self::delete_object), …), e.g. to bump an
    /// object's resourceVersion before a DELETE; it must not call the [`Cluster`] methods
    /// (hooks run under their own lock, which is not reentrant).
    pub fn on_call(
        &self,
        hook: impl Fn(&MemoryCluster, &Call) -> Option<ClusterError> + Send + Sync + 'static,
    ) {
        self.hooks.lock().push(Box::new(hook));
    }

    /// Removes every hook and pending fault.
    pub fn clear_faults(&self) {
        self.hooks.lock().clear();
        self.state.lock().faults.clear();
    }

    /// The recorded calls, oldest first (not cleared).
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().calls.clone()
    }

    /// The recorded calls, oldest first, clearing them.
    pub fn take_calls(&self) -> Vec<Call> {
        std::mem::take(&mut self.state.lock().calls)
    }

    /// The recorded calls as the fake client's action strings ([`Call::action`]), oldest first,
    /// clearing them.
    pub fn take_actions(&self) -> Vec<String> {
        self.take_calls().iter().map(Call::action).collect()
    }

    /// Every change to an object since the last call (creations, updates with the old object,
    /// deletions with the last state), as a watch would deliver them, oldest first, clearing
    /// them. Every mutation is logged: the recording helpers and the served calls alike.
    pub fn take_watch_events(&self) -> Vec<Event> {
        std::mem::take(&mut self.state.lock().watch)
    }

    /// The recorded events, oldest first, clearing them.
    pub fn take_events(&self) -> Vec<WarningEvent> {
        std::mem::take(&mut self.state.lock().events)
    }

    /// The recorded events as [`fake_recorder_string`]s, oldest first, clearing them.
    pub fn take_event_strings(&self) -> Vec<String> {
        self.take_events().iter().map(fake_recorder_string).collect()
    }

    /// Records `call`, then consults pending faults and hooks.
    fn begin(&self, call: Call) -> Result<(), ClusterError> {
        let fault = {
            let mut state = self.state.lock();
            let fault = state.take_fault(&call);
            state.calls.push(call.clone());
            fault
        };
        if let Some(error) = fault {
            return Err(error);
        }
        let hooks = self.hooks.lock();
        match hooks.iter().find_map(|hook| hook(self, &call)) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    fn serve_get(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<ObjectMeta, ClusterError> {
        self.begin(Call {
            resource: resource.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            request: Request::Get,
        })?;
        self.object(resource, namespace, name).ok_or(ClusterError::NotFound)
    }

    fn serve_patch(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> Result<ObjectMeta, ClusterError> {
        self.begin(Call {
            resource: resource.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            request: Request::Patch(patch.clone()),
        })?;
        let key = ObjectKey::new(resource, namespace, name);
        let mut state = self.state.lock();
        // The patch handler refuses the content type before reading the object.
        if patch.patch_type == PatchType::StrategicMerge && state.options(resource).custom {
            return Err(ClusterError::UnsupportedMediaType);
        }
        let current = state.objects.get(&key).ok_or(ClusterError::NotFound)?.meta.clone();
        let mut next = current.clone();
        apply_patch(&mut next, patch)?;
        if current.deletion_timestamp {
            let added: Vec<&String> =
                next.finalizers.iter().filter(|f| !current.has_finalizer(f)).collect();
            if !added.is_empty() {
                return Err(ClusterError::Invalid(format!(
                    "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                )));
            }
        }
        Ok(state.update(&key, next))
    }

    fn serve_delete(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(), ClusterError> {
        self.begin(Call {
            resource: resource.clone(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            request: Request::Delete(options.clone()),
        })?;
        let key = ObjectKey::new(resource, namespace, name);
        let mut state = self.state.lock();
        let resource_options = state.options(resource);
        let stored = state.objects.get(&key).ok_or(ClusterError::NotFound)?;
        let conflict = |what: &str, want: &str, got: &str, why: &str| {
            ClusterError::Conflict(format!(
                "Operation cannot be fulfilled on {} {name:?}: the {what} in the precondition ({want}) does not match the {what} in record ({got}). {why}",
                resource.resource
            ))
        };
        if let Some(uid) = &options.precondition_uid {
            if *uid != stored.meta.uid {
                let why = "The object might have been deleted and then recreated";
                return Err(conflict("UID", uid, &stored.meta.uid, why));
            }
        }
        if let Some(rv) = &options.precondition_resource_version {
            if *rv != stored.meta.resource_version {
                let why = "The object might have been modified";
                return Err(conflict("ResourceVersion", rv, &stored.meta.resource_version, why));
            }
        }

        // rest.BeforeDelete: a pending graceful deletion is left alone; a graceful resource not
        // yet being deleted starts one; anything else is not graceful.
        let grace = resource_options.grace_period_seconds;
        if stored.meta.deletion_timestamp && stored.grace_period.unwrap_or(0) > 0 {
            return Ok(());
        }
        let graceful = !stored.meta.deletion_timestamp && grace > 0;

        let mut meta = stored.meta.clone();
        let pending_finalizers = !meta.finalizers.is_empty();
        let new_finalizers = deletion_finalizers_for_garbage_collection(
            &meta.finalizers,
            options.propagation_policy,
            resource_options.default_orphan,
        );
        if graceful || pending_finalizers || new_finalizers.is_some() {
            if let Some(finalizers) = new_finalizers {
                meta.finalizers = finalizers;
            }
            if graceful {
                meta.deletion_timestamp = true;
                state.write(&key, meta, Some(grace));
                return Ok(());
            }
            if !meta.finalizers.is_empty() {
                // markAsDeleting: deletionTimestamp (kept if already set), grace period 0.
                meta.deletion_timestamp = true;
                state.write(&key, meta, Some(0));
                return Ok(());
            }
        }
        state.remove(&key, None);
        Ok(())
    }
}

impl Cluster for MemoryCluster {
    fn resource_for(&self, ty: ObjectType) -> Result<Resource, ClusterError> {
        self.state
            .lock()
            .mappings
            .get(&ty)
            .cloned()
            .ok_or_else(|| ClusterError::NoMapping(format!("{}/{}", ty.api_version(), ty.kind())))
    }

    async fn get(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<ObjectMeta, ClusterError> {
        self.serve_get(resource, namespace, name)
    }

    async fn patch(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> Result<ObjectMeta, ClusterError> {
        self.serve_patch(resource, namespace, name, patch)
    }

    async fn delete(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(), ClusterError> {
        self.serve_delete(resource, namespace, name, options)
    }

    fn record_event(&self, event: WarningEvent) {
        self.state.lock().events.push(event);
    }
}

#[cfg(test)]
mod tests {
    use futures::executor::block_on;
    use serde_json::json;

    use super::*;
    use kube_gc_engine::cluster::PropagationPolicy;
    use kube_gc_engine::identity::ObjectReference;
    use kube_gc_engine::ingest::OwnerReference;
    use kube_gc_engine::patch::{
        delete_owner_refs_json_merge, delete_owner_refs_strategic, remove_finalizer_json_merge,
    };

    fn pods() -> Resource {
        resource("v1", "pods", "Pod", true)
    }

    fn rcs() -> Resource {
        resource("v1", "replicationcontrollers", "ReplicationController", true)
    }

    fn nodes() -> Resource {
        resource("v1", "nodes", "Node", false)
    }

    fn widgets() -> Resource {
        resource("acme.example/v1", "widgets", "Widget", true)
    }

    fn owner(uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "ReplicationController".into(),
            name: format!("rc{uid}"),
            uid: uid.into(),
            controller: None,
            block_owner_deletion: None,
        }
    }

    fn meta(name: &str, uid: &str, owners: &[&str], finalizers: &[&str]) -> ObjectMeta {
        ObjectMeta {
            uid: uid.into(),
            name: name.into(),
            namespace: "ns1".into(),
            owner_references: owners.iter().map(|u| owner(u)).collect(),
            finalizers: finalizers.iter().map(|f| (*f).to_owned()).collect(),
            ..ObjectMeta::default()
        }
    }

    fn policy(policy: Option<PropagationPolicy>) -> DeleteOptions {
        DeleteOptions { propagation_policy: policy, ..DeleteOptions::default() }
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn rest_mapper_maps_registered_kinds_only() {
        let cluster = MemoryCluster::with_test_resources();
        let got = cluster.resource_for(ObjectType::new("apps/v1", "Deployment")).unwrap();
        assert_eq!(got.to_string(), "apps/v1, Resource=deployments");
        assert!(!cluster.resource_for(ObjectType::new("v1", "Node")).unwrap().namespaced);
        let err =
            cluster.resource_for(ObjectType::new("extensions/v1beta1", "Deployment")).unwrap_err();
        assert_eq!(err, ClusterError::NoMapping("extensions/v1beta1/Deployment".into()));
        assert_eq!(err.to_string(), "unable to get REST mapping for extensions/v1beta1/Deployment");
        cluster.unregister("apps/v1", "Deployment");
        assert!(cluster.resource_for(ObjectType::new("apps/v1", "Deployment")).is_err());
    }

    #[test]
    fn get_records_fake_client_actions() {
        let cluster = MemoryCluster::with_test_resources();
        cluster.create(&pods(), meta("podname1", "poduid1", &[], &[])).unwrap();
        cluster
            .create(
                &nodes(),
                ObjectMeta {
                    namespace: "ignored".into(),
                    ..meta("nodename", "nodeuid1", &[], &[])
                },
            )
            .unwrap();
        let roles = resource("rbac.authorization.k8s.io/v1beta1", "roles", "Role", true);
        block_on(async {
            assert_eq!(cluster.get(&pods(), "ns1", "podname1").await.unwrap().uid, "poduid1");
            assert_eq!(cluster.get(&nodes(), "", "nodename").await.unwrap().namespace, "");
            assert_eq!(cluster.get(&roles, "ns1", "role1").await, Err(ClusterError::NotFound));
            // A namespace on a cluster-scoped request is the wrong URL.
            assert_eq!(cluster.get(&nodes(), "ns1", "nodename").await, Err(ClusterError::NotFound));
        });
        assert_eq!(
            cluster.take_actions(),
            [
                "get /v1, Resource=pods ns=ns1 name=podname1",
                "get /v1, Resource=nodes name=nodename",
                "get rbac.authorization.k8s.io/v1beta1, Resource=roles ns=ns1 name=role1",
                "get /v1, Resource=nodes ns=ns1 name=nodename",
            ]
        );
        assert!(cluster.take_actions().is_empty(), "take_actions clears");
    }

    #[test]
    fn create_assigns_increasing_resource_versions_and_refuses_duplicates() {
        let cluster = MemoryCluster::new();
        let a = cluster.create(&pods(), meta("a", "1", &[], &[])).unwrap();
        let b = cluster.create(&pods(), meta("b", "2", &[], &[])).unwrap();
        assert!(
            a.resource_version.parse::<u64>().unwrap() < b.resource_version.parse::<u64>().unwrap()
        );
        let err = cluster.create(&pods(), meta("a", "3", &[], &[])).unwrap_err();
        assert!(matches!(err, ClusterError::Other { code: 409, .. }), "{err:?}");
        assert_eq!(cluster.objects().len(), 2);
        assert!(cluster.calls().is_empty(), "helpers are not recorded");
    }

    #[test]
    fn strategic_patch_deletes_owner_refs_and_bumps_resource_version() {
        let cluster = MemoryCluster::with_test_resources();
        let created = cluster.create(&pods(), meta("pod", "100", &["1", "2", "3"], &[])).unwrap();
        let patch = delete_owner_refs_strategic("100", ["2", "3"]);
        let patched = block_on(cluster.patch(&pods(), "ns1", "pod", &patch)).unwrap();
        assert_eq!(patched.owner_references, vec![owner("1")]);
        assert_ne!(patched.resource_version, created.resource_version);
        assert_eq!(cluster.object(&pods(), "ns1", "pod").unwrap(), patched);
        let calls = cluster.take_calls();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].action(), "patch /v1, Resource=pods ns=ns1 name=pod");
        assert_eq!(calls[0].patch(), Some(&patch));
    }

    #[test]
    fn no_op_patch_keeps_the_resource_version() {
        let cluster = MemoryCluster::new();
        let created = cluster.create(&pods(), meta("pod", "100", &["1"], &[])).unwrap();
        let patch = delete_owner_refs_strategic("100", ["9"]);
        let patched = block_on(cluster.patch(&pods(), "ns1", "pod", &patch)).unwrap();
        assert_eq!(patched.resource_version, created.resource_version);
    }

    #[test]
    fn strategic_patch_of_custom_resource_is_unsupported_media_type() {
        let cluster = MemoryCluster::new();
        cluster.register_custom(widgets());
        let created = cluster.create(&widgets(), meta("w", "100", &["1", "2"], &[])).unwrap();
        let smp = delete_owner_refs_strategic("100", ["2"]);
        assert_eq!(
            block_on(cluster.patch(&widgets(), "ns1", "w", &smp)),
            Err(ClusterError::UnsupportedMediaType)
        );
        // Refused before the object is read: absent objects get 415 too.
        assert_eq!(
            block_on(cluster.patch(&widgets(), "ns1", "absent", &smp)),
            Err(ClusterError::UnsupportedMediaType)
        );
        let jmp = delete_owner_refs_json_merge(
            &created.resource_version,
            &created.owner_references,
            ["2"],
        );
        let patched = block_on(cluster.patch(&widgets(), "ns1", "w", &jmp)).unwrap();
        assert_eq!(patched.owner_references, vec![owner("1")]);
    }

    #[test]
    fn patch_preconditions_uid_is_invalid_and_stale_resource_version_conflicts() {
        let cluster = MemoryCluster::new();
        let created = cluster.create(&pods(), meta("pod", "recreated", &["1"], &[])).unwrap();
        block_on(async {
            let smp = delete_owner_refs_strategic("original", ["1"]);
            let err = cluster.patch(&pods(), "ns1", "pod", &smp).await.unwrap_err();
            assert!(matches!(err, ClusterError::Invalid(_)), "{err:?}");
            let jmp = delete_owner_refs_json_merge("0", &created.owner_references, ["1"]);
            let err = cluster.patch(&pods(), "ns1", "pod", &jmp).await.unwrap_err();
            assert!(matches!(err, ClusterError::Conflict(_)), "{err:?}");
            assert_eq!(
                cluster.patch(&pods(), "ns1", "absent", &smp).await,
                Err(ClusterError::NotFound)
            );
        });
        assert_eq!(cluster.object(&pods(), "ns1", "pod").unwrap(), created);
    }

    #[test]
    fn emptying_finalizers_of_object_being_deleted_deletes_it() {
        let cluster = MemoryCluster::with_test_resources();
        cluster.create(&rcs(), meta("rc1", "1", &[], &[])).unwrap();
        block_on(async {
            cluster
                .delete(&rcs(), "ns1", "rc1", &policy(Some(PropagationPolicy::Orphan)))
                .await
                .unwrap();
            let held = cluster.get(&rcs(), "ns1", "rc1").await.unwrap();
            assert!(held.deletion_timestamp);
            assert_eq!(held.finalizers, strings(&["orphan"]));
            let patch = remove_finalizer_json_merge(&held.resource_version, &[]);
            cluster.patch(&rcs(), "ns1", "rc1", &patch).await.unwrap();
            assert_eq!(cluster.get(&rcs(), "ns1", "rc1").await, Err(ClusterError::NotFound));
        });
    }

    #[test]
    fn emptying_finalizers_of_live_object_keeps_it() {
        let cluster = MemoryCluster::new();
        let created = cluster.create(&pods(), meta("pod", "1", &[], &["x/y"])).unwrap();
        let patch = remove_finalizer_json_merge(&created.resource_version, &[]);
        let patched = block_on(cluster.patch(&pods(), "ns1", "pod", &patch)).unwrap();
        assert!(patched.finalizers.is_empty());
        assert!(cluster.object(&pods(), "ns1", "pod").is_some());
    }

    #[test]
    fn no_new_finalizers_on_object_being_deleted() {
        let cluster = MemoryCluster::new();
        cluster.create(&pods(), meta("pod", "1", &[], &["x/y"])).unwrap();
        block_on(async {
            cluster.delete(&pods(), "ns1", "pod", &DeleteOptions::default()).await.unwrap();
            let body = json!({"metadata": {"finalizers": ["x/y", "new"]}});
            let patch = Patch { patch_type: PatchType::JsonMerge, body };
            let err = cluster.patch(&pods(), "ns1", "pod", &patch).await.unwrap_err();
            assert!(
                matches!(err, ClusterError::Invalid(ref m) if m.contains("no new finalizers")),
                "{err:?}"
            );
        });
    }

    #[test]
    fn delete_preconditions_conflict_and_change_nothing() {
        let cluster = MemoryCluster::new();
        let created = cluster.create(&pods(), meta("pod", "1", &[], &[])).unwrap();
        let cases = [
            DeleteOptions { precondition_uid: Some("2".into()), ..DeleteOptions::default() },
            DeleteOptions {
                precondition_uid: Some("1".into()),
                precondition_resource_version: Some("999".into()),
                ..DeleteOptions::default()
            },
        ];
        for (i, options) in cases.iter().enumerate() {
            let err = block_on(cluster.delete(&pods(), "ns1", "pod", options)).unwrap_err();
            assert!(matches!(err, ClusterError::Conflict(_)), "#{i}: got {err:?}, want Conflict");
            assert!(err.to_string().contains("does not match"), "#{i}: {err}");
        }
        assert_eq!(cluster.object(&pods(), "ns1", "pod").unwrap(), created);
        let matching = DeleteOptions {
            precondition_uid: Some("1".into()),
            precondition_resource_version: Some(created.resource_version.clone()),
            ..DeleteOptions::default()
        };
        block_on(cluster.delete(&pods(), "ns1", "pod", &matching)).unwrap();
        assert!(cluster.objects().is_empty());
        assert_eq!(
            block_on(cluster.delete(&pods(), "ns1", "pod", &matching)),
            Err(ClusterError::NotFound)
        );
    }

    /// The outcome of one delete, per policy, on an object with `finalizers`:
    /// (finalizers after, kept).
    #[test]
    fn delete_propagation_table() {
        use PropagationPolicy::{Background, Foreground, Orphan};
        /// (finalizers before, policy, finalizers after, kept).
        type Case =
            (&'static [&'static str], Option<PropagationPolicy>, &'static [&'static str], bool);
        let cases: [Case; 8] = [
            (&[], Some(Background), &[], false),
            (&[], None, &[], false),
            (&[], Some(Orphan), &["orphan"], true),
            (&[], Some(Foreground), &["foregroundDeletion"], true),
            (&["x/y"], Some(Background), &["x/y"], true),
            (&["x/y"], Some(Foreground), &["x/y", "foregroundDeletion"], true),
            // The existing finalizer is the default when no policy is given.
            (&["orphan"], None, &["orphan"], true),
            // An explicit policy replaces it.
            (&["orphan", "x/y"], Some(Foreground), &["x/y", "foregroundDeletion"], true),
        ];
        for (i, (before, propagation, want, want_kept)) in cases.iter().enumerate() {
            let cluster = MemoryCluster::new();
            cluster.create(&pods(), meta("pod", "1", &[], before)).unwrap();
            block_on(cluster.delete(&pods(), "ns1", "pod", &policy(*propagation))).unwrap();
            let got = cluster.object(&pods(), "ns1", "pod");
            assert_eq!(
                got.is_some(),
                *want_kept,
                "#{i}: kept = {}, want {want_kept}",
                got.is_some()
            );
            if let Some(got) = got {
                assert!(got.deletion_timestamp, "#{i}: no deletionTimestamp");
                assert_eq!(got.finalizers, strings(want), "#{i}: finalizers");
            }
        }
    }

    #[test]
    fn legacy_default_orphan_kind_orphans_without_policy() {
        let cluster = MemoryCluster::with_test_resources();
        cluster.create(&rcs(), meta("rc1", "1", &[], &[])).unwrap();
        cluster.create(&rcs(), meta("rc2", "2", &[], &[])).unwrap();
        block_on(async {
            cluster.delete(&rcs(), "ns1", "rc1", &DeleteOptions::default()).await.unwrap();
            cluster
                .delete(&rcs(), "ns1", "rc2", &policy(Some(PropagationPolicy::Background)))
                .await
                .unwrap();
        });
        assert_eq!(cluster.object(&rcs(), "ns1", "rc1").unwrap().finalizers, strings(&["orphan"]));
        assert!(cluster.object(&rcs(), "ns1", "rc2").is_none());
    }

    #[test]
    fn second_delete_of_object_held_by_finalizers_recomputes_gc_finalizers() {
        let cluster = MemoryCluster::new();
        cluster.create(&pods(), meta("pod", "1", &[], &["x/y"])).unwrap();
        block_on(async {
            let foreground = policy(Some(PropagationPolicy::Foreground));
            cluster.delete(&pods(), "ns1", "pod", &foreground).await.unwrap();
            let first = cluster.object(&pods(), "ns1", "pod").unwrap();
            assert_eq!(first.finalizers, strings(&["x/y", "foregroundDeletion"]));
            // Same policy again: the set is unchanged, so nothing is written.
            cluster.delete(&pods(), "ns1", "pod", &DeleteOptions::default()).await.unwrap();
            assert_eq!(cluster.object(&pods(), "ns1", "pod").unwrap(), first);
            // Grace period 0 is not a pending graceful deletion: a new policy applies.
            cluster
                .delete(&pods(), "ns1", "pod", &policy(Some(PropagationPolicy::Orphan)))
                .await
                .unwrap();
        });
        let last = cluster.object(&pods(), "ns1", "pod").unwrap();
        assert_eq!(last.finalizers, strings(&["x/y", "orphan"]));
    }

    /// TestDoubleDeletionWithFinalizer's rule: once a graceful deletion is pending, a second
    /// delete cannot change the finalizers.
    #[test]
    fn second_delete_during_graceful_deletion_does_not_change_finalizers() {
        let cluster = MemoryCluster::new();
        cluster.register_with(
            pods(),
            ResourceOptions { grace_period_seconds: 30, ..ResourceOptions::default() },
        );
        cluster.create(&pods(), meta("pod", "1", &[], &["x/y"])).unwrap();
        block_on(async {
            cluster
                .delete(&pods(), "ns1", "pod", &policy(Some(PropagationPolicy::Foreground)))
                .await
                .unwrap();
            let first = cluster.object(&pods(), "ns1", "pod").unwrap();
            assert!(first.deletion_timestamp);
            assert_eq!(first.finalizers, strings(&["x/y", "foregroundDeletion"]));
            cluster
                .delete(&pods(), "ns1", "pod", &policy(Some(PropagationPolicy::Orphan)))
                .await
                .unwrap();
            assert_eq!(cluster.object(&pods(), "ns1", "pod").unwrap(), first);
        });
        // The kubelet's final delete: finalizers remain, so it stays, now with grace period 0.
        assert!(!cluster.expire_grace_period(&pods(), "ns1", "pod"));
        let held = cluster.update_object(&pods(), "ns1", "pod", |m| m.finalizers.clear());
        assert!(held.is_some());
        assert!(cluster.object(&pods(), "ns1", "pod").is_none(), "emptied finalizers delete it");
    }

    #[test]
    fn graceful_deletion_without_finalizers_waits_for_the_grace_period() {
        let cluster = MemoryCluster::new();
        cluster.register_with(
            pods(),
            ResourceOptions { grace_period_seconds: 30, ..ResourceOptions::default() },
        );
        cluster.create(&pods(), meta("pod", "1", &[], &[])).unwrap();
        block_on(cluster.delete(&pods(), "ns1", "pod", &DeleteOptions::default())).unwrap();
        assert!(cluster.object(&pods(), "ns1", "pod").unwrap().deletion_timestamp);
        assert!(cluster.expire_grace_period(&pods(), "ns1", "pod"));
        assert!(cluster.objects().is_empty());
    }

    /// TestOrphanDependentsFailure's server: PATCH of the pod answers 409.
    #[test]
    fn fail_next_fails_one_matching_call_and_still_records_it() {
        let cluster = MemoryCluster::with_test_resources();
        cluster.create(&pods(), meta("pod", "1", &["1"], &[])).unwrap();
        cluster.fail_next(
            Verb::Patch,
            "pods",
            "pod",
            ClusterError::Conflict("patch pods pod".into()),
        );
        let patch = delete_owner_refs_strategic("1", ["1"]);
        block_on(async {
            // Another verb or object is not affected.
            cluster.get(&pods(), "ns1", "pod").await.unwrap();
            let err = cluster.patch(&pods(), "ns1", "pod", &patch).await.unwrap_err();
            assert!(err.to_string().contains("the server reported a conflict"), "{err}");
            assert_eq!(cluster.object(&pods(), "ns1", "pod").unwrap().owner_references.len(), 1);
            cluster.patch(&pods(), "ns1", "pod", &patch).await.unwrap();
        });
        assert_eq!(
            cluster.take_actions(),
            [
                "get /v1, Resource=pods ns=ns1 name=pod",
                "patch /v1, Resource=pods ns=ns1 name=pod",
                "patch /v1, Resource=pods ns=ns1 name=pod",
            ]
        );
    }

    #[test]
    fn hook_can_make_the_resource_version_stale_before_a_delete() {
        let cluster = MemoryCluster::new();
        let created = cluster.create(&pods(), meta("pod", "1", &[], &[])).unwrap();
        cluster.on_call(|cluster, call| {
            if call.verb() == Verb::Delete {
                cluster.update_object(&call.resource, &call.namespace, &call.name, |_| {});
            }
            None
        });
        let options = DeleteOptions {
            precondition_uid: Some("1".into()),
            precondition_resource_version: Some(created.resource_version),
            ..DeleteOptions::default()
        };
        let err = block_on(cluster.delete(&pods(), "ns1", "pod", &options)).unwrap_err();
        assert!(matches!(err, ClusterError::Conflict(_)), "{err:?}");
        cluster.on_call(|_, call| {
            (call.verb() == Verb::Get)
                .then(|| ClusterError::Other { code: 500, message: "boom".into() })
        });
        assert_eq!(
            block_on(cluster.get(&pods(), "ns1", "pod")),
            Err(ClusterError::Other { code: 500, message: "boom".into() })
        );
        cluster.clear_faults();
        assert!(block_on(cluster.get(&pods(), "ns1", "pod")).is_ok());
        let delete = &cluster.calls()[0];
        assert_eq!(delete.delete_options(), Some(&options));
    }

    #[test]
    fn events_are_kept_in_fake_recorder_form() {
        let cluster = MemoryCluster::new();
        let event = WarningEvent {
            involved: ObjectReference::new("v1", "Pod", "ns1", "podname1", "poduid1"),
            reason: "OwnerRefInvalidNamespace",
            message: r#"ownerRef [v1/Pod, namespace: ns1, name: podname2, uid: poduid2] does not exist in namespace "ns1""#
                .into(),
        };
        cluster.record_event(event.clone());
        assert_eq!(
            cluster.take_event_strings(),
            [
                r#"Warning OwnerRefInvalidNamespace ownerRef [v1/Pod, namespace: ns1, name: podname2, uid: poduid2] does not exist in namespace "ns1" involvedObject{kind=Pod,apiVersion=v1}"#
            ]
        );
        assert!(cluster.take_events().is_empty());
    }

    #[test]
    fn delete_object_removes_without_recording() {
        let cluster = MemoryCluster::new();
        cluster.create(&pods(), meta("pod", "1", &[], &["x/y"])).unwrap();
        assert_eq!(cluster.delete_object(&pods(), "ns1", "pod").unwrap().uid, "1");
        assert!(cluster.objects().is_empty());
        assert!(cluster.calls().is_empty());
    }

    #[test]
    fn cluster_futures_are_send() {
        fn assert_send<T: Send>(_: &T) {}
        let (cluster, pods, options) = (MemoryCluster::new(), pods(), DeleteOptions::default());
        assert_send(&cluster.get(&pods, "ns1", "pod"));
        assert_send(&cluster.delete(&pods, "ns1", "pod", &options));
    }
}
