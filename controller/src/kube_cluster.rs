//! The engine's [`Cluster`] over kube-rs: metadata-only GET, PATCH and DELETE, rate-limited as
//! client-go's QPS/burst, with the restMapper fed by discovery.
//!
//! Upstream: `operations.go` over the metadata client; GC-SPEC.md §5.

use std::collections::{BTreeSet, HashMap};
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
    /// The apiVersions aggregated API servers serve (`None`: not known, so any may be).
    aggregated: Arc<RwLock<Option<BTreeSet<String>>>>,
    limiter: Arc<DefaultDirectRateLimiter>,
    events: Arc<EventRecorder>,
    /// Calls made, by verb.
    pub calls: Arc<ApiCallCounts>,
    /// `--dry-run`: writes are recorded here instead of sent.
    shadow: Option<Arc<crate::shadow::Shadow>>,
    /// How long one call may wait for its answer ([`CALL_TIMEOUT`]).
    call_timeout: Duration,
    /// Never writes ([`read_only`](Self::read_only)).
    read_only: bool,
}

/// How long a GET, LIST page, PATCH or DELETE may wait for the server's answer before it
/// fails (the item is then retried, and a write whose outcome was lost is decided again from a
/// live read). Without it a half-open connection (an API server failing over, a NAT entry
/// dropped) would hold a worker (or a proof round) until the kernel gave up on the
/// connection; client-go finds such connections with HTTP/2 pings instead. A
/// page of a proof list (500 objects' metadata) takes milliseconds.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

impl std::fmt::Debug for KubeCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeCluster").finish_non_exhaustive()
    }
}

/// client-go's token bucket: `qps` steady, `burst` at once. `qps` must be positive and
/// finite (`Flags::validate` checks `--kube-api-qps`); a `burst` whose refill time does not
/// fit in half of 584 years of nanoseconds is cut to the largest that does
/// (`Flags::validate` refuses it): governor's unchecked arithmetic adds the time since the
/// limiter started to a full bucket's, and would overflow.
pub fn token_bucket(qps: f64, burst: u32) -> DefaultDirectRateLimiter {
    let period = Duration::from_secs_f64(1.0 / qps).max(Duration::from_nanos(1));
    let largest = u64::MAX / 2 / u64::try_from(period.as_nanos()).unwrap_or(u64::MAX);
    let burst = u32::try_from(largest.max(1)).map_or(burst, |b| burst.min(b));
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
            aggregated: self.aggregated.clone(),
            limiter: Arc::new(token_bucket(5.0, 20)),
            events: self.events.clone(),
            calls: Arc::default(),
            shadow: self.shadow.clone(),
            call_timeout: self.call_timeout,
            read_only: self.read_only,
        }
    }

    /// The same cluster, never writing: a PATCH or DELETE fails unsent and an event is
    /// dropped. For kubectl-gc, which runs with its user's credentials and only reads: no
    /// change to it can make it write with them.
    pub fn read_only(mut self) -> KubeCluster {
        self.read_only = true;
        self
    }

    /// Fails a write of a [read-only](Self::read_only) cluster, before it is sent.
    fn writable(&self, verb: &str) -> Result<(), ClusterError> {
        match self.read_only {
            false => Ok(()),
            true => Err(ClusterError::Other {
                code: 0,
                message: format!("{verb} not sent: a read-only client (kubectl-gc) never writes"),
            }),
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
            aggregated: Arc::default(),
            limiter: Arc::new(token_bucket(qps, burst)),
            events: Arc::new(EventRecorder::start(
                sink,
                crate::events::EVENTS_QPS,
                crate::events::EVENTS_BURST,
            )),
            calls,
            shadow: None,
            call_timeout: CALL_TIMEOUT,
            read_only: false,
        }
    }

    /// The same cluster, each call failing after `timeout` without an answer (tests).
    pub fn with_call_timeout(mut self, timeout: Duration) -> KubeCluster {
        self.call_timeout = timeout;
        self
    }

    /// `call`, failed with [`ClusterError::Other`] if it has no answer within the call timeout.
    async fn answer<T>(
        &self,
        verb: &str,
        call: impl std::future::Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, ClusterError> {
        match tokio::time::timeout(self.call_timeout, call).await {
            Ok(answer) => answer.map_err(classify_error),
            Err(_) => Err(ClusterError::Other {
                code: 0,
                message: format!("{verb}: no answer in {:?}", self.call_timeout),
            }),
        }
    }

    /// What happened to the Warning events recorded so far.
    pub fn event_counts(&self) -> &Arc<crate::events::EventCounts> {
        self.events.counts()
    }

    /// Replaces the restMapper's contents (after discovery), and interns every type it maps:
    /// the cap on types ([`kube_gc_engine::identity`]) then never refuses one the cluster
    /// serves. The mappings of `failed` apiVersions (group-versions whose discovery failed
    /// this time) are kept from before, as their watchers are: an aggregated API that does
    /// not answer for a while, or a core group's request that timed out, must not unmap its
    /// kinds (every owner of them requeued with a growing backoff meanwhile). Upstream's Sync
    /// keeps its restMapper when the resources it found, the failed groups' merged in, did not
    /// change.
    pub fn set_mapper(
        &self,
        mut mapper: HashMap<(String, String), Resource>,
        failed: &BTreeSet<String>,
    ) {
        let mut current = self.mapper.write().expect("mapper lock");
        if !failed.is_empty() {
            for (key, resource) in current.iter() {
                if failed.contains(&key.0) {
                    mapper.entry(key.clone()).or_insert_with(|| resource.clone());
                }
            }
        }
        for (api_version, kind) in mapper.keys() {
            ObjectType::new(api_version, kind);
        }
        *current = mapper;
    }

    /// Records which apiVersions aggregated API servers serve (after discovery; `None`: not
    /// known), for [`Cluster::consistent_lists`].
    pub fn set_aggregated(&self, aggregated: Option<BTreeSet<String>>) {
        *self.aggregated.write().expect("aggregated lock") = aggregated;
    }

    /// The resource's metadata-only API for one object's calls (`lean_meta.rs` decodes the
    /// answers). A namespaced resource without a namespace is refused: its objects' URLs would
    /// lack the namespace, a path the server answers with 404, which would read as the object
    /// being absent.
    fn api(&self, resource: &Resource, namespace: &str) -> Result<Api<LeanObject>, ClusterError> {
        let ar = api_resource(resource);
        match (resource.namespaced, namespace.is_empty()) {
            (true, false) => Ok(Api::namespaced_with(self.client.clone(), namespace, &ar)),
            (false, _) => Ok(Api::all_with(self.client.clone(), &ar)),
            (true, true) => Err(ClusterError::Other {
                code: 0,
                message: format!("{resource} is namespaced, and no namespace was given"),
            }),
        }
    }
}

