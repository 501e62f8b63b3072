//! Bulk preload of WORKLOAD.md's `deploy-rs-pods` objects straight into storage (no HTTP, no
//! events): Deployments, ReplicaSets, Pods, ConfigMaps and the Pods whose ReplicaSet is never
//! created.
//!
//! The generator follows WORKLOAD.md's draws exactly (splitmix64 streams, UIDs, name suffixes,
//! namespaces, resourceVersions from 1000001 in object-construction order), so a preloaded
//! cluster holds the very objects the graph benchmarks ingest; the golden rows of WORKLOAD.md
//! are its test. Objects are written as compact JSON (metadata only, as the benchmarks' input)
//! by hand, without building a `serde_json::Value`.

use std::fmt::Write as _;
use std::str::FromStr;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::store::{Store, StoredObject, object_key};
use kube_gc_workload::{SplitMix64, namespace_name};

/// The shapes `--shape` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// WORKLOAD.md: 79% Deployment → ReplicaSet → 8 Pods families, 20% unowned ConfigMaps, 1%
    /// Pods whose owner is never listed.
    DeployRsPods,
}

impl FromStr for Shape {
    type Err = Error;

    fn from_str(s: &str) -> Result<Shape> {
        match s {
            "deploy-rs-pods" => Ok(Shape::DeployRsPods),
            other => {
                Err(Error::BadRequest(format!("unknown shape {other:?} (known: deploy-rs-pods)")))
            }
        }
    }
}

/// What each preloaded object's metadata carries besides what the collector reads
/// (`--preload-metadata`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Metadata {
    /// Only what WORKLOAD.md specifies: name, namespace, uid, resourceVersion, generation,
    /// creationTimestamp, ownerReferences (its golden rows are checked in this form).
    #[default]
    Minimal,
    /// Also what kube-apiserver adds to an object a client created: a label and a
    /// `managedFields` entry shaped as the one v1.20.2 writes for the real-server benchmark's
    /// Pods (about 900 bytes more per object), so the HTTP benchmarks decode what a real
    /// cluster sends.
    KubeApiserver,
}

impl FromStr for Metadata {
    type Err = Error;

    fn from_str(s: &str) -> Result<Metadata> {
        match s {
            "minimal" => Ok(Metadata::Minimal),
            "kube-apiserver" => Ok(Metadata::KubeApiserver),
            other => Err(Error::BadRequest(format!(
                "unknown preload metadata {other:?} (known: minimal, kube-apiserver)"
            ))),
        }
    }
}

/// What to preload.
#[derive(Clone, Debug)]
pub struct Preload {
    /// N, total objects.
    pub objects: usize,
    /// The shape.
    pub shape: Shape,
    /// WORKLOAD.md's seed (default 1).
    pub seed: u64,
    /// Namespaces (default 1000).
    pub namespaces: usize,
    /// `creationTimestamp` of every object.
    pub creation_timestamp: String,
    /// What the metadata carries besides the collector's fields.
    pub metadata: Metadata,
}

impl Preload {
    /// WORKLOAD.md's defaults for `objects` objects.
    pub fn new(objects: usize) -> Preload {
        Preload {
            objects,
            shape: Shape::DeployRsPods,
            seed: 1,
            namespaces: 1000,
            creation_timestamp: crate::time::now_rfc3339(),
            metadata: Metadata::Minimal,
        }
    }
}

/// What a preload stored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preloaded {
    /// Deployments.
    pub deployments: usize,
    /// ReplicaSets.
    pub replicasets: usize,
    /// Pods (family Pods and virtual-owner Pods).
    pub pods: usize,
    /// ConfigMaps.
    pub configmaps: usize,
    /// Bytes of stored JSON, all objects together.
    pub json_bytes: usize,
}

struct Owner<'a> {
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    uid: &'a str,
}

struct Out {
    key: Box<str>,
    json: Arc<StoredObject>,
    rv: u64,
}

