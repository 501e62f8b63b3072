use proptest::prelude::*;
use serde::Deserialize;
use serde_json::{Value, json};

use super::*;

/// The list decoded whole by serde_json: what the stream decoder must match.
#[derive(Deserialize)]
struct Whole {
    #[serde(default)]
    metadata: JsonListMeta,
    #[serde(default)]
    items: Option<Vec<LeanObject>>,
}

/// `body` pushed in pieces cut at `cuts` (offsets, any order), every item taken as soon as
/// it is in; the items and the finished page.
fn decode_in_pieces(body: &[u8], cuts: &[usize]) -> Result<(Vec<ObjectMeta>, ListPage), String> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    cuts.extend([0, body.len()]);
    cuts.sort_unstable();
    let mut decoder = JsonListDecoder::new();
    let mut items = Vec::new();
    for piece in cuts.windows(2) {
        decoder.push(&body[piece[0]..piece[1]]);
        while let Some(item) = decoder.next_item()? {
            items.push(item);
        }
    }
    Ok((items, decoder.finish()?))
}

fn decode_whole(body: &[u8]) -> Result<(Vec<ObjectMeta>, ListPage), String> {
    decode_in_pieces(body, &[])
}

fn object(name: &str, rv: &str) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {
        "name": name, "namespace": "ns", "uid": format!("uid-{name}"), "resourceVersion": rv,
        "labels": {"app": "x"}, "finalizers": ["orphan"], "deletionTimestamp": "2024-01-01T00:00:00Z",
    }})
}

#[test]
fn a_list_page_reads_its_version_token_and_items() {
    let body = json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": "42", "continue": "next"}, "items": [object("b", "7")]});
    let (items, page) = decode_whole(body.to_string().as_bytes()).unwrap();
    assert_eq!(
        (page.resource_version.as_str(), page.continue_token.as_deref()),
        ("42", Some("next"))
    );
    assert_eq!(items.len(), 1);
    assert_eq!((items[0].name.as_str(), items[0].uid.as_str()), ("b", "uid-b"));
    assert_eq!((items[0].resource_version.as_str(), items[0].finalizers.len()), ("7", 1));
    assert!(items[0].deletion_timestamp);
    let last = br#"{"metadata":{"resourceVersion":"43","continue":""},"items":null}"#;
    let (items, page) = decode_whole(last).unwrap();
    assert!(items.is_empty() && page.continue_token.is_none());
    assert_eq!(page.resource_version, "43");
}

