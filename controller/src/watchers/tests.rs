use std::time::Duration;

use kube_gc_wire::messages::{self, PartialObjectMetadata};
use kube_gc_wire::{Status, encode_status, encode_watch_event, enveloped};

use super::*;
use crate::test_server::{
    Reply, Script, SeenRequest, configmaps, failure_reply, list_reply, names_of, watch_reply,
    watcher_options,
};
use kube_gc_engine::ObjectMeta;

fn object_of(event: kube_gc_wire::WatchEvent) -> Option<ObjectMeta> {
    match event.object {
        OrStatus::Ok(meta) => Some(meta),
        OrStatus::Status(_) => None,
    }
}

fn meta(name: &str, rv: &str) -> ObjectMeta {
    ObjectMeta {
        uid: format!("uid-{name}"),
        name: name.into(),
        namespace: "ns".into(),
        resource_version: rv.into(),
        finalizers: vec!["orphan".into()],
        deletion_timestamp: true,
        creation_time: Some(1_704_067_199),
        deletion_time: Some(1_704_067_200),
        ..Default::default()
    }
}

fn proto_object(name: &str, rv: &str) -> Vec<u8> {
    let object = PartialObjectMetadata {
        metadata: Some(messages::ObjectMeta {
            uid: Some(format!("uid-{name}")),
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(rv.into()),
            finalizers: vec!["orphan".into()],
            creation_timestamp: Some(messages::Time { seconds: Some(1_704_067_199), nanos: None }),
            deletion_timestamp: Some(messages::Time { seconds: Some(1_704_067_200), nanos: None }),
            labels: [("app".to_owned(), "x".to_owned())].into(),
            ..Default::default()
        }),
    };
    enveloped("meta.k8s.io/v1", "PartialObjectMetadata", &object)
}

fn json_object(name: &str, rv: &str) -> String {
    format!(
        r#"{{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{{"name":"{name}","namespace":"ns","uid":"uid-{name}","resourceVersion":"{rv}","labels":{{"app":"x"}},"finalizers":["orphan"],"creationTimestamp":"2023-12-31T23:59:59Z","deletionTimestamp":"2024-01-01T00:00:00Z"}}}}"#
    )
}

/// The same stream in both formats decodes to the same events, however it is cut.
#[test]
fn both_formats_decode_to_the_same_events_whatever_the_chunks() {
    let mut proto = Vec::new();
    proto.extend(encode_watch_event(WatchEventType::Added, proto_object("a", "10")));
    proto.extend(encode_watch_event(WatchEventType::Deleted, proto_object("a", "11")));
    let gone = Status {
        code: Some(410),
        message: Some("too old".into()),
        reason: Some("Expired".into()),
        ..Default::default()
    };
    proto.extend(encode_watch_event(WatchEventType::Error, encode_status(&gone)));
    let json = format!(
        "{{\"type\":\"ADDED\",\"object\":{}}}\n{{\"type\":\"DELETED\",\"object\":{}}}\n\n{{\"type\":\"ERROR\",\"object\":{{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"too old\",\"reason\":\"Expired\",\"code\":410}}}}\n",
        json_object("a", "10"),
        json_object("a", "11")
    );
    for (content_type, stream) in
        [(kube_gc_wire::PROTOBUF_WATCH, proto), ("application/json", json.into_bytes())]
    {
        for chunk_len in [1, 3, 17, stream.len()] {
            let mut decoder = StreamDecoder::for_content_type(content_type);
            let mut events = Vec::new();
            for chunk in stream.chunks(chunk_len) {
                decoder.push(&Bytes::copy_from_slice(chunk));
                while let Some(e) = decoder.next_event().unwrap() {
                    events.push(e);
                }
            }
            let types: Vec<_> = events.iter().map(|e| e.event_type).collect();
            assert_eq!(
                types,
                [WatchEventType::Added, WatchEventType::Deleted, WatchEventType::Error],
                "{content_type}, chunks of {chunk_len}"
            );
            let mut events = events.into_iter();
            assert_eq!(object_of(events.next().unwrap()), Some(meta("a", "10")));
            assert_eq!(object_of(events.next().unwrap()), Some(meta("a", "11")));
            let error = events.next().unwrap();
            assert_eq!(
                error.object,
                OrStatus::Status(Status {
                    code: Some(410),
                    message: Some("too old".into()),
                    reason: Some("Expired".into()),
                    ..Default::default()
                })
            );
        }
    }
}

