//! The graph in Graphviz DOT, byte for byte as upstream's `dump.go` serves it at `/graph`
//! (GC-SPEC.md §7).
//!
//! Upstream: `dump.go` (`dotVertex`, `dotEdge`, `toDOTNodesAndEdges`,
//! `toDOTNodesAndEdgesForObj`, `marshalDOT`); GC-SPEC.md §7, tests in §9.A (dump_test.go).
//!
//! Export is two steps, as upstream's. [`to_dot_nodes_and_edges`] (or
//! [`to_dot_nodes_and_edges_for_uids`], for the part of the graph connected to some UIDs) turns
//! a list of [`DotNode`]s into a [`DotGraph`] of sorted [`DotVertex`]es and [`DotEdge`]s, and
//! [`marshal_dot`] writes it. [`to_dot`] and [`to_dot_for_uids`] do both over a live [`Graph`].
//!
//! # Format
//!
//! - A vertex for every node with at least one owner or one dependent; other nodes are left out.
//! - An edge from each node to each of its owners (dependent → owner), one per owner reference.
//! - Vertices sorted by UID, edges by (from, to), both as strings, byte order.
//! - `strict digraph full {`, then `  // Node definitions.` and the vertices if there are any,
//!   `  // Edge definitions.` and the edges if there are any, then `}`; each line ends in `\n`.
//!   A vertex is `  "<uid>" [`, eleven `    key="value"` lines (`label`, `group`, `version`,
//!   `kind`, `namespace`, `name`, `uid`, `missing`, `beingDeleted`, `deletingDependents`,
//!   `virtual`), then `  ];`. The label is
//!   `uid=<uid>\nnamespace=<ns>\n<Kind>.<version>[.<group>]/<name>\n`, followed by the node's
//!   conditions (`beingDeleted,deletingDependents,virtual,missingFromGraph`, those that hold)
//!   and `\n` if it has any.
//! - Every UID and value is written as Go's `%q` writes it: see [`go_quote`].
//!
//! # Upstream quirks, kept
//!
//! 1. When a node names an owner that has no vertex, upstream synthesises a `missing` vertex
//!    from the owner reference ([`DotVertex::missing`]) but files it in its UID → vertex map
//!    under the *dependent's* UID, not the owner's. Two things follow, and kube-gc reproduces
//!    both: (a) the missing owner is never found again, so each reference to it makes another
//!    vertex, and its UID is written once per reference (Graphviz merges them: the graph is
//!    `strict`); (b) a node visited *after* that dependent which names the dependent as its own
//!    owner gets its edge drawn to the missing owner instead of the dependent.
//!    Upstream visits nodes in Go map order, so whether (b) happens is random; kube-gc visits
//!    them in ascending UID order, so its output is always one upstream can produce, and always
//!    the same. Pinned by `to_dot_graph_missing_owner_*` in `tests/dot.rs`. Ingestion gives
//!    every owner a node (a virtual one if unobserved), so over a [`Graph`] this only shows
//!    for an owner removed while the export runs.
//! 2. The vertex's group and version come from the apiVersion as apimachinery's
//!    `ParseGroupVersion` splits it: `""` and `"/"` are empty, no `/` is a bare version, one `/`
//!    splits group from version, and more than one is an error that upstream logs and then
//!    writes as an empty group and version. kube-gc writes the same.
//!
//! # Consistency
//!
//! Divergence from upstream: upstream holds its `uidToNode` lock for the whole export. kube-gc
//! never stops ingestion for it: [`to_dot`] reads one shard at a time and [`to_dot_for_uids`]
//! one node at a time, so under concurrent ingestion the output mixes moments. Each node is read
//! consistently under its shard's lock; edges between nodes read at different moments may
//! disagree (as a worker's reads may, see [`crate::graph`]). The export is a debugging aid.
//!
//! # Examples
//!
//! ```
//! use kube_gc_engine::dot::{self, DotNode};
//! use kube_gc_engine::{ObjectReference, OwnerRef, ObjectType, Uid};
//!
//! let mut pod = DotNode::new(ObjectReference::new("v1", "Pod", "default", "web-1", "pod-1"));
//! pod.owners.push(OwnerRef {
//!     ty: ObjectType::new("apps/v1", "ReplicaSet"),
//!     name: "web".into(),
//!     uid: Uid::parse("rs-1"),
//!     controller: Some(true),
//!     block_owner_deletion: Some(true),
//! });
//! // The ReplicaSet is not in the list: it gets a synthetic "missing" vertex.
//! let out = dot::to_dot_nodes_and_edges(&[pod]).marshal();
//! assert!(out.starts_with("strict digraph full {\n  // Node definitions.\n  \"pod-1\" [\n"));
//! assert!(out.contains("    label=\"uid=rs-1\\nnamespace=\\nReplicaSet.v1.apps/web\\nmissingFromGraph\\n\"\n"));
//! assert!(out.ends_with("  // Edge definitions.\n  \"pod-1\" -> \"rs-1\";\n}\n"));
//! ```

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt::Write as _;

