//! What a scenario works with: object kinds, created objects, and [`Ctx`] — a scenario's
//! namespace(s), the objects it created under logical names, and its checks of the cluster's
//! state, recorded as normalised snapshots so that two runs (kube-gc, upstream) compare.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

use super::collector::Collector;

/// A resource: how to reach it, and whether it is namespaced.
#[derive(Clone, Debug)]
pub struct Kind {
    /// Group, version, kind, plural.
    pub ar: ApiResource,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
}

impl Kind {
    /// Any resource.
    pub fn new(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Kind {
        let api_version =
            if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
        Kind {
            ar: ApiResource {
                group: group.into(),
                version: version.into(),
                api_version,
                kind: kind.into(),
                plural: plural.into(),
            },
            namespaced,
        }
    }
    pub fn config_map() -> Kind {
        Kind::new("", "v1", "ConfigMap", "configmaps", true)
    }
    pub fn secret() -> Kind {
        Kind::new("", "v1", "Secret", "secrets", true)
    }
    pub fn pod() -> Kind {
        Kind::new("", "v1", "Pod", "pods", true)
    }
    pub fn rc() -> Kind {
        Kind::new("", "v1", "ReplicationController", "replicationcontrollers", true)
    }
    pub fn deployment() -> Kind {
        Kind::new("apps", "v1", "Deployment", "deployments", true)
    }
    pub fn replica_set() -> Kind {
        Kind::new("apps", "v1", "ReplicaSet", "replicasets", true)
    }
    pub fn job() -> Kind {
        Kind::new("batch", "v1", "Job", "jobs", true)
    }
    /// v1.20 serves CronJobs in `batch/v1beta1` only, though the group prefers `v1`.
    pub fn cron_job() -> Kind {
        Kind::new("batch", "v1beta1", "CronJob", "cronjobs", true)
    }
    pub fn cluster_role() -> Kind {
        Kind::new("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false)
    }
    pub fn namespace() -> Kind {
        Kind::new("", "v1", "Namespace", "namespaces", false)
    }
    pub fn crd() -> Kind {
        Kind::new(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
        )
    }
    pub fn api_service() -> Kind {
        Kind::new("apiregistration.k8s.io", "v1", "APIService", "apiservices", false)
    }
}

/// An object a scenario created.
#[derive(Clone, Debug)]
pub struct Obj {
    /// The scenario's name for it (the same in every run).
    pub logical: String,
    /// Its resource.
    pub kind: Kind,
    /// Its namespace (actual name), if namespaced.
    pub ns: Option<String>,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
}

impl Obj {
    /// An ownerReference to this object (no `controller`, no `blockOwnerDeletion`).
    pub fn owner_ref(&self) -> OwnerRef {
        OwnerRef::new(&self.kind.ar.api_version, &self.kind.ar.kind, &self.name, &self.uid)
    }
}

/// An ownerReference under construction.
#[derive(Clone, Debug)]
pub struct OwnerRef(pub Value);

impl OwnerRef {
    /// Any coordinates.
    pub fn new(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerRef {
        OwnerRef(json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": uid}))
    }
    /// Sets `blockOwnerDeletion`.
    #[must_use]
    pub fn block(mut self, b: bool) -> OwnerRef {
        self.0["blockOwnerDeletion"] = json!(b);
        self
    }
    /// Sets `controller`.
    #[must_use]
    pub fn controller(mut self, b: bool) -> OwnerRef {
        self.0["controller"] = json!(b);
        self
    }
    /// Replaces the UID.
    #[must_use]
    pub fn uid(mut self, uid: &str) -> OwnerRef {
        self.0["uid"] = json!(uid);
        self
    }
}

/// `metadata.ownerReferences` of a body.
pub fn owners(refs: &[OwnerRef]) -> Value {
    Value::Array(refs.iter().map(|r| r.0.clone()).collect())
}

/// How to delete.
#[derive(Clone, Copy, Debug)]
pub enum Del {
    /// No options: the resource's default policy.
    Default,
    /// `propagationPolicy: Background`.
    Background,
    /// `propagationPolicy: Foreground`.
    Foreground,
    /// `propagationPolicy: Orphan`.
    Orphan,
    /// The deprecated `orphanDependents` bool.
    OrphanDependents(bool),
}

/// A normalised view of a set of objects: logical name → state, e.g. `gone`, `live`,
/// `deleting fin=[x/y] owners=[ReplicationController/rc!]` (`!` = blockOwnerDeletion).
pub type Snapshot = BTreeMap<String, String>;

/// How long to wait for a state, and how long it must then hold.
#[derive(Clone, Copy, Debug)]
pub struct Wait {
    pub timeout: Duration,
    pub stable: Duration,
}

impl Wait {
    /// 30 s to get there, 2 s holding.
    pub const DEFAULT: Wait =
        Wait { timeout: Duration::from_secs(30), stable: Duration::from_secs(2) };
    /// For states that are "nothing happened": hold 5 s.
    pub const HOLD: Wait =
        Wait { timeout: Duration::from_secs(30), stable: Duration::from_secs(5) };
    /// For custom resources (upstream 1.20 picks up a new CRD within 30 s).
    pub const CRD: Wait = Wait { timeout: Duration::from_secs(90), stable: Duration::from_secs(2) };
}

/// What a scenario's run leaves behind: its names and its record.
#[derive(Clone, Debug, Default)]
pub struct State {
    /// Scenario name.
    pub scenario: &'static str,
    /// This run's suffix for names that must be unique in the cluster (`k1a2b`, `u1a2b`).
    pub suffix: String,
    /// The primary namespace (actual name).
    pub ns: String,
    namespaces: BTreeMap<String, String>,
    objs: BTreeMap<String, Obj>,
    /// Every checked state, in order: (phase, snapshot).
    pub record: Vec<(String, Snapshot)>,
}

impl State {
    /// The last recorded snapshot of objects (not of events).
    pub fn last_objects(&self) -> Option<&Snapshot> {
        self.record.iter().rev().find(|(p, _)| !p.starts_with("events:")).map(|(_, s)| s)
    }
}

/// A scenario's run against one collector.
pub struct Ctx<'a> {
    /// Admin client.
    pub client: Client,
    /// The collector running now.
    pub collector: &'a mut Collector,
    /// Names and record.
    pub st: State,
}

impl std::ops::Deref for Ctx<'_> {
    type Target = State;
    fn deref(&self) -> &State {
        &self.st
    }
}

impl std::ops::DerefMut for Ctx<'_> {
    fn deref_mut(&mut self) -> &mut State {
        &mut self.st
    }
}

fn slug(s: &str, max: usize) -> String {
    let s: String = s.replace('_', "-");
    s[..s.len().min(max)].trim_end_matches('-').to_owned()
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

impl<'a> Ctx<'a> {
    /// A context for `scenario`, creating its primary namespace.
    pub async fn new(
        client: Client,
        collector: &'a mut Collector,
        scenario: &'static str,
        suffix: &str,
    ) -> anyhow::Result<Ctx<'a>> {
        let st = State { scenario, suffix: suffix.to_owned(), ..State::default() };
        let mut cx = Ctx { client, collector, st };
        cx.st.ns = cx.namespace("ns").await?;
        Ok(cx)
    }

    /// A context over what an earlier run left (to look at its objects again).
    pub fn resume(client: Client, collector: &'a mut Collector, st: State) -> Ctx<'a> {
        Ctx { client, collector, st }
    }

    /// Creates (once) the namespace the scenario calls `logical`; returns its actual name.
    pub async fn namespace(&mut self, logical: &str) -> anyhow::Result<String> {
        if let Some(ns) = self.namespaces.get(logical) {
            return Ok(ns.clone());
        }
        let name = if logical == "ns" {
            format!("{}-{}", slug(self.scenario, 50), self.suffix)
        } else {
            format!("{}-{}-{}", slug(self.scenario, 40), slug(logical, 8), self.suffix)
        };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &Kind::namespace().ar);
        let obj: DynamicObject = serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
        )?;
        api.create(&PostParams::default(), &obj)
            .await
            .with_context(|| format!("create namespace {name}"))?;
        self.namespaces.insert(logical.to_owned(), name.clone());
        Ok(name)
    }

