//! The events the graph ingests: what an informer (or a GC worker's virtual delete) reports.
//!
//! Upstream: `graph_builder.go` (`event`, `eventType`); GC-SPEC.md §1.6 and §2.1.
//!
//! Events carry object metadata as the API decodes it (strings, unvalidated). Ingestion parses
//! and validates it: a malformed object (an empty UID, an owner reference without a UID or a
//! kind) is rejected with an [`IngestError`](crate::IngestError) and counted, and the rest of its
//! batch is applied.

use crate::identity::ObjectType;
use crate::meta::ObjectMeta;

/// What happened to the object.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum EventType {
    /// The informer saw the object for the first time.
    Add,
    /// The informer saw a new version of the object.
    Update,
    /// The object is gone (or, for a virtual event, a worker found it absent).
    Delete,
}

impl EventType {
    /// Upstream's `String()`: `add`, `update`, `delete`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Add => "add",
            EventType::Update => "update",
            EventType::Delete => "delete",
        }
    }
}

/// One change to ingest (upstream's `event`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Event {
    /// add, update or delete.
    pub event_type: EventType,
    /// True for the delete events GC workers generate when a live read finds an object absent;
    /// false for informer events.
    pub is_virtual: bool,
    /// The type of the watched resource that produced the event (the *monitor's* kind, never the
    /// object's TypeMeta); for virtual events, the identity's type.
    pub object_type: ObjectType,
    /// The object (for deletes, its last known state).
    pub object: ObjectMeta,
    /// The previous version of the object, for updates (boxed: rare, and an event without it
    /// is half the size, which a batch of thousands of events moves several times).
    pub old_object: Option<Box<ObjectMeta>>,
}

impl Event {
    /// An informer event.
    pub fn new(event_type: EventType, object_type: ObjectType, object: ObjectMeta) -> Event {
        Event { event_type, is_virtual: false, object_type, object, old_object: None }
    }

    /// An informer update event carrying the previous version.
    pub fn update(object_type: ObjectType, old: ObjectMeta, new: ObjectMeta) -> Event {
        Event {
            event_type: EventType::Update,
            is_virtual: false,
            object_type,
            object: new,
            old_object: Some(Box::new(old)),
        }
    }

    /// The virtual delete event a worker generates for `identity` (upstream's
    /// `enqueueVirtualDeleteEvent`): only type, namespace, name and UID are set.
    pub fn virtual_delete(identity: &crate::ObjectReference) -> Event {
        Event {
            event_type: EventType::Delete,
            is_virtual: true,
            object_type: identity.ty,
            object: ObjectMeta {
                uid: identity.uid.to_string(),
                name: identity.name.clone(),
                namespace: identity.namespace.as_str().to_owned(),
                ..ObjectMeta::default()
            },
            old_object: None,
        }
    }
}
