//! The list/watch loop that reads protobuf, as upstream's metadata informers do: kube-rs's
//! watcher reads JSON only, so with `--kube-api-content-type application/vnd.kubernetes.protobuf`
//! each watcher runs this loop instead.
//!
//! Upstream: client-go's `reflector.go` (`ListAndWatch`, `watchHandler`) over the metadata
//! client (`metadata.go`, which asks for `PartialObjectMetadata(List)` as protobuf, JSON if the
//! server cannot); GC-SPEC.md §2.1.
//!
//! It emits exactly what kube-rs's watcher does ([`Notification`]s: a list's objects between
//! `ListStarted` and `ListDone`, then the watch's changes), under the same rules:
//!
//! - **Lists are paged and consistent** (500 objects a page, from etcd), but for the first
//!   list with `--list-from-watch-cache`, which may come from the watch cache
//!   (`resourceVersion=0`, whole) as long as nothing was emitted yet: a list older than what
//!   was emitted would fake deletes in the graph builder's relist diff.
//! - **A watch resumes** from the last resourceVersion seen (an object's or a bookmark's) when
//!   the server ends it (its timeout, 290 s here as in kube-rs) or it is idle 5 s past that;
//!   on `410 Gone` the loop relists.
//! - **Failures back off** (0.8 s doubling to 30 s, reset by a list that completes or a watch
//!   event), and every failure counts in `kube_gc_watch_errors_total`.
//! - **No event is lost at a resume:** what was decoded is sent before the next request, and the
//!   resourceVersion a watch resumes from is that of the last event sent.
//! - **A broken watch says so:** [`Notification::Interrupted`] when a watch fails, and
//!   [`Notification::Resumed`] once a new one is seen to work (its first events, or
//!   [`RESUMED_AFTER_QUIET`] open and silent), so that orphanings and foreground deletions
//!   wait for what it missed
//!   (`kube_gc_engine::collector::lagging_watchers`).
//!
//! Each response is read by its `Content-Type`: protobuf ([`kube_gc_wire`]) or, from a server
//! that cannot encode metadata as protobuf, JSON (the same lean decoder as kube-rs's path,
//! [`LeanObject`]).

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
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use crate::batcher::WatcherMsg;
use crate::lean_meta::LeanObject;
use crate::watchers::WatcherOptions;

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

/// Exponential backoff between failures: 0.8 s, doubling, at most 30 s.
struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(800);
    const MAX: Duration = Duration::from_secs(30);

    fn new() -> Backoff {
        Backoff { next: Backoff::FIRST }
    }

    /// The delay before the next retry, and doubles the one after.
    fn step(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(Backoff::MAX);
        now
    }

    fn reset(&mut self) {
        self.next = Backoff::FIRST;
    }
}

/// Runs the list/watch loop of `source`'s resource until the task is aborted or the ingest
/// loop is gone. `on_synced` is called once, when the first list is complete.
pub(crate) async fn run(
    client: Client,
    resource: Resource,
    source: WatchSource,
    tx: mpsc::Sender<WatcherMsg>,
    metrics: Arc<crate::metrics::Metrics>,
    options: WatcherOptions,
    mut on_synced: impl FnMut(),
) {
    let WatcherOptions { batch_size, list_from_watch_cache, .. } = options;
    let key = source.resource.clone();
    let ar = crate::kube_cluster::api_resource(&resource);
    let request = Request::new(Api::<LeanObject>::all_with(client.clone(), &ar).resource_url());
    // Lists send a page a batch (500), a whole list too: the channel to the ingest loop is
    // bounded in batches, and larger ones would let more of a list wait in memory.
    let batch_size = batch_size.clamp(1, PAGE_SIZE as usize);
    let mut out = Outbox { tx, source, batch_size, pending: Vec::new(), emitted: false };
    let mut backoff = Backoff::new();
    let mut synced = false;
    'relist: loop {
        let from_cache = list_from_watch_cache && !out.emitted;
        let listed = list(&client, &request, from_cache, &mut out).await;
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
            on_synced();
        }
        backoff.reset();
        // Whether a watch broke and none has resumed since (a relist's end says in step too).
        let mut interrupted = false;
        loop {
            let mut stream = WatchStream { resource_version: &mut resource_version, interrupted };
            let watched = watch(&client, &request, &mut stream, &mut out, &mut backoff).await;
            interrupted = stream.interrupted;
            if out.flush().await.is_err() {
                return;
            }
            match watched {
                Ok(Ok(())) => {} // the server ended the watch: resume
                Ok(Err(Failure::Gone(m))) => {
                    tracing::debug!(resource = %key, message = %m, "watch expired, relisting");
                    continue 'relist;
                }
                Ok(Err(failure)) => {
                    tracing::warn!(resource = %key, error = %failure, "watch failed, retrying with backoff");
                    metrics.watch_errors.inc();
                    if !interrupted {
                        // Behind from now on: orphanings and foreground deletions
                        // wait for what this watch misses.
                        interrupted = true;
                        let sent = out.push(Notification::Interrupted).await;
                        if sent.is_err() || out.flush().await.is_err() {
                            return;
                        }
                    }
                    tokio::time::sleep(backoff.step()).await;
                }
                Err(Closed) => return,
            }
        }
    }
}

