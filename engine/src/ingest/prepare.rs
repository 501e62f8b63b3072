//! Parsing and validating an event before it is applied.

use smallvec::SmallVec;

use super::event::{Event, EventType};
use super::rules::{DeletionState, RefView};
use crate::error::IngestError;
use crate::identity::{Namespace, ObjectReference, ObjectType, Uid, owner_coordinates};

/// An event with its UIDs parsed and its strings interned, borrowing the rest from the event.
#[derive(Debug)]
pub(crate) struct Prepared<'a> {
    pub(crate) event_type: EventType,
    pub(crate) is_virtual: bool,
    /// identityFromEvent: the monitor's type, the object's namespace, name and UID.
    pub(crate) ty: ObjectType,
    pub(crate) namespace: Namespace,
    pub(crate) name: &'a str,
    pub(crate) uid: Uid,
    pub(crate) owners: SmallVec<[RefView<'a>; 1]>,
    pub(crate) state: DeletionState,
    pub(crate) old_state: Option<DeletionState>,
    /// `metadata.resourceVersion` as a number (0 if it is not one).
    pub(crate) resource_version: u64,
}

impl<'a> Prepared<'a> {
    /// Parses `event`, or says why it cannot be ingested.
    pub(crate) fn parse(event: &'a Event) -> Result<Prepared<'a>, IngestError> {
        let obj = &event.object;
        if obj.uid.is_empty() {
            return Err(IngestError::MissingUid {
                event_type: event.event_type.as_str(),
                kind: event.object_type.kind(),
                namespace: obj.namespace.clone(),
                name: obj.name.clone(),
            });
        }
        if event.is_virtual && event.event_type != EventType::Delete {
            return Err(IngestError::VirtualNotDelete {
                event_type: event.event_type.as_str(),
                uid: obj.uid.clone(),
            });
        }
        let mut owners = SmallVec::with_capacity(obj.owner_references.len());
        for (index, r) in obj.owner_references.iter().enumerate() {
            let missing = if r.uid.is_empty() {
                Some("uid")
            } else if r.kind.is_empty() {
                Some("kind")
            } else if r.api_version.is_empty() {
                Some("apiVersion")
            } else {
                None
            };
            if let Some(field) = missing {
                if event.event_type == EventType::Delete {
                    // A delete takes the owners the graph holds, never the event's: refused
                    // for a reference it does not read, the object would stay in the graph for
                    // ever (its dependents never queued, a foreground owner never re-checked).
                    continue;
                }
                return Err(IngestError::InvalidOwnerReference {
                    uid: obj.uid.clone(),
                    index,
                    field,
                });
            }
            let (ty, uid) = owner_coordinates(&r.api_version, &r.kind, &r.uid);
            owners.push(RefView {
                ty,
                name: &r.name,
                uid,
                controller: r.controller,
                block_owner_deletion: r.block_owner_deletion,
            });
        }
        Ok(Prepared {
            event_type: event.event_type,
            is_virtual: event.is_virtual,
            ty: event.object_type,
            namespace: Namespace::new(&obj.namespace),
            name: &obj.name,
            uid: Uid::try_parse(&obj.uid)?,
            owners,
            state: DeletionState::of(obj),
            old_state: event.old_object.as_deref().map(DeletionState::of),
            resource_version: resource_version_number(&obj.resource_version),
        })
    }

    /// identityFromEvent.
    pub(crate) fn identity(&self) -> ObjectReference {
        ObjectReference {
            ty: self.ty,
            namespace: self.namespace,
            name: self.name.to_owned(),
            uid: self.uid,
        }
    }

    /// Whether the identity from this event equals `node`'s (`names` are its shard's).
    pub(crate) fn identity_eq(
        &self,
        node: &crate::graph::Node,
        names: &crate::graph::names::Names,
    ) -> bool {
        node.uid == self.uid
            && node.ty == self.ty
            && node.namespace == self.namespace
            && node.name(names) == self.name
    }

    /// The object's references as the node whose name is at `holder` keeps them, their names
    /// stored in `names` (the node's shard's).
    pub(crate) fn node_owners(
        &self,
        holder: crate::graph::names::NameId,
        names: &mut crate::graph::names::Names,
    ) -> crate::graph::node::Owners {
        self.owners.iter().map(|r| r.to_node_owner_ref(holder, names)).collect()
    }

    /// The object's references to `owner` as (type, name, blocks): what the owner's side of
    /// the edge keeps (see `graph::node::DependentEntry`).
    pub(crate) fn edge_refs(
        &self,
        owner: Uid,
    ) -> impl Iterator<Item = (ObjectType, &'a str, bool)> + Clone + '_ {
        self.owners.iter().filter(move |r| r.uid == owner).map(|r| (r.ty, r.name, r.blocks()))
    }
}

/// `text` as a decimal `u64`, 0 if it is not one: `text.parse().unwrap_or(0)`, with the common
/// case (up to 19 ASCII digits, which cannot overflow) done without the library's sign and
/// overflow handling, which cost as much as the rest of the event's prepare step, its UIDs
/// aside (`scripts/bench-instructions`). Everything else, a leading `+` included, takes the
/// library.
fn resource_version_number(text: &str) -> u64 {
    let bytes = text.as_bytes();
    // 10^19 - 1 < 2^64: no run of 19 digits overflows.
    if bytes.is_empty() || bytes.len() > 19 {
        return text.parse().unwrap_or(0);
    }
    let mut value = 0u64;
    for &b in bytes {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            return text.parse().unwrap_or(0);
        }
        value = value * 10 + u64::from(digit);
    }
    value
}

/// A batch's parsed events where phase zero left them: one run per ingest thread, each a
/// contiguous chunk of the batch (`None` for an event that did not parse). Phase zero's runs
/// are read in place rather than copied into one list, a copy the threads would wait for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PreparedBatch<'r, 'e> {
    runs: &'r [&'r [Option<Prepared<'e>>]],
    /// Events per run (all runs but the last are full).
    chunk: usize,
}

impl<'r, 'e> PreparedBatch<'r, 'e> {
    /// The batch whose events `seq` live in `runs[seq / chunk][seq % chunk]`.
    pub(crate) fn new(runs: &'r [&'r [Option<Prepared<'e>>]], chunk: usize) -> Self {
        PreparedBatch { runs, chunk: chunk.max(1) }
    }

    /// The parsed event at batch position `seq`; `None` if it did not parse.
    ///
    /// # Panics
    ///
    /// If `seq` is past the batch.
    pub(crate) fn get(&self, seq: u32) -> Option<&'r Prepared<'e>> {
        let seq = seq as usize;
        self.runs[seq / self.chunk][seq % self.chunk].as_ref()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::resource_version_number;

    fn library(text: &str) -> u64 {
        text.parse().unwrap_or(0)
    }

    #[test]
    fn resource_versions_parse_as_the_library_parses_them() {
        let max = u64::MAX.to_string();
        let over = "18446744073709551616";
        for text in [
            "",
            "0",
            "7",
            "1000001",
            "0000000000000000000",
            "9999999999999999999",
            &max,
            over,
            "99999999999999999999",
            "00000000000000000000001",
            "+1",
            "+",
            "-1",
            " 1",
            "1 ",
            "1a",
            "a1",
            "١",
            "1/",
            ":1",
            "12345678901234567890123",
        ] {
            assert_eq!(resource_version_number(text), library(text), "{text:?}");
        }
        assert_eq!(resource_version_number(&max), u64::MAX);
        assert_eq!(resource_version_number(over), 0);
    }

    proptest! {
        #[test]
        fn any_text_parses_as_the_library_parses_it(text in "[0-9+/:a -]{0,24}") {
            prop_assert_eq!(resource_version_number(&text), library(&text));
        }

        #[test]
        fn any_number_with_leading_zeros_parses_as_the_library_parses_it(n: u64, zeros in 0usize..4) {
            let text = format!("{}{n}", "0".repeat(zeros));
            prop_assert_eq!(resource_version_number(&text), library(&text));
        }
    }
}