use crate::graph::{DependentView, Graph, NodeView};
use crate::identity::{ObjectReference, OwnerRef, Uid};

/// One node as the export reads it: upstream's `*node`, reduced to what `dump.go` uses.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct DotNode {
    /// The node's identity.
    pub identity: ObjectReference,
    /// The object's ownerReferences, in order (one edge each).
    pub owners: Vec<OwnerRef>,
    /// The UIDs of the node's dependents (only their number and, for a subgraph, the UIDs to
    /// visit next are used).
    pub dependents: Vec<Uid>,
    /// Has a deletionTimestamp.
    pub being_deleted: bool,
    /// Has a deletionTimestamp and the `foregroundDeletion` finalizer.
    pub deleting_dependents: bool,
    /// Never observed through an informer.
    pub is_virtual: bool,
}

impl DotNode {
    /// A node with `identity`, no owners, no dependents and no flag set.
    pub fn new(identity: ObjectReference) -> DotNode {
        DotNode {
            identity,
            owners: Vec::new(),
            dependents: Vec::new(),
            being_deleted: false,
            deleting_dependents: false,
            is_virtual: false,
        }
    }

    /// The node a [`Graph`] read returned ([`Graph::node`] and [`Graph::dependents`], or the
    /// two arguments of [`Graph::for_each_node`]'s callback).
    pub fn from_view(view: &NodeView, dependents: &[DependentView]) -> DotNode {
        DotNode {
            identity: view.identity.clone(),
            owners: view.owners.clone(),
            dependents: dependents.iter().map(|d| d.uid).collect(),
            being_deleted: view.being_deleted,
            deleting_dependents: view.deleting_dependents,
            is_virtual: view.is_virtual,
        }
    }

    /// Whether the node gets a vertex: it has an owner or a dependent.
    fn is_connected(&self) -> bool {
        !self.owners.is_empty() || !self.dependents.is_empty()
    }
}

/// One vertex of the DOT graph (upstream's `dotVertex`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct DotVertex {
    /// The UID, the vertex's DOT identifier.
    pub uid: Uid,
    /// The API group (`""` for the core group).
    pub group: &'static str,
    /// The API version.
    pub version: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// The namespace (`""` for cluster-scoped objects and missing owners).
    pub namespace: &'static str,
    /// The name.
    pub name: String,
    /// Synthesised from an owner reference whose owner had no vertex.
    pub missing_from_graph: bool,
    /// The node's `beingDeleted` flag.
    pub being_deleted: bool,
    /// The node's `deletingDependents` flag.
    pub deleting_dependents: bool,
    /// The node's `virtual` flag.
    pub is_virtual: bool,
}

impl DotVertex {
    /// The vertex of a node (upstream's `NewDOTVertex`).
    pub fn new(node: &DotNode) -> DotVertex {
        let (group, version) = parse_group_version(node.identity.ty.api_version());
        DotVertex {
            uid: node.identity.uid,
            group,
            version,
            kind: node.identity.ty.kind(),
            namespace: node.identity.namespace.as_str(),
            name: node.identity.name.clone(),
            missing_from_graph: false,
            being_deleted: node.being_deleted,
            deleting_dependents: node.deleting_dependents,
            is_virtual: node.is_virtual,
        }
    }

    /// The synthetic vertex of an owner that has none (upstream's `NewMissingdotVertex`): the
    /// reference's UID, type and name, an empty namespace, `missing_from_graph` set.
    pub fn missing(owner: &OwnerRef) -> DotVertex {
        let (group, version) = parse_group_version(owner.ty.api_version());
        DotVertex {
            uid: owner.uid,
            group,
            version,
            kind: owner.ty.kind(),
            namespace: "",
            name: owner.name.clone(),
            missing_from_graph: true,
            being_deleted: false,
            deleting_dependents: false,
            is_virtual: false,
        }
    }

    /// kubectl's `<Kind>.<version>[.<group>]/<name>` (`./` when all four are empty).
    pub fn kubectl_string(&self) -> String {
        let mut s = format!("{}.{}", self.kind, self.version);
        if !self.group.is_empty() {
            s.push('.');
            s.push_str(self.group);
        }
        s.push('/');
        s.push_str(&self.name);
        s
    }

