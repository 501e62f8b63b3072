//! Classifying an object's live owner references: solid, dangling, or waiting for their own
//! dependents' deletion.
//!
//! Upstream: `garbagecollector.go` (`isDangling`, `classifyReferences`); GC-SPEC.md §3.3-3.4.

use hashbrown::HashMap;

use super::{Collector, ItemError};
use crate::cluster::{Cluster, ClusterError};
use crate::identity::{Namespace, ObjectReference, ObjectType, OwnerRef, Uid};
use crate::meta::FINALIZER_DELETE_DEPENDENTS;
use crate::meta::ObjectMeta;

/// The three kinds of owner reference.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Classified {
    /// Owners that exist and are not being deleted in the foreground.
    pub(super) solid: Vec<OwnerRef>,
    /// Owners a live read (or the absent-owner cache) found absent, or with another UID.
    pub(super) dangling: Vec<OwnerRef>,
    /// Owners that exist and are being deleted in the foreground.
    pub(super) waiting_for_dependents_deletion: Vec<OwnerRef>,
}

/// Whether an owner reference's `name` addresses that name in a GET: not empty, not `.` or
/// `..`, no `/`. No object can have any other name (the API server validates object names as
/// path segments), but an owner reference may (only emptiness is refused), and upstream's
/// client joins it into the GET's path, where `path.Join` rewrites it: `x/` reads `x`, `.` the
/// collection, `x/status` a subresource of `x`. What upstream then decides depends on another
/// object, or fails for ever; kube-gc neither reads another object nor takes the name's
/// absence from a list: it cannot verify the reference, and keeps the dependent (fewer
/// writes than upstream, which may delete it or keep it).
pub(super) fn is_addressable(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/')
}

impl<C: Cluster> Collector<C> {
    /// Upstream's `isDangling`: whether `owner` (a reference of `item`) is absent, with the
    /// owner's live metadata when it is not.
    pub(super) async fn is_dangling(
        &self,
        owner: &OwnerRef,
        item: &ObjectReference,
    ) -> Result<Option<ObjectMeta>, ItemError> {
        // Cached as cluster-scoped, or in the dependent's namespace.
        let mut key = ObjectReference::from_owner(owner, Namespace::CLUSTER);
        if self.absent_owners.has(&key) {
            tracing::trace!(%item, owner = %key, "according to the absentOwnerCache, item's owner does not exist");
            return Ok(None);
        }
        key.namespace = item.namespace;
        if self.absent_owners.has(&key) {
            tracing::trace!(%item, owner = %key, "according to the absentOwnerCache, item's owner does not exist in namespace");
            return Ok(None);
        }
        let (resource, _) = self.locate(&key)?;
        if !resource.namespaced {
            key.namespace = Namespace::CLUSTER;
        }
        if item.namespace.is_cluster() && resource.namespaced {
            tracing::debug!(%item, owner = %key, "item is cluster-scoped, but refers to a namespaced owner");
            return Err(ItemError::NamespacedOwnerOfClusterScopedObject);
        }
        let namespace = key.namespace.as_str();
        // Each decision reads the owner itself, as upstream does, never sharing another
        // worker's GET in flight: one sent before this item's reference was in hand may
        // predate the owner (deleted and created again under its name) and answer 404, or
        // the old UID, for it; the item would then be collected as its owner's garbage
        // (engine/tests/owner_lookups.rs).
        match self.read_counted(&resource, namespace, &owner.name, true).await {
            Err(ClusterError::NotFound) => {
                tracing::trace!(%item, owner = %key, "item's owner is not found");
                self.absent_owners.add(key);
                Ok(None)
            }
            Err(e) => Err(ItemError::cluster(format_args!("cannot get owner {key}"), e)),
            Ok(found) if found.uid != owner.uid.to_string() => {
                tracing::trace!(%item, owner = %key, "item's owner is not found, UID mismatch");
                self.absent_owners.add(key);
                Ok(None)
            }
            Ok(found) => Ok(Some(found)),
        }
    }

    /// Upstream's `classifyReferences`: one live read per reference not in the absent-owner
    /// cache; any error aborts the classification.
    ///
    /// Divergence from upstream: a repeated reference (the same UID, apiVersion, kind and name:
    /// the same lookup) is read once per classification and takes the class its first
    /// occurrence got. Upstream reads every occurrence, so an owner whose foreground deletion
    /// begins between two of those reads is found solid and waiting at once; with a solid
    /// owner found, upstream removes the waiting references, by UID, and so strips the object
    /// of the owner it has just found solid, which leaves the object out of that owner's
    /// foreground deletion. Read once, the decision is the one upstream makes on the owner as
    /// that read found it, with fewer calls. (Another apiVersion is another lookup, which may
    /// fail on its own: it is read on its own, as upstream reads it.)
    pub(super) async fn classify_references(
        &self,
        item: &ObjectReference,
        owners: &[OwnerRef],
    ) -> Result<Classified, ItemError> {
        #[derive(Clone, Copy)]
        enum Class {
            Solid,
            Dangling,
            Waiting,
        }
        let mut c = Classified::default();
        let mut read: HashMap<(Uid, ObjectType, &str), Class> = HashMap::new();
        for owner in owners {
            let lookup = (owner.uid, owner.ty, owner.name.as_str());
            let class = match read.get(&lookup) {
                Some(class) => *class,
                None => {
                    let class = match self.is_dangling(owner, item).await? {
                        None => Class::Dangling,
                        Some(meta)
                            if meta.deletion_timestamp
                                && meta.has_finalizer(FINALIZER_DELETE_DEPENDENTS) =>
                        {
                            Class::Waiting
                        }
                        Some(_) => Class::Solid,
                    };
                    read.insert(lookup, class);
                    class
                }
            };
            match class {
                Class::Solid => c.solid.push(owner.clone()),
                Class::Dangling => c.dangling.push(owner.clone()),
                Class::Waiting => c.waiting_for_dependents_deletion.push(owner.clone()),
            }
        }
        Ok(c)
    }
}
