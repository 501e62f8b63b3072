//! What applying events produces besides the graph: queue items, absent owners, warnings.

use crate::cluster::WarningEvent;
use crate::error::IngestError;
use crate::graph::NodeKey;
use crate::identity::{ObjectReference, OwnerRef};

/// The reason of the only Event the collector records (GC-SPEC.md §2.4).
pub const REASON_OWNER_REF_INVALID_NAMESPACE: &str = "OwnerRefInvalidNamespace";

/// One item the graph builder queues, in the order upstream would queue it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Enqueue {
    /// `attemptToDelete.Add`.
    AttemptToDelete(NodeKey),
    /// `attemptToDelete.Add` of a virtual node just created from an owner reference: the only
    /// reason to process it is to verify the owner exists (see
    /// [`CollectorOptions::skip_observed_verification`](crate::collector::CollectorOptions)).
    VerifyVirtual(NodeKey),
    /// `attemptToDelete.Add` of a node that is likely garbage: a dependent of an owner just
    /// deleted or verified absent, or an object being deleted in the foreground (see
    /// [`CollectorOptions::garbage_first`](crate::collector::CollectorOptions)).
    LikelyGarbage(NodeKey),
    /// `attemptToDelete.AddRateLimited` (a virtual node given an alternate identity).
    AttemptToDeleteRateLimited(NodeKey),
    /// `attemptToOrphan.Add`.
    AttemptToOrphan(NodeKey),
}

impl Enqueue {
    /// The queued node.
    pub fn key(self) -> NodeKey {
        match self {
            Enqueue::AttemptToDelete(k)
            | Enqueue::VerifyVirtual(k)
            | Enqueue::LikelyGarbage(k)
            | Enqueue::AttemptToDeleteRateLimited(k)
            | Enqueue::AttemptToOrphan(k) => k,
        }
    }

    /// Whether the item goes to attemptToOrphan (else attemptToDelete).
    pub fn is_orphan(self) -> bool {
        matches!(self, Enqueue::AttemptToOrphan(_))
    }
}

/// Everything applying a batch produced, in upstream's order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestOutput {
    /// Items to queue, in order.
    pub enqueued: Vec<Enqueue>,
    /// Identities to add to the absent-owner cache, in order.
    pub absent_owners: Vec<ObjectReference>,
    /// Warning events to record (`OwnerRefInvalidNamespace`).
    pub warnings: Vec<WarningEvent>,
    /// Events that were rejected; the rest of the batch was applied.
    pub errors: Vec<IngestError>,
    /// How many events were applied.
    pub applied: usize,
}

impl IngestOutput {
    /// The items queued to attemptToDelete (plain and rate-limited), in order.
    pub fn attempt_to_delete(&self) -> impl Iterator<Item = NodeKey> + '_ {
        self.enqueued.iter().filter(|e| !e.is_orphan()).map(|e| e.key())
    }

    /// The items queued to attemptToOrphan, in order.
    pub fn attempt_to_orphan(&self) -> impl Iterator<Item = NodeKey> + '_ {
        self.enqueued.iter().filter(|e| e.is_orphan()).map(|e| e.key())
    }

    /// Appends `other` (a later batch's output).
    pub fn extend(&mut self, other: IngestOutput) {
        self.enqueued.extend(other.enqueued);
        self.absent_owners.extend(other.absent_owners);
        self.warnings.extend(other.warnings);
        self.errors.extend(other.errors);
        self.applied += other.applied;
    }
}

/// Upstream's `reportInvalidNamespaceOwnerRef` event: `dependent` names `invalid` in its own
/// namespace, where no such owner exists.
pub(crate) fn invalid_namespace_warning(
    dependent: &ObjectReference,
    invalid: &OwnerRef,
) -> WarningEvent {
    let named = ObjectReference::from_owner(invalid, dependent.namespace);
    WarningEvent {
        involved: dependent.clone(),
        reason: REASON_OWNER_REF_INVALID_NAMESPACE,
        message: format!(
            "ownerRef {named} does not exist in namespace {:?}",
            dependent.namespace.as_str()
        ),
    }
}
