//! One metadata-only watcher per deletable resource: it lists and watches, and sends what it
//! saw to the batcher. Nothing else: turning notifications into graph events (old states,
//! relist deletes) is the engine's graph builder's job (`kube_gc_engine::builder`).
//!
//! Upstream: client-go's `reflector.go` (`ListAndWatch`, `watchHandler`) over the metadata
//! client (`metadata.go`, which asks for `PartialObjectMetadata(List)` as protobuf, JSON if the
//! server cannot); `graph_builder.go` (`controllerFor`); GC-SPEC.md §2.1.
//!
//! One file on purpose (over 600 lines): the list and the watch are one loop whose states
//! (which resourceVersion to resume from, when a relist must be consistent, when the watcher
//! counts as behind) pass between them, as in client-go's `reflector.go`; split, each half
//! would be read only with the other beside it. Its tests and its supervisor are apart
//! (`watchers/`).
//!
//! Each watcher is this list/watch loop. It asks for protobuf, as upstream's metadata informers
//! do, or JSON with `--kube-api-content-type application/json`, and reads each response by its
//! `Content-Type` (protobuf by [`kube_gc_wire`], JSON by [`crate::lean_meta`], its lists
//! item by item as `json_list.rs` finds them): only what the engine keeps of an object is
//! decoded, and a list is decoded as it arrives, never held whole. kube-rs's `watcher()` reads
//! JSON only, and says nothing when a broken watch is open again (see the last rule below), so
//! it is not used.
//!
//! Its [`Notification`]s (a list's objects between `ListStarted` and `ListDone`, then the
//! watch's changes) go to the batcher in batches ([`WatchBatch`]) of at most a page, under
//! these rules:
//!
//! - **Lists are paged and consistent** (500 objects a page, from etcd), but for the first
//!   list with `--list-from-watch-cache`, which may come from the watch cache
//!   (`resourceVersion=0`, whole) as long as nothing was emitted yet: a list older than what
//!   was emitted would fake deletes in the graph builder's relist diff (a lagging cache of an
//!   HA control plane may answer from the past).
//! - **A watch resumes** from the last resourceVersion seen (an object's or a bookmark's) when
//!   the server ends it (its timeout, 290 s here as in kube-rs); on `410 Gone` the loop
//!   relists, after a backoff. A watch silent 5 s past that timeout (a dead connection), or
//!   ended within a second with no event (client-go's "very short watch"), is a failure. A
//!   continue token that expires mid-list makes the list start over, whole (client-go's
//!   pager).
//! - **Failures back off** (0.8 s doubling to 30 s, each jittered by up to as much again, and
//!   back to the start two minutes after the last delay, as client-go's reflector: a list
//!   or an event does not reset it), and every failure but a 410 counts in
//!   `kube_gc_watch_errors_total`.
//! - **Silence is a failure:** a watch or a list page unanswered for two minutes (a whole
//!   list, fifteen), or a list whose body stops for two, is retried (a connection the
//!   network dropped).
//! - **No event is lost at a resume:** what was decoded is sent before the next request, and the
//!   resourceVersion a watch resumes from is that of the last event sent.
//! - **A watcher says when it is behind:** from the end of a list (what changed since the
//!   list's resourceVersion is still to come) and with [`Notification::Interrupted`] when a
//!   watch fails, until [`Notification::Resumed`], once a watch has delivered what was
//!   missed: its stream has paused for half a second (so a watch with nothing to send is back
//!   after half a second), or it has read its stream for two seconds on a resource whose
//!   events never pause. A watch reopened in step that takes over 250 ms to answer makes the
//!   watcher behind too.
//!   So orphanings and foreground deletions wait for what it missed
//!   (`kube_gc_engine::collector::lagging_watchers`), and not much longer.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http_body_util::BodyExt;
use kube::Client;
use kube::api::{Api, ListParams, VersionMatch, WatchParams};
use kube::client::Body;
use kube::core::Request;
use kube_gc_engine::cluster::Resource;
use kube_gc_engine::{Notification, WatchBatch, WatchSource};
use kube_gc_wire::{FrameReader, OrStatus, WatchEventType, WireError};
use tokio::sync::mpsc;

use crate::batcher::WatcherMsg;
use crate::flags::ContentType;
use crate::json_list::JsonListDecoder;
use crate::lean_meta::LeanObject;