    /// The `label` attribute, unquoted: UID, namespace, kubectl string and conditions, one per
    /// line.
    pub fn label(&self) -> String {
        let mut label =
            format!("uid={}\nnamespace={}\n{}\n", self.uid, self.namespace, self.kubectl_string());
        let conditions: Vec<&str> = [
            (self.being_deleted, "beingDeleted"),
            (self.deleting_dependents, "deletingDependents"),
            (self.is_virtual, "virtual"),
            (self.missing_from_graph, "missingFromGraph"),
        ]
        .into_iter()
        .filter_map(|(holds, name)| holds.then_some(name))
        .collect();
        if !conditions.is_empty() {
            label.push_str(&conditions.join(","));
            label.push('\n');
        }
        label
    }

    /// The vertex's attributes, unquoted, in upstream's order.
    pub fn attributes(&self) -> [(&'static str, String); 11] {
        [
            ("label", self.label()),
            // As upstream: metadata in a place Graphviz keeps but does not render.
            ("group", self.group.to_owned()),
            ("version", self.version.to_owned()),
            ("kind", self.kind.to_owned()),
            ("namespace", self.namespace.to_owned()),
            ("name", self.name.clone()),
            ("uid", self.uid.to_string()),
            ("missing", self.missing_from_graph.to_string()),
            ("beingDeleted", self.being_deleted.to_string()),
            ("deletingDependents", self.deleting_dependents.to_string()),
            ("virtual", self.is_virtual.to_string()),
        ]
    }

    /// Appends the vertex's DOT statement (upstream's `dotVertex.MarshalDOT`).
    pub fn write_dot(&self, out: &mut String) {
        out.push_str("  ");
        push_go_quoted(out, &self.uid.to_string());
        out.push_str(" [\n");
        for (key, value) in self.attributes() {
            out.push_str("    ");
            out.push_str(key);
            out.push('=');
            push_go_quoted(out, &value);
            out.push('\n');
        }
        out.push_str("  ];\n");
    }
}

/// One edge of the DOT graph, from a dependent to its owner (upstream's `dotEdge`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct DotEdge {
    /// The dependent's UID.
    pub from: Uid,
    /// The owner's UID (see the module docs for when it is not).
    pub to: Uid,
}

impl DotEdge {
    /// Appends the edge's DOT statement (upstream's `dotEdge.MarshalDOT`).
    pub fn write_dot(&self, out: &mut String) {
        out.push_str("  ");
        push_go_quoted(out, &self.from.to_string());
        out.push_str(" -> ");
        push_go_quoted(out, &self.to.to_string());
        out.push_str(";\n");
    }
}

/// Vertices and edges, sorted, ready to write.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct DotGraph {
    /// Vertices, by UID (a missing owner may appear more than once: see the module docs).
    pub vertices: Vec<DotVertex>,
    /// Edges, by (from, to).
    pub edges: Vec<DotEdge>,
}

impl DotGraph {
    /// The graph in DOT ([`marshal_dot`]).
    pub fn marshal(&self) -> String {
        marshal_dot(&self.vertices, &self.edges)
    }
}

/// The whole graph in DOT (upstream's `GET /graph`).
pub fn to_dot(graph: &Graph) -> String {
    let mut nodes = Vec::new();
    graph.for_each_node(|view, dependents| {
        // A node with neither owners nor dependents has no vertex and no edge: skip the copy.
        if !view.owners.is_empty() || !dependents.is_empty() {
            nodes.push(DotNode::from_view(view, dependents));
        }
    });
    to_dot_nodes_and_edges(&nodes).marshal()
}

/// The part of the graph connected to `uids` in DOT (upstream's `GET /graph?uid=…&uid=…`): the
/// nodes with these UIDs and, transitively, every owner and dependent that has a node. UIDs
/// without a node are skipped, so if none of `uids` has one the graph is empty.
pub fn to_dot_for_uids(graph: &Graph, uids: &[Uid]) -> String {
    let reachable = reachable_from(uids, |uid| {
        let view = graph.node(uid)?;
        Some(DotNode::from_view(&view, &graph.dependents(uid)))
    });
    build(reachable.values()).marshal()
}

/// Vertices and edges of `nodes` (upstream's `toDOTNodesAndEdges`).
///
/// `nodes` stands for upstream's UID → node map: if two share a UID, the later one counts.
pub fn to_dot_nodes_and_edges(nodes: &[DotNode]) -> DotGraph {
    let by_uid: HashMap<Uid, &DotNode> = nodes.iter().map(|n| (n.identity.uid, n)).collect();
    build(by_uid.into_values())
}