/// Refuses a write once this process's lease has passed its renew deadline
/// ([`crate::leader::may_write`]): checked after the budget's wait, just before sending.
fn fenced(verb: &str) -> Result<(), ClusterError> {
    if crate::leader::may_write() {
        Ok(())
    } else {
        Err(ClusterError::Other {
            code: 0,
            message: format!(
                "{verb} not sent: the lease was not renewed within the renew deadline"
            ),
        })
    }
}

/// An object the server answered a call on `name` with, if it is one: a body without a uid,
/// or another object's, is a server (or proxy) out of contract, never an answer about `name`
/// (taken as one, its empty uid would say the object asked for is gone). Upstream's client
/// refuses only bodies with none of uid, name, creationTimestamp and generateName
/// (`isLikelyObjectMetadata`), and takes a name without a uid for another object, so the owner
/// for absent; kube-gc retries instead (fewer writes; README, departures).
fn answer_about(name: &str, object: LeanObject) -> Result<ObjectMeta, ClusterError> {
    let meta = object.into_meta();
    if meta.uid.is_empty() || meta.name != name {
        return Err(ClusterError::Other {
            code: 0,
            message: format!(
                "the answer about {name:?} is not that object's metadata (name {:?}, uid {:?})",
                meta.name, meta.uid
            ),
        });
    }
    Ok(meta)
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

/// The `reason` kube-rs gives the Status it makes up for an error body that is no Status (a
/// proxy's text, a bare path's `404 page not found`): its code is the HTTP status.
const KUBE_RS_UNPARSED: &str = "Failed to parse error data";

/// Maps a kube-rs error to what the collector distinguishes, as client-go's `IsNotFound`,
/// `IsConflict`, … judge a Status: by its `reason`, and by its `code` only when the reason is
/// unknown (empty). A Status that says another reason under a 404 is not an absence; one that
/// says `NotFound` without a code is (a body without a code would otherwise be retried for
/// ever). An error body that is no Status is judged by the HTTP status, as client-go's
/// generic response error is.
pub fn classify_error(e: kube::Error) -> ClusterError {
    match e {
        kube::Error::Api(status) => {
            let reason = match status.reason.as_str() {
                KUBE_RS_UNPARSED => "",
                reason => reason,
            };
            let is = |r: &str, code: u16| reason == r || (reason.is_empty() && status.code == code);
            let message = status.message.clone();
            if is("NotFound", 404) {
                ClusterError::NotFound
            } else if is("Conflict", 409) {
                ClusterError::Conflict(message)
            } else if is("UnsupportedMediaType", 415) {
                ClusterError::UnsupportedMediaType
            } else if is("Invalid", 422) {
                ClusterError::Invalid(message)
            } else {
                ClusterError::Other { code: status.code, message }
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

    fn consistent_lists(&self, resource: &Resource) -> bool {
        // kube-apiserver's own lists without a resourceVersion are quorum reads of etcd in
        // snapshot pages; an aggregated server's promise nothing, and an unknown one may be.
        self.aggregated
            .read()
            .expect("aggregated lock")
            .as_ref()
            .is_some_and(|aggregated| !aggregated.contains(&resource.api_version()))
    }

    async fn get(
        &self,
        resource: &Resource,
        namespace: &str,
        name: &str,
    ) -> Result<ObjectMeta, ClusterError> {
        self.wait_for_budget("GET").await;
        self.calls.get.fetch_add(1, Ordering::Relaxed);
        let api = self.api(resource, namespace)?;
        answer_about(name, self.answer("GET", api.get(name)).await?)
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
        let api = Api::<LeanObject>::all_with(self.client.clone(), &api_resource(resource));
        let list = self.answer("LIST", api.list(&params)).await?;
        let items = list
            .items
            .into_iter()
            .map(|o| {
                let (namespace, name, uid) = o.into_identity();
                ListedObject { namespace, name, uid }
            })
            .collect::<Vec<_>>();
        // A page holding something that is no object's metadata proves nothing.
        if let Some(odd) = items.iter().find(|o| o.uid.is_empty() || o.name.is_empty()) {
            return Err(ClusterError::Other {
                code: 0,
                message: format!(
                    "a page of {resource} holds an item without a name or uid: {odd:?}"
                ),
            });
        }
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
        self.writable("PATCH")?;
        self.wait_for_budget("PATCH").await;
        fenced("PATCH")?;
        self.calls.patch.fetch_add(1, Ordering::Relaxed);
        let body = patch.body.clone();
        let p = match patch.patch_type {
            PatchType::StrategicMerge => KubePatch::Strategic(body),
            PatchType::JsonMerge => KubePatch::Merge(body),
        };
        let api = self.api(resource, namespace)?;
        answer_about(
            name,
            self.answer("PATCH", api.patch(name, &PatchParams::default(), &p)).await?,
        )
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
        self.writable("DELETE")?;
        self.wait_for_budget("DELETE").await;
        fenced("DELETE")?;
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
        let api = self.api(resource, namespace)?;
        let answer = self.answer("DELETE", api.delete(name, &params)).await?;
        // A Status in a 200 that says it failed is a failure, as client-go reads it.
        match answer.right() {
            Some(status) if status.is_failure() => Err(ClusterError::Other {
                code: status.code,
                message: format!("DELETE answered with a failure: {}", status.message),
            }),
            _ => Ok(()),
        }
    }

    fn record_event(&self, event: WarningEvent) {
        if let Some(shadow) = &self.shadow {
            shadow.event(&event);
            return;
        }
        if self.read_only {
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
    if fenced("POST event").is_err() {
        // Past the renew deadline, as the collector's writes: the leader this process was may
        // no longer be (the watchdog ends the process at this moment).
        tracing::debug!(reason = event.reason, "event not recorded: the lease was not renewed");
        return;
    }
    // Bounded as the collector's calls are, so that one lost answer does not stop the
    // recorder's queue.
    match tokio::time::timeout(CALL_TIMEOUT, api.create(&PostParams::default(), &ev)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, reason = event.reason, "failed to record event"),
        Err(_) => {
            tracing::warn!(reason = event.reason, "failed to record event: no answer in time")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_server::{Reply, Script, failure_reply, json_object, list_reply};

    fn pods() -> Resource {
        Resource::new("v1", "pods", "Pod", true)
    }

    /// A cluster over a server answering with `replies`, in order.
    fn cluster(replies: Vec<Reply>) -> (KubeCluster, Script) {
        let script = Script::new(replies);
        (KubeCluster::new(Client::new(script.clone(), "default"), 1000.0, 1000), script)
    }

    fn is_other(answer: &Result<impl std::fmt::Debug, ClusterError>) -> bool {
        matches!(answer, Err(ClusterError::Other { .. }))
    }

    /// A group-version whose discovery failed keeps its kinds mapped; one that answered
    /// without a kind unmaps it.
    #[tokio::test]
    async fn a_failed_group_version_keeps_its_mappings() {
        let (c, _) = cluster(Vec::new());
        let jobs = Resource::new("batch/v1", "jobs", "Job", true);
        let mapper = |resources: &[&Resource]| {
            (resources.iter())
                .map(|r| ((r.api_version(), r.kind.clone()), (*r).clone()))
                .collect::<HashMap<_, _>>()
        };
        let job = ObjectType::new("batch/v1", "Job");
        c.set_mapper(mapper(&[&pods(), &jobs]), &BTreeSet::new());
        assert_eq!(c.resource_for(job), Ok(jobs.clone()));
        c.set_mapper(mapper(&[&pods()]), &["batch/v1".to_owned()].into());
        assert_eq!(c.resource_for(job), Ok(jobs), "batch/v1 failed: kept");
        c.set_mapper(mapper(&[&pods()]), &["apps/v1".to_owned()].into());
        assert!(matches!(c.resource_for(job), Err(ClusterError::NoMapping(_))), "answered");
    }

    /// A read-only cluster (kubectl-gc's) sends no PATCH, DELETE or event; it still reads.
    #[tokio::test]
    async fn a_read_only_cluster_never_writes() {
        let (c, script) = cluster(vec![Reply::json(200, json_object("web", "7"), false)]);
        let c = c.read_only().for_inspection();
        let patch = Patch {
            patch_type: PatchType::JsonMerge,
            body: serde_json::json!({"metadata": {"finalizers": null}}),
        };
        assert!(is_other(&c.patch(&pods(), "ns", "web", &patch).await));
        let options = DeleteOptions::default();
        assert!(is_other(&c.delete(&pods(), "ns", "web", &options).await));
        assert!(script.requests().is_empty(), "{:?}", script.requests());
        assert!(c.get(&pods(), "ns", "web").await.is_ok());
        assert_eq!(script.requests().len(), 1);
    }

    #[tokio::test]
    async fn a_get_is_answered_with_the_object_or_not_found() {
        let (c, _) =
            cluster(vec![Reply::json(200, json_object("web", "7"), false), failure_reply(404)]);
        let found = c.get(&pods(), "ns", "web").await.unwrap();
        assert_eq!((found.uid.as_str(), found.resource_version.as_str()), ("uid-web", "7"));
        assert_eq!(c.get(&pods(), "ns", "web").await, Err(ClusterError::NotFound));
    }

    /// Errors are judged as client-go judges them: by the Status's reason, by its code only
    /// when the reason is empty, and by the HTTP status when the body is no Status.
    #[tokio::test]
    async fn an_error_is_judged_by_its_reason_then_its_code() {
        let status = |code: u16, reason: &str| {
            let body = format!(
                r#"{{"kind":"Status","status":"Failure","reason":"{reason}","code":{code}}}"#
            );
            let body = body.replace(r#","code":0"#, "");
            Reply::json(if code == 0 { 500 } else { code }, body, false)
        };
        let text = |code: u16| Reply {
            content_type: "text/plain",
            ..Reply::json(code, "404 page not found", false)
        };
        let (c, _) = cluster(vec![
            status(0, "NotFound"),
            status(404, ""),
            status(404, "Forbidden"),
            text(404),
            status(0, "Conflict"),
            status(0, ""),
        ]);
        let mut answers = Vec::new();
        for _ in 0..6 {
            answers.push(c.get(&pods(), "ns", "web").await.map(|_| ()));
        }
        let other = |code| Err(ClusterError::Other { code, message: String::new() });
        let answers: Vec<_> = answers
            .into_iter()
            .map(|a| match a {
                Err(ClusterError::Other { code, .. }) => other(code),
                Err(ClusterError::Conflict(_)) => Err(ClusterError::Conflict(String::new())),
                a => a,
            })
            .collect();
        assert_eq!(
            answers,
            [
                Err(ClusterError::NotFound),
                Err(ClusterError::NotFound),
                other(404),
                Err(ClusterError::NotFound),
                Err(ClusterError::Conflict(String::new())),
                other(0),
            ]
        );
    }

    /// A DELETE answered 200 with a Status that says it failed did not delete.
    #[tokio::test]
    async fn a_delete_answered_with_a_failed_status_is_a_failure() {
        let failed =
            r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"no","code":500}"#;
        let done = r#"{"kind":"Status","apiVersion":"v1","status":"Success","code":200}"#;
        let (c, _) = cluster(vec![Reply::json(200, failed, false), Reply::json(200, done, false)]);
        let answer = c.delete(&pods(), "ns", "web", &DeleteOptions::default()).await;
        assert!(is_other(&answer), "{answer:?}");
        assert_eq!(c.delete(&pods(), "ns", "web", &DeleteOptions::default()).await, Ok(()));
    }

    /// A body that is no object's metadata, or another object's, is an error (the item is
    /// retried), never an answer that the object asked for is gone or has another UID.
    #[tokio::test]
    async fn an_answer_that_is_not_the_object_is_an_error_not_an_absence() {
        let no_uid = r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"web"}}"#;
        let (c, _) = cluster(vec![
            Reply::json(200, no_uid, false),
            Reply::json(
                200,
                r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1"}"#,
                false,
            ),
            Reply::json(200, "{}", false),
            Reply::json(200, json_object("other", "7"), false),
            Reply::json(200, no_uid, false),
        ]);
        for _ in 0..4 {
            let answer = c.get(&pods(), "ns", "web").await;
            assert!(is_other(&answer), "{answer:?}");
        }
        let patch = Patch { patch_type: PatchType::JsonMerge, body: serde_json::json!({}) };
        let answer = c.patch(&pods(), "ns", "web", &patch).await;
        assert!(is_other(&answer), "{answer:?}");
    }

    /// A proof list's page holding an item without a uid proves nothing.
    #[tokio::test]
    async fn a_list_page_with_an_item_that_is_not_an_object_is_an_error() {
        let mut page = list_reply("9", &["a"]);
        let body = String::from_utf8(page.body).unwrap();
        page.body =
            body.replace(r#"]}"#, r#",{"metadata":{"name":"b","namespace":"ns"}}]}"#).into_bytes();
        let (c, _) = cluster(vec![list_reply("9", &["a"]), page]);
        let good = c.list_page(&pods(), None, 500).await.unwrap();
        assert_eq!(good.items.len(), 1);
        let answer = c.list_page(&pods(), None, 500).await;
        assert!(is_other(&answer), "{answer:?}");
    }

    /// A namespaced object's calls need its namespace: without one, nothing is sent (the
    /// cluster-wide path would be answered 404, as if the object were gone).
    #[tokio::test]
    async fn a_namespaced_object_without_a_namespace_is_never_asked_for() {
        let (c, script) = cluster(vec![]);
        assert!(is_other(&c.get(&pods(), "", "web").await));
        let patch = Patch { patch_type: PatchType::JsonMerge, body: serde_json::json!({}) };
        assert!(is_other(&c.patch(&pods(), "", "web", &patch).await));
        assert!(is_other(&c.delete(&pods(), "", "web", &DeleteOptions::default()).await));
        assert!(script.requests().is_empty(), "{:?}", script.requests());
    }

    /// A call whose answer never comes fails after the call timeout instead of holding its
    /// worker.
    #[tokio::test]
    async fn a_call_without_an_answer_fails_after_the_timeout() {
        let (c, script) = cluster(vec![Reply::json(200, "", true), Reply::json(200, "", true)]);
        let c = c.with_call_timeout(Duration::from_millis(50));
        let answer = c.get(&pods(), "ns", "web").await;
        assert!(
            matches!(&answer, Err(ClusterError::Other { message, .. }) if message.contains("no answer")),
            "{answer:?}"
        );
        let answer = c.delete(&pods(), "ns", "web", &DeleteOptions::default()).await;
        assert!(is_other(&answer), "{answer:?}");
        assert_eq!(script.requests().len(), 2);
    }
}