/// How the watchers list and watch (from the flags).
#[derive(Clone, Copy, Debug)]
pub struct WatcherOptions {
    /// Notifications per batch sent to the ingest loop (`--batch-size`), at most a page.
    pub batch_size: usize,
    /// The first list may come from the watch cache (`--list-from-watch-cache`).
    pub list_from_watch_cache: bool,
    /// What lists and watches ask for (`--kube-api-content-type`).
    pub content_type: ContentType,
}

/// The `Accept` header of a metadata list with JSON asked for (the object whole if the server
/// cannot send its metadata alone: the decoder reads only `metadata` either way).
const JSON_LIST_ACCEPT: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
/// The `Accept` header of a metadata watch with JSON asked for.
const JSON_OBJECT_ACCEPT: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// Where a watcher's requests go, and what they ask for.
struct Endpoint {
    client: Client,
    /// The resource's collection URL, cluster-wide.
    request: Request,
    /// The `Accept` header of a list page.
    list_accept: &'static str,
    /// The `Accept` header of a watch.
    watch_accept: &'static str,
}

impl Endpoint {
    fn new(client: Client, resource: &Resource, content_type: ContentType) -> Endpoint {
        let ar = crate::kube_cluster::api_resource(resource);
        let request = Request::new(Api::<LeanObject>::all_with(client.clone(), &ar).resource_url());
        let (list_accept, watch_accept) = match content_type {
            ContentType::Protobuf => (kube_gc_wire::LIST_ACCEPT, kube_gc_wire::OBJECT_ACCEPT),
            ContentType::Json => (JSON_LIST_ACCEPT, JSON_OBJECT_ACCEPT),
        };
        Endpoint { client, request, list_accept, watch_accept }
    }

    /// Sends a request `self.request` built, asking for `accept`; see [`send`]. Fails if no
    /// answer comes `within`.
    async fn send(
        &self,
        req: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
        accept: &'static str,
        within: Duration,
    ) -> Result<(String, Body), Failure> {
        let mut req = req.map_err(|e| Failure::Other(e.to_string()))?;
        req.headers_mut().insert(ACCEPT, HeaderValue::from_static(accept));
        match tokio::time::timeout(within, send(&self.client, req)).await {
            Ok(answer) => answer,
            Err(_) => Err(Failure::Other(format!("no answer in {within:?}"))),
        }
    }
}

/// How long a list or watch request may wait for its answer, and a list for the next part
/// of its body: twice the API server's own request timeout (60 s by default), by which it
/// has answered a list or failed it. Past it the connection is presumed dead (half-open
/// after a network failure, or a proxy that accepts and never answers) and the request is
/// retried after a backoff; without it the watcher, and the graph's copy of its resource,
/// would wait for the kernel to give up on the connection, which it never does for one
/// with nothing left to send. Time spent waiting for room in the channel to the graph
/// builder is not counted.
const SILENCE_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a whole (unpaged) list may wait for its answer: the server answers once it has
/// the whole list (from etcd, after a continue token expired, every object of the resource),
/// within its own request timeout, which operators of large clusters sometimes raise to
/// minutes; past this, no configuration would still be working on it.
const WHOLE_LIST_ANSWER_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Objects per list page, client-go's.
const PAGE_SIZE: u32 = 500;
/// The server-side timeout of a watch request, kube-rs's.
const WATCH_TIMEOUT_SECONDS: u32 = 290;
/// How long past the server's timeout a silent watch is given before it is taken as dead.
const WATCH_IDLE_MARGIN: Duration = Duration::from_secs(5);

/// Why a request or a stream ended early.
#[derive(Debug)]
enum Failure {
    /// `410 Gone`: the resourceVersion (or continue token) is too old; relist.
    Gone(String),
    /// Anything else: back off and retry where the loop was.
    Other(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Gone(m) => write!(f, "410 Gone: {m}"),
            Failure::Other(m) => f.write_str(m),
        }
    }
}

impl From<WireError> for Failure {
    fn from(e: WireError) -> Failure {
        Failure::Other(e.to_string())
    }
}

/// The ingest loop is gone: the watcher stops.
struct Closed;

/// Notifications on their way to the batcher, sent in batches of at most `batch_size`.
struct Outbox {
    tx: mpsc::Sender<WatcherMsg>,
    source: WatchSource,
    batch_size: usize,
    pending: Vec<Notification>,
    /// Whether any object was ever sent (the first list may come from the watch cache until
    /// then; see the module docs).
    emitted: bool,
}