/// Vertices and edges of the part of `nodes` connected to `uids` (upstream's
/// `toDOTNodesAndEdgesForObj`); see [`to_dot_for_uids`].
///
/// `nodes` stands for upstream's UID → node map: if two share a UID, the later one counts.
pub fn to_dot_nodes_and_edges_for_uids(nodes: &[DotNode], uids: &[Uid]) -> DotGraph {
    let by_uid: HashMap<Uid, &DotNode> = nodes.iter().map(|n| (n.identity.uid, n)).collect();
    let reachable = reachable_from(uids, |uid| by_uid.get(&uid).copied());
    build(reachable.into_values())
}

/// The nodes reachable from `uids` through owner references and dependents, by UID, as
/// `toDOTNodesAndEdgesForObj` collects them. `lookup` returns the node with a UID, if any.
fn reachable_from<N: Borrow<DotNode>>(
    uids: &[Uid],
    mut lookup: impl FnMut(Uid) -> Option<N>,
) -> HashMap<Uid, N> {
    let mut to_check = uids.to_vec();
    let mut reachable: HashMap<Uid, N> = HashMap::new();
    let mut next = 0;
    while let Some(&uid) = to_check.get(next) {
        next += 1;
        if reachable.contains_key(&uid) {
            continue;
        }
        // No node: skip it. A UID can be queued more than once before it is visited; the
        // check above makes the later visits no-ops, as upstream's does.
        let Some(node) = lookup(uid) else { continue };
        let n = node.borrow();
        let linked = n.owners.iter().map(|o| o.uid).chain(n.dependents.iter().copied());
        to_check.extend(linked.filter(|u| !reachable.contains_key(u)));
        reachable.insert(uid, node);
    }
    reachable
}

/// The construction proper, over one node per UID in any order.
fn build<'a>(nodes: impl IntoIterator<Item = &'a DotNode>) -> DotGraph {
    // Visit in UID order, not Go's random map order: deterministic, and one of upstream's
    // possible outputs even where quirk 1(b) makes the order matter (module docs).
    let mut nodes: Vec<(String, &DotNode)> =
        nodes.into_iter().map(|n| (n.identity.uid.to_string(), n)).collect();
    nodes.sort_unstable_by(|a, b| a.0.cmp(&b.0)); // keys are distinct: one node per UID

    let mut vertices: Vec<DotVertex> = Vec::new();
    let mut vertex_of: HashMap<Uid, usize> = HashMap::new();
    // Vertices first, then edges, so that an owner listed later is not taken for missing.
    for (_, node) in &nodes {
        if node.is_connected() {
            vertex_of.insert(node.identity.uid, vertices.len());
            vertices.push(DotVertex::new(node));
        }
    }
    let mut edges = Vec::new();
    for (_, node) in &nodes {
        // Looked up before the loop, as upstream's `currVertex`: quirk 1 below only changes
        // what *later* lookups of this node find. A node without a vertex has no owners.
        let Some(&from) = vertex_of.get(&node.identity.uid) else { continue };
        let from = vertices[from].uid;
        for owner in &node.owners {
            let to = match vertex_of.get(&owner.uid) {
                Some(&i) => i,
                None => {
                    // Upstream quirk 1 (module docs): filed under the dependent's UID.
                    vertex_of.insert(node.identity.uid, vertices.len());
                    vertices.push(DotVertex::missing(owner));
                    vertices.len() - 1
                }
            };
            edges.push(DotEdge { from, to: vertices[to].uid });
        }
    }

    // Stable sorts, as upstream's `sort.SliceStable`: duplicate missing vertices keep the
    // order they were made in.
    vertices.sort_by_cached_key(|v| v.uid.to_string());
    edges.sort_by_cached_key(|e| (e.from.to_string(), e.to.to_string()));
    DotGraph { vertices, edges }
}

/// Writes `vertices` and `edges` in DOT (upstream's `marshalDOT`). Empty input gives
/// `strict digraph full {\n}\n`.
pub fn marshal_dot(vertices: &[DotVertex], edges: &[DotEdge]) -> String {
    let mut out = String::from("strict digraph full {\n");
    if !vertices.is_empty() {
        out.push_str("  // Node definitions.\n");
        for v in vertices {
            v.write_dot(&mut out);
        }
    }
    if !edges.is_empty() {
        out.push_str("  // Edge definitions.\n");
        for e in edges {
            e.write_dot(&mut out);
        }
    }
    out.push_str("}\n");
    out
}

