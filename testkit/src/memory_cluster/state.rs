//! The in-memory cluster's state behind its one mutex: the restMapper, the objects by
//! GroupVersionResource, resourceVersions, the recorded calls, faults and events, and the
//! watch log; and the store's write rules (no-op writes keep the version; emptying the
//! finalizers of an object being deleted removes it).

use std::collections::{BTreeMap, HashMap};

use kube_gc_engine::cluster::{ClusterError, ListedObject, Resource, WarningEvent};
use kube_gc_engine::identity::ObjectType;
use kube_gc_engine::ingest::{Event, EventType};
use kube_gc_engine::meta::ObjectMeta;

use super::ResourceOptions;
use crate::calls::{Call, Verb};

/// (group, version, plural resource): one store per GroupVersionResource.
pub(super) type Gvr = (String, String, String);

pub(super) fn gvr(resource: &Resource) -> Gvr {
    (resource.group.clone(), resource.version.clone(), resource.resource.clone())
}

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
pub(super) struct ObjectKey {
    pub(super) gvr: Gvr,
    pub(super) namespace: String,
    pub(super) name: String,
}

impl ObjectKey {
    pub(super) fn new(resource: &Resource, namespace: &str, name: &str) -> ObjectKey {
        ObjectKey { gvr: gvr(resource), namespace: namespace.to_owned(), name: name.to_owned() }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Stored {
    pub(super) resource: Resource,
    pub(super) meta: ObjectMeta,
    /// `deletionGracePeriodSeconds`: `None` until deletion starts; 0 once marked deleting by
    /// finalizers; the resource's grace period during a graceful deletion.
    pub(super) grace_period: Option<u32>,
}

#[derive(Debug)]
pub(super) struct Fault {
    pub(super) verb: Verb,
    pub(super) resource: String,
    pub(super) name: String,
    pub(super) error: ClusterError,
}

#[derive(Default)]
pub(super) struct State {
    /// The restMapper: apiVersion/kind → resource.
    pub(super) mappings: HashMap<ObjectType, Resource>,
    /// Per-resource behaviour; unregistered resources get the defaults.
    pub(super) options: HashMap<Gvr, ResourceOptions>,
    pub(super) objects: BTreeMap<ObjectKey, Stored>,
    /// The last resourceVersion handed out (a cluster-wide counter, as etcd's revision).
    pub(super) last_resource_version: u64,
    pub(super) calls: Vec<Call>,
    pub(super) faults: Vec<Fault>,
    pub(super) events: Vec<WarningEvent>,
    /// Every change to an object, as a watch would deliver it, oldest first.
    pub(super) watch: Vec<Event>,
    /// The snapshots paged LISTs are reading, by the number in their continue token (etcd
    /// serves every page of a list at its first page's revision).
    pub(super) list_snapshots: HashMap<u64, Vec<ListedObject>>,
    /// The number of the next list snapshot.
    pub(super) next_list_snapshot: u64,
    /// The cluster's clock, in seconds since the Unix epoch: the creation and deletion
    /// timestamps it stamps. It moves only when a test moves it
    /// ([`MemoryCluster::advance_clock`](super::MemoryCluster::advance_clock)).
    pub(super) clock: i64,
    /// Writes are recorded and answered, not applied
    /// ([`MemoryCluster::set_dry_run`](super::MemoryCluster::set_dry_run)).
    pub(super) dry_run: bool,
}

/// Where a [`MemoryCluster`](super::MemoryCluster)'s clock starts (2023-11-14T22:13:20Z).
pub(super) const CLOCK_START: i64 = 1_700_000_000;

impl State {
    pub(super) fn options(&self, resource: &Resource) -> ResourceOptions {
        self.options.get(&gvr(resource)).copied().unwrap_or_default()
    }

    /// Appends the watch event for a change of an object of `resource` from `old` to `new`.
    pub(super) fn log(
        &mut self,
        resource: &Resource,
        old: Option<ObjectMeta>,
        new: Option<ObjectMeta>,
    ) {
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
    pub(super) fn remove(
        &mut self,
        key: &ObjectKey,
        last: Option<ObjectMeta>,
    ) -> Option<ObjectMeta> {
        let stored = self.objects.remove(key)?;
        let mut last = match last {
            Some(mut last) => {
                self.stamp(&mut last, Some(&stored.meta));
                last
            }
            None => stored.meta,
        };
        last.resource_version = self.next_resource_version();
        self.log(&stored.resource, Some(last.clone()), None);
        Some(last)
    }

    /// Sets `meta`'s timestamps as the API server keeps them: the creation time of the object
    /// it replaces (`stored`; now, for a new object), and while it is being deleted, the time
    /// its deletion began (now, if it begins with this write).
    pub(super) fn stamp(&self, meta: &mut ObjectMeta, stored: Option<&ObjectMeta>) {
        meta.creation_time = Some(stored.and_then(|s| s.creation_time).unwrap_or(self.clock));
        meta.deletion_time = if meta.deletion_timestamp {
            Some(stored.and_then(|s| s.deletion_time).unwrap_or(self.clock))
        } else {
            None
        };
    }

    pub(super) fn next_resource_version(&mut self) -> String {
        self.last_resource_version += 1;
        self.last_resource_version.to_string()
    }

    /// Stores `meta` (and `grace_period`) as the new state of `key`, bumping the
    /// resourceVersion only if something changed (the store skips no-op writes). Returns the
    /// stored metadata.
    pub(super) fn write(
        &mut self,
        key: &ObjectKey,
        mut meta: ObjectMeta,
        grace_period: Option<u32>,
    ) -> ObjectMeta {
        let Some(stored) = self.objects.get(key) else { return meta };
        meta.resource_version = stored.meta.resource_version.clone();
        self.stamp(&mut meta, Some(&stored.meta));
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
    pub(super) fn update(&mut self, key: &ObjectKey, meta: ObjectMeta) -> ObjectMeta {
        let grace_period = self.objects.get(key).and_then(|s| s.grace_period);
        if meta.deletion_timestamp && meta.finalizers.is_empty() && grace_period.unwrap_or(0) == 0 {
            return self.remove(key, Some(meta)).expect("an update reads the object first");
        }
        self.write(key, meta, grace_period)
    }

    pub(super) fn take_fault(&mut self, call: &Call) -> Option<ClusterError> {
        let verb = call.verb();
        let i = self.faults.iter().position(|f| {
            f.verb == verb && f.resource == call.resource.resource && f.name == call.name
        })?;
        Some(self.faults.remove(i).error)
    }
}
