//! What the store's API takes and returns: changes, options, selectors, pages, watch starts.

use super::*;

/// What a change did to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// Created (`ADDED`).
    Added,
    /// Updated (`MODIFIED`).
    Modified,
    /// Removed (`DELETED`); the object is its last state at the deletion's resourceVersion.
    Deleted,
}

impl ChangeKind {
    /// The watch event type.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "ADDED",
            ChangeKind::Modified => "MODIFIED",
            ChangeKind::Deleted => "DELETED",
        }
    }
}

/// An object as stored: its JSON without `apiVersion` and `kind` (what it derefs to), and its
/// metadata as an encoded protobuf `PartialObjectMetadata`, made on first use and kept with
/// this version of the object (a new version is a new `StoredObject`). A real API server holds
/// its objects decoded and only encodes them for a list; converting the JSON again for every
/// list made the emulator's share of the two cores a warm-up benchmark runs on larger than
/// kube-gc's.
pub struct StoredObject {
    json: Box<[u8]>,
    metadata_protobuf: std::sync::OnceLock<Box<[u8]>>,
}

impl StoredObject {
    /// An object stored as `json`.
    pub fn new(json: Vec<u8>) -> StoredObject {
        StoredObject { json: json.into(), metadata_protobuf: std::sync::OnceLock::new() }
    }

    /// The object's metadata as protobuf: `encode(json)` the first time, kept after.
    pub fn metadata_protobuf(&self, encode: impl FnOnce(&[u8]) -> Vec<u8>) -> &[u8] {
        self.metadata_protobuf.get_or_init(|| encode(&self.json).into())
    }
}

impl std::ops::Deref for StoredObject {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.json
    }
}

impl std::fmt::Debug for StoredObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoredObject({})", String::from_utf8_lossy(&self.json))
    }
}

/// One write, as the watch history keeps it.
#[derive(Debug)]
pub struct Change {
    /// The resourceVersion the write produced.
    pub rv: u64,
    /// The storage table (resource) it happened in.
    pub(crate) table: usize,
    /// The object's namespace (empty for cluster-scoped objects).
    pub namespace: Box<str>,
    /// What happened.
    pub kind: ChangeKind,
    /// The object, in stored form (no `apiVersion` / `kind`).
    pub object: Arc<StoredObject>,
}

/// Knobs of the store.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// How many changes the watch history keeps; a watch from an older resourceVersion gets
    /// 410 Expired.
    pub history: usize,
    /// Capacity of the live change channel; a watcher that falls this far behind is ended with
    /// 410 Expired (the real server ends slow watchers too).
    pub channel: usize,
    /// Seed of the uid and generated-name generator (deterministic by default).
    pub seed: u64,
}

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig { history: 10_000, channel: 65_536, seed: 0x5eed }
    }
}

/// A resolved resource: its definition and its table.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The resource as served at the requested version.
    pub def: Arc<ResourceDef>,
    pub(crate) table: usize,
}

/// `DeleteOptions` (body) merged with the query's `propagationPolicy` / `orphanDependents`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteOptions {
    /// `Orphan`, `Background` or `Foreground`.
    pub propagation_policy: Option<String>,
    /// Deprecated: `true` orphans, `false` does not (and must not be combined with a policy).
    pub orphan_dependents: Option<bool>,
    /// `preconditions.uid` / `preconditions.resourceVersion`.
    pub preconditions: Option<Preconditions>,
    /// Accepted and ignored: deletion is never graceful here.
    pub grace_period_seconds: Option<i64>,
    /// `dryRun` (`["All"]`): refused with 400, simcluster has no dry run.
    #[serde(default)]
    pub dry_run: Vec<String>,
}

/// Delete preconditions (409 on mismatch).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    /// The uid the object must have.
    pub uid: Option<String>,
    /// The resourceVersion the object must be at.
    pub resource_version: Option<String>,
}

