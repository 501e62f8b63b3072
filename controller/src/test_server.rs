//! A scripted API server for the watchers' tests: each request gets the next reply.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use kube::client::Body;
use kube_gc_engine::WatchSource;
use kube_gc_engine::cluster::Resource;
use tokio::sync::mpsc;

use crate::batcher::WatcherMsg;

/// A PartialObjectMetadata in JSON, named `name`, at resourceVersion `rv`.
pub(crate) fn json_object(name: &str, rv: &str) -> String {
    format!(
        r#"{{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{{"name":"{name}","namespace":"ns","uid":"uid-{name}","resourceVersion":"{rv}"}}}}"#
    )
}

/// One scripted response: its status, content type and body (sent at once, then each of
/// `later` after its delay), and whether the body then stays open (a watch the server keeps).
pub(crate) struct Reply {
    pub(crate) code: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: Vec<u8>,
    pub(crate) later: Vec<(std::time::Duration, Vec<u8>)>,
    pub(crate) stays_open: bool,
    /// How long the server takes to answer (its headers).
    pub(crate) delay: std::time::Duration,
}

impl Reply {
    /// A JSON reply.
    pub(crate) fn json(code: u16, body: impl Into<Vec<u8>>, stays_open: bool) -> Reply {
        let content_type = "application/json";
        let delay = std::time::Duration::ZERO;
        Reply { code, content_type, body: body.into(), later: Vec::new(), stays_open, delay }
    }

    /// This watch reply, with `events` sent as one more chunk `after` the chunk before.
    pub(crate) fn then(mut self, after: std::time::Duration, events: &[(&str, String)]) -> Reply {
        self.later.push((after, watch_lines(events).into_bytes()));
        self
    }
}

type ScriptBody = http_body_util::combinators::UnsyncBoxBody<Bytes, std::convert::Infallible>;

/// A server answering requests with its replies, in order; past the last, a watch that stays
/// open and silent. It records each request it was sent.
#[derive(Clone)]
pub(crate) struct Script {
    replies: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<SeenRequest>>>,
}

/// A request as the scripted server saw it.
#[derive(Clone, Debug)]
pub(crate) struct SeenRequest {
    /// Path and query.
    pub(crate) uri: String,
    /// The `Accept` header, empty if there was none.
    pub(crate) accept: String,
}

impl Script {
    /// A server that answers with `replies`, in order.
    pub(crate) fn new(replies: Vec<Reply>) -> Script {
        Script { replies: Arc::new(Mutex::new(replies.into())), requests: Default::default() }
    }

    /// The requests sent so far, in order.
    pub(crate) fn requests(&self) -> Vec<SeenRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl tower::Service<http::Request<Body>> for Script {
    type Response = http::Response<ScriptBody>;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        use futures::stream::{self, StreamExt as _};
        use http_body_util::{BodyExt as _, StreamBody};
        let accept = request.headers().get(http::header::ACCEPT);
        self.requests.lock().unwrap().push(SeenRequest {
            uri: request.uri().to_string(),
            accept: accept.and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned(),
        });
        let reply = self.replies.lock().unwrap().pop_front();
        let reply = reply.unwrap_or(Reply::json(200, "", true));
        let frame = http_body::Frame::data(Bytes::from(reply.body));
        let later = stream::iter(reply.later).then(|(after, chunk)| async move {
            tokio::time::sleep(after).await;
            Ok(http_body::Frame::data(Bytes::from(chunk)))
        });
        let first = stream::iter([Ok::<_, std::convert::Infallible>(frame)]).chain(later);
        let body = if reply.stays_open {
            StreamBody::new(first.chain(stream::pending())).boxed_unsync()
        } else {
            StreamBody::new(first).boxed_unsync()
        };
        let response = http::Response::builder()
            .status(reply.code)
            .header(CONTENT_TYPE, reply.content_type)
            .body(body)
            .expect("a valid response");
        let delay = reply.delay;
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            Ok(response)
        })
    }
}

/// A whole list at `rv` of the objects `names` (see [`json_object`]).
pub(crate) fn list_reply(rv: &str, names: &[&str]) -> Reply {
    let items: Vec<String> = names.iter().map(|n| json_object(n, rv)).collect();
    let body =
        format!(r#"{{"metadata":{{"resourceVersion":"{rv}"}},"items":[{}]}}"#, items.join(","));
    Reply::json(200, body, false)
}

/// A watch that sends `events` (type, object JSON), then stays open and silent.
pub(crate) fn watch_reply(events: &[(&str, String)]) -> Reply {
    Reply::json(200, watch_lines(events), true)
}

/// `events` (type, object JSON) as a JSON watch stream's lines.
fn watch_lines(events: &[(&str, String)]) -> String {
    events.iter().map(|(t, o)| format!("{{\"type\":\"{t}\",\"object\":{o}}}\n")).collect()
}

/// An error response with status `code` and its `Status` body.
pub(crate) fn failure_reply(code: u16) -> Reply {
    let body = format!(r#"{{"kind":"Status","status":"Failure","message":"no","code":{code}}}"#);
    Reply::json(code, body, false)
}

/// The configmaps watcher's resource and first run.
pub(crate) fn configmaps() -> (Resource, WatchSource) {
    let source = WatchSource {
        resource: "v1/configmaps".into(),
        object_type: kube_gc_engine::ObjectType::new("v1", "ConfigMap"),
        generation: 1,
    };
    (Resource::new("v1", "configmaps", "ConfigMap", true), source)
}

/// The first `n` notifications a watcher sends to `rx` within a minute, in order, as their
/// variant names.
pub(crate) async fn names_of(rx: &mut mpsc::Receiver<WatcherMsg>, n: usize) -> Vec<String> {
    // A watcher that never sends the n-th ends the wait (at once in paused time), so that a
    // test expecting it fails rather than hangs.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut seen = Vec::new();
    while seen.len() < n {
        let received = tokio::time::timeout_at(deadline, rx.recv()).await;
        let Ok(Some(WatcherMsg::Batch(batch))) = received else { break };
        for notification in batch.notifications {
            let name = format!("{notification:?}");
            seen.push(name.split('(').next().unwrap_or_default().to_owned());
        }
    }
    seen.truncate(n);
    seen
}

/// Options for a test watcher reading `content_type` (consistent lists, small batches).
pub(crate) fn watcher_options(
    content_type: crate::flags::ContentType,
) -> crate::watchers::WatcherOptions {
    crate::watchers::WatcherOptions { batch_size: 100, list_from_watch_cache: false, content_type }
}
