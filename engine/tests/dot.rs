//! The DOT export: upstream's dump_test.go, ported, plus the export of a real graph.
//!
//! Upstream: <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/dump_test.go>
//! (TestToDOTGraph, TestToDOTGraphObj, TestMarshalDOT); GC-SPEC.md §7 and §9.A. The golden
//! files in `tests/testdata/` are upstream's `testdata/*.dot`, byte for byte.

use std::path::Path;
use std::sync::Arc;

use kube_gc_engine::dot::{
    self, DotEdge, DotGraph, DotNode, DotVertex, go_quote, marshal_dot, to_dot_nodes_and_edges,
    to_dot_nodes_and_edges_for_uids,
};
use kube_gc_engine::{
    Event, EventType, Graph, Ingester, ObjectMeta, ObjectReference, ObjectType, OwnerRef,
    OwnerReference, Uid,
};

// --- upstream's fixtures: nodes with only UIDs set ---------------------------------------------

fn uid(s: &str) -> Uid {
    Uid::parse(s)
}

/// An owner reference with only its UID set.
fn owner(u: &str) -> OwnerRef {
    OwnerRef {
        ty: ObjectType::default(),
        name: String::new(),
        uid: uid(u),
        controller: None,
        block_owner_deletion: None,
    }
}

fn node(u: &str, owners: &[&str], dependents: &[&str]) -> DotNode {
    let mut n = DotNode::new(ObjectReference::new("", "", "", "", u));
    n.owners = owners.iter().map(|o| owner(o)).collect();
    n.dependents = dependents.iter().map(|d| uid(d)).collect();
    n
}

fn alpha() -> DotNode {
    node("alpha", &["bravo", "charlie"], &[])
}
fn bravo() -> DotNode {
    node("bravo", &[], &["alpha"])
}
fn charlie() -> DotNode {
    node("charlie", &[], &["alpha"])
}
fn delta() -> DotNode {
    node("delta", &["foxtrot"], &[])
}
fn echo() -> DotNode {
    node("echo", &[], &[])
}
fn foxtrot() -> DotNode {
    node("foxtrot", &["golf"], &["delta"])
}
fn golf() -> DotNode {
    node("golf", &[], &["foxtrot"])
}

fn all_but_echo() -> Vec<DotNode> {
    vec![alpha(), bravo(), charlie(), delta(), foxtrot(), golf()]
}

/// Upstream's `compareGraphs`: vertices by UID, in order; edges exactly, in order.
fn compare_graphs(got: &DotGraph, want_vertices: &[&str], want_edges: &[(&str, &str)]) {
    let got_vertices: Vec<String> = got.vertices.iter().map(|v| v.uid.to_string()).collect();
    assert_eq!(
        got_vertices, want_vertices,
        "vertices: got {got_vertices:?}, want {want_vertices:?}"
    );
    let got_edges: Vec<(String, String)> =
        got.edges.iter().map(|e| (e.from.to_string(), e.to.to_string())).collect();
    assert_eq!(got_edges.len(), want_edges.len(), "edges: got {got_edges:?}, want {want_edges:?}");
    for (i, ((gf, gt), (wf, wt))) in got_edges.iter().zip(want_edges).enumerate() {
        assert_eq!((gf.as_str(), gt.as_str()), (*wf, *wt), "#{i}: got {gf}->{gt}, want {wf}->{wt}");
    }
}

const SIMPLE_VERTICES: [&str; 3] = ["alpha", "bravo", "charlie"];
const SIMPLE_EDGES: [(&str, &str); 2] = [("alpha", "bravo"), ("alpha", "charlie")];
const TWO_CHAIN_VERTICES: [&str; 6] = ["alpha", "bravo", "charlie", "delta", "foxtrot", "golf"];
const TWO_CHAIN_EDGES: [(&str, &str); 4] =
    [("alpha", "bravo"), ("alpha", "charlie"), ("delta", "foxtrot"), ("foxtrot", "golf")];