/// Lists every page into `out`, between `ListStarted` and `ListDone`; returns the list's
/// resourceVersion.
async fn list(
    client: &Client,
    request: &Request,
    from_cache: bool,
    out: &mut Outbox,
) -> Result<Result<String, Failure>, Closed> {
    out.push(Notification::ListStarted).await?;
    let mut continue_token = None;
    loop {
        let mut params = ListParams::default();
        if from_cache && continue_token.is_none() {
            // Whole: the watch cache answers without pages (kube-rs sends no limit either).
            params.resource_version = Some("0".into());
            params.version_match = Some(VersionMatch::NotOlderThan);
        } else {
            // A continue token carries the list's resourceVersion; the request must not.
            params.limit = Some(PAGE_SIZE);
            params.continue_token = continue_token.take();
        }
        let page = match fetch_page(client, request, &params, out).await? {
            Ok(page) => page,
            Err(failure) => return Ok(Err(failure)),
        };
        // A page a batch at most, as kube-rs's watcher chunks them.
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
    client: &Client,
    request: &Request,
    params: &ListParams,
    out: &mut Outbox,
) -> Result<Result<kube_gc_wire::ListPage, Failure>, Closed> {
    let mut req = match request.list(params) {
        Ok(req) => req,
        Err(e) => return Ok(Err(Failure::Other(e.to_string()))),
    };
    req.headers_mut().insert(ACCEPT, HeaderValue::from_static(kube_gc_wire::LIST_ACCEPT));
    let (content_type, body) = match send(client, req).await {
        Ok(response) => response,
        Err(failure) => return Ok(Err(failure)),
    };
    if !kube_gc_wire::is_protobuf(&content_type) {
        let body = match body.collect().await {
            Ok(body) => body.to_bytes(),
            Err(e) => return Ok(Err(Failure::Other(e.to_string()))),
        };
        let mut page = match decode_json_list(&body) {
            Ok(page) => page,
            Err(failure) => return Ok(Err(failure)),
        };
        for item in std::mem::take(&mut page.items) {
            out.push(Notification::Listed(item)).await?;
        }
        return Ok(Ok(page));
    }
    // Decoded as it arrives: a whole list from the watch cache is never held at once, and
    // the objects reach the graph while the rest is still on the wire.
    let mut decoder = kube_gc_wire::ListStreamDecoder::new();
    let mut body = body.into_data_stream();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(chunk) => decoder.push(&chunk),
            Err(e) => return Ok(Err(Failure::Other(e.to_string()))),
        }
        loop {
            match decoder.next_item() {
                Ok(Some(item)) => out.push(Notification::Listed(item)).await?,
                Ok(None) => break,
                Err(e) => return Ok(Err(e.into())),
            }
        }
    }
    Ok(decoder.finish().map_err(Failure::from))
}

/// Where a watch resumes from, and whether the one before broke.
struct WatchStream<'a> {
    /// Follows every event pushed.
    resource_version: &'a mut String,
    /// Set while the watch is behind (the last one broke); cleared, with
    /// [`Notification::Resumed`] pushed, once this one is seen to work.
    interrupted: bool,
}

impl WatchStream<'_> {
    /// A broken watch works again: says so after what it delivered so far.
    async fn resumed(&mut self, out: &mut Outbox) -> Result<(), Closed> {
        if std::mem::take(&mut self.interrupted) {
            out.push(Notification::Resumed).await?;
            out.flush().await?;
        }
        Ok(())
    }
}

/// After a broken watch, how long a new one must stay open and silent to count as working
/// (the first chunk of events counts sooner). A server that accepts the watch and then
/// refuses it (a 410 Gone as an ERROR event) does so at once: a watcher told "back in step"
/// before that would be back behind a moment later, and an orphaning let through in between.
const RESUMED_AFTER_QUIET: Duration = Duration::from_millis(250);