impl DeleteOptions {
    pub(super) fn policy(&self) -> Result<Option<PropagationPolicy>> {
        let policy = match self.propagation_policy.as_deref() {
            None => None,
            Some("Orphan") => Some(PropagationPolicy::Orphan),
            Some("Background") => Some(PropagationPolicy::Background),
            Some("Foreground") => Some(PropagationPolicy::Foreground),
            Some(other) => {
                return Err(Error::Invalid(format!(
                    "DeleteOptions.propagationPolicy: Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
                )));
            }
        };
        match (self.orphan_dependents, policy) {
            (Some(_), Some(_)) => Err(Error::Invalid(
                "DeleteOptions.propagationPolicy: Invalid value: orphanDependents and deletionPropagation cannot be both set".into(),
            )),
            (Some(true), None) => Ok(Some(PropagationPolicy::Orphan)),
            (Some(false), None) => Ok(Some(PropagationPolicy::Background)),
            (None, policy) => Ok(policy),
        }
    }
}

/// A label or field selector: `key=value`, `key==value`, `key!=value`, `key`, `!key`, joined
/// by commas (set-based `in` / `notin` are not supported: 400).
#[derive(Clone, Debug, Default)]
pub struct Selector {
    terms: Vec<(String, SelectorOp)>,
}

#[derive(Clone, Debug)]
enum SelectorOp {
    Eq(String),
    Ne(String),
    Exists,
    Absent,
}

impl Selector {
    /// Parses a selector; an empty string selects everything.
    pub fn parse(text: &str) -> Result<Selector> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let parsed = if let Some((k, v)) = term.split_once("!=") {
                (k, SelectorOp::Ne(v.trim().to_owned()))
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (k, SelectorOp::Eq(v.trim().to_owned()))
            } else if let Some(k) = term.strip_prefix('!') {
                (k, SelectorOp::Absent)
            } else if term.contains(' ') || term.contains('(') {
                return Err(Error::BadRequest(format!("unsupported selector {term:?}")));
            } else {
                (term, SelectorOp::Exists)
            };
            terms.push((parsed.0.trim().to_owned(), parsed.1));
        }
        Ok(Selector { terms })
    }

    pub(super) fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    pub(super) fn matches(&self, lookup: impl Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|(key, op)| {
            let value = lookup(key);
            match op {
                SelectorOp::Eq(v) => value.as_deref() == Some(v.as_str()),
                SelectorOp::Ne(v) => value.as_deref() != Some(v.as_str()),
                SelectorOp::Exists => value.is_some(),
                SelectorOp::Absent => value.is_none(),
            }
        })
    }
}

/// What to list.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// The namespace, or `None` for all (and for cluster-scoped resources).
    pub namespace: Option<String>,
    /// `limit` (0: no limit).
    pub limit: usize,
    /// `continue`, from a previous page.
    pub continue_token: Option<String>,
    /// `labelSelector`.
    pub labels: Selector,
    /// `fieldSelector` (`metadata.name`, `metadata.namespace`).
    pub fields: Selector,
}

/// One page of a list.
#[derive(Debug)]
pub struct ListPage {
    /// The objects, in stored form.
    pub items: Vec<Arc<StoredObject>>,
    /// The list's resourceVersion (that of its first page).
    pub resource_version: u64,
    /// The token for the next page, if any.
    pub continue_token: Option<String>,
}

/// Where a watch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchFrom {
    /// `resourceVersion` unset or `0`: every current object as ADDED, then changes.
    Current,
    /// After this resourceVersion: changes only (410 if older than the history).
    After(u64),
}

/// A started watch: the changes to send first, then the live channel.
#[derive(Debug)]
pub struct WatchStart {
    /// Changes (or synthetic ADDED events) to deliver before the live ones.
    pub backlog: Vec<Arc<Change>>,
    /// Live changes of the whole store (filter by [`Resolved`] and namespace).
    pub live: broadcast::Receiver<Arc<Change>>,
    /// The store's resourceVersion when the watch started.
    pub resource_version: u64,
}

pub(super) fn selected(obj: &[u8], labels: &Selector, fields: &Selector) -> bool {
    if labels.is_empty() && fields.is_empty() {
        return true;
    }
    let Ok(v) = serde_json::from_slice::<Value>(obj) else { return false };
    let meta = &v["metadata"];
    labels.matches(|k| meta["labels"][k].as_str().map(str::to_owned))
        && fields.matches(|k| match k {
            "metadata.name" => meta["name"].as_str().map(str::to_owned),
            "metadata.namespace" => Some(meta["namespace"].as_str().unwrap_or_default().to_owned()),
            _ => None,
        })
}
