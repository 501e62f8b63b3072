//! The graph without a running kube-gc: one paged metadata list of every deletable resource,
//! ingested into the engine's graph, for `kubectl gc` to answer from (whichever collector the
//! cluster runs).
//!
//! Once every resource is listed, an owner some object names but no list returned is absent
//! (a list is a consistent read of its whole resource): it is recorded as proven absent, as
//! the collector's own proof lists do, so [`explain`](kube_gc_engine::inspect::explain) and
//! the blast radius see dangling references as dangling. Owners of resources that could not be
//! listed stay unverified.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use kube::Client;
use kube::api::{Api, ListParams};
use kube_gc_engine::absent_owner_cache::AbsentOwnerCache;
use kube_gc_engine::cluster::Cluster;
use kube_gc_engine::collector::Collector;
use kube_gc_engine::{
    Event, EventType, Graph, GraphChanges, Ingester, Namespace, ObjectReference, Uid, WorkQueue,
};

use crate::discovery::{self, Discovered};
use crate::kube_cluster::{KubeCluster, api_resource};
use crate::lean_meta::LeanObject;

/// Objects per list page.
const PAGE: u32 = 500;

/// Progress of [`Snapshot::list`], for a progress bar.
pub trait Progress {
    /// About to list `resources` resources.
    fn start(&self, resources: usize);
    /// Listed one more page of `resource`: `objects` objects so far in all.
    fn page(&self, resource: &str, objects: u64);
    /// Finished (or gave up on) one resource.
    fn resource_done(&self);
}

/// The cluster's objects in a graph, and what is needed to ask it questions.
pub struct Snapshot {
    /// What discovery found (for resolving `TYPE/NAME`).
    pub discovered: Discovered,
    /// A collector over the graph (never run: its queues and absent-owner cache answer
    /// `explain`).
    pub collector: Arc<Collector<KubeCluster>>,
    /// The cluster, for `explain`'s live reads of finalizers.
    pub cluster: KubeCluster,
    /// Every listed object, by (resource key, namespace, name).
    pub objects: HashMap<(String, String, String), Uid>,
    /// Objects listed.
    pub listed: u64,
    /// Resources whose list failed, with the error.
    pub failed: Vec<(String, String)>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("listed", &self.listed).finish_non_exhaustive()
    }
}

impl Snapshot {
    /// Discovers the deletable resources and lists each into a graph (see the module docs).
    pub async fn list(client: Client, progress: &dyn Progress) -> anyhow::Result<Snapshot> {
        Self::list_checked(client, progress, |_| Ok(())).await
    }

    /// [`list`](Self::list), with `check` asked about what discovery found before anything is
    /// listed (which takes a while on a large cluster): its error ends the call.
    pub async fn list_checked(
        client: Client,
        progress: &dyn Progress,
        check: impl FnOnce(&Discovered) -> Result<(), String>,
    ) -> anyhow::Result<Snapshot> {
        let ignored: BTreeSet<String> =
            crate::flags::DEFAULT_IGNORED_RESOURCES.split(',').map(str::to_owned).collect();
        let discovered = discovery::discover(&client, &ignored).await?;
        check(&discovered).map_err(anyhow::Error::msg)?;
        // Read-only: the plugin runs with its user's credentials, and never writes.
        let cluster = KubeCluster::new(client.clone(), 50.0, 100).read_only();
        cluster.set_mapper(discovered.mapper.clone(), &BTreeSet::new());
        cluster.set_aggregated(discovered.aggregated.clone());
        let graph = Arc::new(Graph::new(64)?);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut ingester = Ingester::new(graph.clone(), threads);
        let collector = Arc::new(Collector::new(
            graph.clone(),
            Arc::new(cluster.for_inspection()),
            Arc::new(AbsentOwnerCache::new(1 << 20)),
            Arc::new(WorkQueue::new("garbage_collector_attempt_to_delete")),
            Arc::new(WorkQueue::new("garbage_collector_attempt_to_orphan")),
            Arc::new(GraphChanges::new()),
        ));
        progress.start(discovered.deletable.len());
        let mut objects = HashMap::new();
        let mut listed_types = std::collections::HashSet::new();
        // Owners named, by UID: (reference, the namespace of a dependent naming it).
        let mut named: BTreeMap<Uid, (kube_gc_engine::OwnerRef, Namespace)> = BTreeMap::new();
        let mut failed = Vec::new();
        let mut listed = 0u64;
        for (key, resource) in &discovered.deletable {
            let ar = api_resource(resource);
            let api: Api<LeanObject> = Api::all_with(client.clone(), &ar);
            let mut params = ListParams::default().limit(PAGE);
            let outcome: anyhow::Result<()> = async {
                loop {
                    let page = api.list(&params).await?;
                    let mut events = Vec::with_capacity(page.items.len());
                    for item in page.items {
                        let meta = item.into_meta();
                        if let Some(uid) = Uid::lookup(&meta.uid) {
                            objects.insert(
                                (key.clone(), meta.namespace.clone(), meta.name.clone()),
                                uid,
                            );
                        }
                        let ns = Namespace::new(&meta.namespace);
                        for r in &meta.owner_references {
                            let owner = kube_gc_engine::patch::owner_ref_from_api(r);
                            named.entry(owner.uid).or_insert((owner, ns));
                        }
                        events.push(Event::new(EventType::Add, resource.object_type(), meta));
                    }
                    listed += events.len() as u64;
                    let out = ingester.ingest(&events);
                    drop(out); // nothing is queued: no collector runs here
                    progress.page(key, listed);
                    match page.metadata.continue_.filter(|c| !c.is_empty()) {
                        Some(token) => params = params.continue_token(&token),
                        None => return Ok(()),
                    }
                }
            }
            .await;
            match outcome {
                Ok(()) => {
                    listed_types.insert(resource.object_type());
                }
                Err(e) => failed.push((key.clone(), crate::error::one_line(e.as_ref()))),
            }
            progress.resource_done();
        }
        // Owners no list returned, of a resource that was listed: absent.
        for (uid, (owner, ns)) in named {
            let absent = graph.node(uid).is_some_and(|n| n.is_virtual);
            if absent && listed_types.contains(&owner.ty) {
                let cluster_scoped = cluster.resource_for(owner.ty).is_ok_and(|r| !r.namespaced);
                let ns = if cluster_scoped { Namespace::CLUSTER } else { ns };
                collector.absent_owners().add(ObjectReference::from_owner(&owner, ns));
            }
        }
        Ok(Snapshot { discovered, collector, cluster, objects, listed, failed })
    }

    /// The UID of `type_name/name` in `namespace` (ignored for cluster-scoped resources), as
    /// kubectl resolves it: `deploy/web`, `deployments.apps/web`, `Deployment/web`.
    pub fn resolve(&self, type_name: &str, name: &str, namespace: &str) -> Result<Uid, String> {
        let key = self.discovered.resource_key_of(type_name)?;
        let resource = &self.discovered.deletable[key];
        let ns = if resource.namespaced { namespace } else { "" };
        self.objects.get(&(key.clone(), ns.to_owned(), name.to_owned())).copied().ok_or_else(|| {
            match ns {
                "" => format!("{key} {name:?} not found"),
                ns => format!("{key} {name:?} not found in namespace {ns:?}"),
            }
        })
    }

    /// The graph every listed object was ingested into, for the engine's inspection
    /// functions (`tree`, `blast_radius`, `explain`) to answer from.
    pub fn graph(&self) -> &Arc<Graph> {
        self.collector.graph()
    }
}