// --- TestToDOTGraph ----------------------------------------------------------------------------

#[test]
fn to_dot_graph_simple() {
    let got = to_dot_nodes_and_edges(&[alpha(), bravo(), charlie()]);
    compare_graphs(&got, &SIMPLE_VERTICES, &SIMPLE_EDGES);
}

#[test]
fn to_dot_graph_missing() {
    // bravo is not in the map: a synthetic vertex stands for it.
    let got = to_dot_nodes_and_edges(&[alpha(), charlie()]);
    compare_graphs(&got, &SIMPLE_VERTICES, &SIMPLE_EDGES);
    let bravo = &got.vertices[1];
    assert!(bravo.missing_from_graph);
    assert!(!got.vertices[0].missing_from_graph && !got.vertices[2].missing_from_graph);
}

#[test]
fn to_dot_graph_drop_no_ref() {
    let got = to_dot_nodes_and_edges(&[alpha(), bravo(), charlie(), echo()]);
    compare_graphs(&got, &SIMPLE_VERTICES, &SIMPLE_EDGES);
}

#[test]
fn to_dot_graph_two_chains() {
    let got = to_dot_nodes_and_edges(&all_but_echo());
    compare_graphs(&got, &TWO_CHAIN_VERTICES, &TWO_CHAIN_EDGES);
}

#[test]
fn to_dot_graph_order_of_input_does_not_matter() {
    let mut nodes = all_but_echo();
    nodes.reverse();
    compare_graphs(&to_dot_nodes_and_edges(&nodes), &TWO_CHAIN_VERTICES, &TWO_CHAIN_EDGES);
}

// Upstream quirk (GC-SPEC §7): the missing vertex is filed under the dependent's UID.

#[test]
fn to_dot_graph_missing_owner_gets_one_vertex_per_reference() {
    // Two dependents of the absent "mike", and one naming it twice: three "mike" vertices.
    let nodes = [node("a", &["mike"], &[]), node("b", &["mike", "mike"], &[])];
    let got = to_dot_nodes_and_edges(&nodes);
    compare_graphs(
        &got,
        &["a", "b", "mike", "mike", "mike"],
        &[("a", "mike"), ("b", "mike"), ("b", "mike")],
    );
    assert!(got.vertices[2..].iter().all(|v| v.missing_from_graph));
    let out = got.marshal();
    assert_eq!(out.matches("  \"mike\" [\n").count(), 3, "{out}");
}

#[test]
fn to_dot_graph_missing_owner_captures_later_edges_to_its_dependent() {
    // "a" names the absent "mike"; "b" (visited after "a": UID order) names "a". Upstream
    // looks "a" up, finds the missing vertex filed under it, and draws b -> mike.
    let nodes = [node("a", &["mike"], &["b"]), node("b", &["a"], &[])];
    let got = to_dot_nodes_and_edges(&nodes);
    compare_graphs(&got, &["a", "b", "mike"], &[("a", "mike"), ("b", "mike")]);

    // Visited *before* its owner's missing owner is made, the edge is right.
    let nodes = [node("b", &["mike"], &["a"]), node("a", &["b"], &[])];
    let got = to_dot_nodes_and_edges(&nodes);
    compare_graphs(&got, &["a", "b", "mike"], &[("a", "b"), ("b", "mike")]);
}

#[test]
fn to_dot_graph_missing_vertex_is_built_from_the_reference() {
    let mut a = DotNode::new(ObjectReference::new("v1", "Pod", "ns1", "pod-a", "a"));
    a.owners.push(OwnerRef {
        ty: ObjectType::new("apps/v1", "ReplicaSet"),
        name: "rs".into(),
        uid: uid("rs-uid"),
        controller: Some(true),
        block_owner_deletion: Some(true),
    });
    let got = to_dot_nodes_and_edges(&[a]);
    let want = DotVertex {
        uid: uid("rs-uid"),
        group: "apps",
        version: "v1",
        kind: "ReplicaSet",
        namespace: "",
        name: "rs".into(),
        missing_from_graph: true,
        being_deleted: false,
        deleting_dependents: false,
        is_virtual: false,
    };
    assert_eq!(got.vertices[1], want);
    assert_eq!(want.label(), "uid=rs-uid\nnamespace=\nReplicaSet.v1.apps/rs\nmissingFromGraph\n");
}

