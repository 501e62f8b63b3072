//! The engine's errors.

use crate::cluster::ClusterError;

/// Why an event was not ingested. The rest of its batch is applied regardless.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum IngestError {
    /// The object has an empty `metadata.uid`.
    #[error("{event_type} event for {kind} {namespace}/{name} has no uid")]
    MissingUid {
        /// add / update / delete.
        event_type: &'static str,
        /// The watched kind.
        kind: &'static str,
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
    },
    /// Only delete events may be virtual (a worker's verdict that an object is gone).
    #[error("virtual {event_type} event for uid {uid}: only delete events may be virtual")]
    VirtualNotDelete {
        /// add or update.
        event_type: &'static str,
        /// The object's UID.
        uid: String,
    },
    /// A non-UUID UID past the cap on interned UIDs (see [`crate::identity`]): an object's
    /// own UID, or in a live read any owner reference's (ingestion holds such a reference as
    /// unrepresentable, [`crate::identity::owner_coordinates`]).
    #[error(transparent)]
    UidCapacity(#[from] crate::identity::UidCapacityError),
    /// An owner reference's apiVersion or kind past the cap on types or the length limit, in
    /// a live read (see [`crate::identity`]; ingestion holds such a reference as
    /// unrepresentable).
    #[error(transparent)]
    TypeCapacity(#[from] crate::identity::TypeCapacityError),
    /// An owner reference lacks a field the collector cannot do without.
    #[error("object {uid}: ownerReferences[{index}] has no {field}")]
    InvalidOwnerReference {
        /// The dependent's UID.
        uid: String,
        /// The reference's position.
        index: usize,
        /// The missing field: `uid`, `kind` or `apiVersion`.
        field: &'static str,
    },
}

/// Errors of the engine's public operations.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
pub enum Error {
    /// An event could not be ingested.
    #[error(transparent)]
    Ingest(#[from] IngestError),
    /// A cluster call failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// A configuration value is out of range.
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