impl Outbox {
    async fn push(&mut self, n: Notification) -> Result<(), Closed> {
        self.emitted |= matches!(n, Notification::Listed(_) | Notification::Applied(_));
        self.pending.push(n);
        if self.pending.len() >= self.batch_size { self.flush().await } else { Ok(()) }
    }

    /// The watcher misses changes from now on (its watch broke, or is slow to open): says so,
    /// unless it is `behind` already, and marks it behind.
    async fn fall_behind(&mut self, behind: &mut bool) -> Result<(), Closed> {
        if !std::mem::replace(behind, true) {
            self.push(Notification::Interrupted).await?;
            self.flush().await?;
        }
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), Closed> {
        if self.pending.is_empty() {
            return Ok(());
        }
        // Sized for a whole batch at once: grown by pushes instead, every batch's buffer was
        // reallocated several times over (copying notifications of ~160 bytes each).
        let notifications =
            std::mem::replace(&mut self.pending, Vec::with_capacity(self.batch_size));
        let batch = WatchBatch { source: self.source.clone(), notifications };
        self.tx.send(WatcherMsg::Batch(batch)).await.map_err(|_| Closed)
    }
}

/// Backoff between failures, client-go's reflector's: 0.8 s doubling to 30 s, each delay
/// stretched by a random jitter of up to as much again (so watchers that failed together, say
/// when the API server restarted, do not all retry at once), and back to the start two
/// minutes after the last delay. kube-runtime's watcher backoff, which follows the same
/// rules.
struct Backoff(kube::runtime::watcher::DefaultBackoff);

impl Backoff {
    fn new() -> Backoff {
        Backoff(kube::runtime::watcher::DefaultBackoff::default())
    }

    /// The delay before the next retry: the first again if the last was over two minutes
    /// ago (the failures were over), else twice the last, up to 30 s, with jitter.
    fn step(&mut self) -> Duration {
        // It never runs out; were it to, the longest delay (30 s and its jitter).
        self.0.next().unwrap_or(Duration::from_secs(60))
    }
}

/// Runs the watcher of `source`'s resource until the task is aborted or the ingest loop is
/// gone, sending batches to `tx`. The first list's completion sets the resource's
/// `kube_gc_warmup_seconds`.
pub async fn run_watcher(
    client: Client,
    resource: Resource,
    source: WatchSource,
    tx: mpsc::Sender<WatcherMsg>,
    metrics: Arc<crate::metrics::Metrics>,
    options: WatcherOptions,
) {
    let WatcherOptions { batch_size, list_from_watch_cache, content_type } = options;
    let started = std::time::Instant::now();
    let key = source.resource.clone();
    let endpoint = Endpoint::new(client, &resource, content_type);
    // Lists send a page a batch (500), a whole list too: the channel to the ingest loop is
    // bounded in batches, and larger ones would let more of a list wait in memory.
    let batch_size = batch_size.clamp(1, PAGE_SIZE as usize);
    let mut out = Outbox { tx, source, batch_size, pending: Vec::new(), emitted: false };
    let mut backoff = Backoff::new();
    let mut synced = false;
    'relist: loop {
        let from_cache = list_from_watch_cache && !out.emitted;
        let listed = list(&endpoint, from_cache, &mut out).await;
        if out.flush().await.is_err() {
            return;
        }
        let mut resource_version = match listed {
            Ok(Ok(rv)) => rv,
            Ok(Err(failure)) => {
                tracing::warn!(resource = %key, error = %failure, "list failed, retrying with backoff");
                metrics.watch_errors.inc();
                tokio::time::sleep(backoff.step()).await;
                continue 'relist;
            }
            Err(Closed) => return,
        };
        if !synced {
            synced = true;
            metrics.set_warmup_seconds(&key, started.elapsed().as_secs_f64());
        }
        // The backoff is not reset by a list or an event: as client-go's reflector's
        // (`ExponentialBackoffManager`), it starts over only two minutes after its last delay,
        // so a list whose watch expires at once (a busy resource whose consistent list
        // outlasts the watch cache's window) relists ever more slowly, up to every 30 s,
        // rather than every second for ever.
        // Whether the graph builder counts this watcher as behind: from the list's end (what
        // changed since its resourceVersion is still to come) or a broken watch, until a
        // watch has delivered what was missed.
        let mut behind = true;
        loop {
            let mut stream = WatchStream { resource_version: &mut resource_version, behind };
            let watched = watch(&endpoint, &mut stream, &mut out).await;
            behind = stream.behind;
            if out.flush().await.is_err() {
                return;
            }
            match watched {
                Ok(Ok(())) => {} // the server ended the watch: resume
                Ok(Err(failure)) => {
                    let gone = matches!(failure, Failure::Gone(_));
                    if gone {
                        tracing::debug!(resource = %key, message = %failure, "watch expired, relisting");
                    } else {
                        tracing::warn!(resource = %key, error = %failure, "watch failed, retrying with backoff");
                        metrics.watch_errors.inc();
                    }
                    // Behind from now on: orphanings and foreground deletions wait for what
                    // this watch misses.
                    if out.fall_behind(&mut behind).await.is_err() {
                        return;
                    }
                    // A relist too waits its turn, as client-go's reflector's does: a server
                    // that expires every watch at once is not listed in a loop.
                    tokio::time::sleep(backoff.step()).await;
                    if gone {
                        continue 'relist;
                    }
                }
                Err(Closed) => return,
            }
        }
    }
}