#[allow(clippy::too_many_arguments)]
fn object(
    ns: &str,
    name: &str,
    uid: &str,
    rv: u64,
    created: &str,
    metadata: Metadata,
    owner: Option<Owner<'_>>,
) -> Out {
    let mut s = String::with_capacity(320);
    let _ = write!(
        s,
        r#"{{"metadata":{{"name":"{name}","namespace":"{ns}","uid":"{uid}","resourceVersion":"{rv}","generation":1,"creationTimestamp":"{created}""#
    );
    if metadata == Metadata::KubeApiserver {
        s.push_str(r#","labels":{"kube-gc-bench/family":"true"}"#);
    }
    if let Some(o) = &owner {
        let _ = write!(
            s,
            r#","ownerReferences":[{{"apiVersion":"{}","kind":"{}","name":"{}","uid":"{}","controller":true,"blockOwnerDeletion":true}}]"#,
            o.api_version, o.kind, o.name, o.uid
        );
    }
    if metadata == Metadata::KubeApiserver {
        let owned = owner.as_ref().map_or(String::new(), |o| {
            format!(
                r#","f:ownerReferences":{{".":{{}},"k:{{\"uid\":\"{}\"}}":{{".":{{}},"f:apiVersion":{{}},"f:blockOwnerDeletion":{{}},"f:controller":{{}},"f:kind":{{}},"f:name":{{}},"f:uid":{{}}}}}}"#,
                o.uid
            )
        });
        let _ = write!(
            s,
            r#","managedFields":[{{"manager":"kubectl-create","operation":"Update","apiVersion":"v1","time":"{created}","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:labels":{{".":{{}},"f:kube-gc-bench/family":{{}}}}{owned}}},"f:spec":{{"f:containers":{{"k:{{\"name\":\"app\"}}":{{".":{{}},"f:image":{{}},"f:imagePullPolicy":{{}},"f:name":{{}},"f:resources":{{}},"f:terminationMessagePath":{{}},"f:terminationMessagePolicy":{{}}}}}},"f:dnsPolicy":{{}},"f:enableServiceLinks":{{}},"f:restartPolicy":{{}},"f:schedulerName":{{}},"f:securityContext":{{}},"f:terminationGracePeriodSeconds":{{}}}}}}}}]"#
        );
    }
    s.push_str("}}");
    let json = Arc::new(StoredObject::new(s.into_bytes()));
    // Encoded now, as later writes' objects are at their first list: a benchmark's first list
    // must not pay for what its later ones do not.
    crate::http::protobuf::encoded_metadata(&json);
    Out { key: object_key(Some(ns), name), json, rv }
}

/// Generates WORKLOAD.md's objects into `store` (which must serve apps/v1 deployments and
/// replicasets and v1 pods and configmaps). ResourceVersions start at 1000001, or after the
/// store's current one if that is higher.
pub fn preload(store: &Store, p: &Preload) -> Result<Preloaded> {
    let Shape::DeployRsPods = p.shape;
    let n = p.objects;
    let families = n * 79 / 1000;
    let virtual_pods = n / 100;
    let configmaps = n - 10 * families - virtual_pods;
    let namespaces: Vec<String> = (0..p.namespaces.max(1)).map(namespace_name).collect();
    let ns = |i: usize| namespaces[i % namespaces.len()].as_str();
    let mut uids = SplitMix64::new(p.seed);
    let mut names = SplitMix64::new(p.seed.wrapping_add(1));
    let base = 1_000_001u64.max(store.resource_version() + 1);
    let created = p.creation_timestamp.as_str();
    let md = p.metadata;

    let mut deployments = Vec::with_capacity(families);
    let mut replicasets = Vec::with_capacity(families);
    let mut pods = Vec::with_capacity(families * 8 + virtual_pods);
    let mut cms = Vec::with_capacity(configmaps);
    let mut rv = base;
    let mut uid_buf = String::with_capacity(36 * 10);
    for f in 0..families {
        uid_buf.clear();
        for _ in 0..10 {
            uids.push_uid(&mut uid_buf);
        }
        let uid = |i: usize| &uid_buf[i * 36..(i + 1) * 36];
        let d_name = format!("app-{f:08}");
        let mut rs_name = d_name.clone();
        rs_name.push('-');
        names.push_suffix(&mut rs_name, 10);
        let namespace = ns(f);
        deployments.push(object(namespace, &d_name, uid(0), rv, created, md, None));
        let d_owner =
            Owner { api_version: "apps/v1", kind: "Deployment", name: &d_name, uid: uid(0) };
        replicasets.push(object(namespace, &rs_name, uid(1), rv + 1, created, md, Some(d_owner)));
        for p_i in 0..8 {
            let mut pod_name = rs_name.clone();
            pod_name.push('-');
            names.push_suffix(&mut pod_name, 5);
            let owner =
                Owner { api_version: "apps/v1", kind: "ReplicaSet", name: &rs_name, uid: uid(1) };
            pods.push(object(
                namespace,
                &pod_name,
                uid(2 + p_i),
                rv + 2 + p_i as u64,
                created,
                md,
                Some(owner),
            ));
        }
        rv += 10;
    }
    for s in 0..configmaps {
        uid_buf.clear();
        uids.push_uid(&mut uid_buf);
        cms.push(object(ns(s), &format!("cm-{s:08}"), &uid_buf, rv, created, md, None));
        rv += 1;
    }
    for v in 0..virtual_pods {
        let gone_uid = uids.uid();
        uid_buf.clear();
        uids.push_uid(&mut uid_buf);
        let mut gone_name = format!("gone-{v:08}-");
        names.push_suffix(&mut gone_name, 10);
        let mut pod_name = gone_name.clone();
        pod_name.push('-');
        names.push_suffix(&mut pod_name, 5);
        let owner =
            Owner { api_version: "apps/v1", kind: "ReplicaSet", name: &gone_name, uid: &gone_uid };
        pods.push(object(ns(v), &pod_name, &uid_buf, rv, created, md, Some(owner)));
        rv += 1;
    }
    let json_bytes = [&deployments, &replicasets, &pods, &cms]
        .iter()
        .flat_map(|v| v.iter())
        .map(|o| o.json.len())
        .sum();
    let out = Preloaded {
        deployments: deployments.len(),
        replicasets: replicasets.len(),
        pods: pods.len(),
        configmaps: cms.len(),
        json_bytes,
    };
    for (api_version, plural, objs) in [
        ("apps/v1", "deployments", deployments),
        ("apps/v1", "replicasets", replicasets),
        ("v1", "pods", pods),
        ("v1", "configmaps", cms),
    ] {
        let r = store.resolve_api_version(api_version, plural)?;
        store.preload(&r, objs.into_iter().map(|o| (o.key, o.json, o.rv)))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ListOptions, StoreConfig};
    use serde_json::Value;

    fn store() -> Store {
        Store::new(StoreConfig::default(), crate::resources::builtin())
    }

    fn get(store: &Store, api_version: &str, plural: &str, ns: &str, name: &str) -> Value {
        let r = store.resolve_api_version(api_version, plural).unwrap();
        serde_json::from_slice(&store.get(&r, Some(ns), name).unwrap()).unwrap()
    }

    /// With `--preload-metadata kube-apiserver` the objects carry what the real server adds,
    /// shaped as the decode benchmark's fixture, and the collector's fields are unchanged.
    #[test]
    fn kube_apiserver_metadata_adds_a_label_and_managed_fields_only() {
        let (minimal, full) = (store(), store());
        // One creation time for both: two `Preload::new`s a second apart would differ in it.
        let plan = Preload::new(1_000);
        preload(&minimal, &plan).unwrap();
        let p = Preload { metadata: Metadata::KubeApiserver, ..plan };
        let out = preload(&full, &p).unwrap();
        assert!(out.json_bytes > 1_000 * 900, "{} bytes", out.json_bytes);
        let rs = get(&full, "apps/v1", "replicasets", "ns-0000", "app-00000000-gbt48xsf5p");
        let pod_name = "app-00000000-gbt48xsf5p-m8rmz";
        let pod = get(&full, "v1", "pods", "ns-0000", pod_name);
        let meta = &pod["metadata"];
        assert_eq!(meta["labels"]["kube-gc-bench/family"], "true");
        let fields = &meta["managedFields"][0]["fieldsV1"]["f:metadata"]["f:ownerReferences"];
        let key = format!("k:{{\"uid\":\"{}\"}}", rs["metadata"]["uid"].as_str().unwrap());
        assert!(fields[&key].is_object(), "the owner's uid keys its managed fields: {fields}");
        let mut lean = pod.clone();
        let m = lean["metadata"].as_object_mut().unwrap();
        m.remove("labels");
        m.remove("managedFields");
        assert_eq!(lean, get(&minimal, "v1", "pods", "ns-0000", pod_name));
        assert!("bogus".parse::<Metadata>().is_err());
    }

    /// WORKLOAD.md's golden rows (N = 100000, seed 1, owners-first).
    #[test]
    fn preload_should_reproduce_the_workload_golden_rows() {
        let s = store();
        let out = preload(&s, &Preload::new(100_000)).unwrap();
        assert_eq!(
            (out.deployments, out.replicasets, out.pods, out.configmaps),
            (7_900, 7_900, 7_900 * 8 + 1_000, 20_000)
        );
        assert_eq!(s.len(), 100_000);
        assert_eq!(s.resource_version(), 1_100_000);
        let d = get(&s, "apps/v1", "deployments", "ns-0000", "app-00000000");
        assert_eq!(d["metadata"]["uid"], "910a2dec-8902-4cc1-beeb-8da1658eec67");
        assert_eq!(d["metadata"]["resourceVersion"], "1000001");
        let d = get(&s, "apps/v1", "deployments", "ns-0899", "app-00007899");
        assert_eq!(d["metadata"]["uid"], "6dc58edd-5dfe-4794-af95-152bf3551c51");
        assert_eq!(d["metadata"]["resourceVersion"], "1078991");
        let rs = get(&s, "apps/v1", "replicasets", "ns-0000", "app-00000000-gbt48xsf5p");
        assert_eq!(rs["metadata"]["uid"], "f893a2ee-fb32-455e-b1c1-8690ee42c90b");
        assert_eq!(
            rs["metadata"]["ownerReferences"][0]["uid"],
            "910a2dec-8902-4cc1-beeb-8da1658eec67"
        );
        let pod = get(&s, "v1", "pods", "ns-0000", "app-00000000-gbt48xsf5p-m8rmz");
        assert_eq!(pod["metadata"]["uid"], "e099ec6c-d736-4ca5-85e7-bb0f12278575");
        assert_eq!(pod["metadata"]["resourceVersion"], "1000004");
        let cm = get(&s, "v1", "configmaps", "ns-0000", "cm-00000000");
        assert_eq!(cm["metadata"]["uid"], "aa0100f2-72a3-4065-9cea-805e132f9e61");
        assert_eq!(cm["metadata"]["resourceVersion"], "1079001");
        let v = get(&s, "v1", "pods", "ns-0999", "gone-00000999-pgtmcmk6b9-f6dfs");
        assert_eq!(v["metadata"]["uid"], "215118d0-fdc0-487d-a6f4-0f5304efe249");
        assert_eq!(v["metadata"]["resourceVersion"], "1100000");
        assert_eq!(
            v["metadata"]["ownerReferences"][0]["uid"],
            "0291950d-4cee-4f5d-99ca-4e84fd5970bf"
        );
        assert_eq!(v["metadata"]["ownerReferences"][0]["name"], "gone-00000999-pgtmcmk6b9");
        let pods = s.resolve_api_version("v1", "pods").unwrap();
        let page = s
            .list(&pods, &ListOptions { namespace: Some("ns-0001".into()), ..Default::default() })
            .unwrap();
        assert_eq!(
            page.items.len(),
            8 * 8 + 1,
            "8 families of 8 pods and 1 virtual-owner pod in ns-0001"
        );
    }
}