    fn api(&self, kind: &Kind, ns: Option<&str>) -> Api<DynamicObject> {
        match ns {
            Some(ns) if kind.namespaced => Api::namespaced_with(self.client.clone(), ns, &kind.ar),
            _ => Api::all_with(self.client.clone(), &kind.ar),
        }
    }

    fn obj_api(&self, o: &Obj) -> Api<DynamicObject> {
        self.api(&o.kind, o.ns.as_deref())
    }

    /// The object called `logical`.
    pub fn obj(&self, logical: &str) -> &Obj {
        self.objs.get(logical).unwrap_or_else(|| panic!("scenario bug: no object {logical:?}"))
    }

    /// An ownerReference to the object called `logical`.
    pub fn owner(&self, logical: &str) -> OwnerRef {
        self.obj(logical).owner_ref()
    }

    /// A UUID that is not any object's, the same for the same `tag` within this run and
    /// different in every other run (two runs sharing a made-up owner UID would share the
    /// collector's virtual node for it, and upstream's outcome then depends on which run
    /// created it first, GC-SPEC.md §2.3).
    pub fn fake_uuid(&self, tag: &str) -> String {
        use std::hash::{Hash, Hasher};
        let h = |seed: u8| {
            let mut s = std::collections::hash_map::DefaultHasher::new();
            (seed, self.scenario, &self.suffix, tag).hash(&mut s);
            s.finish()
        };
        let (a, b) = (h(1), h(2));
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            b >> 52,
            b & 0xffff_ffff_ffff
        )
    }

    /// A made-up non-UUID UID, unique to this run: `<text>-<suffix>`.
    pub fn fake_uid(&self, text: &str) -> String {
        format!("{text}-{}", self.suffix)
    }

    /// UID of the object called `logical`.
    pub fn uid(&self, logical: &str) -> String {
        self.obj(logical).uid.clone()
    }

    /// Creates an object in the primary namespace (if namespaced). `body` holds everything
    /// but apiVersion, kind, name and namespace (its `metadata` is merged).
    pub async fn create(&mut self, logical: &str, kind: Kind, body: Value) -> anyhow::Result<Obj> {
        let ns = self.ns.clone();
        self.create_in(logical, kind, Some(&ns), body).await
    }

    /// As [`Ctx::create`], in namespace `ns` (actual name). Cluster-scoped objects get
    /// `<logical>-<suffix>` as name unless `body.metadata.name` says otherwise.
    pub async fn create_in(
        &mut self,
        logical: &str,
        kind: Kind,
        ns: Option<&str>,
        mut body: Value,
    ) -> anyhow::Result<Obj> {
        assert!(!self.objs.contains_key(logical), "scenario bug: {logical} created twice");
        let ns = if kind.namespaced { ns.map(str::to_owned) } else { None };
        if !body.is_object() {
            body = json!({});
        }
        body["apiVersion"] = json!(kind.ar.api_version);
        body["kind"] = json!(kind.ar.kind);
        if !body["metadata"].is_object() {
            body["metadata"] = json!({});
        }
        if body["metadata"]["name"].is_null() {
            let name = if kind.namespaced {
                logical.to_owned()
            } else {
                format!("{logical}-{}", self.suffix)
            };
            body["metadata"]["name"] = json!(name);
        }
        if let Some(ns) = &ns {
            body["metadata"]["namespace"] = json!(ns);
        }
        let obj: DynamicObject = serde_json::from_value(body)?;
        let api = self.api(&kind, ns.as_deref());
        // A custom resource right after its CRD became Established can still 404 for a moment.
        let deadline = Instant::now() + Duration::from_secs(15);
        let created = loop {
            match api.create(&PostParams::default(), &obj).await {
                Ok(c) => break c,
                Err(e)
                    if (is_status(&e, 404) || is_status(&e, 503)) && Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(anyhow!(e)).with_context(|| format!("create {logical}")),
            }
        };
        let o = Obj {
            logical: logical.to_owned(),
            kind,
            ns,
            name: created.metadata.name.clone().unwrap_or_default(),
            uid: created.metadata.uid.clone().unwrap_or_default(),
        };
        self.objs.insert(logical.to_owned(), o.clone());
        Ok(o)
    }

    /// Creates many objects in the primary namespace, 16 at a time: (logical, kind, body).
    pub async fn create_many(&mut self, items: Vec<(String, Kind, Value)>) -> anyhow::Result<()> {
        use futures::StreamExt;
        let ns = self.ns.clone();
        let client = self.client.clone();
        let created: Vec<anyhow::Result<Obj>> = futures::stream::iter(items)
            .map(|(logical, kind, mut body)| {
                let (client, ns) = (client.clone(), ns.clone());
                async move {
                    body["apiVersion"] = json!(kind.ar.api_version);
                    body["kind"] = json!(kind.ar.kind);
                    body["metadata"]["name"] = json!(logical);
                    body["metadata"]["namespace"] = json!(ns);
                    let api: Api<DynamicObject> = Api::namespaced_with(client, &ns, &kind.ar);
                    let c = api
                        .create(&PostParams::default(), &serde_json::from_value(body)?)
                        .await
                        .with_context(|| format!("create {logical}"))?;
                    Ok(Obj {
                        logical: logical.clone(),
                        kind,
                        ns: Some(ns),
                        name: logical,
                        uid: c.metadata.uid.unwrap_or_default(),
                    })
                }
            })
            .buffer_unordered(16)
            .collect()
            .await;
        for o in created {
            let o = o?;
            self.objs.insert(o.logical.clone(), o);
        }
        Ok(())
    }

    /// Logical names of the objects whose logical name starts with `prefix`.
    pub fn named(&self, prefix: &str) -> Vec<String> {
        self.objs.keys().filter(|k| k.starts_with(prefix)).cloned().collect()
    }

    /// Deletes the object called `logical`.
    pub async fn delete(&self, logical: &str, how: Del) -> anyhow::Result<()> {
        let o = self.obj(logical);
        let api = self.obj_api(o);
        let body = match how {
            Del::Default => None,
            Del::Background => Some(json!({"propagationPolicy": "Background"})),
            Del::Foreground => Some(json!({"propagationPolicy": "Foreground"})),
            Del::Orphan => Some(json!({"propagationPolicy": "Orphan"})),
            Del::OrphanDependents(b) => Some(json!({"orphanDependents": b})),
        };
        let mut req = kube::core::Request::new(api.resource_url())
            .delete(&o.name, &DeleteParams::default())
            .map_err(|e| anyhow!("{e}"))?;
        *req.body_mut() = match body {
            Some(mut b) => {
                b["kind"] = json!("DeleteOptions");
                b["apiVersion"] = json!("v1");
                serde_json::to_vec(&b)?
            }
            None => Vec::new(),
        };
        self.client
            .request_status::<DynamicObject>(req)
            .await
            .with_context(|| format!("delete {logical} ({how:?})"))?;
        Ok(())
    }

    /// JSON-merge-patches the object called `logical`.
    pub async fn merge_patch(&self, logical: &str, patch: Value) -> anyhow::Result<()> {
        let o = self.obj(logical);
        self.obj_api(o)
            .patch(&o.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("patch {logical}"))?;
        Ok(())
    }

    /// Removes every finalizer of the object called `logical`.
    pub async fn clear_finalizers(&self, logical: &str) -> anyhow::Result<()> {
        self.merge_patch(logical, json!({"metadata": {"finalizers": null}})).await
    }

    /// Appends `r` to the ownerReferences of the object called `logical`.
    pub async fn add_owner(&self, logical: &str, r: OwnerRef) -> anyhow::Result<()> {
        let o = self.obj(logical);
        let cur = self.obj_api(o).get(&o.name).await?;
        let mut refs: Vec<Value> = cur
            .metadata
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .map(|r| serde_json::to_value(r).expect("ownerReference serialises"))
            .collect();
        refs.push(r.0);
        self.merge_patch(
            logical,
            json!({"metadata": {"resourceVersion": cur.metadata.resource_version, "ownerReferences": refs}}),
        )
        .await
    }

    /// The live object called `logical`, if it exists with the UID it was created with.
    pub async fn get(&self, logical: &str) -> anyhow::Result<Option<DynamicObject>> {
        let o = self.obj(logical);
        Ok(self.obj_api(o).get_opt(&o.name).await?)
    }

    fn logical_of_uid(&self, uid: &str) -> Option<&str> {
        self.objs.values().find(|o| o.uid == uid).map(|o| o.logical.as_str())
    }

    /// Renders an object's state (see [`Snapshot`]).
    pub fn render(&self, o: &Obj, got: Option<&DynamicObject>) -> String {
        let Some(got) = got else { return "gone".into() };
        let m = &got.metadata;
        if m.uid.as_deref() != Some(o.uid.as_str()) {
            return "replaced (another object, same name)".into();
        }
        let mut s =
            if m.deletion_timestamp.is_some() { "deleting".to_owned() } else { "live".to_owned() };
        if let Some(f) = m.finalizers.as_ref().filter(|f| !f.is_empty()) {
            s.push_str(&format!(" fin=[{}]", f.join(",")));
        }
        if let Some(refs) = m.owner_references.as_ref().filter(|r| !r.is_empty()) {
            let refs: Vec<String> = refs
                .iter()
                .map(|r| {
                    let name = match self.logical_of_uid(&r.uid) {
                        Some(l) => l.to_owned(),
                        None => format!("?{}", r.name),
                    };
                    let block = if r.block_owner_deletion == Some(true) { "!" } else { "" };
                    format!("{}/{name}{block}", r.kind)
                })
                .collect();
            s.push_str(&format!(" owners=[{}]", refs.join(",")));
        }
        s
    }

    /// The state of every object the scenario created (one LIST per resource and namespace).
    pub async fn snapshot(&self) -> anyhow::Result<Snapshot> {
        let mut groups: BTreeMap<(String, Option<String>), Vec<&Obj>> = BTreeMap::new();
        for o in self.objs.values() {
            let key = (format!("{}/{}", o.kind.ar.api_version, o.kind.ar.plural), o.ns.clone());
            groups.entry(key).or_default().push(o);
        }
        let mut snap = Snapshot::new();
        for ((_, ns), objs) in groups {
            let api = self.api(&objs[0].kind, ns.as_deref());
            let items = match api.list(&ListParams::default()).await {
                Ok(list) => list.items,
                // A custom resource whose CRD is gone.
                Err(e) if is_status(&e, 404) => Vec::new(),
                Err(e) => return Err(anyhow!(e)).context("list for a snapshot"),
            };
            let by_name: BTreeMap<&str, &DynamicObject> =
                items.iter().map(|i| (i.metadata.name.as_deref().unwrap_or_default(), i)).collect();
            for o in objs {
                snap.insert(
                    o.logical.clone(),
                    self.render(o, by_name.get(o.name.as_str()).copied()),
                );
            }
        }
        Ok(snap)
    }

    /// Waits until every object the scenario created is in the state `want` gives it (all
    /// must be listed) and stays so for `wait.stable`; records the state as `phase`.
    pub async fn expect(
        &mut self,
        phase: &str,
        want: &[(&str, &str)],
        wait: Wait,
    ) -> anyhow::Result<()> {
        let want: Snapshot = want.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.expect_snapshot(phase, want, wait).await
    }

    /// As [`Ctx::expect`], with the wanted state built by the caller.
    pub async fn expect_snapshot(
        &mut self,
        phase: &str,
        want: Snapshot,
        wait: Wait,
    ) -> anyhow::Result<()> {
        let missing: Vec<&String> = self.objs.keys().filter(|k| !want.contains_key(*k)).collect();
        let extra: Vec<&String> = want.keys().filter(|k| !self.objs.contains_key(*k)).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "scenario bug in {} / {phase}: unlisted {missing:?}, unknown {extra:?}",
            self.scenario
        );
        self.expect_with(phase, wait, move |snap| {
            (snap == &want).then_some(()).ok_or_else(|| diff(&want, snap))
        })
        .await
    }

    /// Waits until `check` accepts the snapshot and keeps accepting it for `wait.stable`;
    /// records the last snapshot as `phase` either way.
    pub async fn expect_with(
        &mut self,
        phase: &str,
        wait: Wait,
        check: impl Fn(&Snapshot) -> Result<(), String>,
    ) -> anyhow::Result<()> {
        let started = Instant::now();
        let deadline = started + wait.timeout;
        let mut good_since: Option<Instant> = None;
        loop {
            let snap = self.snapshot().await?;
            match check(&snap) {
                Ok(()) => {
                    let since = *good_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= wait.stable {
                        self.record.push((phase.to_owned(), snap));
                        eprintln!("    ✓ {phase} ({:.1} s)", (since - started).as_secs_f64());
                        return Ok(());
                    }
                }
                Err(why) => {
                    if good_since.is_some() {
                        eprintln!("    ! {phase}: the expected state did not hold:\n{why}");
                    }
                    good_since = None;
                    if Instant::now() > deadline {
                        self.record.push((phase.to_owned(), snap));
                        bail!("{phase}: not reached within {:?}:\n{why}", wait.timeout);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until the collector's graph holds every object in `logicals` as observed (the
    /// integration tests' `GraphHasUID` before deleting an owner whose dependents must be
    /// orphaned: deletion observed before a dependent's creation does not orphan it, #26120).
    pub async fn wait_observed(&self, logicals: &[&str], timeout: Duration) -> anyhow::Result<()> {
        let uids: Vec<String> = logicals.iter().map(|l| self.uid(l)).collect();
        let uids: Vec<&str> = uids.iter().map(String::as_str).collect();
        let started = Instant::now();
        loop {
            match self.collector.observed_all(&uids) {
                Ok(true) => {
                    let what = if logicals.len() > 8 {
                        format!("{} objects", logicals.len())
                    } else {
                        format!("{logicals:?}")
                    };
                    eprintln!(
                        "    · {} observed {what} ({:.1} s)",
                        self.collector.which.name(),
                        started.elapsed().as_secs_f64()
                    );
                    return Ok(());
                }
                Ok(false) | Err(_) if started.elapsed() < timeout => {}
                Ok(false) => bail!(
                    "{} did not observe {logicals:?} within {timeout:?}",
                    self.collector.which.name()
                ),
                Err(e) => return Err(e.context("debug graph")),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The collector's events in the namespace called `ns_logical`, normalised (namespaces
    /// and UIDs replaced by logical names), sorted and deduplicated.
    pub async fn gc_events(&self, ns_logical: &str) -> anyhow::Result<Vec<String>> {
        let ns = &self.namespaces[ns_logical];
        let kind = Kind::new("", "v1", "Event", "events", true);
        let list = self.api(&kind, Some(ns)).list(&ListParams::default()).await?;
        let mut out: Vec<String> = list
            .items
            .iter()
            .filter(|e| e.data["source"]["component"] == "garbage-collector-controller")
            .map(|e| {
                let d = &e.data;
                let involved = d["involvedObject"]["uid"]
                    .as_str()
                    .and_then(|u| self.logical_of_uid(u))
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("?{}", d["involvedObject"]["name"]));
                let msg = self.normalise(d["message"].as_str().unwrap_or_default());
                format!(
                    "{} {} {}/{involved}: {msg}",
                    d["type"].as_str().unwrap_or_default(),
                    d["reason"].as_str().unwrap_or_default(),
                    d["involvedObject"]["kind"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Replaces actual namespace names and UIDs in `text` by `<ns:logical>` / `<uid:logical>`.
    pub fn normalise(&self, text: &str) -> String {
        let mut t = text.to_owned();
        for o in self.objs.values() {
            t = t.replace(&o.uid, &format!("<uid:{}>", o.logical));
        }
        // Longest first: a secondary namespace's name extends the primary's.
        let mut nss: Vec<(&String, &String)> = self.namespaces.iter().collect();
        nss.sort_by_key(|(_, actual)| std::cmp::Reverse(actual.len()));
        for (logical, actual) in nss {
            t = t.replace(actual.as_str(), &format!("<ns:{logical}>"));
        }
        t
    }

    /// Waits until the collector's events in `ns_logical` are exactly `want` (stable for
    /// `wait.stable`); records them as phase `events:<ns_logical>`.
    pub async fn expect_events(
        &mut self,
        ns_logical: &str,
        want: &[String],
        wait: Wait,
    ) -> anyhow::Result<()> {
        let phase = format!("events:{ns_logical}");
        let started = Instant::now();
        let mut good_since: Option<Instant> = None;
        loop {
            let got = self.gc_events(ns_logical).await?;
            let snap: Snapshot =
                got.iter().enumerate().map(|(i, e)| (format!("{i:02}"), e.clone())).collect();
            if got == want {
                let since = *good_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= wait.stable {
                    self.record.push((phase.clone(), snap));
                    eprintln!("    ✓ {phase} ({:.1} s)", (since - started).as_secs_f64());
                    return Ok(());
                }
            } else {
                good_since = None;
                if started.elapsed() > wait.timeout {
                    self.record.push((phase.clone(), snap));
                    bail!("{phase}: want {want:#?}\ngot {got:#?}");
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Pushes a note into the record (e.g. a measured value that both runs should share).
    pub fn note(&mut self, phase: &str, key: &str, value: String) {
        let mut s = Snapshot::new();
        s.insert(key.to_owned(), value);
        self.record.push((phase.to_owned(), s));
    }
}

/// `key: want …, got …` lines for the keys that differ.
pub fn diff(want: &Snapshot, got: &Snapshot) -> String {
    let mut out = String::new();
    let keys: std::collections::BTreeSet<&String> = want.keys().chain(got.keys()).collect();
    for k in keys {
        let (w, g) = (want.get(k), got.get(k));
        if w != g {
            out.push_str(&format!(
                "      {k}: want {:?}, got {:?}\n",
                w.map(String::as_str).unwrap_or("<none>"),
                g.map(String::as_str).unwrap_or("<none>")
            ));
        }
    }
    out
}

/// A Pod body (no node, no kubelet: it is only an API object here).
pub fn pod(owners_: &[OwnerRef], finalizers: &[&str]) -> Value {
    json!({
        "metadata": {"ownerReferences": owners(owners_), "finalizers": finalizers},
        "spec": {"containers": [{"name": "c", "image": "fakeimage"}]}
    })
}

/// A ConfigMap body.
pub fn config_map(owners_: &[OwnerRef], finalizers: &[&str]) -> Value {
    json!({"metadata": {"ownerReferences": owners(owners_), "finalizers": finalizers}})
}

fn pod_template(labels: &Value) -> Value {
    json!({"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "fakeimage"}]}})
}

/// A ReplicationController body (upstream's `newOwnerRC`).
pub fn rc(owners_: &[OwnerRef], finalizers: &[&str]) -> Value {
    let labels = json!({"name": "test"});
    json!({
        "metadata": {"ownerReferences": owners(owners_), "finalizers": finalizers},
        "spec": {"selector": labels, "template": pod_template(&labels)}
    })
}

/// A Deployment or ReplicaSet body (both take `selector.matchLabels` + a template).
pub fn workload(owners_: &[OwnerRef], app: &str) -> Value {
    let labels = json!({"app": app});
    json!({
        "metadata": {"ownerReferences": owners(owners_)},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": pod_template(&labels)}
    })
}

/// A suspended CronJob body (no Job of its own, should a CronJob controller run).
pub fn cron_job() -> Value {
    json!({"spec": {"schedule": "0 0 1 1 *", "suspend": true, "jobTemplate": {"spec": job()["spec"]}}})
}

/// A batch/v1 Job body owned by `owners_`.
pub fn job_owned(owners_: &[OwnerRef]) -> Value {
    let mut body = job();
    body["metadata"] = json!({"ownerReferences": owners(owners_)});
    body
}

/// A batch/v1 Job body.
pub fn job() -> Value {
    json!({"spec": {"template": {"spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "fakeimage"}]
    }}}})
}