/// Lists every page into `out`, between `ListStarted` and `ListDone`; returns the list's
/// resourceVersion.
async fn list(
    endpoint: &Endpoint,
    from_cache: bool,
    out: &mut Outbox,
) -> Result<Result<String, Failure>, Closed> {
    out.push(Notification::ListStarted).await?;
    // Sent at once, not with the first page: a relist after a watch expired starts the
    // watcher's time behind (the graph builder's), and a consistent list may wait seconds for
    // its first page while the lost watch's events are missing from the graph.
    out.flush().await?;
    let mut continue_token = None;
    // Unpaged (but consistent) once a continue token expired, as client-go's pager does
    // (`FullListIfExpired`): a list that outlives etcd's compaction (about 5 minutes) would
    // expire again if paged again, and never complete.
    let mut whole = false;
    loop {
        let mut params = ListParams::default();
        if from_cache && !whole && continue_token.is_none() {
            // Whole: the watch cache answers without pages (kube-rs sends no limit either).
            // Only the first request: once pages were sent, a new list is a relist, which a
            // lagging cache could answer from before them (see `WatcherOptions`).
            params.resource_version = Some("0".into());
            params.version_match = Some(VersionMatch::NotOlderThan);
        } else if !whole {
            // A continue token carries the list's resourceVersion; the request must not.
            params.limit = Some(PAGE_SIZE);
            params.continue_token = continue_token.take();
        }
        let paging = params.continue_token.is_some();
        let page = match fetch_page(endpoint, &params, out).await? {
            Ok(page) => page,
            Err(Failure::Gone(m)) if paging => {
                tracing::info!(resource = %out.source.resource, message = %m, "continue token expired: listing again, whole");
                whole = true;
                // The pages sent are part of no complete list: a new one starts.
                out.push(Notification::ListStarted).await?;
                out.flush().await?;
                continue;
            }
            Err(failure) => return Ok(Err(failure)),
        };
        // A page a batch at most: the graph builder diffs a relist page by page.
        out.flush().await?;
        match page.continue_token {
            Some(token) => continue_token = Some(token),
            None if page.resource_version.is_empty() => {
                return Ok(Err(Failure::Other("a list without a resourceVersion".into())));
            }
            None => {
                out.push(Notification::ListDone).await?;
                return Ok(Ok(page.resource_version));
            }
        }
    }
}