#[test]
fn to_dot_graph_later_node_with_a_uid_replaces_the_earlier() {
    let got = to_dot_nodes_and_edges(&[node("a", &["b"], &[]), node("a", &["c"], &[])]);
    compare_graphs(&got, &["a", "c"], &[("a", "c")]);
}

// --- TestToDOTGraphObj -------------------------------------------------------------------------

#[test]
fn to_dot_graph_obj_simple() {
    let got = to_dot_nodes_and_edges_for_uids(&[alpha(), bravo(), charlie()], &[uid("bravo")]);
    compare_graphs(&got, &SIMPLE_VERTICES, &SIMPLE_EDGES);
}

#[test]
fn to_dot_graph_obj_missing() {
    let got = to_dot_nodes_and_edges_for_uids(&[alpha(), charlie()], &[uid("bravo")]);
    compare_graphs(&got, &[], &[]);
}

#[test]
fn to_dot_graph_obj_drop_no_ref() {
    let nodes = [alpha(), bravo(), charlie(), echo()];
    let got = to_dot_nodes_and_edges_for_uids(&nodes, &[uid("echo")]);
    compare_graphs(&got, &[], &[]);
}

#[test]
fn to_dot_graph_obj_two_chains_from_owner() {
    let got = to_dot_nodes_and_edges_for_uids(&all_but_echo(), &[uid("golf")]);
    compare_graphs(
        &got,
        &["delta", "foxtrot", "golf"],
        &[("delta", "foxtrot"), ("foxtrot", "golf")],
    );
}

#[test]
fn to_dot_graph_obj_two_chains_from_child() {
    let got = to_dot_nodes_and_edges_for_uids(&all_but_echo(), &[uid("delta")]);
    compare_graphs(
        &got,
        &["delta", "foxtrot", "golf"],
        &[("delta", "foxtrot"), ("foxtrot", "golf")],
    );
}

#[test]
fn to_dot_graph_obj_two_chains_choose_both() {
    let got = to_dot_nodes_and_edges_for_uids(&all_but_echo(), &[uid("delta"), uid("charlie")]);
    compare_graphs(&got, &TWO_CHAIN_VERTICES, &TWO_CHAIN_EDGES);
}

// --- TestMarshalDOT ----------------------------------------------------------------------------

fn golden(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata").join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn assert_golden(file: &str, got: &str) {
    let want = golden(file);
    if got != want {
        let line = got.lines().zip(want.lines()).position(|(g, w)| g != w);
        panic!(
            "{file}: output differs (first differing line {line:?})\ngot:\n{got}\nwant:\n{want}"
        );
    }
}

#[test]
fn marshal_dot_empty() {
    assert_golden("empty.dot", &marshal_dot(&[], &[]));
    assert_eq!(marshal_dot(&[], &[]), "strict digraph full {\n}\n");
}

#[test]
fn marshal_dot_simple() {
    let vertices: Vec<DotVertex> = all_but_echo().iter().map(DotVertex::new).collect();
    let edges: Vec<DotEdge> =
        TWO_CHAIN_EDGES.iter().map(|(f, t)| DotEdge { from: uid(f), to: uid(t) }).collect();
    assert_golden("simple.dot", &marshal_dot(&vertices, &edges));
}