/// Splits an apiVersion into (group, version) as apimachinery's `ParseGroupVersion` does, with
/// its error case (more than one `/`) read as empty, as upstream's vertex constructors do.
fn parse_group_version(api_version: &'static str) -> (&'static str, &'static str) {
    if api_version.is_empty() || api_version == "/" {
        return ("", "");
    }
    match api_version.split_once('/') {
        None => ("", api_version),
        Some((group, version)) if !version.contains('/') => (group, version),
        Some(_) => ("", ""),
    }
}

/// `s` as a Go double-quoted string literal, exactly as Go's `strconv.Quote` (and `%q`) writes
/// it.
///
/// `"` and `\` are backslash-escaped; printable characters (Unicode letters, marks, numbers,
/// punctuation and symbols, and the ASCII space) are kept as they are, non-ASCII included;
/// everything else is escaped: `\a \b \f \n \r \t \v`, other ASCII controls and DEL as `\xhh`,
/// other characters as `\uhhhh` or, above U+FFFF, `\Uhhhhhhhh` (lowercase hex).
///
/// Printability comes from the Unicode tables of Rust's `core`, which follow the newest
/// Unicode; Go's `strconv` follows the Unicode of its release (15.0 since Go 1.21). They differ
/// only on code points assigned in between, which Go escapes and this keeps: checked over every
/// code point against Go 1.19 (Unicode 13.0), where those were the only differences.
///
/// # Examples
///
/// ```
/// use kube_gc_engine::dot::go_quote;
///
/// assert_eq!(go_quote("a\"b\\c\n"), r#""a\"b\\c\n""#);
/// assert_eq!(go_quote("Iñtërnâtiônàlizætiøn,🐹"), "\"Iñtërnâtiônàlizætiøn,🐹\"");
/// assert_eq!(go_quote("\u{0}\u{7f}\u{a0}\u{e0001}"), r#""\x00\x7f\u00a0\U000e0001""#);
/// ```
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_go_quoted(&mut out, s);
    out
}

/// Appends [`go_quote`]`(s)` to `out`.
fn push_go_quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            // Writing to a `String` cannot fail.
            _ if c.is_ascii() => _ = write!(out, "\\x{:02x}", u32::from(c)),
            _ if is_printable(c) => out.push(c),
            _ if u32::from(c) < 0x1_0000 => _ = write!(out, "\\u{:04x}", u32::from(c)),
            _ => _ = write!(out, "\\U{:08x}", u32::from(c)),
        }
    }
    out.push('"');
}

/// Go's `strconv.IsPrint` for a non-ASCII character: not a control, format, surrogate,
/// private-use, unassigned or separator character.
///
/// That is exactly the set Rust's `core` calls printable, and `str::escape_debug` exposes it:
/// a character that does not begin the string is escaped if and only if it is not printable
/// (grapheme extenders are escaped only at the start, which is why `c` goes second).
fn is_printable(c: char) -> bool {
    let mut buf = [0u8; 5];
    buf[0] = b' ';
    let len = 1 + c.encode_utf8(&mut buf[1..]).len();
    let s = std::str::from_utf8(&buf[..len]).expect("an ASCII byte and an encoded char are UTF-8");
    s.escape_debug().nth(1) == Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_group_version_is_apimachinerys() {
        let cases = [
            ("", ("", "")),
            ("/", ("", "")),
            ("v1", ("", "v1")),
            ("apps/v1", ("apps", "v1")),
            ("/v1", ("", "v1")),
            ("apps/", ("apps", "")),
            ("a/b/c", ("", "")),
        ];
        for (i, (input, want)) in cases.into_iter().enumerate() {
            let got = parse_group_version(input);
            assert_eq!(got, want, "#{i}: got {got:?}, want {want:?} for {input:?}");
        }
    }

    #[test]
    fn is_printable_is_go_is_print() {
        // Letters, marks (even as the first char), numbers, punctuation, symbols: printable.
        for c in ['ñ', '\u{301}', '٣', '«', '€', '🐹', '\u{fffd}', '中'] {
            assert!(is_printable(c), "{c:?} should be printable");
        }
        // Cc, Cf, Co, Cn, Zs, Zl, Zp: not.
        for c in ['\u{85}', '\u{200b}', '\u{feff}', '\u{e000}', '\u{378}', '\u{a0}', '\u{2028}'] {
            assert!(!is_printable(c), "{c:?} should not be printable");
        }
    }
}