#[test]
fn a_malformed_json_line_is_a_failure_not_a_panic() {
    let mut decoder = StreamDecoder::for_content_type("application/json");
    decoder.push(&Bytes::from_static(b"{\"type\":\"ADDED\",\"object\":[1,2]}\n"));
    assert!(matches!(decoder.next_event(), Err(Failure::Other(_))));
    let mut decoder = StreamDecoder::for_content_type("application/json");
    decoder.push(&Bytes::from_static(b"{\"type\":\"SYNC\",\"object\":{}}\n"));
    assert!(matches!(decoder.next_event(), Err(Failure::Other(m)) if m.contains("SYNC")));
}

/// A JSON watch line that never ends is refused once it is larger than any event, as an
/// oversized protobuf frame is, instead of growing without bound.
#[test]
fn an_endless_json_line_is_a_failure() {
    let mut decoder = StreamDecoder::for_content_type("application/json");
    decoder.push(&Bytes::from_static(b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\""));
    assert!(matches!(decoder.next_event(), Ok(None)));
    decoder.push(&Bytes::from(vec![b'x'; kube_gc_wire::MAX_FRAME_BYTES]));
    assert!(matches!(decoder.next_event(), Err(Failure::Other(m)) if m.contains("over")));
}

#[test]
fn only_an_expired_version_relists() {
    assert!(matches!(status_failure(Some(410), "", "x".into()), Failure::Gone(_)));
    // A Status that says so without its code (client-go's isExpiredError reads the reason).
    assert!(matches!(status_failure(None, "Expired", "x".into()), Failure::Gone(_)));
    assert!(matches!(status_failure(Some(0), "Gone", "x".into()), Failure::Gone(_)));
    assert!(matches!(
        status_failure(Some(500), "InternalError", "x".into()),
        Failure::Other(m) if m.starts_with("500")
    ));
    assert!(matches!(status_failure(None, "", "x".into()), Failure::Other(_)));
}

/// Each delay is its base (0.8 s doubling to 30 s) and a jitter below as much again; the
/// jitter differs between watchers; two minutes after the last delay it starts over, not
/// before.
#[tokio::test(start_paused = true)]
async fn backoff_doubles_to_its_cap_with_jitter_and_resets() {
    let bases = [800, 1600, 3200, 6400, 12800, 25600, 30000, 30000];
    let mut first_delays = std::collections::HashSet::new();
    for _ in 0..20 {
        let mut b = Backoff::new();
        for (i, base) in bases.iter().enumerate() {
            let step = b.step().as_millis();
            assert!((*base..2 * base).contains(&step), "step {i}: {step} ms");
        }
        tokio::time::advance(Duration::from_secs(119)).await;
        assert!(b.step() >= Duration::from_secs(30), "within two minutes: no reset");
        tokio::time::advance(Duration::from_secs(121)).await;
        let first = b.step();
        let base = Duration::from_millis(800);
        assert!(first >= base && first < 2 * base, "{first:?}");
        first_delays.insert(first);
    }
    assert!(first_delays.len() > 1, "no jitter: {first_delays:?}");
}

async fn failure_of(answer: Reply) -> Failure {
    let client = Client::new(Script::new(vec![answer]), "default");
    let req = http::Request::get("/api/v1/pods").body(Vec::new()).unwrap();
    match send(&client, req).await {
        Ok(_) => panic!("an error response must fail"),
        Err(failure) => failure,
    }
}

/// An error response's Status is read in the format it came in: its message reaches the
/// failure, and a 410 is the one failure that relists.
#[tokio::test]
async fn error_responses_carry_their_status_message_in_either_format() {
    let gone = Status { code: Some(410), message: Some("too old".into()), ..Default::default() };
    let proto = Reply {
        content_type: kube_gc_wire::PROTOBUF,
        ..Reply::json(410, encode_status(&gone), false)
    };
    assert!(matches!(failure_of(proto).await, Failure::Gone(m) if m == "too old"));
    let json = Reply::json(
        403,
        br#"{"kind":"Status","status":"Failure","message":"pods is forbidden","code":403}"#,
        false,
    );
    assert!(matches!(failure_of(json).await, Failure::Other(m) if m == "403: pods is forbidden"));
    // A body that is neither still fails, with the code.
    let garbage = Reply { content_type: kube_gc_wire::PROTOBUF, ..Reply::json(500, "x", false) };
    assert!(matches!(failure_of(garbage).await, Failure::Other(m) if m == "500: "));
}

