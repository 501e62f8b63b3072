//! Puts WORKLOAD.md's objects into a real kube-apiserver, as real objects created through the
//! API, and puts back what a run deleted.
//!
//! The bench crate's generator fixes every name, namespace and owner relation; the server
//! assigns the UIDs, so owners are created before their dependents (Deployments, then
//! ReplicaSets, then Pods and ConfigMaps) and each generated owner UID is mapped to the
//! server's. The Pods whose ReplicaSet is never created keep the generated UID in their
//! ownerReference: an owner that never existed, the workload's garbage.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{Api, ListParams, PostParams};
use kube::{Client, Resource};
use kube_gc_bench::workload::{Order, Workload, WorkloadConfig};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Label on the Pods whose owner never existed.
pub const GARBAGE_LABEL: &str = "kube-gc-bench/garbage";
/// Label on every object of the families the cascade benchmark deletes.
pub const CASCADE_LABEL: &str = "kube-gc-bench/cascade";
/// Name of the ConfigMap (in `default`) that records a finished load.
const MARKER: &str = "kube-gc-bench-loaded";
/// Requests in flight while loading (the apiserver's default mutating limit is 200).
const CONCURRENCY: usize = 64;

/// One Deployment → ReplicaSet → Pods family.
#[derive(Clone, Debug)]
pub struct Family {
    namespace: String,
    deployment: String,
    replica_set: String,
    pods: Vec<String>,
    /// Whether the cascade benchmark deletes it.
    cascade: bool,
}

/// A Pod whose ReplicaSet never existed.
#[derive(Clone, Debug)]
pub struct GarbagePod {
    namespace: String,
    name: String,
    owner_name: String,
    owner_uid: String,
}

/// The workload, as names and relations.
#[derive(Debug)]
pub struct Plan {
    namespaces: Vec<String>,
    families: Vec<Family>,
    garbage: Vec<GarbagePod>,
    config_maps: Vec<(String, String)>,
}

/// Objects of each kind a loaded cluster holds (the workload's, not the system's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    pub deployments: usize,
    pub replica_sets: usize,
    pub pods: usize,
    pub config_maps: usize,
}

impl Plan {
    /// WORKLOAD.md's `objects` objects (seed 1, 1000 namespaces); the first `cascade` families
    /// are labelled for the cascade benchmark.
    pub fn new(objects: usize, cascade: usize) -> anyhow::Result<Plan> {
        let workload = Workload::generate(&WorkloadConfig::new(objects, Order::OwnersFirst));
        let mut namespaces = BTreeSet::new();
        let mut families: Vec<Family> = Vec::new();
        let mut family_of_deployment: HashMap<&str, usize> = HashMap::new();
        let mut family_of_replica_set: HashMap<&str, usize> = HashMap::new();
        let mut garbage = Vec::new();
        let mut config_maps = Vec::new();
        for event in workload.events() {
            let o = &event.object;
            namespaces.insert(o.namespace.clone());
            match event.object_type.kind() {
                "Deployment" => {
                    family_of_deployment.insert(&o.uid, families.len());
                    families.push(Family {
                        namespace: o.namespace.clone(),
                        deployment: o.name.clone(),
                        replica_set: String::new(),
                        pods: Vec::new(),
                        cascade: families.len() < cascade,
                    });
                }
                "ReplicaSet" => {
                    let owner = o.owner_references.first().context("a ReplicaSet without owner")?;
                    let f = *family_of_deployment.get(owner.uid.as_str()).context("orphan RS")?;
                    families[f].replica_set = o.name.clone();
                    family_of_replica_set.insert(&o.uid, f);
                }
                "Pod" => {
                    let owner = o.owner_references.first().context("a Pod without owner")?;
                    match family_of_replica_set.get(owner.uid.as_str()) {
                        Some(&f) => families[f].pods.push(o.name.clone()),
                        None => garbage.push(GarbagePod {
                            namespace: o.namespace.clone(),
                            name: o.name.clone(),
                            owner_name: owner.name.clone(),
                            owner_uid: owner.uid.clone(),
                        }),
                    }
                }
                "ConfigMap" => config_maps.push((o.namespace.clone(), o.name.clone())),
                other => bail!("unexpected kind {other} in the workload"),
            }
        }
        if cascade > families.len() {
            bail!("--cascade {cascade}: the workload has only {} families", families.len());
        }
        Ok(Plan { namespaces: namespaces.into_iter().collect(), families, garbage, config_maps })
    }