/// Fetches one page (or a whole list), sending its objects to `out` as they are decoded;
/// returns the page's resourceVersion and continue token (no items).
async fn fetch_page(
    endpoint: &Endpoint,
    params: &ListParams,
    out: &mut Outbox,
) -> Result<Result<kube_gc_wire::ListPage, Failure>, Closed> {
    let req = endpoint.request.list(params);
    let within = if params.limit.is_some() { SILENCE_TIMEOUT } else { WHOLE_LIST_ANSWER_TIMEOUT };
    let (content_type, body) = match endpoint.send(req, endpoint.list_accept, within).await {
        Ok(response) => response,
        Err(failure) => return Ok(Err(failure)),
    };
    // Decoded as it arrives, in either format: a whole list from the watch cache is never
    // held at once, and the objects reach the graph while the rest is still on the wire.
    let mut decoder = ListDecoder::for_content_type(&content_type);
    let mut body = body.into_data_stream();
    loop {
        match tokio::time::timeout(SILENCE_TIMEOUT, body.next()).await {
            Ok(Some(Ok(chunk))) => decoder.push(&chunk),
            Ok(Some(Err(e))) => return Ok(Err(Failure::Other(e.to_string()))),
            Ok(None) => break,
            Err(_) => {
                let message = format!("a list silent for {SILENCE_TIMEOUT:?}");
                return Ok(Err(Failure::Other(message)));
            }
        }
        loop {
            match decoder.next_item() {
                Ok(Some(item)) => out.push(Notification::Listed(item)).await?,
                Ok(None) => break,
                Err(failure) => return Ok(Err(failure)),
            }
        }
    }
    Ok(decoder.finish())
}

/// A list body's decoder, by its `Content-Type`.
enum ListDecoder {
    Protobuf(kube_gc_wire::ListStreamDecoder),
    Json(JsonListDecoder),
}

impl ListDecoder {
    fn for_content_type(content_type: &str) -> ListDecoder {
        if kube_gc_wire::is_protobuf(content_type) {
            ListDecoder::Protobuf(kube_gc_wire::ListStreamDecoder::new())
        } else {
            ListDecoder::Json(JsonListDecoder::new())
        }
    }

    fn push(&mut self, chunk: &Bytes) {
        match self {
            ListDecoder::Protobuf(decoder) => decoder.push(chunk),
            ListDecoder::Json(decoder) => decoder.push(chunk),
        }
    }

    fn next_item(&mut self) -> Result<Option<kube_gc_engine::ObjectMeta>, Failure> {
        match self {
            ListDecoder::Protobuf(decoder) => decoder.next_item().map_err(Failure::from),
            ListDecoder::Json(decoder) => decoder.next_item().map_err(Failure::Other),
        }
    }

    /// The list's resourceVersion and continue token (no items).
    fn finish(self) -> Result<kube_gc_wire::ListPage, Failure> {
        match self {
            ListDecoder::Protobuf(decoder) => decoder.finish().map_err(Failure::from),
            ListDecoder::Json(decoder) => decoder.finish().map_err(Failure::Other),
        }
    }
}

/// Where a watch resumes from, and whether the watcher is behind.
struct WatchStream<'a> {
    /// Follows every event pushed.
    resource_version: &'a mut String,
    /// Set while the watcher is behind (a list ended, or the last watch broke); cleared, with
    /// [`Notification::Resumed`] pushed, once this watch has delivered what was missed.
    behind: bool,
}

impl WatchStream<'_> {
    /// The watch has delivered what was missed: says so after it.
    async fn resumed(&mut self, out: &mut Outbox) -> Result<(), Closed> {
        if std::mem::take(&mut self.behind) {
            out.push(Notification::Resumed).await?;
            out.flush().await?;
        }
        Ok(())
    }
}

/// After a list or a broken watch, how long the new watch's stream must pause to count as
/// having delivered what the watcher missed. The server sends that backlog first, an event a
/// chunk, at once from its watch cache; a pause this long means it is through, and the
/// decisions waiting for it can go (a new watch with nothing to send is back after this
/// long). The first chunk alone is no proof: the events after it may still be on their way,
/// and an orphaning let through between them would miss a dependent they carry (simcluster's
/// chaos holds events back up to 300 ms, and found that). A server that accepts the watch
/// and then refuses it (a 410 Gone as an ERROR event) does so at once, well within it.
const RESUMED_AFTER_QUIET: Duration = Duration::from_millis(500);

/// After a list or a broken watch, when the new watch counts as back however busy its
/// stream: a resource whose events never pause for [`RESUMED_AFTER_QUIET`] has long had its
/// backlog by then, and holding its decisions longer would only delay them. Counted in time
/// spent waiting for the stream only: while the watcher waits for room in the channel to the
/// graph builder (a busy builder), the backlog waits unread, and the clock must not run.
const RESUMED_AT_THE_LATEST: Duration = Duration::from_secs(2);