/// Runs a watcher with `options` against `replies`; returns the first `n` notifications it
/// sends, in order (as their variant names), and the requests it made until then.
async fn run_against(
    replies: Vec<Reply>,
    n: usize,
    options: WatcherOptions,
) -> (Vec<String>, Vec<SeenRequest>) {
    let script = Script::new(replies);
    let client = Client::new(script.clone(), "default");
    let (tx, mut rx) = mpsc::channel(64);
    let (resource, source) = configmaps();
    let metrics = Default::default();
    let task = tokio::spawn(run_watcher(client, resource, source, tx, metrics, options));
    let seen = names_of(&mut rx, n).await;
    task.abort();
    (seen, script.requests())
}

/// The first `n` notifications of a protobuf watcher against `replies` (see [`run_against`]).
async fn notifications_of(replies: Vec<Reply>, n: usize) -> Vec<String> {
    let options = watcher_options(ContentType::Protobuf);
    run_against(replies, n, options).await.0
}

/// With `--kube-api-content-type=application/json`, lists and watches ask for JSON metadata
/// (the whole object if the server cannot send metadata alone), and the watcher is back in
/// step when a watch is open and silent, as with protobuf: an idle resource does not hold
/// orphanings and foreground deletions until the catch-up timeout.
#[tokio::test(start_paused = true)]
async fn a_json_watcher_asks_for_json_and_says_when_its_watch_is_back() {
    let options = watcher_options(ContentType::Json);
    let replies = vec![list_reply("5", &["a"]), failure_reply(500)];
    let (seen, requests) = run_against(replies, 4, options).await;
    assert_eq!(seen, ["ListStarted", "Listed", "ListDone", "Resumed"]);
    assert_eq!(requests.len(), 3, "{requests:?}");
    let (list, watches) = requests.split_first().unwrap();
    assert!(!list.uri.contains("watch=true") && list.accept == JSON_LIST_ACCEPT, "{list:?}");
    for watch in watches {
        assert!(
            watch.uri.contains("watch=true") && watch.accept == JSON_OBJECT_ACCEPT,
            "{watch:?}"
        );
    }
    assert!(JSON_LIST_ACCEPT.starts_with("application/json;as=PartialObjectMetadataList;"));
    assert!(JSON_OBJECT_ACCEPT.starts_with("application/json;as=PartialObjectMetadata;"));
}

/// By default lists and watches ask for protobuf metadata first, as upstream's metadata client.
#[tokio::test(start_paused = true)]
async fn a_protobuf_watcher_asks_for_protobuf_first() {
    let options = watcher_options(ContentType::Protobuf);
    let replies = vec![list_reply("5", &["a"]), watch_reply(&[("ADDED", json_object("b", "6"))])];
    let (seen, requests) = run_against(replies, 4, options).await;
    assert_eq!(seen, ["ListStarted", "Listed", "ListDone", "Applied"]);
    let accepts: Vec<&str> = requests.iter().map(|r| r.accept.as_str()).collect();
    assert_eq!(accepts, [kube_gc_wire::LIST_ACCEPT, kube_gc_wire::OBJECT_ACCEPT]);
}

/// With `--list-from-watch-cache`, a list comes from the watch cache only while nothing was
/// sent: a first list that failed is asked of the cache again, but a relist (here after a
/// watch refused with 410 Gone) is consistent and paged, since a lagging cache could answer it
/// from before what was already sent and fake deletes.
#[tokio::test(start_paused = true)]
async fn only_the_first_list_comes_from_the_watch_cache() {
    let mut options = watcher_options(ContentType::Json);
    options.list_from_watch_cache = true;
    let gone =
        r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old","code":410}"#;
    let replies = vec![
        failure_reply(500),
        list_reply("5", &["a"]),
        watch_reply(&[("ERROR", gone.to_owned())]),
        list_reply("9", &["a"]),
    ];
    let (seen, requests) = run_against(replies, 6, options).await;
    assert_eq!(seen, ["ListStarted", "ListStarted", "Listed", "ListDone", "ListStarted", "Listed"]);
    let lists: Vec<&str> = (requests.iter())
        .filter(|r| !r.uri.contains("watch=true"))
        .map(|r| r.uri.as_str())
        .collect();
    assert_eq!(lists.len(), 3, "{requests:?}");
    for from_cache in &lists[..2] {
        assert!(from_cache.contains("resourceVersion=0") && !from_cache.contains("limit="));
    }
    assert!(
        lists[2].contains("limit=500") && !lists[2].contains("resourceVersion="),
        "{}",
        lists[2]
    );
}

