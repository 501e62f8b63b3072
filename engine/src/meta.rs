//! Object metadata as the API returns it: what the collector reads of every object, and the
//! two finalizers of garbage collection. The one place these types and names are defined.

/// The finalizer that makes the API server keep an object until its dependents are orphaned
/// (`metav1.FinalizerOrphanDependents`).
pub const FINALIZER_ORPHAN: &str = "orphan";

/// The finalizer that makes the API server keep an object until its blocking dependents are
/// gone (`metav1.FinalizerDeleteDependents`).
pub const FINALIZER_DELETE_DEPENDENTS: &str = "foregroundDeletion";

/// An owner reference as the API returns it (`metadata.ownerReferences[*]`).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct OwnerReference {
    /// apiVersion of the owner.
    pub api_version: String,
    /// Kind of the owner.
    pub kind: String,
    /// Name of the owner.
    pub name: String,
    /// UID of the owner.
    pub uid: String,
    /// `controller`, if set.
    pub controller: Option<bool>,
    /// `blockOwnerDeletion`, if set.
    pub block_owner_deletion: Option<bool>,
}

/// The metadata the collector needs of an object (what a metadata-only informer or a metadata
/// GET returns).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct ObjectMeta {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` (empty for cluster-scoped objects).
    pub namespace: String,
    /// `metadata.resourceVersion` (not read by the graph; used by the collector's preconditions).
    pub resource_version: String,
    /// `metadata.ownerReferences`, in order.
    pub owner_references: Vec<OwnerReference>,
    /// `metadata.finalizers`, in order.
    pub finalizers: Vec<String>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deletion_timestamp: bool,
    /// `metadata.creationTimestamp`, in seconds since the Unix epoch (the API server's clock,
    /// to the second), if it was set and readable. Only the memory of orphaned owners reads it.
    pub creation_time: Option<i64>,
    /// `metadata.deletionTimestamp`, in seconds since the Unix epoch, if it was set and
    /// readable. [`Self::deletion_timestamp`] says whether the object is being deleted: a
    /// timestamp that does not parse still means it is.
    pub deletion_time: Option<i64>,
}

impl ObjectMeta {
    /// Whether `finalizer` is in the object's finalizers.
    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }
}
