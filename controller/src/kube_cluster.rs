//! The engine's [`Cluster`] over kube-rs: metadata-only GET, PATCH and DELETE, rate-limited as
//! client-go's QPS/burst, with the restMapper fed by discovery.
//!
//! Upstream: `operations.go` over the metadata client; GC-SPEC.md §5.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, ListParams, Patch as KubePatch, PatchParams, PostParams,
    Preconditions, PropagationPolicy as KubePropagation,
};
use kube_gc_engine::cluster::{
    Cluster, ClusterError, DeleteOptions, ListPage, ListedObject, Patch, PatchType,
    PropagationPolicy, Resource, WarningEvent,
};
use kube_gc_engine::{ObjectMeta, ObjectType};

use crate::events::EventRecorder;
use crate::lean_meta::LeanObject;

/// Counts of API calls by verb, for `/metrics` and the benchmarks.
#[derive(Debug, Default)]
pub struct ApiCallCounts {
    /// GETs (of items and of owners).
    pub get: AtomicU64,
    /// LIST pages read to prove owners absent.
    pub list: AtomicU64,
    /// PATCHes.
    pub patch: AtomicU64,
    /// DELETEs.
    pub delete: AtomicU64,
    /// Events created.
    pub event: AtomicU64,
}

/// A [`Cluster`] backed by a kube-rs [`Client`].
#[derive(Clone)]
pub struct KubeCluster {
    client: Client,
    mapper: Arc<RwLock<HashMap<(String, String), Resource>>>,
    limiter: Arc<DefaultDirectRateLimiter>,
    events: Arc<EventRecorder>,
    /// Calls made, by verb.
    pub calls: Arc<ApiCallCounts>,
    /// `--dry-run`: writes are recorded here instead of sent.
    shadow: Option<Arc<crate::shadow::Shadow>>,
}

impl std::fmt::Debug for KubeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeCluster").finish_non_exhaustive()
    }
}

/// client-go's token bucket: `qps` steady, `burst` at once.
pub fn token_bucket(qps: f64, burst: u32) -> DefaultDirectRateLimiter {
    let period = Duration::from_secs_f64(1.0 / qps).max(Duration::from_nanos(1));
    let quota = Quota::with_period(period)
        .expect("a positive period")
        .allow_burst(NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN));
    RateLimiter::direct(quota)
}

impl KubeCluster {
    /// Waits for the collector's `--kube-api-qps` budget before a `verb` request, recording
    /// the wait (`rest_client_rate_limiter_duration_seconds`).
    async fn wait_for_budget(&self, verb: &str) {
        let started = std::time::Instant::now();
        self.limiter.until_ready().await;
        crate::metrics::rest_client::global().rate_limited(verb, started.elapsed());
    }

    /// The same cluster for the debug endpoints' live reads (`…/explain`): the same client
    /// and resource mapping, but a budget of its own (5 reads/s, bursts of 20) and call
    /// counts of its own, so that answering an operator neither slows the collector nor
    /// shows in its `kube_gc_api_calls_total`.
    pub fn for_inspection(&self) -> KubeCluster {
        KubeCluster {
            client: self.client.clone(),
            mapper: self.mapper.clone(),
            limiter: Arc::new(token_bucket(5.0, 20)),
            events: self.events.clone(),
            calls: Arc::default(),
            shadow: self.shadow.clone(),
        }
    }

    /// The same cluster in shadow mode (`--dry-run`): PATCHes, DELETEs and events are
    /// recorded in `shadow` and never sent; a patch answers with the object as it is.
    pub fn with_shadow(mut self, shadow: Arc<crate::shadow::Shadow>) -> KubeCluster {
        self.shadow = Some(shadow);
        self
    }

