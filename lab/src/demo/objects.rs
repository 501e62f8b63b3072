//! The demo's view of the preloaded objects, read straight from the store: metadata of stored
//! bytes, the resources, counts by resource, and the garbage Pods.

use super::*;

/// The stored metadata the demo reads.
#[derive(Deserialize)]
pub(super) struct Stored {
    pub(super) metadata: StoredMeta,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StoredMeta {
    pub(super) name: String,
    #[serde(default)]
    pub(super) namespace: Option<String>,
    #[serde(default)]
    pub(super) uid: String,
    #[serde(default)]
    pub(super) owner_references: Vec<StoredOwner>,
}

#[derive(Deserialize)]
pub(super) struct StoredOwner {
    pub(super) uid: String,
}

pub(super) fn meta(bytes: &[u8]) -> anyhow::Result<StoredMeta> {
    Ok(serde_json::from_slice::<Stored>(bytes)?.metadata)
}

/// Resolved handles of the resources the demo reads in the store.
pub(super) struct Res {
    pub(super) deployments: Resolved,
    pub(super) replicasets: Resolved,
    pub(super) pods: Resolved,
}

impl Res {
    pub(super) fn new(store: &Store) -> anyhow::Result<Res> {
        Ok(Res {
            deployments: store.resolve_api_version("apps/v1", "deployments")?,
            replicasets: store.resolve_api_version("apps/v1", "replicasets")?,
            pods: store.resolve_api_version("v1", "pods")?,
        })
    }
}

/// Every stored object's count, by `resource_key` (`pods`, `replicasets.apps`), the empty left
/// out.
pub(super) fn counts(store: &Store) -> anyhow::Result<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for def in store.resources() {
        let r = store.resolve(&def.group, &def.version, &def.plural)?;
        let n = store.list(&r, &ListOptions::default())?.items.len() as u64;
        if n > 0 {
            out.insert(def.group_resource(), n);
        }
    }
    Ok(out)
}

/// The Pods whose owner (a ReplicaSet) is not stored: WORKLOAD.md's V virtual-owner Pods.
pub(super) fn garbage_pods(store: &Store, res: &Res) -> anyhow::Result<Vec<(String, String)>> {
    let rs_uids: HashSet<String> = store
        .list(&res.replicasets, &ListOptions::default())?
        .items
        .iter()
        .map(|b| meta(b).map(|m| m.uid))
        .collect::<anyhow::Result<_>>()?;
    let mut out = Vec::new();
    for b in store.list(&res.pods, &ListOptions::default())?.items {
        let m = meta(&b)?;
        if !m.owner_references.is_empty()
            && m.owner_references.iter().all(|o| !rs_uids.contains(&o.uid))
        {
            out.push((m.namespace.unwrap_or_default(), m.name));
        }
    }
    Ok(out)
}
