//! The resources a simcluster serves: the builtin set, resources declared by a test or the CLI,
//! and those CustomResourceDefinitions add at run time.
//!
//! A resource is served at one group/version; several versions of one group/resource (a CRD
//! serving `v1` and `v1beta1`) share one storage table, as the real server stores one object
//! whatever version it is read at.

use std::sync::Arc;

use serde_json::Value;

use crate::error::{Error, Result};

/// One served resource (upstream's `APIResource` plus what the store needs to know about it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceDef {
    /// API group (`""` for the core group).
    pub group: String,
    /// Version (`v1`).
    pub version: String,
    /// Plural resource name (`pods`), the URL segment.
    pub plural: String,
    /// Singular name (`pod`).
    pub singular: String,
    /// Kind (`Pod`).
    pub kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Whether a delete without a propagation policy orphans dependents (GC-SPEC §5.6:
    /// `DefaultGarbageCollectionPolicy` = `OrphanDependents`, e.g. core/v1
    /// ReplicationController).
    pub default_orphan: bool,
    /// Whether this is a custom resource (a CRD's): strategic merge patch is refused with 415,
    /// as the real server does.
    pub custom: bool,
    /// Short names listed by discovery.
    pub short_names: Vec<String>,
}

impl ResourceDef {
    /// A namespaced or cluster-scoped resource at `api_version` (`v1`, `apps/v1`), with the
    /// singular name derived from `kind`.
    pub fn new(api_version: &str, plural: &str, kind: &str, namespaced: bool) -> ResourceDef {
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g.to_owned(), v.to_owned()),
            None => (String::new(), api_version.to_owned()),
        };
        ResourceDef {
            group,
            version,
            plural: plural.to_owned(),
            singular: kind.to_ascii_lowercase(),
            kind: kind.to_owned(),
            namespaced,
            default_orphan: false,
            custom: false,
            short_names: Vec::new(),
        }
    }

    /// Marks the resource as a legacy default-orphan kind.
    #[must_use]
    pub fn default_orphan(mut self) -> ResourceDef {
        self.default_orphan = true;
        self
    }

    /// Marks the resource as a custom resource (415 on strategic merge patch).
    #[must_use]
    pub fn custom(mut self) -> ResourceDef {
        self.custom = true;
        self
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural.group`, or `plural` for the core group (the apiserver's spelling in messages).
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Parses the CLI spelling `apiVersion,plural,Kind,Namespaced|Cluster[,orphan][,custom]`.
    pub fn parse(spec: &str) -> Result<ResourceDef> {
        let parts: Vec<&str> = spec.split(',').map(str::trim).collect();
        let bad = || {
            Error::BadRequest(format!(
                "invalid resource {spec:?}: expected apiVersion,plural,Kind,Namespaced|Cluster[,orphan][,custom]"
            ))
        };
        if parts.len() < 4 || parts[..4].iter().any(|p| p.is_empty()) {
            return Err(bad());
        }
        let namespaced = match parts[3] {
            "Namespaced" | "namespaced" => true,
            "Cluster" | "cluster" => false,
            _ => return Err(bad()),
        };
        let mut def = ResourceDef::new(parts[0], parts[1], parts[2], namespaced);
        for flag in &parts[4..] {
            match *flag {
                "orphan" => def.default_orphan = true,
                "custom" => def.custom = true,
                _ => return Err(bad()),
            }
        }
        Ok(def)
    }
}

/// The resources every simcluster serves unless told otherwise.
///
/// ReplicationController is the one legacy default-orphan kind still served at v1 (the
/// extensions/v1beta1 and apps/v1beta1/v1beta2 workload kinds, also default-orphan, are gone
/// since 1.16).
pub fn builtin() -> Vec<ResourceDef> {
    let short = |mut d: ResourceDef, names: &[&str]| {
        d.short_names = names.iter().map(|s| (*s).to_owned()).collect();
        d
    };
    vec![
        short(ResourceDef::new("v1", "namespaces", "Namespace", false), &["ns"]),
        short(ResourceDef::new("v1", "nodes", "Node", false), &["no"]),
        short(ResourceDef::new("v1", "pods", "Pod", true), &["po"]),
        short(ResourceDef::new("v1", "configmaps", "ConfigMap", true), &["cm"]),
        ResourceDef::new("v1", "secrets", "Secret", true),
        short(ResourceDef::new("v1", "services", "Service", true), &["svc"]),
        short(ResourceDef::new("v1", "events", "Event", true), &["ev"]),
        short(
            ResourceDef::new("v1", "replicationcontrollers", "ReplicationController", true)
                .default_orphan(),
            &["rc"],
        ),
        short(ResourceDef::new("apps/v1", "deployments", "Deployment", true), &["deploy"]),
        short(ResourceDef::new("apps/v1", "replicasets", "ReplicaSet", true), &["rs"]),
        short(ResourceDef::new("apps/v1", "statefulsets", "StatefulSet", true), &["sts"]),
        short(ResourceDef::new("apps/v1", "daemonsets", "DaemonSet", true), &["ds"]),
        // batch/v1 Jobs orphan by default, for backwards compatibility (kube-apiserver's
        // jobStrategy.DefaultGarbageCollectionPolicy), as ReplicationControllers do.
        ResourceDef::new("batch/v1", "jobs", "Job", true).default_orphan(),
        ResourceDef::new("rbac.authorization.k8s.io/v1", "roles", "Role", true),
        ResourceDef::new("coordination.k8s.io/v1", "leases", "Lease", true),
        short(
            ResourceDef::new(
                "apiextensions.k8s.io/v1",
                "customresourcedefinitions",
                "CustomResourceDefinition",
                false,
            ),
            &["crd", "crds"],
        ),
    ]
}

/// Whether `def` is the CRD resource itself.
pub(crate) fn is_crd_resource(def: &ResourceDef) -> bool {
    def.group == "apiextensions.k8s.io" && def.plural == "customresourcedefinitions"
}

/// The resources a CustomResourceDefinition object declares: one per served version.
pub(crate) fn from_crd(crd: &Value) -> Result<Vec<ResourceDef>> {
    let invalid = |what: &str| Error::Invalid(format!("CustomResourceDefinition: {what}"));
    let spec = crd.get("spec").ok_or_else(|| invalid("spec is required"))?;
    let text = |v: Option<&Value>, what: &str| -> Result<String> {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| invalid(&format!("{what} is required")))
    };
    let group = text(spec.get("group"), "spec.group")?;
    let names = spec.get("names").ok_or_else(|| invalid("spec.names is required"))?;
    let plural = text(names.get("plural"), "spec.names.plural")?;
    let kind = text(names.get("kind"), "spec.names.kind")?;
    let singular = names
        .get("singular")
        .and_then(Value::as_str)
        .map_or_else(|| kind.to_lowercase(), str::to_owned);
    let namespaced = match spec.get("scope").and_then(Value::as_str) {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        _ => return Err(invalid("spec.scope must be Namespaced or Cluster")),
    };
    let expected = crd.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    if expected != format!("{plural}.{group}") {
        return Err(invalid(&format!(
            "metadata.name must be spec.names.plural+\".\"+spec.group: {expected:?}"
        )));
    }
    let short_names: Vec<String> = names
        .get("shortNames")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| invalid("spec.versions must have at least one version"))?;
    let mut out = Vec::new();
    for v in versions {
        if v.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let version = text(v.get("name"), "spec.versions[].name")?;
        out.push(ResourceDef {
            group: group.clone(),
            version,
            plural: plural.clone(),
            singular: singular.clone(),
            kind: kind.clone(),
            namespaced,
            default_orphan: false,
            custom: true,
            short_names: short_names.clone(),
        });
    }
    Ok(out)
}

/// Served resources, in registration order, with the storage table each one uses.
#[derive(Debug, Default, Clone)]
pub(crate) struct Registry {
    entries: Vec<(Arc<ResourceDef>, usize)>,
    /// (group, plural) → table, for every table ever handed out (never reused).
    tables: Vec<(String, String)>,
}

impl Registry {
    /// Adds `def` (replacing a resource at the same group/version/plural); returns its table.
    pub(crate) fn add(&mut self, def: ResourceDef) -> usize {
        let table = self.table_for(&def.group, &def.plural);
        self.entries.retain(|(d, _)| {
            !(d.group == def.group && d.version == def.version && d.plural == def.plural)
        });
        self.entries.push((Arc::new(def), table));
        table
    }

    fn table_for(&mut self, group: &str, plural: &str) -> usize {
        let live = self.entries.iter().find(|(d, _)| d.group == group && d.plural == plural);
        if let Some((_, t)) = live {
            return *t;
        }
        self.tables.push((group.to_owned(), plural.to_owned()));
        self.tables.len() - 1
    }

    /// Removes every version of `group`/`plural`; returns the table it used.
    pub(crate) fn remove(&mut self, group: &str, plural: &str) -> Option<usize> {
        let table = self.lookup_any(group, plural).map(|(_, t)| t);
        self.entries.retain(|(d, _)| !(d.group == group && d.plural == plural));
        table
    }

    pub(crate) fn lookup(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<(Arc<ResourceDef>, usize)> {
        self.entries
            .iter()
            .find(|(d, _)| d.group == group && d.version == version && d.plural == plural)
            .cloned()
    }

    fn lookup_any(&self, group: &str, plural: &str) -> Option<(Arc<ResourceDef>, usize)> {
        self.entries.iter().find(|(d, _)| d.group == group && d.plural == plural).cloned()
    }

    /// The number of tables ever handed out.
    pub(crate) fn table_count(&self) -> usize {
        self.tables.len()
    }

    /// Every served resource.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Arc<ResourceDef>> {
        self.entries.iter().map(|(d, _)| d)
    }

    /// Groups (non-core) in first-registration order, each with its versions in order.
    pub(crate) fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for (d, _) in &self.entries {
            if d.group.is_empty() {
                continue;
            }
            match out.iter_mut().find(|(g, _)| *g == d.group) {
                Some((_, versions)) => {
                    if !versions.contains(&d.version) {
                        versions.push(d.version.clone());
                    }
                }
                None => out.push((d.group.clone(), vec![d.version.clone()])),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parse_should_read_the_cli_spelling() {
        let d = ResourceDef::parse("example.com/v1,widgets,Widget,Namespaced,custom").unwrap();
        assert_eq!((d.group.as_str(), d.version.as_str()), ("example.com", "v1"));
        assert!(d.namespaced && d.custom && !d.default_orphan);
        let d = ResourceDef::parse("v1,things,Thing,Cluster,orphan").unwrap();
        assert!(d.group.is_empty() && !d.namespaced && d.default_orphan);
        assert!(ResourceDef::parse("v1,things,Thing").is_err());
        assert!(ResourceDef::parse("v1,things,Thing,Global").is_err());
    }

    #[test]
    fn from_crd_should_declare_one_resource_per_served_version() {
        let crd = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true}, {"name": "v0", "served": false}]}
        });
        let defs = from_crd(&crd).unwrap();
        assert_eq!(defs.len(), 1);
        assert!(defs[0].custom && defs[0].namespaced && defs[0].singular == "widget");
        let bad = json!({"metadata": {"name": "x"}, "spec": crd["spec"].clone()});
        assert!(matches!(from_crd(&bad), Err(Error::Invalid(_))));
    }

    #[test]
    fn registry_should_share_a_table_between_versions() {
        let mut r = Registry::default();
        let a = r.add(ResourceDef::new("example.com/v1", "widgets", "Widget", true));
        let b = r.add(ResourceDef::new("example.com/v2", "widgets", "Widget", true));
        assert_eq!(a, b);
        assert_eq!(r.groups(), vec![("example.com".to_owned(), vec!["v1".into(), "v2".into()])]);
        assert_eq!(r.remove("example.com", "widgets"), Some(a));
        let c = r.add(ResourceDef::new("example.com/v1", "widgets", "Widget", true));
        assert_ne!(a, c, "a recreated resource gets a fresh table");
    }
}