#[test]
fn marshal_dot_escaping() {
    let ref1 = ObjectReference::new(
        "ref1group/version",
        "ref1kind-Iñtërnâtiônàlizætiøn,🐹",
        "ref1ns",
        "ref1name-Iñtërnâtiônàlizætiøn,🐹",
        "ref1-[]\"\\Iñtërnâtiônàlizætiøn,🐹",
    );
    let ref2 =
        ObjectReference::new("ref2group/version", "ref2kind-", "ref2ns", "ref2name-", "ref2-");
    let mut node1 = DotNode::new(ref1.clone());
    node1.owners.push(OwnerRef {
        ty: ref2.ty,
        name: ref2.name.clone(),
        uid: ref2.uid,
        controller: None,
        block_owner_deletion: None,
    });
    let mut node2 = DotNode::new(ref2.clone());
    let vertices = [DotVertex::new(&node1), DotVertex::new(&node2)];
    let edges = [DotEdge { from: ref1.uid, to: ref2.uid }];
    assert_golden("escaping.dot", &marshal_dot(&vertices, &edges));
    // The same through the construction, once ref2 lists its dependent (else it has no
    // vertex of its own and ref1's reference makes a missing one).
    node2.dependents.push(ref1.uid);
    assert_golden("escaping.dot", &to_dot_nodes_and_edges(&[node2, node1]).marshal());
}

#[test]
fn marshal_dot_simple_through_the_construction() {
    assert_golden("simple.dot", &to_dot_nodes_and_edges(&all_but_echo()).marshal());
}

// --- labels and quoting ------------------------------------------------------------------------

#[test]
fn label_lists_conditions_in_upstreams_order() {
    let mut n = DotNode::new(ObjectReference::new("v1", "Pod", "ns", "p", "u"));
    n.being_deleted = true;
    n.deleting_dependents = true;
    n.is_virtual = true;
    let mut v = DotVertex::new(&n);
    v.missing_from_graph = true;
    assert_eq!(
        v.label(),
        "uid=u\nnamespace=ns\nPod.v1/p\nbeingDeleted,deletingDependents,virtual,missingFromGraph\n"
    );
    v.being_deleted = false;
    v.missing_from_graph = false;
    assert_eq!(v.label(), "uid=u\nnamespace=ns\nPod.v1/p\ndeletingDependents,virtual\n");
}

#[test]
fn label_of_an_apiversion_with_two_slashes_has_no_group_or_version() {
    let v = DotVertex::new(&DotNode::new(ObjectReference::new("a/b/c", "K", "", "n", "u")));
    assert_eq!((v.group, v.version), ("", ""));
    assert_eq!(v.kubectl_string(), "K./n");
}