    /// A cluster over `client`, at most `qps` requests per second with bursts of `burst`;
    /// Warning events go through an [`EventRecorder`] with a budget of their own. Must be
    /// called within a tokio runtime (the recorder's task).
    pub fn new(client: Client, qps: f64, burst: u32) -> KubeCluster {
        let calls: Arc<ApiCallCounts> = Arc::default();
        let (sink_client, sink_calls) = (client.clone(), calls.clone());
        let sink: crate::events::Sink = Arc::new(move |event| {
            let (client, calls) = (sink_client.clone(), sink_calls.clone());
            Box::pin(async move {
                calls.event.fetch_add(1, Ordering::Relaxed);
                send_event(client, event).await;
            })
        });
        KubeCluster {
            client,
            mapper: Arc::default(),
            limiter: Arc::new(token_bucket(qps, burst)),
            events: Arc::new(EventRecorder::start(
                sink,
                crate::events::EVENTS_QPS,
                crate::events::EVENTS_BURST,
            )),
            calls,
            shadow: None,
        }
    }

    /// What happened to the Warning events recorded so far.
    pub fn event_counts(&self) -> &Arc<crate::events::EventCounts> {
        self.events.counts()
    }

    /// Replaces the restMapper's contents (after discovery), and interns every type it maps:
    /// the cap on types ([`kube_gc_engine::identity`]) then never refuses one the cluster
    /// serves.
    pub fn set_mapper(&self, mapper: HashMap<(String, String), Resource>) {
        for (api_version, kind) in mapper.keys() {
            ObjectType::new(api_version, kind);
        }
        *self.mapper.write().expect("mapper lock") = mapper;
    }

    /// The resource's metadata-only API (`lean_meta.rs` decodes the answers).
    fn api(&self, resource: &Resource, namespace: &str) -> Api<LeanObject> {
        let ar = api_resource(resource);
        if resource.namespaced && !namespace.is_empty() {
            Api::namespaced_with(self.client.clone(), namespace, &ar)
        } else {
            Api::all_with(self.client.clone(), &ar)
        }
    }
}

/// kube-rs's description of a discovered resource.
pub fn api_resource(resource: &Resource) -> ApiResource {
    ApiResource {
        group: resource.group.clone(),
        version: resource.version.clone(),
        api_version: resource.api_version(),
        kind: resource.kind.clone(),
        plural: resource.resource.clone(),
    }
}

/// Maps a kube-rs error to what the collector distinguishes.
pub fn classify_error(e: kube::Error) -> ClusterError {
    match e {
        kube::Error::Api(status) => {
            let code = status.code;
            let message = status.message.clone();
            match code {
                404 => ClusterError::NotFound,
                409 => ClusterError::Conflict(message),
                415 => ClusterError::UnsupportedMediaType,
                422 => ClusterError::Invalid(message),
                _ => ClusterError::Other { code, message },
            }
        }
        other => ClusterError::Other { code: 0, message: other.to_string() },
    }
}

impl Cluster for KubeCluster {
    fn resource_for(&self, ty: ObjectType) -> Result<Resource, ClusterError> {
        let key = (ty.api_version().to_owned(), ty.kind().to_owned());
        self.mapper
            .read()
            .expect("mapper lock")
            .get(&key)
            .cloned()
            .ok_or_else(|| ClusterError::NoMapping(format!("{}/{}", key.0, key.1)))
    }