/// A watch that fails, once the watcher was back in step, says so before the backoff; the
/// next one that delivers events says it is back after them (what it missed is in the graph
/// first). Failures while still behind (here the first watch after the list) say nothing
/// more.
#[tokio::test(start_paused = true)]
async fn a_broken_watch_is_interrupted_until_a_new_one_delivers() {
    // Back at 0.5 s (quiet), then one more event at 1 s, and the stream is cut.
    let cut = Reply { stays_open: false, ..watch_reply(&[("ADDED", json_object("b", "6"))]) }
        .then(Duration::from_secs(1), &[("ADDED", json_object("c", "7"))]);
    let replies = vec![
        list_reply("5", &["a"]),
        failure_reply(500),
        cut,
        failure_reply(429),
        watch_reply(&[("ADDED", json_object("d", "8"))]),
    ];
    let seen = notifications_of(replies, 9).await;
    let want = [
        "ListStarted",
        "Listed",
        "ListDone",
        "Applied",
        "Resumed",
        "Applied",
        "Interrupted",
        "Applied",
        "Resumed",
    ];
    assert_eq!(seen, want);
}

/// The watch after a list is back only once its stream pauses: until then what changed since
/// the list's resourceVersion may still be on its way (its first events are no proof: here
/// the second comes 300 ms later, as a loaded server or simcluster's held-back events may send
/// it), and an orphaning let through between them would miss a dependent the second carries.
/// A watch after a broken one is held to the same.
#[tokio::test(start_paused = true)]
async fn the_watch_after_a_list_is_back_once_its_backlog_pauses() {
    let backlog = watch_reply(&[("ADDED", json_object("b", "6"))])
        .then(Duration::from_millis(300), &[("ADDED", json_object("c", "7"))]);
    let replies = vec![list_reply("5", &["a"]), backlog];
    let seen = notifications_of(replies, 6).await;
    assert_eq!(seen, ["ListStarted", "Listed", "ListDone", "Applied", "Applied", "Resumed"]);
}

/// A new watch whose events never pause is back two seconds after it opened all the same:
/// its backlog came first, and its resource's decisions are not held for ever.
#[tokio::test(start_paused = true)]
async fn a_busy_new_watch_is_back_at_the_latest_two_seconds_after_it_opened() {
    let mut busy = watch_reply(&[("ADDED", json_object("b0", "6"))]);
    for i in 1..8 {
        let event = ("MODIFIED", json_object(&format!("b{i}"), &(6 + i).to_string()));
        busy = busy.then(Duration::from_millis(450), &[event]);
    }
    let replies = vec![list_reply("5", &[]), failure_reply(500), busy];
    let seen = notifications_of(replies, 10).await;
    // Events at 0, 0.45, 0.9, 1.35 and 1.8 s, then back at 2 s, then the one at 2.25 s.
    let mut want = vec!["ListStarted", "ListDone"];
    want.extend(["Applied"; 5]);
    want.extend(["Resumed", "Applied", "Applied"]);
    assert_eq!(seen, want);
}

/// A watch that stays open and silent is back after a short quiet time.
#[tokio::test(start_paused = true)]
async fn a_silent_new_watch_resumes_after_a_quiet_time() {
    let replies = vec![list_reply("5", &[])];
    let seen = notifications_of(replies, 3).await;
    assert_eq!(seen, ["ListStarted", "ListDone", "Resumed"]);
}