/// Expected values are Go's `strconv.Quote` output.
#[test]
fn go_quote_is_strconv_quote() {
    let cases: &[(&str, &str)] = &[
        ("", r#""""#),
        ("plain ascii ~!", r#""plain ascii ~!""#),
        ("\"\\", r#""\"\\""#),
        ("\x07\x08\x0c\n\r\t\x0b", r#""\a\b\f\n\r\t\v""#),
        ("\0\x01\x1b\x1f\x7f", r#""\x00\x01\x1b\x1f\x7f""#),
        ("'", r#""'""#),
        ("Iñtërnâtiônàlizætiøn,🐹", "\"Iñtërnâtiônàlizætiøn,🐹\""),
        ("e\u{301}", "\"e\u{301}\""),          // Mn: printable
        ("\u{301}", "\"\u{301}\""),            // ... even first
        ("\u{85}\u{9f}", r#""\u0085\u009f""#), // C1 controls
        ("\u{a0}\u{2000}\u{3000}", r#""\u00a0\u2000\u3000""#), // Zs other than ' '
        ("\u{2028}\u{2029}", r#""\u2028\u2029""#), // Zl, Zp
        ("\u{200b}\u{200d}\u{feff}", r#""\u200b\u200d\ufeff""#), // Cf
        ("\u{e000}\u{f8ff}", r#""\ue000\uf8ff""#), // Co
        ("\u{378}\u{ffff}", r#""\u0378\uffff""#), // Cn
        ("\u{e0001}\u{f0000}\u{10ffff}", r#""\U000e0001\U000f0000\U0010ffff""#),
        ("\u{fffd}", "\"\u{fffd}\""),
        ("中文€«»", "\"中文€«»\""),
    ];
    for (i, (input, want)) in cases.iter().enumerate() {
        let got = go_quote(input);
        assert_eq!(&got, want, "#{i}: got {got}, want {want} for {input:?}");
    }
}

/// Reads Go double-quoted literals back (what `strconv.Unquote` accepts of `go_quote`'s
/// output); panics on anything that is not a well-formed literal.
fn go_unquote(literal: &str) -> String {
    let inner = literal
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or_else(|| panic!("not quoted: {literal:?}"));
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        assert!(c != '"' && !c.is_control(), "raw {c:?} inside {literal:?}");
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = match chars.next().expect("dangling backslash") {
            'a' => '\x07',
            'b' => '\x08',
            'f' => '\x0c',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\x0b',
            '\\' => '\\',
            '"' => '"',
            x @ ('x' | 'u' | 'U') => {
                let n = match x {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let digits: String = chars.by_ref().take(n).collect();
                let v = u32::from_str_radix(&digits, 16).expect("hex escape");
                char::from_u32(v).expect("escape of a char")
            }
            other => panic!("unknown escape \\{other} in {literal:?}"),
        };
        out.push(e);
    }
    out
}

#[test]
fn go_quote_round_trips_every_kind_of_char() {
    let mut s: String = (0u32..0x800).filter_map(char::from_u32).collect();
    s.extend(['\u{2028}', '\u{feff}', '\u{fffd}', '\u{e0001}', '\u{1f439}', '\u{10ffff}']);
    let quoted = go_quote(&s);
    assert_eq!(go_unquote(&quoted), s);
}

// --- through a real graph ----------------------------------------------------------------------

const RS: &str = "00000000-0000-4000-8000-000000000001";
const POD: &str = "00000000-0000-4000-8000-000000000002";
const LONER: &str = "00000000-0000-4000-8000-000000000003";

fn meta(u: &str, name: &str, namespace: &str, owners: Vec<OwnerReference>) -> ObjectMeta {
    ObjectMeta {
        uid: u.into(),
        name: name.into(),
        namespace: namespace.into(),
        owner_references: owners,
        ..Default::default()
    }
}

fn owner_ref(api_version: &str, kind: &str, name: &str, u: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        uid: u.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn ingest(events: &[Event]) -> Arc<Graph> {
    let graph = Arc::new(Graph::new(16).unwrap());
    let mut ingester = Ingester::new(graph.clone(), 2);
    ingester.ingest(events);
    graph
}

#[test]
fn to_dot_of_an_ingested_graph() {
    // A pod being deleted in the foreground, owned by a ReplicaSet never observed (virtual, in
    // its dependent's namespace, as upstream's), and a config map with no references (left out).
    let mut pod =
        meta(POD, "web-1", "default", vec![owner_ref("apps/v1", "ReplicaSet", "web", RS)]);
    pod.deletion_timestamp = true;
    pod.finalizers = vec!["foregroundDeletion".into()];
    let graph = ingest(&[
        Event::new(EventType::Add, ObjectType::new("v1", "Pod"), pod),
        Event::new(
            EventType::Add,
            ObjectType::new("v1", "ConfigMap"),
            meta(LONER, "c", "default", vec![]),
        ),
    ]);
    assert_eq!(graph.len(), 3);

    let want = format!(
        r#"strict digraph full {{
  // Node definitions.
  "{RS}" [
    label="uid={RS}\nnamespace=default\nReplicaSet.v1.apps/web\nvirtual\n"
    group="apps"
    version="v1"
    kind="ReplicaSet"
    namespace="default"
    name="web"
    uid="{RS}"
    missing="false"
    beingDeleted="false"
    deletingDependents="false"
    virtual="true"
  ];
  "{POD}" [
    label="uid={POD}\nnamespace=default\nPod.v1/web-1\nbeingDeleted,deletingDependents\n"
    group=""
    version="v1"
    kind="Pod"
    namespace="default"
    name="web-1"
    uid="{POD}"
    missing="false"
    beingDeleted="true"
    deletingDependents="true"
    virtual="false"
  ];
  // Edge definitions.
  "{POD}" -> "{RS}";
}}
"#
    );
    assert_eq!(dot::to_dot(&graph), want);
    // The subgraph of either end is the whole chain; of the loner or an unknown UID, empty.
    assert_eq!(dot::to_dot_for_uids(&graph, &[uid(RS)]), want);
    assert_eq!(dot::to_dot_for_uids(&graph, &[uid(POD), uid("nope")]), want);
    assert_eq!(dot::to_dot_for_uids(&graph, &[uid(LONER)]), "strict digraph full {\n}\n");
    assert_eq!(dot::to_dot_for_uids(&graph, &[uid("nope")]), "strict digraph full {\n}\n");
    assert_eq!(dot::to_dot_for_uids(&graph, &[]), "strict digraph full {\n}\n");
    assert_eq!(dot::to_dot(&Graph::new(4).unwrap()), "strict digraph full {\n}\n");
}

#[test]
fn to_dot_of_hostile_uids_never_panics_and_quotes_them() {
    let long = "\"\\\n".repeat(10 * 1024 / 3) + "x";
    let hostile = [
        "quote\"inside",
        "back\\slash\\\\",
        "new\nline\r\n",
        "tab\tbell\x07nul\0del\x7f",
        "\u{2028}\u{feff}\u{85}\u{e0001}",
        "\"}; digraph evil { \"a\" -> \"b",
        long.as_str(),
    ];
    // Each hostile UID owns the next; the last owns a hostile UID with no node (virtual).
    let mut events = Vec::new();
    for (i, u) in hostile.iter().enumerate() {
        let owner = hostile.get(i + 1).copied().unwrap_or("owner\"\\\n");
        let name = format!("name\"{i}\\\n");
        let obj = meta(u, &name, "ns\"\n", vec![owner_ref("x/y/z", "K\"\n", "o\\", owner)]);
        events.push(Event::new(EventType::Add, ObjectType::new("weird\"/v\n", "Kind\\"), obj));
    }
    let graph = ingest(&events);
    assert_eq!(graph.len(), hostile.len() + 1);

    for out in [dot::to_dot(&graph), dot::to_dot_for_uids(&graph, &[uid(hostile[0])])] {
        // Everything a value could smuggle is escaped: lines are exactly the statements.
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "strict digraph full {");
        assert_eq!(*lines.last().unwrap(), "}");
        assert_eq!(lines.len(), 1 + 1 + (hostile.len() + 1) * 13 + 1 + hostile.len() + 1);
        let mut vertex_uids = Vec::new();
        for line in &lines[1..lines.len() - 1] {
            if let Some(rest) = line.strip_prefix("    ") {
                let (key, value) = rest.split_once('=').expect("key=value");
                assert!(key.chars().all(|c| c.is_ascii_alphabetic()), "{key:?}");
                go_unquote(value);
            } else if let Some(id) = line.strip_prefix("  ").and_then(|l| l.strip_suffix(" [")) {
                vertex_uids.push(go_unquote(id));
            } else if let Some(edge) = line.strip_prefix("  ").and_then(|l| l.strip_suffix(';')) {
                if edge == "]" {
                    continue;
                }
                let (from, to) = edge.split_once("\" -> \"").expect("edge");
                let (from, to) = (go_unquote(&format!("{from}\"")), go_unquote(&format!("\"{to}")));
                assert!(hostile.contains(&from.as_str()), "{from:?}");
                assert!(hostile.contains(&to.as_str()) || to == "owner\"\\\n", "{to:?}");
            } else {
                assert!(line.starts_with("  // "), "unexpected line {line:?}");
            }
        }
        let mut want: Vec<String> = hostile.iter().map(|s| s.to_string()).collect();
        want.push("owner\"\\\n".into());
        want.sort();
        assert_eq!(vertex_uids, want);
    }
}
