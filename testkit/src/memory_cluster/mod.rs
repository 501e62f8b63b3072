//! An in-memory API server implementing [`Cluster`](kube_gc_engine::Cluster) (upstream's fake metadata client plus the generic registry store, `store.go`); GC-SPEC.md §5.6.
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
//! This file holds the setup, fault injection and inspection API; `serve.rs` serves the calls
//! (the [`Cluster`](kube_gc_engine::Cluster) implementation), and `state.rs` holds the state
//! behind the mutex and the store's write rules.
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

use std::fmt;
use std::sync::Arc;

use kube_gc_engine::cluster::{ClusterError, Resource, WarningEvent};
use kube_gc_engine::identity::ObjectType;
use kube_gc_engine::ingest::Event;
use kube_gc_engine::meta::ObjectMeta;
use parking_lot::Mutex;

pub use crate::calls::{Call, Request, Verb, fake_recorder_string};
pub use crate::registry::deletion_finalizers_for_garbage_collection;

mod serve;
mod state;

use state::{Fault, ObjectKey, State, Stored, gvr};

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
    /// Served by an aggregated API server: [`consistent_lists`](kube_gc_engine::Cluster::consistent_lists) is false, so the
    /// collector proves its objects absent only by GET. Default false.
    pub aggregated: bool,
}

/// A hook consulted on every call; see [`MemoryCluster::on_call`].
type Hook = Arc<dyn Fn(&MemoryCluster, &Call) -> Option<ClusterError> + Send + Sync>;

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
        let state = State { clock: state::CLOCK_START, ..State::default() };
        MemoryCluster { state: Mutex::new(state), hooks: Mutex::new(Vec::new()) }
    }

    /// Answers the collector's writes as kube-gc's shadow mode (`--dry-run`) does: a PATCH or
    /// DELETE is recorded (and its hooks consulted) but not applied, a PATCH answering with the
    /// object as it is (a 404 if there is none), a DELETE with success. The test's own changes
    /// still apply.
    pub fn set_dry_run(&self, on: bool) {
        self.state.lock().dry_run = on;
    }

    /// Moves the cluster's clock `seconds` on. It stamps creation and deletion timestamps
    /// (`creation_time`, `deletion_time`) and moves only when a test moves it, so that
    /// everything a test does happens in the same second unless it says otherwise.
    pub fn advance_clock(&self, seconds: i64) {
        self.state.lock().clock += seconds;
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
        state.stamp(&mut meta, None);
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
        state.stamp(&mut meta, Some(&stored.meta));
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
    /// [`create`](Self::create), [`delete_object`](Self::delete_object),
    /// [`delete_as_client`](Self::delete_as_client), …), e.g. to bump an object's
    /// resourceVersion before a DELETE. It may also make calls of its own through the
    /// [`Cluster`](kube_gc_engine::Cluster) methods (another client's, or another worker's):
    /// those are recorded and consult the hooks in turn, this one included (so a hook that
    /// makes a call on every call never ends). They are recorded after the call the hook was
    /// consulted on, though served before it.
    pub fn on_call(
        &self,
        hook: impl Fn(&MemoryCluster, &Call) -> Option<ClusterError> + Send + Sync + 'static,
    ) {
        self.hooks.lock().push(Arc::new(hook));
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
}

#[cfg(test)]
mod tests;