    async fn get(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<ObjectMeta, ClusterError> {
        self.wait_for_budget("GET").await;
        self.calls.get.fetch_add(1, Ordering::Relaxed);
        let got = self.api(resource, namespace).get(name).await.map_err(classify_error)?;
        Ok(got.into_meta())
    }

    async fn list_page(
        &self,
        resource: &Resource,
        continue_token: Option<&str>,
        limit: u32,
    ) -> Result<ListPage, ClusterError> {
        self.wait_for_budget("GET").await;
        self.calls.list.fetch_add(1, Ordering::Relaxed);
        // No resourceVersion: a consistent (quorum) read from etcd, never the watch cache.
        let mut params = ListParams::default().limit(limit);
        if let Some(token) = continue_token {
            params = params.continue_token(token);
        }
        let list = Api::<LeanObject>::all_with(self.client.clone(), &api_resource(resource))
            .list(&params)
            .await
            .map_err(classify_error)?;
        let items = list
            .items
            .into_iter()
            .map(|o| {
                let (namespace, name, uid) = o.into_identity();
                ListedObject { namespace, name, uid }
            })
            .collect();
        Ok(ListPage {
            items,
            continue_token: list.metadata.continue_.filter(|t| !t.is_empty()),
            remaining: list.metadata.remaining_item_count.and_then(|n| u64::try_from(n).ok()),
        })
    }

    async fn patch(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        patch: &Patch,
    ) -> Result<ObjectMeta, ClusterError> {
        if let Some(shadow) = &self.shadow {
            shadow.patch(resource, namespace, name, patch);
            return self.get(resource, namespace, name).await;
        }
        self.wait_for_budget("PATCH").await;
        self.calls.patch.fetch_add(1, Ordering::Relaxed);
        let body = patch.body.clone();
        let p = match patch.patch_type {
            PatchType::StrategicMerge => KubePatch::Strategic(body),
            PatchType::JsonMerge => KubePatch::Merge(body),
        };
        let got = self
            .api(resource, namespace)
            .patch(name, &PatchParams::default(), &p)
            .await
            .map_err(classify_error)?;
        Ok(got.into_meta())
    }

    async fn delete(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(), ClusterError> {
        if let Some(shadow) = &self.shadow {
            shadow.delete(resource, namespace, name, options);
            return Ok(());
        }
        self.wait_for_budget("DELETE").await;
        self.calls.delete.fetch_add(1, Ordering::Relaxed);
        let preconditions = (options.precondition_uid.is_some()
            || options.precondition_resource_version.is_some())
        .then(|| Preconditions {
            uid: options.precondition_uid.clone(),
            resource_version: options.precondition_resource_version.clone(),
        });
        let params = DeleteParams {
            preconditions,
            propagation_policy: options.propagation_policy.map(|p| match p {
                PropagationPolicy::Orphan => KubePropagation::Orphan,
                PropagationPolicy::Background => KubePropagation::Background,
                PropagationPolicy::Foreground => KubePropagation::Foreground,
            }),
            ..DeleteParams::default()
        };
        self.api(resource, namespace).delete(name, &params).await.map_err(classify_error)?;
        Ok(())
    }

    fn record_event(&self, event: WarningEvent) {
        if let Some(shadow) = &self.shadow {
            shadow.event(&event);
            return;
        }
        // Never waits: queued for the recorder's own task and budget.
        self.events.record(event);
    }
}

/// Creates `event` as a core/v1 Event, as client-go's recorder does; failures are logged.
async fn send_event(client: Client, event: WarningEvent) {
    let involved = &event.involved;
    // client-go's recorder files events of cluster-scoped objects in `default`.
    let ns = match involved.namespace.as_str() {
        "" => "default",
        ns => ns,
    };
    let now = meta::Time(k8s_openapi::jiff::Timestamp::now());
    let ev = core::Event {
        metadata: meta::ObjectMeta {
            generate_name: Some(format!("{}.", involved.name)),
            namespace: Some(ns.to_owned()),
            ..Default::default()
        },
        involved_object: core::ObjectReference {
            api_version: Some(involved.ty.api_version().to_owned()),
            kind: Some(involved.ty.kind().to_owned()),
            name: Some(involved.name.clone()),
            namespace: (!involved.namespace.is_cluster())
                .then(|| involved.namespace.as_str().to_owned()),
            uid: Some(involved.uid.to_string()),
            ..Default::default()
        },
        reason: Some(event.reason.to_owned()),
        message: Some(event.message.clone()),
        type_: Some("Warning".to_owned()),
        source: Some(core::EventSource {
            component: Some("garbage-collector-controller".to_owned()),
            host: None,
        }),
        first_timestamp: Some(now.clone()),
        last_timestamp: Some(now),
        count: Some(1),
        ..Default::default()
    };
    let api: Api<core::Event> = Api::namespaced(client, ns);
    if let Err(e) = api.create(&PostParams::default(), &ev).await {
        tracing::warn!(error = %e, reason = event.reason, "failed to record event");
    }
}