    /// Objects the workload puts in the cluster.
    pub fn objects(&self) -> usize {
        self.counts().deployments
            + self.counts().replica_sets
            + self.counts().pods
            + self.counts().config_maps
    }

    /// What a fully loaded cluster holds.
    pub fn counts(&self) -> Counts {
        Counts {
            deployments: self.families.len(),
            replica_sets: self.families.len(),
            pods: self.families.iter().map(|f| f.pods.len()).sum::<usize>() + self.garbage.len(),
            config_maps: self.config_maps.len(),
        }
    }

    /// The Pods whose owner never existed.
    pub fn garbage_pods(&self) -> usize {
        self.garbage.len()
    }

    /// Families the cascade benchmark deletes, and their ReplicaSets + Pods.
    pub fn cascade_families(&self) -> (usize, usize) {
        let fams: Vec<_> = self.families.iter().filter(|f| f.cascade).collect();
        (fams.len(), fams.iter().map(|f| 1 + f.pods.len()).sum())
    }

    /// `(namespace, name)` of the cascade families' Deployments.
    pub fn cascade_deployments(&self) -> Vec<(String, String)> {
        self.families
            .iter()
            .filter(|f| f.cascade)
            .map(|f| (f.namespace.clone(), f.deployment.clone()))
            .collect()
    }
}

/// Loads `plan` into the cluster unless a previous load of the same size is recorded there.
pub async fn load(client: &Client, plan: &Plan) -> anyhow::Result<()> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    if let Some(marker) = cms.get_opt(MARKER).await? {
        let recorded = marker.data.and_then(|d| d.get("objects").cloned());
        if recorded.as_deref() == Some(plan.objects().to_string().as_str()) {
            eprintln!("[load] the cluster already holds the workload ({recorded:?} objects)");
            return Ok(());
        }
        bail!("the cluster holds another workload ({recorded:?} objects); use a fresh testenv");
    }
    let t0 = Instant::now();
    let namespaces = plan.namespaces.iter().map(|ns| {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        (Api::<Namespace>::all(client.clone()), body)
    });
    create_all::<Namespace>(namespaces, false, "namespaces").await?;
    create_families(client, plan.families.iter()).await?;
    let config_maps = plan.config_maps.iter().map(|(ns, name)| {
        let body = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns},
            "data": {"key": "value"},
        });
        (Api::namespaced(client.clone(), ns), body)
    });
    create_all::<ConfigMap>(config_maps, false, "configmaps").await?;
    restore_garbage(client, plan).await?;
    let marker = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": MARKER, "namespace": "default"},
        "data": {"objects": plan.objects().to_string()},
    });
    cms.create(&PostParams::default(), &serde_json::from_value(marker)?).await?;
    eprintln!("[load] {} objects created in {:.1} s", plan.objects(), t0.elapsed().as_secs_f64());
    Ok(())
}

/// Creates the garbage Pods that are missing (a run's collector deleted them).
pub async fn restore_garbage(client: &Client, plan: &Plan) -> anyhow::Result<usize> {
    let pods: Api<Pod> = Api::all(client.clone());
    let present: BTreeSet<(String, String)> = pods
        .list_metadata(&ListParams::default().labels(GARBAGE_LABEL))
        .await?
        .items
        .into_iter()
        .map(|p| (p.metadata.namespace.unwrap_or_default(), p.metadata.name.unwrap_or_default()))
        .collect();
    let missing: Vec<_> = plan
        .garbage
        .iter()
        .filter(|g| !present.contains(&(g.namespace.clone(), g.name.clone())))
        .map(|g| {
            let owner = owner_ref("ReplicaSet", &g.owner_name, &g.owner_uid);
            (
                Api::namespaced(client.clone(), &g.namespace),
                pod(&g.namespace, &g.name, owner, GARBAGE_LABEL),
            )
        })
        .collect();
    let n = missing.len();
    create_all::<Pod>(missing, false, "garbage pods").await?;
    Ok(n)
}

/// Creates again the cascade families (all of them: the cascade deleted them whole). Waits
/// first until none of their objects is left, so that no name is taken.
pub async fn restore_cascade(client: &Client, plan: &Plan) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(300);
    let selector = ListParams::default().labels(CASCADE_LABEL);
    loop {
        let left = Api::<Pod>::all(client.clone()).list_metadata(&selector).await?.items.len()
            + Api::<ReplicaSet>::all(client.clone()).list_metadata(&selector).await?.items.len()
            + Api::<Deployment>::all(client.clone()).list_metadata(&selector).await?.items.len();
        if left == 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!("{left} objects of the cascade families are still there after 300 s");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    create_families(client, plan.families.iter().filter(|f| f.cascade)).await
}