/// A new watch the server accepts and at once ends with 410 Gone is not a resumption: the
/// watcher stays behind into its relist, and is back once the relist's watch is.
#[tokio::test(start_paused = true)]
async fn a_watch_refused_with_gone_is_no_resumption() {
    let gone =
        r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old","code":410}"#;
    let replies = vec![
        list_reply("5", &["a"]),
        failure_reply(500),
        watch_reply(&[("ERROR", gone.to_owned())]),
        list_reply("9", &["a"]),
    ];
    let seen = notifications_of(replies, 7).await;
    assert_eq!(
        seen,
        ["ListStarted", "Listed", "ListDone", "ListStarted", "Listed", "ListDone", "Resumed"]
    );
}

/// A watch in step that the server ends with 410 Gone: the watcher is behind from that moment,
/// not once its relist answers (a consistent list may wait seconds in the server's queues, and
/// orphanings must wait for what the lost watch missed meanwhile); the relist comes after a
/// backoff, as client-go's.
#[tokio::test(start_paused = true)]
async fn a_watch_gone_in_step_is_behind_before_its_relist_answers() {
    let gone =
        r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old","code":410}"#;
    // Back at 0.5 s (quiet), then expired at 1 s; the relist never answers.
    let expired = Reply { stays_open: false, ..watch_reply(&[]) }
        .then(Duration::from_secs(1), &[("ERROR", gone.to_owned())]);
    let replies = vec![list_reply("5", &[]), expired, Reply::json(200, "", true)];
    let start = tokio::time::Instant::now();
    let seen = notifications_of(replies, 5).await;
    assert_eq!(seen, ["ListStarted", "ListDone", "Resumed", "Interrupted", "ListStarted"]);
    assert!(start.elapsed() >= Duration::from_millis(1800), "relisted after {:?}", start.elapsed());
}

/// A watch in step that stays silent past the server's timeout (a dead connection the server
/// can no longer end) is a broken watch: the watcher is behind until a new one is back.
#[tokio::test(start_paused = true)]
async fn a_watch_silent_past_its_timeout_is_interrupted() {
    let replies = vec![list_reply("5", &[])]; // then silent watches that stay open
    let start = tokio::time::Instant::now();
    let (tx, mut rx) = mpsc::channel(64);
    let (resource, source) = configmaps();
    let client = Client::new(Script::new(replies), "default");
    let options = watcher_options(ContentType::Json);
    let task = tokio::spawn(run_watcher(client, resource, source, tx, Default::default(), options));
    assert_eq!(names_of(&mut rx, 3).await, ["ListStarted", "ListDone", "Resumed"]);
    let resumed = start.elapsed();
    // names_of gives up after a minute: wait past the watch's timeout first.
    tokio::time::sleep(Duration::from_secs(WATCH_TIMEOUT_SECONDS.into())).await;
    assert_eq!(names_of(&mut rx, 2).await, ["Interrupted", "Resumed"]);
    assert!(start.elapsed() - resumed >= Duration::from_secs(295), "{:?}", start.elapsed());
    task.abort();
}

/// A watch the server ends at once with no event is a failure (client-go's "very short
/// watch"): reopened after a backoff, not in a loop, and the watcher stays behind meanwhile.
#[tokio::test(start_paused = true)]
async fn a_very_short_watch_backs_off() {
    let short = || Reply::json(200, "", false);
    let replies = vec![list_reply("5", &[]), short(), short(), watch_reply(&[])];
    let start = tokio::time::Instant::now();
    let (seen, requests) = run_against(replies, 3, watcher_options(ContentType::Json)).await;
    assert_eq!(seen, ["ListStarted", "ListDone", "Resumed"]);
    assert_eq!(requests.len(), 4, "{requests:?}");
    // Two backoffs (0.8 s, 1.6 s), then half a second of quiet.
    assert!(start.elapsed() >= Duration::from_millis(2900), "back after {:?}", start.elapsed());
}

/// The two seconds after which a busy new watch counts as back run only while the watcher
/// reads its stream: while the graph builder is too busy to take its batches, the backlog
/// waits unread, and an event of it that comes after must still come before `Resumed`.
#[tokio::test(start_paused = true)]
async fn the_latest_resumption_does_not_count_time_waiting_for_the_builder() {
    let backlog = watch_reply(&[
        ("ADDED", json_object("b", "6")),
        ("ADDED", json_object("c", "7")),
        ("ADDED", json_object("d", "8")),
    ])
    .then(Duration::from_millis(100), &[("ADDED", json_object("e", "9"))]);
    let replies = vec![list_reply("5", &[]), backlog];
    let (tx, mut rx) = mpsc::channel(1);
    let (resource, source) = configmaps();
    let client = Client::new(Script::new(replies), "default");
    let mut options = watcher_options(ContentType::Json);
    options.batch_size = 1;
    let task = tokio::spawn(run_watcher(client, resource, source, tx, Default::default(), options));
    assert_eq!(names_of(&mut rx, 2).await, ["ListStarted", "ListDone"]);
    // The builder takes nothing for three seconds.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen = names_of(&mut rx, 5).await;
    assert_eq!(seen, ["Applied", "Applied", "Applied", "Applied", "Resumed"]);
    task.abort();
}