/// Watches from `stream.resource_version` into `out` until the server ends the stream (`Ok`)
/// or it fails.
async fn watch(
    client: &Client,
    request: &Request,
    stream: &mut WatchStream<'_>,
    out: &mut Outbox,
    backoff: &mut Backoff,
) -> Result<Result<(), Failure>, Closed> {
    let params =
        WatchParams { timeout: Some(WATCH_TIMEOUT_SECONDS), bookmarks: true, ..Default::default() };
    let mut req = match request.watch(&params, stream.resource_version) {
        Ok(req) => req,
        Err(e) => return Ok(Err(Failure::Other(e.to_string()))),
    };
    req.headers_mut().insert(ACCEPT, HeaderValue::from_static(kube_gc_wire::OBJECT_ACCEPT));
    let (content_type, body) = match send(client, req).await {
        Ok(response) => response,
        Err(failure) => return Ok(Err(failure)),
    };
    let mut decoder = StreamDecoder::for_content_type(&content_type);
    let mut body = body.into_data_stream();
    let idle = Duration::from_secs(WATCH_TIMEOUT_SECONDS.into()) + WATCH_IDLE_MARGIN;
    loop {
        let wait = if stream.interrupted { RESUMED_AFTER_QUIET } else { idle };
        let chunk = match tokio::time::timeout(wait, body.next()).await {
            Err(_) if stream.interrupted => {
                // Open and silent: nothing was missed, or the server would be sending it.
                stream.resumed(out).await?;
                continue;
            }
            Err(_) | Ok(None) => return Ok(Ok(())),
            Ok(Some(Err(e))) => return Ok(Err(Failure::Other(e.to_string()))),
            Ok(Some(Ok(chunk))) => chunk,
        };
        decoder.push(&chunk);
        let mut decoded = false;
        loop {
            let event = match decoder.next_event() {
                Ok(Some(event)) => {
                    decoded = true;
                    event
                }
                Ok(None) => break,
                Err(failure) => return Ok(Err(failure)),
            };
            let meta = match (event.event_type, event.object) {
                (WatchEventType::Error, OrStatus::Status(s)) => {
                    return Ok(Err(status_failure(s.code, s.message.unwrap_or_default())));
                }
                (t, OrStatus::Status(_)) => {
                    return Ok(Err(Failure::Other(format!(
                        "a {} event holding a Status",
                        t.as_str()
                    ))));
                }
                (_, OrStatus::Ok(meta)) => meta,
            };
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
            backoff.reset();
        }
        out.flush().await?;
        if decoded {
            // Events flow (what was missed first): the watch works.
            stream.resumed(out).await?;
        }
    }
}

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
    let body = response.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let message = if kube_gc_wire::is_protobuf(&content_type) {
        kube_gc_wire::decode_status(body).ok().and_then(|s| s.message).unwrap_or_default()
    } else {
        serde_json::from_slice::<kube::core::Status>(&body).map(|s| s.message).unwrap_or_default()
    };
    Err(status_failure(Some(code.into()), message))
}

fn status_failure(code: Option<i32>, message: String) -> Failure {
    match code {
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
                    return Ok(None);
                };
                let line: Vec<u8> = buffer.drain(..=end).collect();
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return decode_json_event(&line).map(Some);
            },
        }
    }
}

#[derive(Deserialize)]
struct JsonList {
    #[serde(default)]
    metadata: JsonListMeta,
    #[serde(default)]
    items: Option<Vec<LeanObject>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct JsonListMeta {
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default, rename = "continue")]
    continue_token: Option<String>,
}

#[derive(Deserialize)]
struct JsonWatchEvent<'a> {
    #[serde(rename = "type")]
    event_type: String,
    #[serde(borrow)]
    object: &'a RawValue,
}

fn decode_json_list(body: &[u8]) -> Result<kube_gc_wire::ListPage, Failure> {
    let list: JsonList =
        serde_json::from_slice(body).map_err(|e| Failure::Other(format!("a list page: {e}")))?;
    Ok(kube_gc_wire::ListPage {
        resource_version: list.metadata.resource_version.unwrap_or_default(),
        continue_token: list.metadata.continue_token.filter(|c| !c.is_empty()),
        items: list.items.unwrap_or_default().into_iter().map(LeanObject::into_meta).collect(),
    })
}

fn decode_json_event(line: &[u8]) -> Result<kube_gc_wire::WatchEvent, Failure> {
    let event: JsonWatchEvent<'_> =
        serde_json::from_slice(line).map_err(|e| Failure::Other(format!("a watch event: {e}")))?;
    let event_type = WatchEventType::parse(&event.event_type).ok_or_else(|| {
        Failure::Other(format!("unknown watch event type {:?}", event.event_type))
    })?;
    let object = if event_type == WatchEventType::Error {
        let status: kube::core::Status = serde_json::from_str(event.object.get())
            .map_err(|e| Failure::Other(format!("a watch error: {e}")))?;
        // kube's Status reads an absent code as 0 and an absent message as empty.
        OrStatus::Status(kube_gc_wire::Status {
            code: (status.code != 0).then_some(i32::from(status.code)),
            message: (!status.message.is_empty()).then_some(status.message),
            ..Default::default()
        })
    } else {
        let object: LeanObject = serde_json::from_str(event.object.get())
            .map_err(|e| Failure::Other(format!("a watch event's object: {e}")))?;
        OrStatus::Ok(object.into_meta())
    };
    Ok(kube_gc_wire::WatchEvent { event_type, object })
}

#[cfg(test)]
mod tests;