/// How long a watch reopened in step (the server ended the one before, its timeout) may take
/// to answer before the watcher counts as behind: changes made meanwhile reach the graph only
/// once it answers, and a request queued by the server (its priority and fairness, a
/// restarted server's watch cache) can take seconds. Quick answers, the rule, hold nothing.
const REOPENED_IN_STEP_WITHIN: Duration = Duration::from_millis(250);

/// A watch that ends within this time with no event at all is a failure, not a server's
/// timeout (client-go's "very short watch"): reopening it at once would loop against a server
/// or proxy that closes every watch, and it backs off instead.
const VERY_SHORT_WATCH: Duration = Duration::from_secs(1);

/// Watches from `stream.resource_version` into `out` until the server ends the stream (`Ok`)
/// or it fails.
async fn watch(
    endpoint: &Endpoint,
    stream: &mut WatchStream<'_>,
    out: &mut Outbox,
) -> Result<Result<(), Failure>, Closed> {
    let params =
        WatchParams { timeout: Some(WATCH_TIMEOUT_SECONDS), bookmarks: true, ..Default::default() };
    let req = endpoint.request.watch(&params, stream.resource_version);
    let opened = tokio::time::Instant::now();
    let sent = endpoint.send(req, endpoint.watch_accept, SILENCE_TIMEOUT);
    let mut sent = std::pin::pin!(sent);
    let answer = match tokio::time::timeout(REOPENED_IN_STEP_WITHIN, &mut sent).await {
        Ok(answer) => answer,
        Err(_) => {
            out.fall_behind(&mut stream.behind).await?;
            sent.await
        }
    };
    let (content_type, body) = match answer {
        Ok(response) => response,
        Err(failure) => return Ok(Err(failure)),
    };
    let mut decoder = StreamDecoder::for_content_type(&content_type);
    let mut body = body.into_data_stream();
    let idle = Duration::from_secs(WATCH_TIMEOUT_SECONDS.into()) + WATCH_IDLE_MARGIN;
    // What is left of RESUMED_AT_THE_LATEST: time spent waiting for the stream.
    let mut reading_left = RESUMED_AT_THE_LATEST;
    let mut delivered = false;
    loop {
        let wait = match stream.behind {
            true => RESUMED_AFTER_QUIET.min(reading_left),
            false => idle,
        };
        let reading = tokio::time::Instant::now();
        let next = tokio::time::timeout(wait, body.next()).await;
        reading_left = reading_left.saturating_sub(reading.elapsed());
        let chunk = match next {
            Err(_) if stream.behind => {
                // Paused (or busy past the latest): what was missed is delivered, and what
                // was decoded of it sent.
                stream.resumed(out).await?;
                continue;
            }
            // The server ends every watch at its timeout: silent past it, the connection is
            // presumed dead, and what changed meanwhile is missed until a new watch delivers
            // it (a failure, so that the watcher counts as behind until then).
            Err(_) => return Ok(Err(Failure::Other(format!("watch silent for {idle:?}")))),
            Ok(None) if !delivered && opened.elapsed() < VERY_SHORT_WATCH => {
                return Ok(Err(Failure::Other("very short watch: ended at once, no event".into())));
            }
            Ok(None) => return Ok(Ok(())),
            Ok(Some(Err(e))) => return Ok(Err(Failure::Other(e.to_string()))),
            Ok(Some(Ok(chunk))) => chunk,
        };
        decoder.push(&chunk);
        loop {
            let event = match decoder.next_event() {
                Ok(Some(event)) => event,
                Ok(None) => break,
                Err(failure) => return Ok(Err(failure)),
            };
            let meta = match (event.event_type, event.object) {
                (WatchEventType::Error, OrStatus::Status(s)) => {
                    let reason = s.reason.as_deref().unwrap_or_default();
                    return Ok(Err(status_failure(s.code, reason, s.message.unwrap_or_default())));
                }
                (t, OrStatus::Status(_)) => {
                    return Ok(Err(Failure::Other(format!(
                        "a {} event holding a Status",
                        t.as_str()
                    ))));
                }
                (_, OrStatus::Ok(meta)) => meta,
            };
            delivered = true;
            if meta.resource_version.is_empty() {
                // Without it the watch could not resume where it is: start over.
                return Ok(Err(Failure::Gone("a watch event without a resourceVersion".into())));
            }
            let next_version = meta.resource_version.clone();
            match event.event_type {
                WatchEventType::Added | WatchEventType::Modified => {
                    out.push(Notification::Applied(meta)).await?;
                }
                WatchEventType::Deleted => out.push(Notification::Deleted(meta)).await?,
                WatchEventType::Bookmark => {}
                WatchEventType::Error => {
                    return Ok(Err(Failure::Other("an ERROR event holding an object".into())));
                }
            }
            *stream.resource_version = next_version;
        }
        out.flush().await?;
    }
}