/// A watch reopened in step (the server ended the one before) that takes long to answer makes
/// the watcher behind until it is back: changes made meanwhile reach the graph only then.
#[tokio::test(start_paused = true)]
async fn a_watch_slow_to_reopen_is_behind_until_it_is_back() {
    // Back at 0.5 s; the server ends the watch at 1 s, and the next one answers 3 s later.
    let ended = Reply { stays_open: false, ..watch_reply(&[]) }
        .then(Duration::from_secs(1), &[("ADDED", json_object("b", "6"))]);
    let slow = Reply { delay: Duration::from_secs(3), ..watch_reply(&[]) };
    let replies = vec![list_reply("5", &[]), ended, slow];
    let start = tokio::time::Instant::now();
    let seen = notifications_of(replies, 6).await;
    let want = ["ListStarted", "ListDone", "Resumed", "Applied", "Interrupted", "Resumed"];
    assert_eq!(seen, want);
    // Reopened at 1 s, answered at 4 s, quiet until 4.5 s.
    assert!(start.elapsed() >= Duration::from_millis(4500), "back after {:?}", start.elapsed());
}

/// A watch the server ends normally (its timeout) resumes without a word: nothing was missed.
#[tokio::test(start_paused = true)]
async fn a_watch_the_server_ends_is_resumed_silently() {
    // Back at 0.5 s (quiet); its last event at 1 s, and the server ends it.
    let ended = Reply { stays_open: false, ..watch_reply(&[]) }
        .then(Duration::from_secs(1), &[("ADDED", json_object("b", "6"))]);
    let replies =
        vec![list_reply("5", &[]), ended, watch_reply(&[("ADDED", json_object("c", "7"))])];
    let seen = notifications_of(replies, 5).await;
    assert_eq!(seen, ["ListStarted", "ListDone", "Resumed", "Applied", "Applied"]);
}

/// A continue token that expires (a list longer than etcd's compaction interval) is not paged
/// again, which would expire again: the list starts over, whole and consistent, as client-go's
/// pager does; the pages before are part of no complete list. With `--list-from-watch-cache`
/// too (a server whose cache answer carries a token): what was sent makes the new list a
/// relist, which a lagging cache could answer from before it, faking deletes.
#[tokio::test(start_paused = true)]
async fn a_list_whose_continue_token_expires_starts_over_whole() {
    for from_cache in [false, true] {
        let first_page = format!(
            r#"{{"metadata":{{"resourceVersion":"5","continue":"next"}},"items":[{}]}}"#,
            json_object("a", "5")
        );
        let replies = vec![
            Reply::json(200, first_page, false),
            failure_reply(410),
            list_reply("9", &["a", "b"]),
        ];
        let mut options = watcher_options(ContentType::Json);
        options.list_from_watch_cache = from_cache;
        let (seen, requests) = run_against(replies, 6, options).await;
        assert_eq!(seen, ["ListStarted", "Listed", "ListStarted", "Listed", "Listed", "ListDone"]);
        let lists: Vec<&str> = requests.iter().map(|r| r.uri.as_str()).take(3).collect();
        let first_list = if from_cache { "resourceVersion=0" } else { "limit=500" };
        assert!(lists[0].contains(first_list) && !lists[0].contains("continue="), "{lists:?}");
        assert!(lists[1].contains("continue=next"), "{lists:?}");
        assert!(
            !lists[2].contains("limit=")
                && !lists[2].contains("continue=")
                && !lists[2].contains("resourceVersion="),
            "from the cache: {from_cache}, {lists:?}"
        );
    }
}