/// Creates Deployments, then their ReplicaSets, then their Pods, owners' UIDs as the server
/// assigned them.
async fn create_families<'a>(
    client: &Client,
    families: impl Iterator<Item = &'a Family> + Clone,
) -> anyhow::Result<()> {
    let deployments = families.clone().map(|f| {
        let labels = family_labels(f);
        let body = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f.deployment, "namespace": f.namespace, "labels": labels},
            "spec": {
                "replicas": f.pods.len(),
                "selector": {"matchLabels": {"app": f.deployment}},
                "template": pod_template(&f.deployment),
            },
        });
        (Api::namespaced(client.clone(), &f.namespace), body)
    });
    let deployment_uids = create_all::<Deployment>(deployments, true, "deployments").await?;
    let replica_sets = families.clone().zip(&deployment_uids).map(|(f, uid)| {
        let labels = family_labels(f);
        let body = json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {
                "name": f.replica_set, "namespace": f.namespace, "labels": labels,
                "ownerReferences": [owner_ref("Deployment", &f.deployment, uid)],
            },
            "spec": {
                "replicas": f.pods.len(),
                "selector": {"matchLabels": {"app": f.deployment}},
                "template": pod_template(&f.deployment),
            },
        });
        (Api::namespaced(client.clone(), &f.namespace), body)
    });
    let rs_uids = create_all::<ReplicaSet>(replica_sets, true, "replicasets").await?;
    let pods = families.zip(&rs_uids).flat_map(|(f, uid)| {
        f.pods.iter().map(move |name| {
            let owner = owner_ref("ReplicaSet", &f.replica_set, uid);
            let label = if f.cascade { CASCADE_LABEL } else { "kube-gc-bench/family" };
            (Api::namespaced(client.clone(), &f.namespace), pod(&f.namespace, name, owner, label))
        })
    });
    create_all::<Pod>(pods, false, "pods").await?;
    Ok(())
}

fn family_labels(f: &Family) -> Value {
    if f.cascade { json!({ CASCADE_LABEL: "true" }) } else { json!({}) }
}

fn owner_ref(kind: &str, name: &str, uid: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid,
        "controller": true, "blockOwnerDeletion": true,
    })
}

fn pod_template(app: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]},
    })
}

fn pod(namespace: &str, name: &str, owner: Value, label: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": namespace, "labels": { label: "true" },
            "ownerReferences": [owner],
        },
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]},
    })
}

/// Creates every `(api, body)` with [`CONCURRENCY`] requests in flight, retrying transient
/// failures; returns the server's UIDs in input order when `want_uids` is set.
async fn create_all<K>(
    items: impl IntoIterator<Item = (Api<K>, Value)>,
    want_uids: bool,
    what: &str,
) -> anyhow::Result<Vec<String>>
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let t0 = Instant::now();
    let created: Vec<(usize, String)> = stream::iter(items.into_iter().enumerate())
        .map(|(i, (api, body))| async move { create_one(api, body).await.map(|u| (i, u)) })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    if !created.is_empty() {
        eprintln!("[load] {} {what} in {:.1} s", created.len(), t0.elapsed().as_secs_f64());
    }
    if !want_uids {
        return Ok(Vec::new());
    }
    let mut uids = vec![String::new(); created.len()];
    for (i, uid) in created {
        uids[i] = uid;
    }
    Ok(uids)
}

/// Creates one object (namespaced, or a Namespace); an object already there counts as created
/// (a retried request may have succeeded). Returns its UID.
async fn create_one<K>(api: Api<K>, body: Value) -> anyhow::Result<String>
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = body["metadata"]["name"].as_str().context("no name")?.to_owned();
    let object: K = serde_json::from_value(body)?;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let result = match api.create(&PostParams::default(), &object).await {
            Err(kube::Error::Api(s)) if s.code == 409 => api.get(&name).await,
            other => other,
        };
        match result {
            Ok(o) => return Ok(o.meta().uid.clone().unwrap_or_default()),
            Err(e) if attempt < 8 => {
                tokio::time::sleep(Duration::from_millis(100 << attempt.min(5))).await;
                if attempt >= 3 {
                    eprintln!("[load] retrying {name}: {e}");
                }
            }
            Err(e) => return Err(e).with_context(|| format!("create {name}")),
        }
    }
}