/// The most of a failed response's body read for its Status.
const MAX_ERROR_BODY_BYTES: usize = 1 << 20;

/// Sends `req`; a response that is not a success becomes a [`Failure`] (its `Status` read as
/// protobuf or JSON).
async fn send(client: &Client, req: http::Request<Vec<u8>>) -> Result<(String, Body), Failure> {
    let response =
        client.send(req.map(Body::from)).await.map_err(|e| Failure::Other(e.to_string()))?;
    let content_type = (response.headers().get(CONTENT_TYPE))
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let code = response.status().as_u16();
    if response.status().is_success() {
        return Ok((content_type, response.into_body()));
    }
    // A Status is small; a proxy's error page may not be, and is not read past this.
    let body = http_body_util::Limited::new(response.into_body(), MAX_ERROR_BODY_BYTES)
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let (reason, message) = if kube_gc_wire::is_protobuf(&content_type) {
        kube_gc_wire::decode_status(body)
            .map(|s| (s.reason.unwrap_or_default(), s.message.unwrap_or_default()))
            .unwrap_or_default()
    } else {
        serde_json::from_slice::<kube::core::Status>(&body)
            .map(|s| (s.reason, s.message))
            .unwrap_or_default()
    };
    Err(status_failure(Some(code.into()), &reason, message))
}

/// A failed request or an ERROR event: an expired resourceVersion (client-go's
/// `isExpiredError`: reason `Expired` or `Gone`, or code 410) relists; anything else is
/// retried from where the watch was.
fn status_failure(code: Option<i32>, reason: &str, message: String) -> Failure {
    match code {
        _ if matches!(reason, "Expired" | "Gone") => Failure::Gone(message),
        Some(410) => Failure::Gone(message),
        Some(code) => Failure::Other(format!("{code}: {message}")),
        None => Failure::Other(message),
    }
}

/// A watch stream's decoder, by its `Content-Type`.
enum StreamDecoder {
    /// Length-prefixed `WatchEvent` frames.
    Protobuf(FrameReader),
    /// One JSON `WatchEvent` a line; the bytes of an incomplete line.
    Json(Vec<u8>),
}

impl StreamDecoder {
    fn for_content_type(content_type: &str) -> StreamDecoder {
        if kube_gc_wire::is_protobuf(content_type) {
            StreamDecoder::Protobuf(FrameReader::new())
        } else {
            StreamDecoder::Json(Vec::new())
        }
    }

    fn push(&mut self, chunk: &Bytes) {
        match self {
            StreamDecoder::Protobuf(frames) => frames.push(chunk),
            StreamDecoder::Json(buffer) => buffer.extend_from_slice(chunk),
        }
    }

    /// The next whole event, `Ok(None)` until more bytes arrive.
    fn next_event(&mut self) -> Result<Option<kube_gc_wire::WatchEvent>, Failure> {
        match self {
            StreamDecoder::Protobuf(frames) => match frames.next_frame()? {
                Some(frame) => Ok(Some(kube_gc_wire::decode_watch_event(frame)?)),
                None => Ok(None),
            },
            StreamDecoder::Json(buffer) => loop {
                let Some(end) = buffer.iter().position(|&b| b == b'\n') else {
                    // One object's metadata, as a protobuf frame is: more is a broken stream.
                    if buffer.len() > kube_gc_wire::MAX_FRAME_BYTES {
                        let max = kube_gc_wire::MAX_FRAME_BYTES;
                        return Err(Failure::Other(format!("a watch event over {max} bytes")));
                    }
                    return Ok(None);
                };
                let line: Vec<u8> = buffer.drain(..=end).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return crate::lean_meta::decode_watch_event(&line)
                    .map(Some)
                    .map_err(Failure::Other);
            },
        }
    }
}

mod supervisor;
pub use supervisor::supervise;

#[cfg(test)]
mod tests;