/// What could pass for an empty list and is not one is refused: a relist would take it for
/// every object deleted. A body without `items` (a proxy's `{}`, a single object), an `items`
/// key written with escapes (read as Go reads it, so its items are not skipped), and two
/// `items` or two `metadata` members (Go keeps the last items and merges the metadata).
#[test]
fn what_could_pass_for_an_empty_list_is_read_as_go_reads_it_or_refused() {
    for body in [
        &b" {\n} "[..],
        br#"{"metadata":{"resourceVersion":"9"}}"#,
        br#"{"kind":"ConfigMap","metadata":{"name":"x","resourceVersion":"9","uid":"u"}}"#,
        br#"{"metadata":{"resourceVersion":"9","continue":"c"},"items":[],"metadata":{"resourceVersion":"9"}}"#,
        br#"{"metadata":{"resourceVersion":"9"},"items":[],"items":[]}"#,
    ] {
        assert!(decode_whole(body).is_err(), "{}", String::from_utf8_lossy(body));
    }
    let escaped =
        format!(r#"{{"metadata":{{"resourceVersion":"9"}},"it\u0065ms":[{}]}}"#, object("a", "1"));
    let (items, page) = decode_whole(escaped.as_bytes()).unwrap();
    assert_eq!((items.len(), page.resource_version.as_str()), (1, "9"));
}

/// Each object is handed over once its bytes are in, before the list ends.
#[test]
fn objects_come_out_as_their_bytes_arrive() {
    let body = json!({"metadata": {"resourceVersion": "9"}, "items": [object("a", "1"), object("b", "2")]})
        .to_string();
    let second = body.find("uid-b").unwrap(); // inside the second object
    let mut decoder = JsonListDecoder::new();
    decoder.push(&body.as_bytes()[..second]);
    assert_eq!(decoder.next_item().unwrap().map(|m| m.name), Some("a".into()));
    assert_eq!(decoder.next_item().unwrap(), None);
    decoder.push(&body.as_bytes()[second..]);
    assert_eq!(decoder.next_item().unwrap().map(|m| m.name), Some("b".into()));
    assert_eq!(decoder.finish().unwrap().resource_version, "9");
}

#[test]
fn what_is_not_a_whole_list_is_an_error_not_a_panic() {
    let bad: [&[u8]; 12] = [
        b"",
        b"[]",
        br#"{"items":[{"metadata":{}}]"#,
        br#"{"items":[{"metadata":{}},]}"#,
        br#"{"items":{"a":1}}"#,
        br#"{"items":7}"#,
        br#"{"items":[{"metadata":{"uid":7}}]}"#,
        br#"{"items":[{"metadata":{]}}]}"#,
        br#"{"metadata":{"resourceVersion":5}}"#,
        br#"{"items":[]}}"#,
        br#"{"items" []}"#,
        br#"{,}"#,
    ];
    for body in bad {
        assert!(decode_whole(body).is_err(), "{}", String::from_utf8_lossy(body));
    }
}

#[test]
fn a_value_too_large_for_an_object_is_refused_before_it_is_all_in() {
    let mut decoder = JsonListDecoder::new();
    decoder.push(br#"{"items":[{"metadata":{"name":""#);
    assert_eq!(decoder.next_item(), Ok(None));
    decoder.push(&vec![b'x'; MAX_FRAME_BYTES]);
    assert!(decoder.next_item().is_err());
}

/// Strings that try the scan: quotes, escapes, brackets and non-ASCII.
fn tricky_string() -> impl Strategy<Value = String> {
    proptest::string::string_regex(r#"[a-z0-9"\\{}\[\]:, \n\t\u{e9}\u{1F600}]{0,12}"#).unwrap()
}

fn item() -> impl Strategy<Value = Value> {
    let owner = (tricky_string(), tricky_string(), any::<Option<bool>>())
        .prop_map(|(name, uid, controller)| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid, "controller": controller}));
    (
        tricky_string(),
        tricky_string(),
        proptest::collection::vec(owner, 0..3),
        proptest::collection::btree_map(tricky_string(), tricky_string(), 0..3),
        any::<bool>(),
        any::<u32>(),
    )
        .prop_map(|(name, uid, owners, labels, deleting, rv)| {
            let mut meta = json!({
                "name": name, "uid": uid, "resourceVersion": rv.to_string(), "labels": labels,
                "ownerReferences": owners,
                "managedFields": [{"manager": "m", "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}}, "n": [1.5e3, -2, null, true]}],
            });
            if deleting {
                meta["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
            }
            json!({"kind": "PartialObjectMetadata", "metadata": meta})
        })
}

proptest! {
    /// Whatever the members' order, the whitespace and where the body is cut, the stream
    /// decoder gives what serde_json gives decoding the list whole.
    #[test]
    fn pieces_decode_as_the_whole_does(
        items in proptest::collection::vec(item(), 0..6),
        rv in tricky_string(),
        token in proptest::option::of(tricky_string()),
        order in Just([0usize, 1, 2, 3]).prop_shuffle(),
        pretty in any::<bool>(),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let render = |v: &Value| if pretty { serde_json::to_string_pretty(v).unwrap() } else { v.to_string() };
        let members = [
            format!(r#""kind": {}"#, render(&json!("PartialObjectMetadataList"))),
            format!(r#""apiVersion":{}"#, render(&json!("meta.k8s.io/v1"))),
            format!(r#""metadata" : {}"#, render(&json!({"resourceVersion": rv, "continue": token}))),
            format!(r#""items":{}"#, render(&Value::Array(items))),
        ];
        let body = format!("{{ {} }}\n", order.map(|i| members[i].as_str()).join(",\n"));
        let whole: Whole = serde_json::from_str(&body).unwrap();
        let expected: Vec<ObjectMeta> = whole.items.unwrap_or_default().into_iter().map(LeanObject::into_meta).collect();
        let (got, page) = decode_in_pieces(body.as_bytes(), &cuts).unwrap();
        prop_assert_eq!(got, expected);
        prop_assert_eq!(page.resource_version, whole.metadata.resource_version.unwrap_or_default());
        prop_assert_eq!(page.continue_token, whole.metadata.continue_token.filter(|c| !c.is_empty()));
    }

    /// A body cut short anywhere never finishes as a list (and never panics).
    #[test]
    fn a_body_cut_short_is_an_error(items in proptest::collection::vec(item(), 1..4), cut in any::<usize>()) {
        let body = json!({"metadata": {"resourceVersion": "1"}, "items": items}).to_string();
        let cut = cut % body.len();
        prop_assert!(decode_whole(&body.as_bytes()[..cut]).is_err());
    }
}
