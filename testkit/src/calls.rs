//! The calls a [`MemoryCluster`](crate::MemoryCluster) records, in the shapes upstream's tests
//! assert: structured ([`Call`]) and as the fake client's action strings ([`Call::action`]), and
//! the fake event recorder's strings ([`fake_recorder_string`]).

use kube_gc_engine::cluster::{DeleteOptions, Patch, Resource, WarningEvent};

/// A request verb, as the fake client names it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Verb {
    /// GET.
    Get,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
    /// LIST (one page).
    List,
}

impl Verb {
    /// `get`, `patch` or `delete`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::List => "list",
        }
    }
}

/// What a recorded call asked for.
#[derive(Clone, PartialEq, Debug)]
pub enum Request {
    /// A GET.
    Get,
    /// A PATCH, with its type and body.
    Patch(Patch),
    /// A DELETE, with its options.
    Delete(DeleteOptions),
    /// One page of a LIST: the continue token it was given and its limit.
    List {
        /// The continue token (`None` for the first page).
        continue_token: Option<String>,
        /// The most objects asked for.
        limit: u32,
    },
}

/// One recorded API call (recorded before it is served, so failed calls are recorded too).
#[derive(Clone, PartialEq, Debug)]
pub struct Call {
    /// The resource addressed.
    pub resource: Resource,
    /// The namespace given (empty for cluster-scoped requests).
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The verb and its payload.
    pub request: Request,
}

impl Call {
    /// The call's verb.
    pub fn verb(&self) -> Verb {
        match self.request {
            Request::Get => Verb::Get,
            Request::Patch(_) => Verb::Patch,
            Request::Delete(_) => Verb::Delete,
            Request::List { .. } => Verb::List,
        }
    }

    /// The patch, for a PATCH.
    pub fn patch(&self) -> Option<&Patch> {
        match &self.request {
            Request::Patch(patch) => Some(patch),
            _ => None,
        }
    }

    /// The options, for a DELETE.
    pub fn delete_options(&self) -> Option<&DeleteOptions> {
        match &self.request {
            Request::Delete(options) => Some(options),
            _ => None,
        }
    }

    /// The fake client's action string upstream's tests assert: `<verb> <gvr>[ ns=<ns>][ name=<name>]`,
    /// e.g. `get /v1, Resource=pods ns=ns1 name=podname1`, `get /v1, Resource=nodes name=nodename`.
    pub fn action(&self) -> String {
        let mut s = format!("{} {}", self.verb().as_str(), self.resource);
        if !self.namespace.is_empty() {
            s.push_str(" ns=");
            s.push_str(&self.namespace);
        }
        if !self.name.is_empty() {
            s.push_str(" name=");
            s.push_str(&self.name);
        }
        s
    }
}

/// Upstream's `FakeRecorder` string of an event (with `IncludeObject`):
/// `Warning <reason> <message> involvedObject{kind=<K>,apiVersion=<V>}`.
pub fn fake_recorder_string(event: &WarningEvent) -> String {
    format!(
        "Warning {} {} involvedObject{{kind={},apiVersion={}}}",
        event.reason,
        event.message,
        event.involved.ty.kind(),
        event.involved.ty.api_version()
    )
}