/// A list or watch request the server never answers (a connection the network dropped after
/// the request went out), and a list whose body stops half way, fail after the silence
/// timeout and are retried: the watcher is not held for ever.
#[tokio::test(start_paused = true)]
async fn a_silent_list_or_watch_is_retried() {
    let never = Duration::from_secs(24 * 3600);
    let half_a_list = r#"{"metadata":{"resourceVersion":"5"},"items":["#;
    let cases: [(&str, Vec<Reply>, &[&str]); 3] = [
        (
            "list unanswered",
            vec![Reply { delay: never, ..list_reply("5", &[]) }, list_reply("5", &["a"])],
            &["ListStarted", "ListStarted", "Listed", "ListDone", "Resumed"],
        ),
        (
            "list stopped",
            vec![Reply::json(200, half_a_list, true), list_reply("5", &["a"])],
            &["ListStarted", "ListStarted", "Listed", "ListDone", "Resumed"],
        ),
        (
            "watch unanswered",
            vec![list_reply("5", &["a"]), Reply { delay: never, ..watch_reply(&[]) }],
            &["ListStarted", "Listed", "ListDone", "Resumed"],
        ),
    ];
    for (case, replies, want) in cases {
        let start = tokio::time::Instant::now();
        let (tx, mut rx) = mpsc::channel(64);
        let (resource, source) = configmaps();
        let client = Client::new(Script::new(replies), "default");
        let options = watcher_options(ContentType::Json);
        let task =
            tokio::spawn(run_watcher(client, resource, source, tx, Default::default(), options));
        let mut seen = names_of(&mut rx, want.len()).await;
        // names_of gives up after a minute: past the silence timeout, the rest.
        if seen.len() < want.len() {
            tokio::time::sleep(SILENCE_TIMEOUT).await;
            seen.extend(names_of(&mut rx, want.len() - seen.len()).await);
        }
        assert_eq!(seen, want, "{case}");
        assert!(start.elapsed() >= SILENCE_TIMEOUT, "{case}: {:?}", start.elapsed());
        task.abort();
    }
}

/// A list whose watch expires at once, again and again (a busy resource whose consistent
/// list outlasts the watch cache's window), relists ever more slowly, as client-go's
/// reflector: a list that completes does not reset the backoff.
#[tokio::test(start_paused = true)]
async fn relists_that_expire_at_once_back_off_ever_longer() {
    let mut replies = Vec::new();
    for _ in 0..3 {
        replies.extend([list_reply("5", &[]), failure_reply(410)]);
    }
    replies.extend([list_reply("5", &[]), watch_reply(&[])]);
    let start = tokio::time::Instant::now();
    let seen = notifications_of(replies, 9).await;
    let mut want = ["ListStarted", "ListDone"].repeat(4);
    want.push("Resumed");
    assert_eq!(seen, want);
    // 0.8 s, 1.6 s and 3.2 s at least (each jittered up to as much again); reset by each
    // list, the three would take 2.4 to 4.8 s.
    assert!(start.elapsed() >= Duration::from_millis(5600), "{:?}", start.elapsed());
}

/// A whole list (here the first, from the watch cache) is given longer to answer than a
/// page: the server answers it only once it holds every object, within its own request
/// timeout, which operators of large clusters raise. Unanswered past that, it is retried.
#[tokio::test(start_paused = true)]
async fn a_whole_list_is_given_longer_to_answer() {
    let never = Duration::from_secs(24 * 3600);
    let replies = vec![Reply { delay: never, ..list_reply("5", &[]) }, list_reply("5", &["a"])];
    let (tx, mut rx) = mpsc::channel(64);
    let (resource, source) = configmaps();
    let client = Client::new(Script::new(replies), "default");
    let options =
        WatcherOptions { list_from_watch_cache: true, ..watcher_options(ContentType::Json) };
    let task = tokio::spawn(run_watcher(client, resource, source, tx, Default::default(), options));
    assert_eq!(names_of(&mut rx, 1).await, ["ListStarted"]);
    tokio::time::sleep(SILENCE_TIMEOUT).await;
    assert!(names_of(&mut rx, 1).await.is_empty(), "a whole list retried after a page's timeout");
    tokio::time::sleep(WHOLE_LIST_ANSWER_TIMEOUT).await;
    assert_eq!(names_of(&mut rx, 4).await, ["ListStarted", "Listed", "ListDone", "Resumed"]);
    task.abort();
}
