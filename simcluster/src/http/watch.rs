//! Watches: the initial events (`sendInitialEvents`), the stream of changes from a
//! resourceVersion, bookmarks, `410 Expired`, and the faults a watch may get; each event as a
//! JSON line or a protobuf frame ([`protobuf`]).

use super::*;

/// A watch in progress.
pub(super) struct Watch {
    def: Arc<ResourceDef>,
    table: usize,
    namespace: Option<String>,
    meta_only: bool,
    /// JSON lines, or protobuf frames of `PartialObjectMetadata`.
    encoding: Encoding,
    backlog: std::vec::IntoIter<Arc<Change>>,
    /// Bookmark `k8s.io/initial-events-end` once the backlog is sent (`sendInitialEvents`).
    initial_events_end: bool,
    /// `None` once the watch only has an error left to send.
    live: Option<tokio::sync::broadcast::Receiver<Arc<Change>>>,
    /// Every change up to this resourceVersion has been sent or filtered out.
    seen: u64,
    bookmarks: Option<tokio::time::Interval>,
    deadline: tokio::time::Instant,
    done: bool,
    /// Where delays of watch events are drawn ([`FaultKind::WatchDelayed`]).
    faults: Arc<FaultInjector>,
}

impl Watch {
    fn event(&self, kind: ChangeKind, object: &[u8]) -> Bytes {
        if self.encoding == Encoding::MetadataProtobuf {
            return protobuf::watch_event(kind, object).into();
        }
        let mut out = Vec::with_capacity(object.len() + 96);
        out.extend_from_slice(br#"{"type":""#);
        out.extend_from_slice(kind.as_str().as_bytes());
        out.extend_from_slice(br#"","object":"#);
        push_stored(&mut out, &self.def, object, self.meta_only);
        out.extend_from_slice(b"}\n");
        out.into()
    }

    /// A bookmark at the version seen; `initial_events_end`: the one that ends the initial
    /// events.
    fn bookmark(&self, initial_events_end: bool) -> Bytes {
        if self.encoding == Encoding::MetadataProtobuf {
            let annotations = if initial_events_end {
                [(INITIAL_EVENTS_END.to_owned(), "true".to_owned())].into()
            } else {
                std::collections::BTreeMap::new()
            };
            return protobuf::bookmark(self.seen, annotations).into();
        }
        let (kind, api_version) = if self.meta_only {
            ("PartialObjectMetadata".to_owned(), "meta.k8s.io/v1".to_owned())
        } else {
            (self.def.kind.clone(), self.def.api_version())
        };
        let mut meta = json!({"resourceVersion": self.seen.to_string()});
        if initial_events_end {
            meta["annotations"] = json!({INITIAL_EVENTS_END: "true"});
        }
        let event = json!({"type": "BOOKMARK", "object": {"kind": kind, "apiVersion": api_version, "metadata": meta}});
        format!("{event}\n").into()
    }

    fn expired(&mut self, message: String) -> Bytes {
        self.done = true;
        let error = Error::Expired(message);
        if self.encoding == Encoding::MetadataProtobuf {
            return protobuf::error_event(&error).into();
        }
        let event = json!({"type": "ERROR", "object": error.to_status()});
        format!("{event}\n").into()
    }

    /// Holds the next event back if the faults say so; every later event waits behind it.
    async fn maybe_delay(&self) {
        if let Some(d) = self.faults.watch_delay() {
            tokio::time::sleep(d).await;
        }
    }

    fn wants(&self, c: &Change) -> bool {
        c.table == self.table && self.namespace.as_deref().is_none_or(|ns| *c.namespace == *ns)
    }

    async fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        if let Some(c) = self.backlog.next() {
            self.maybe_delay().await;
            return Some(self.event(c.kind, &c.object));
        }
        if self.initial_events_end {
            self.initial_events_end = false;
            return Some(self.bookmark(true));
        }
        let mut live = self.live.take()?;
        let mut bookmarks = self.bookmarks.take();
        let out = loop {
            let tick = async {
                match bookmarks.as_mut() {
                    Some(i) => {
                        i.tick().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                got = live.recv() => match got {
                    Ok(c) => {
                        self.seen = self.seen.max(c.rv);
                        if self.wants(&c) {
                            let event = self.event(c.kind, &c.object);
                            if let Some(d) = self.faults.watch_delay() {
                                tokio::time::sleep(d).await;
                            }
                            break Some(event);
                        }
                    }
                    Err(RecvError::Lagged(n)) => {
                        let message = format!("watch fell {n} changes behind; too old resource version");
                        return Some(self.expired(message));
                    }
                    Err(RecvError::Closed) => return None,
                },
                () = tick => break Some(self.bookmark(false)),
                () = tokio::time::sleep_until(self.deadline) => return None,
            }
        };
        self.live = Some(live);
        self.bookmarks = bookmarks;
        out
    }
}

pub(super) fn watch_response(
    app: &App,
    r: &Resolved,
    namespace: Option<String>,
    query: &HashMap<String, String>,
    meta_only: bool,
    encoding: Encoding,
    fault: Option<WatchFault>,
) -> Result<Response> {
    let flag = |k: &str| query_flag(query, k);
    let send_initial = flag("sendInitialEvents");
    let bookmarks = flag("allowWatchBookmarks");
    let from = match query.get("resourceVersion").map(String::as_str) {
        None | Some("" | "0") => WatchFrom::Current,
        // sendInitialEvents starts from the current state whatever the version.
        Some(_) if send_initial => WatchFrom::Current,
        Some(rv) => WatchFrom::After(
            rv.parse().map_err(|_| Error::BadRequest(format!("invalid resourceVersion {rv:?}")))?,
        ),
    };
    let timeout = match query.get("timeoutSeconds") {
        Some(t) => Duration::from_secs(
            t.parse().map_err(|_| Error::BadRequest(format!("invalid timeoutSeconds {t:?}")))?,
        ),
        None => Duration::from_secs(1800),
    };
    let mut watch = Watch {
        def: r.def.clone(),
        table: r.table,
        namespace: namespace.clone(),
        meta_only,
        encoding,
        backlog: Vec::new().into_iter(),
        initial_events_end: false,
        live: None,
        seen: 0,
        bookmarks: None,
        deadline: tokio::time::Instant::now() + timeout,
        done: false,
        faults: app.faults.clone(),
    };
    let started = match fault {
        Some(WatchFault::Expire) => Err(Error::Expired(crate::faults::WATCH_EXPIRED.into())),
        _ => app.store.watch(r, namespace.as_deref(), from),
    };
    let first = match started {
        Ok(start) => {
            watch.backlog = start.backlog.into_iter();
            watch.live = Some(start.live);
            watch.seen = start.resource_version;
            watch.initial_events_end = send_initial && bookmarks;
            if bookmarks {
                let mut i = tokio::time::interval_at(
                    tokio::time::Instant::now() + app.bookmark_interval,
                    app.bookmark_interval,
                );
                i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                watch.bookmarks = Some(i);
            }
            None
        }
        Err(Error::Expired(message)) => Some(watch.expired(message)),
        Err(e) => return Err(e),
    };
    // A dropped watch: cut after `events` more events or at `at`, whichever comes first.
    let drop = match fault {
        Some(WatchFault::Drop { events, after }) => {
            Some((events, tokio::time::Instant::now() + after, app.faults.clone()))
        }
        _ => None,
    };
    let stream = futures_util::stream::unfold((watch, first, drop), |(mut w, first, drop)| {
        async move {
            if let Some(b) = first {
                return Some((Ok(b), (w, None, drop)));
            }
            let Some((events, at, faults)) = drop else {
                let item = w.next().await?;
                return Some((Ok(item), (w, None, None)));
            };
            let item = if events == 0 {
                None
            } else {
                tokio::select! {
                    item = w.next() => Some(item),
                    () = tokio::time::sleep_until(at) => None,
                }
            };
            match item {
                Some(item) => Some((Ok(item?), (w, None, Some((events - 1, at, faults))))),
                None => {
                    // An error ends the body without its last chunk: the client sees the
                    // connection cut, as on a reset.
                    faults.count(FaultKind::WatchDropped);
                    w.done = true;
                    let cut = std::io::Error::new(
                        std::io::ErrorKind::ConnectionReset,
                        "simcluster fault: watch dropped",
                    );
                    Some((Err(cut), (w, None, None)))
                }
            }
        }
    });
    let mut headers = HeaderMap::new();
    let content_type = protobuf::watch_content_type(encoding);
    headers.insert(header::CONTENT_TYPE, content_type.parse().expect("valid header"));
    Ok((StatusCode::OK, headers, Body::from_stream(stream)).into_response())
}
