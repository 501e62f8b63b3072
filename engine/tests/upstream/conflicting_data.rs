//! TestConflictingData: sixteen step scripts of conflicting owner references (cross-namespace,
//! cluster-scoped vs namespaced, wrong apiVersion/kind), each checking after every step the
//! exact graph, queues, API calls, absent-owner cache and recorded events.
//!
//! <https://github.com/kubernetes/kubernetes/blob/master/pkg/controller/garbagecollector/garbagecollector_test.go>; GC-SPEC.md §9.A (the scripts), §2.2-2.6 and §3.

use super::*;

/// The identities of upstream's test.
struct Ids {
    pod1ns1: ObjectReference,
    pod2ns1: ObjectReference,
    pod2ns2: ObjectReference,
    node1: ObjectReference,
    role1v1beta1: ObjectReference,
    role1v1: ObjectReference,
    deployment1apps: ObjectReference,
    /// Not served, still referenced.
    deployment1extensions: ObjectReference,
    /// A reference to node1 from a namespaced resource makes a virtual node in its namespace.
    node1_with_namespace: ObjectReference,
    /// A reference to pod1 from a cluster-scoped resource makes a virtual node without one.
    pod1nonamespace: ObjectReference,
    bad_secret_reference_with_deployment_uid: ObjectReference,
    bad_child_pod: ObjectReference,
    good_child_pod: ObjectReference,
}

impl Ids {
    fn new() -> Ids {
        Ids {
            pod1ns1: make_id("v1", "Pod", "ns1", "podname1", "poduid1"),
            pod2ns1: make_id("v1", "Pod", "ns1", "podname2", "poduid2"),
            pod2ns2: make_id("v1", "Pod", "ns2", "podname2", "poduid2"),
            node1: make_id("v1", "Node", "", "nodename", "nodeuid1"),
            role1v1beta1: make_id(
                "rbac.authorization.k8s.io/v1beta1",
                "Role",
                "ns1",
                "role1",
                "roleuid1",
            ),
            role1v1: make_id("rbac.authorization.k8s.io/v1", "Role", "ns1", "role1", "roleuid1"),
            deployment1apps: make_id(
                "apps/v1",
                "Deployment",
                "ns1",
                "deployment1",
                "deploymentuid1",
            ),
            deployment1extensions: make_id(
                "extensions/v1beta1",
                "Deployment",
                "ns1",
                "deployment1",
                "deploymentuid1",
            ),
            node1_with_namespace: make_id("v1", "Node", "ns1", "nodename", "nodeuid1"),
            pod1nonamespace: make_id("v1", "Pod", "", "podname1", "poduid1"),
            bad_secret_reference_with_deployment_uid: make_id(
                "v1",
                "Secret",
                "ns1",
                "secretname",
                "deploymentuid1",
            ),
            bad_child_pod: make_id("v1", "Pod", "ns1", "badpod", "badpoduid"),
            good_child_pod: make_id("v1", "Pod", "ns1", "goodpod", "goodpoduid"),
        }
    }
}

/// A graph node as upstream's assertState compares it: identity, virtual, owners.
#[derive(Clone, PartialEq, Eq, Debug)]
struct GraphNode {
    identity: ObjectReference,
    is_virtual: bool,
    owners: Vec<OwnerRef>,
}

/// Upstream's `makeNode(identity)`.
fn make_node(identity: &ObjectReference) -> GraphNode {
    GraphNode { identity: identity.clone(), is_virtual: false, owners: Vec::new() }
}

impl GraphNode {
    /// Upstream's `virtual` tweak.
    fn marked_virtual(mut self) -> GraphNode {
        self.is_virtual = true;
        self
    }

    /// Upstream's `withOwners` tweak: coordinates only.
    fn with_owners(mut self, owners: &[&ObjectReference]) -> GraphNode {
        self.owners = owners
            .iter()
            .map(|o| OwnerRef {
                ty: o.ty,
                name: o.name.clone(),
                uid: o.uid,
                controller: None,
                block_owner_deletion: None,
            })
            .collect();
        self
    }
}

/// A pending queue item, as upstream's assertState compares it (identity and virtual).
#[derive(Clone, PartialEq, Eq, Debug)]
enum Queued {
    /// An item for the node now in the graph under that UID, as the node is now.
    Node { identity: ObjectReference, is_virtual: bool },
    /// An item for a node re-identified (or removed) since it was queued.
    ///
    /// Upstream's queue holds the pointer to the virtual node that it cloned into a new one
    /// when it re-identified it, and asserts that pointer's old identity and `virtual`;
    /// kube-gc's item holds the UID and an incarnation older than the node's, and the
    /// worker drops it just as upstream's does ("item no longer virtual in the graph").
    Old { uid: Uid },
}

/// `makeNode(identity)` in a pending queue.
fn queued(identity: &ObjectReference) -> Queued {
    Queued::Node { identity: identity.clone(), is_virtual: false }
}

/// `makeNode(identity, virtual)` in a pending queue.
fn queued_virtual(identity: &ObjectReference) -> Queued {
    Queued::Node { identity: identity.clone(), is_virtual: true }
}

/// `makeNode(identity, virtual)` in a pending queue, where upstream's pointer is to the
/// virtual node `identity` that has since been cloned (see [`Queued::Old`]).
fn queued_old(identity: &ObjectReference) -> Queued {
    Queued::Old { uid: identity.uid }
}

/// Upstream's `state`: what `assert_state` checks. Empty fields mean empty.
#[derive(Default)]
struct State {
    events: Vec<&'static str>,
    client_actions: Vec<&'static str>,
    graph_nodes: Vec<GraphNode>,
    pending_graph_changes: Vec<Event>,
    pending_attempt_to_delete: Vec<Queued>,
    pending_attempt_to_orphan: Vec<Queued>,
    absent_owner_cache: Vec<ObjectReference>,
}

/// Upstream's test scaffolding: the graph builder (the parallel [`Ingester`], one event per
/// `ingest` call, and the [`SequentialGraph`] in lockstep), the collector, the fake client
/// and the tracking queues, driven step by step.
struct Harness {
    name: &'static str,
    /// The step about to run (upstream's numbering: every step counts, asserts included).
    step: usize,
    graph: Arc<Graph>,
    ingester: Ingester,
    sequential: SequentialGraph,
    cluster: Arc<MemoryCluster>,
    graph_changes: Arc<GraphChanges>,
    gc: Collector<MemoryCluster>,
}

impl Harness {
    fn new(name: &'static str) -> Harness {
        let cluster = Arc::new(MemoryCluster::with_test_resources());
        let (graph, graph_changes, gc) = collector(cluster.clone(), 100);
        Harness {
            name,
            step: 0,
            ingester: Ingester::new(graph.clone(), 2),
            graph,
            sequential: SequentialGraph::new(),
            cluster,
            graph_changes,
            gc,
        }
    }

    fn at(&self) -> String {
        format!("{}: step {}", self.name, self.step)
    }

    /// Upstream checks its graph invariants after every step; so do we, plus the edge
    /// copies kube-gc keeps on the owner side, plus the sequential reference's agreement.
    fn end_step(&mut self) {
        let at = self.at();
        if let Err(e) = self.graph.check_edge_copies() {
            panic!("{at}: edge copies: {e}");
        }
        let snapshot = self.graph.snapshot();
        if let Err(e) = verify_graph_invariants(&snapshot) {
            panic!("{at}: graph invariants: {e}");
        }
        assert_eq!(snapshot, self.sequential.snapshot(), "{at}: ingester != sequential");
        self.step += 1;
    }

    /// Applies one event as one processGraphChanges iteration, to both graphs, and hands
    /// the ingester's output to the collector.
    fn ingest(&mut self, event: &Event) {
        let out = self.ingester.ingest(std::slice::from_ref(event));
        assert!(out.errors.is_empty(), "{}: {:?}", self.at(), out.errors);
        self.sequential.apply(event, &mut IngestOutput::default());
        self.gc.apply_ingest_output(out);
    }

    /// Upstream's `createObjectInClient`.
    fn create_object_in_client(&mut self, resource: Resource, object: ObjectMeta) {
        assert!(
            self.cluster.calls().is_empty(),
            "{}: cannot create with pending client actions, assert them first",
            self.at()
        );
        if let Err(e) = self.cluster.create(&resource, object) {
            panic!("{}: {e}", self.at());
        }
        self.end_step();
    }

    /// Upstream's `deleteObjectFromClient`.
    fn delete_object_from_client(&mut self, resource: Resource, namespace: &str, name: &str) {
        assert!(self.cluster.calls().is_empty(), "{}: pending client actions", self.at());
        assert!(
            self.cluster.delete_object(&resource, namespace, name).is_some(),
            "{}: no {name} to delete",
            self.at()
        );
        self.end_step();
    }

    /// Upstream's `processEvent`: one informer event, processed at once.
    fn process_event(&mut self, event: Event) {
        assert!(
            self.graph_changes.is_empty(),
            "{}: events present in graphChanges, must process pending graphChanges before calling processEvent",
            self.at()
        );
        self.ingest(&event);
        self.end_step();
    }

    /// Upstream's `insertEvent`: put `event` at the front of graphChanges.
    fn insert_event(&mut self, event: Event) {
        self.graph_changes.push_front(event);
        self.end_step();
    }

    /// Upstream's `processGraphChanges(count)`.
    fn process_pending_graph_changes(&mut self, count: usize) {
        for i in 0..count {
            let Some(event) = self.graph_changes.drain(1).pop() else {
                panic!("{}: expected at least {count} pending changes, got {i}", self.at());
            };
            self.ingest(&event);
        }
        self.end_step();
    }

    /// Upstream's `processAttemptToDelete(count)`: `count` worker iterations.
    fn process_attempt_to_delete(&mut self, count: usize) {
        for i in 0..count {
            // Only ever called with an item pending, so the worker never blocks.
            assert!(
                !self.gc.attempt_to_delete_queue().is_empty(),
                "{}: expected at least {count} pending items, got {i}",
                self.at()
            );
            assert!(block_on(self.gc.process_attempt_to_delete_worker()));
        }
        self.end_step();
    }

    fn resolve(&self, pending: Vec<NodeKey>) -> Vec<Queued> {
        pending
            .into_iter()
            .map(|key| match self.graph.node(key.uid) {
                Some(n) if n.incarnation == key.incarnation => {
                    Queued::Node { identity: n.identity, is_virtual: n.is_virtual }
                }
                _ => Queued::Old { uid: key.uid },
            })
            .collect()
    }

    /// Upstream's `assertState`: checks everything, and clears the recorded events and
    /// client actions.
    fn assert_state(&mut self, s: State) {
        let at = self.at();

        let cached: BTreeSet<String> =
            self.gc.absent_owners().contents().iter().map(ToString::to_string).collect();
        let want: BTreeSet<String> = s.absent_owner_cache.iter().map(ToString::to_string).collect();
        assert_eq!(cached, want, "{at}: absentOwnerCache");

        let events = self.cluster.take_event_strings();
        assert_eq!(events, s.events, "{at}: did not get expected events");

        let actions = self.cluster.take_actions();
        assert_eq!(actions, s.client_actions, "{at}: did not get expected client actions");

        let graph: BTreeMap<Uid, GraphNode> = self
            .graph
            .snapshot()
            .nodes
            .into_iter()
            .map(|(uid, n)| {
                let node =
                    GraphNode { identity: n.identity, is_virtual: n.is_virtual, owners: n.owners };
                (uid, node)
            })
            .collect();
        let want: BTreeMap<Uid, GraphNode> =
            s.graph_nodes.into_iter().map(|n| (n.identity.uid, n)).collect();
        assert_eq!(graph, want, "{at}: graph nodes");

        assert_eq!(self.graph_changes.pending(), s.pending_graph_changes, "{at}: graphChanges");

        let pending = self.resolve(self.gc.attempt_to_delete_queue().pending());
        assert_eq!(pending, s.pending_attempt_to_delete, "{at}: attemptToDelete");

        let pending = self.resolve(self.gc.attempt_to_orphan_queue().pending());
        assert_eq!(pending, s.pending_attempt_to_orphan, "{at}: attemptToOrphan");

        self.end_step();
    }
}

const WARNING_POD1_REFERS_TO_POD2_IN_NS1: &str = r#"Warning OwnerRefInvalidNamespace ownerRef [v1/Pod, namespace: ns1, name: podname2, uid: poduid2] does not exist in namespace "ns1" involvedObject{kind=Pod,apiVersion=v1}"#;
const WARNING_NODE1_REFERS_TO_POD1: &str = r#"Warning OwnerRefInvalidNamespace ownerRef [v1/Pod, namespace: , name: podname1, uid: poduid1] does not exist in namespace "" involvedObject{kind=Node,apiVersion=v1}"#;

/// One step of an upstream script (`step` in garbagecollector_test.go), run by [`run_steps`].
enum Step {
    /// `createObjectInClient`.
    CreateObjectInClient(Resource, ObjectMeta),
    /// `deleteObjectFromClient`: resource, namespace, name.
    DeleteObjectFromClient(Resource, &'static str, &'static str),
    /// `processEvent`: one graph change, applied.
    ProcessEvent(Event),
    /// `insertEvent`: a graph change put in front of the pending ones.
    InsertEvent(Event),
    /// `processPendingGraphChanges(count)`.
    ProcessPendingGraphChanges(usize),
    /// `processAttemptToDelete(count)`.
    ProcessAttemptToDelete(usize),
    /// `assertState`.
    AssertState(State),
}

/// Runs upstream's script `name` step by step, as its `for _, step := range scenario.steps`.
fn run_steps(name: &'static str, steps: Vec<Step>) {
    let mut h = Harness::new(name);
    for step in steps {
        match step {
            Step::CreateObjectInClient(resource, object) => {
                h.create_object_in_client(resource, object)
            }
            Step::DeleteObjectFromClient(resource, namespace, name) => {
                h.delete_object_from_client(resource, namespace, name)
            }
            Step::ProcessEvent(event) => h.process_event(event),
            Step::InsertEvent(event) => h.insert_event(event),
            Step::ProcessPendingGraphChanges(count) => h.process_pending_graph_changes(count),
            Step::ProcessAttemptToDelete(count) => h.process_attempt_to_delete(count),
            Step::AssertState(state) => h.assert_state(state),
        }
    }
}

#[test]
fn case_01_good_child_in_ns1_to_cluster_scoped_owner() {
    let Ids { pod1ns1, node1, node1_with_namespace, .. } = Ids::new();
    run_steps(
        "good child in ns1 -> cluster-scoped owner",
        vec![
            // setup
            Step::CreateObjectInClient(nodes(), make_obj(&node1, &[])),
            Step::CreateObjectInClient(pods(), make_obj(&pod1ns1, &[&node1])),
            // observe namespaced child with not-yet-observed cluster-scoped parent
            Step::ProcessEvent(make_add_event(&pod1ns1, &[&node1])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&node1]),
                    make_node(&node1_with_namespace).marked_virtual(), // matching child namespace
                ],
                pending_attempt_to_delete: vec![queued_virtual(&node1_with_namespace)],
                ..State::default()
            }),
            // handle queued delete of virtual node
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec!["get /v1, Resource=nodes name=nodename"],
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&node1]),
                    make_node(&node1_with_namespace).marked_virtual(),
                ],
                // virtual node1 still not observed, got requeued
                pending_attempt_to_delete: vec![queued_virtual(&node1_with_namespace)],
                ..State::default()
            }),
            // observe cluster-scoped parent
            Step::ProcessEvent(make_add_event(&node1, &[])),
            Step::AssertState(State {
                // node1 switched to observed, fixed namespace coordinate
                graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&node1]), make_node(&node1)],
                // upstream: the old virtual node1WithNamespace pointer; here its stale incarnation
                pending_attempt_to_delete: vec![queued_old(&node1_with_namespace)],
                ..State::default()
            }),
            // handle queued delete of virtual node
            // final state: child and parent present in graph, no queued actions
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&node1]), make_node(&node1)],
                ..State::default()
            }),
        ],
    );
}

/// Child in namespace A with an owner reference to a namespaced type in namespace B: deleted
/// at once, with an event in namespace A on the bad child.
#[test]
fn case_02_bad_child_in_ns1_to_owner_in_ns2_child_first() {
    let Ids { pod1ns1, pod2ns1, pod2ns2, .. } = Ids::new();
    run_steps(
        "bad child in ns1 -> owner in ns2 (child first)",
        vec![
            // 0,1: setup
            Step::CreateObjectInClient(pods(), make_obj(&pod1ns1, &[&pod2ns1])),
            Step::CreateObjectInClient(pods(), make_obj(&pod2ns2, &[])),
            // 2,3: observe namespaced child with not-yet-observed namespace-scoped parent
            Step::ProcessEvent(make_add_event(&pod1ns1, &[&pod2ns2])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&pod2ns2]),
                    make_node(&pod2ns1).marked_virtual(), // virtual pod2 (matching child namespace)
                ],
                pending_attempt_to_delete: vec![queued_virtual(&pod2ns1)],
                ..State::default()
            }),
            // 4,5: observe parent
            Step::ProcessEvent(make_add_event(&pod2ns2, &[])),
            Step::AssertState(State {
                // pod2 is no longer virtual, namespace coordinate is corrected
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&pod2ns2]),
                    make_node(&pod2ns2),
                ],
                // virtual pod2 still queued (stale), bad child pod1 queued because it disagreed
                // with the observed parent
                pending_attempt_to_delete: vec![queued_old(&pod2ns1), queued(&pod1ns1)],
                events: vec![WARNING_POD1_REFERS_TO_POD2_IN_NS1],
                ..State::default()
            }),
            // 6,7: handle queued delete of virtual parent
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&pod2ns2]),
                    make_node(&pod2ns2),
                ],
                pending_attempt_to_delete: vec![queued(&pod1ns1)],
                ..State::default()
            }),
            // 8,9: handle queued delete of bad child
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec![
                    "get /v1, Resource=pods ns=ns1 name=podname1", // lookup of pod1 pre-delete
                    "get /v1, Resource=pods ns=ns1 name=podname2", // bad parent reference is absent
                    "delete /v1, Resource=pods ns=ns1 name=podname1", // pod1 delete
                ],
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&pod2ns2]),
                    make_node(&pod2ns2),
                ],
                absent_owner_cache: vec![pod2ns1.clone()], // cached absence of bad parent
                ..State::default()
            }),
            // 10,11: observe delete issued in step 8
            // final state: parent present in graph, no queued actions
            Step::ProcessEvent(make_delete_event(&pod1ns1, &[])),
            Step::AssertState(State {
                graph_nodes: vec![make_node(&pod2ns2)], // only good parent remains
                absent_owner_cache: vec![pod2ns1.clone()],
                ..State::default()
            }),
        ],
    );
}

#[test]
fn case_03_bad_child_in_ns1_to_owner_in_ns2_owner_first() {
    let Ids { pod1ns1, pod2ns1, pod2ns2, .. } = Ids::new();
    run_steps(
        "bad child in ns1 -> owner in ns2 (owner first)",
        vec![
            // 0,1: setup
            Step::CreateObjectInClient(pods(), make_obj(&pod1ns1, &[&pod2ns1])),
            Step::CreateObjectInClient(pods(), make_obj(&pod2ns2, &[])),
            // 2,3: observe parent
            Step::ProcessEvent(make_add_event(&pod2ns2, &[])),
            Step::AssertState(State { graph_nodes: vec![make_node(&pod2ns2)], ..State::default() }),
            // 4,5: observe namespaced child with invalid cross-namespace reference to parent
            Step::ProcessEvent(make_add_event(&pod1ns1, &[&pod2ns1])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&pod2ns1]),
                    make_node(&pod2ns2),
                ],
                pending_attempt_to_delete: vec![queued(&pod1ns1)], // bad child queued
                events: vec![WARNING_POD1_REFERS_TO_POD2_IN_NS1],
                ..State::default()
            }),
            // 6,7: handle queued delete of bad child
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec![
                    "get /v1, Resource=pods ns=ns1 name=podname1", // lookup of pod1 pre-delete
                    "get /v1, Resource=pods ns=ns1 name=podname2", // bad parent reference is absent
                    "delete /v1, Resource=pods ns=ns1 name=podname1", // pod1 delete
                ],
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&pod2ns1]),
                    make_node(&pod2ns2),
                ],
                absent_owner_cache: vec![pod2ns1.clone()], // cached absence of bad parent
                ..State::default()
            }),
            // 8,9: observe delete issued in step 6
            // final state: parent present in graph, no queued actions
            Step::ProcessEvent(make_delete_event(&pod1ns1, &[])),
            Step::AssertState(State {
                graph_nodes: vec![make_node(&pod2ns2)], // only good parent remains
                absent_owner_cache: vec![pod2ns1.clone()],
                ..State::default()
            }),
        ],
    );
}

/// Cluster-scoped child with an owner reference to a namespaced type: not deleted, and an
/// event is recorded on the bad child.
#[test]
fn case_04_bad_cluster_scoped_child_to_owner_in_ns1_child_first() {
    let Ids { pod1ns1, node1, pod1nonamespace, .. } = Ids::new();
    run_steps(
        "bad cluster-scoped child -> owner in ns1 (child first)",
        vec![
            // setup
            Step::CreateObjectInClient(nodes(), make_obj(&node1, &[&pod1ns1])),
            Step::CreateObjectInClient(pods(), make_obj(&pod1ns1, &[])),
            // 2,3: observe cluster-scoped child with not-yet-observed namespaced parent
            Step::ProcessEvent(make_add_event(&node1, &[&pod1ns1])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod1nonamespace).marked_virtual(), // virtual pod1 (with no namespace)
                ],
                pending_attempt_to_delete: vec![queued_virtual(&pod1nonamespace)],
                ..State::default()
            }),
            // 4,5: handle queued delete of virtual pod1
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod1nonamespace).marked_virtual(),
                ],
                // namespace-scoped virtual object without a namespace coordinate not re-queued
                ..State::default()
            }),
            // 6,7: observe namespace-scoped parent
            Step::ProcessEvent(make_add_event(&pod1ns1, &[])),
            Step::AssertState(State {
                // pod1 namespace coordinate corrected, made non-virtual
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod1ns1),
                ],
                events: vec![WARNING_NODE1_REFERS_TO_POD1],
                // bad cluster-scoped child added to attemptToDelete queue
                pending_attempt_to_delete: vec![queued(&node1)],
                ..State::default()
            }),
            // 8,9: handle queued attempted delete of bad cluster-scoped child
            // final state: parent and child present in graph, no queued actions
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec!["get /v1, Resource=nodes name=nodename"], // lookup of node pre-delete
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod1ns1),
                ],
                ..State::default()
            }),
        ],
    );
}

#[test]
fn case_05_bad_cluster_scoped_child_to_owner_in_ns1_owner_first() {
    let Ids { pod1ns1, node1, pod1nonamespace, .. } = Ids::new();
    run_steps(
        "bad cluster-scoped child -> owner in ns1 (owner first)",
        vec![
            // setup
            Step::CreateObjectInClient(nodes(), make_obj(&node1, &[&pod1ns1])),
            Step::CreateObjectInClient(pods(), make_obj(&pod1ns1, &[])),
            // 2,3: observe namespace-scoped parent
            Step::ProcessEvent(make_add_event(&pod1ns1, &[])),
            Step::AssertState(State { graph_nodes: vec![make_node(&pod1ns1)], ..State::default() }),
            // 4,5: observe cluster-scoped child
            Step::ProcessEvent(make_add_event(&node1, &[&pod1ns1])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod1ns1),
                ],
                events: vec![WARNING_NODE1_REFERS_TO_POD1],
                // bad cluster-scoped child added to attemptToDelete queue
                pending_attempt_to_delete: vec![queued(&node1)],
                ..State::default()
            }),
            // 6,7: handle queued attempted delete of bad cluster-scoped child
            // final state: parent and child present in graph, no queued actions
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec!["get /v1, Resource=nodes name=nodename"], // lookup of node pre-delete
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod1ns1),
                ],
                ..State::default()
            }),
        ],
    );
}

/// Child pointing at a non-preferred, still-served apiVersion of its parent
/// (rbac/v1beta1): not deleted prematurely, no repeated polling while waiting, deleted
/// when the actual parent is deleted.
#[test]
fn case_06_good_child_to_existing_owner_with_non_preferred_accessible_api_version() {
    let Ids { pod1ns1, role1v1, role1v1beta1, .. } = Ids::new();
    run_steps(
        "good child -> existing owner with non-preferred accessible API version",
        vec![
            // setup
            Step::CreateObjectInClient(roles_v1(), make_obj(&role1v1, &[])),
            Step::CreateObjectInClient(roles_v1beta1(), make_obj(&role1v1beta1, &[])),
            Step::CreateObjectInClient(pods(), make_obj(&pod1ns1, &[&role1v1beta1])),
            // 3,4: observe child
            Step::ProcessEvent(make_add_event(&pod1ns1, &[&role1v1beta1])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&role1v1beta1]),
                    make_node(&role1v1beta1).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![queued_virtual(&role1v1beta1)], // virtual parent
                ..State::default()
            }),
            // 5,6: handle queued attempted delete of virtual parent
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec![
                    "get rbac.authorization.k8s.io/v1beta1, Resource=roles ns=ns1 name=role1",
                ],
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&role1v1beta1]),
                    make_node(&role1v1beta1).marked_virtual(),
                ],
                // not yet observed, still in the attemptToDelete queue
                pending_attempt_to_delete: vec![queued_virtual(&role1v1beta1)],
                ..State::default()
            }),
            // 7,8: observe parent via v1
            Step::ProcessEvent(make_add_event(&role1v1, &[])),
            Step::AssertState(State {
                // parent version/virtual state gets corrected
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&role1v1beta1]),
                    make_node(&role1v1),
                ],
                // virtual parent (stale) and mismatched child enqueued for delete attempt
                pending_attempt_to_delete: vec![queued_old(&role1v1beta1), queued(&pod1ns1)],
                ..State::default()
            }),
            // 9,10: process attemptToDelete
            // virtual node dropped from attemptToDelete with no further action because the real
            // node has been observed now
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&role1v1beta1]),
                    make_node(&role1v1),
                ],
                pending_attempt_to_delete: vec![queued(&pod1ns1)], // mismatched child
                ..State::default()
            }),
            // 11,12: process attemptToDelete for mismatched parent
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec![
                    "get /v1, Resource=pods ns=ns1 name=podname1", // lookup of child pre-delete
                    "get rbac.authorization.k8s.io/v1beta1, Resource=roles ns=ns1 name=role1", // solid
                ],
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&role1v1beta1]),
                    make_node(&role1v1),
                ],
                ..State::default()
            }),
            // 13,14: teardown
            Step::DeleteObjectFromClient(roles_v1(), "ns1", "role1"),
            Step::DeleteObjectFromClient(roles_v1beta1(), "ns1", "role1"),
            // 15,16: observe delete via v1
            Step::ProcessEvent(make_delete_event(&role1v1, &[])),
            Step::AssertState(State {
                graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&role1v1beta1])], // only child
                absent_owner_cache: vec![role1v1.clone()], // cached absence of parent via v1
                pending_attempt_to_delete: vec![queued(&pod1ns1)],
                ..State::default()
            }),
            // 17,18: process attemptToDelete for child
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec![
                    "get /v1, Resource=pods ns=ns1 name=podname1", // lookup of child pre-delete
                    "get rbac.authorization.k8s.io/v1beta1, Resource=roles ns=ns1 name=role1",
                    "delete /v1, Resource=pods ns=ns1 name=podname1",
                ],
                // cached absence of v1beta1 role
                absent_owner_cache: vec![role1v1.clone(), role1v1beta1.clone()],
                graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&role1v1beta1])],
                ..State::default()
            }),
            // 19,20: observe delete issued in step 17
            // final state: empty graph, no queued actions
            Step::ProcessEvent(make_delete_event(&pod1ns1, &[])),
            Step::AssertState(State {
                absent_owner_cache: vec![role1v1.clone(), role1v1beta1.clone()],
                ..State::default()
            }),
        ],
    );
}

/// Child pointing at a no-longer-served apiVersion of a still-existing parent
/// (extensions/v1beta1 deployment): not deleted (indistinguishable from an unknown kind),
/// and the virtual parent stops polling once the real parent is observed.
#[test]
fn case_07_child_to_existing_owner_with_inaccessible_api_version_child_first() {
    let Ids { pod1ns1, deployment1apps, deployment1extensions, .. } = Ids::new();
    run_steps(
        "child -> existing owner with inaccessible API version (child first)",
        vec![
            // setup
            Step::CreateObjectInClient(deployments(), make_obj(&deployment1apps, &[])),
            Step::CreateObjectInClient(pods(), make_obj(&pod1ns1, &[&deployment1extensions])),
            // 2,3: observe child
            Step::ProcessEvent(make_add_event(&pod1ns1, &[&deployment1extensions])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                    make_node(&deployment1extensions).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![queued_virtual(&deployment1extensions)],
                ..State::default()
            }),
            // 4,5: handle queued attempted delete of virtual parent
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                    make_node(&deployment1extensions).marked_virtual(),
                ],
                // requeued on restmapper error
                pending_attempt_to_delete: vec![queued_virtual(&deployment1extensions)],
                ..State::default()
            }),
            // 6,7: observe parent via v1
            Step::ProcessEvent(make_add_event(&deployment1apps, &[])),
            Step::AssertState(State {
                // parent version/virtual state gets corrected
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                    make_node(&deployment1apps),
                ],
                // virtual parent (stale) and mismatched child enqueued for delete attempt
                pending_attempt_to_delete: vec![
                    queued_old(&deployment1extensions),
                    queued(&pod1ns1),
                ],
                ..State::default()
            }),
            // 8,9: process attemptToDelete
            // virtual node dropped from attemptToDelete with no further action because the real
            // node has been observed now
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                    make_node(&deployment1apps),
                ],
                pending_attempt_to_delete: vec![queued(&pod1ns1)], // mismatched child
                ..State::default()
            }),
            // 10,11: process attemptToDelete for mismatched child
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec!["get /v1, Resource=pods ns=ns1 name=podname1"],
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                    make_node(&deployment1apps),
                ],
                // mismatched child still enqueued - restmapper error
                pending_attempt_to_delete: vec![queued(&pod1ns1)],
                ..State::default()
            }),
            // 12: teardown
            Step::DeleteObjectFromClient(deployments(), "ns1", "deployment1"),
            // 13,14: observe delete via v1
            Step::ProcessEvent(make_delete_event(&deployment1apps, &[])),
            Step::AssertState(State {
                graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&deployment1extensions])],
                absent_owner_cache: vec![deployment1apps.clone()], // cached absence of parent via v1
                pending_attempt_to_delete: vec![queued(&pod1ns1)],
                ..State::default()
            }),
            // 15,16 (upstream says 17,18): process attemptToDelete for child
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec!["get /v1, Resource=pods ns=ns1 name=podname1"],
                graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&deployment1extensions])],
                absent_owner_cache: vec![deployment1apps.clone()],
                // mismatched child still enqueued - restmapper error
                pending_attempt_to_delete: vec![queued(&pod1ns1)],
                ..State::default()
            }),
        ],
    );
}

#[test]
fn case_08_child_to_existing_owner_with_inaccessible_api_version_owner_first() {
    let Ids { pod1ns1, deployment1apps, deployment1extensions, .. } = Ids::new();
    run_steps(
        "child -> existing owner with inaccessible API version (owner first)",
        vec![
            // setup
            Step::CreateObjectInClient(deployments(), make_obj(&deployment1apps, &[])),
            Step::CreateObjectInClient(pods(), make_obj(&pod1ns1, &[&deployment1extensions])),
            // 2,3: observe parent via v1
            Step::ProcessEvent(make_add_event(&deployment1apps, &[])),
            Step::AssertState(State {
                graph_nodes: vec![make_node(&deployment1apps)],
                ..State::default()
            }),
            // 4,5: observe child
            Step::ProcessEvent(make_add_event(&pod1ns1, &[&deployment1extensions])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                    make_node(&deployment1apps),
                ],
                // mismatched child enqueued for delete attempt
                pending_attempt_to_delete: vec![queued(&pod1ns1)],
                ..State::default()
            }),
            // 6,7: process attemptToDelete for mismatched child
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec!["get /v1, Resource=pods ns=ns1 name=podname1"],
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                    make_node(&deployment1apps),
                ],
                // mismatched child still enqueued - restmapper error
                pending_attempt_to_delete: vec![queued(&pod1ns1)],
                ..State::default()
            }),
            // 8: teardown
            Step::DeleteObjectFromClient(deployments(), "ns1", "deployment1"),
            // 9,10: observe delete via v1
            Step::ProcessEvent(make_delete_event(&deployment1apps, &[])),
            Step::AssertState(State {
                graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&deployment1extensions])],
                absent_owner_cache: vec![deployment1apps.clone()], // cached absence of parent via v1
                pending_attempt_to_delete: vec![queued(&pod1ns1)],
                ..State::default()
            }),
            // 11,12: process attemptToDelete for child
            // final state: child with unresolvable ownerRef remains, queued in attemptToDelete
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec!["get /v1, Resource=pods ns=ns1 name=podname1"],
                graph_nodes: vec![make_node(&pod1ns1).with_owners(&[&deployment1extensions])],
                absent_owner_cache: vec![deployment1apps.clone()],
                pending_attempt_to_delete: vec![queued(&pod1ns1)], // restmapper error
                ..State::default()
            }),
        ],
    );
}

/// Child pointing at a no-longer-served apiVersion of a no-longer-existing parent: not
/// deleted, polled again and again, and it does not block the deletion of the missing
/// parent's legitimate children.
#[test]
fn case_09_child_to_non_existent_owner_with_inaccessible_api_version_inaccessible_parent_first() {
    let Ids { pod1ns1, pod2ns1, deployment1apps, deployment1extensions, .. } = Ids::new();
    run_steps(
        "child -> non-existent owner with inaccessible API version (inaccessible parent apiVersion first)",
        vec![
            // setup
            Step::CreateObjectInClient(pods(), make_obj(&pod1ns1, &[&deployment1extensions])),
            Step::CreateObjectInClient(pods(), make_obj(&pod2ns1, &[&deployment1apps])),
            // 2,3: observe child pointing at no-longer-served apiVersion
            Step::ProcessEvent(make_add_event(&pod1ns1, &[&deployment1extensions])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                    make_node(&deployment1extensions).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![queued_virtual(&deployment1extensions)],
                ..State::default()
            }),
            // 4,5: observe child pointing at served apiVersion where owner does not exist
            Step::ProcessEvent(make_add_event(&pod2ns1, &[&deployment1apps])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                    make_node(&deployment1extensions).marked_virtual(),
                    make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                ],
                // mismatched child enqueued for delete attempt
                pending_attempt_to_delete: vec![
                    queued_virtual(&deployment1extensions),
                    queued(&pod2ns1),
                ],
                ..State::default()
            }),
            // 6,7: handle attempt to delete virtual parent for inaccessible apiVersion
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                    make_node(&deployment1extensions).marked_virtual(),
                    make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                ],
                // inaccessible parent requeued to end
                pending_attempt_to_delete: vec![
                    queued(&pod2ns1),
                    queued_virtual(&deployment1extensions),
                ],
                ..State::default()
            }),
            // 8,9: handle attempt to delete mismatched child
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec![
                    "get /v1, Resource=pods ns=ns1 name=podname2", // lookup of child pre-delete
                    "get apps/v1, Resource=deployments ns=ns1 name=deployment1", // lookup of parent
                    "delete /v1, Resource=pods ns=ns1 name=podname2", // delete child
                ],
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                    make_node(&deployment1extensions).marked_virtual(),
                    make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                ],
                absent_owner_cache: vec![deployment1apps.clone()], // verifiably absent parent
                pending_attempt_to_delete: vec![queued_virtual(&deployment1extensions)],
                ..State::default()
            }),
            // 10,11: observe delete issued in step 8
            Step::ProcessEvent(make_delete_event(&pod2ns1, &[])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                    make_node(&deployment1extensions).marked_virtual(),
                ],
                absent_owner_cache: vec![deployment1apps.clone()],
                pending_attempt_to_delete: vec![queued_virtual(&deployment1extensions)],
                ..State::default()
            }),
            // 12,13: final state: inaccessible parent requeued in attemptToDelete
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                    make_node(&deployment1extensions).marked_virtual(),
                ],
                absent_owner_cache: vec![deployment1apps.clone()],
                pending_attempt_to_delete: vec![queued_virtual(&deployment1extensions)],
                ..State::default()
            }),
        ],
    );
}

#[test]
fn case_10_child_to_non_existent_owner_with_inaccessible_api_version_accessible_parent_first() {
    let Ids { pod1ns1, pod2ns1, deployment1apps, deployment1extensions, .. } = Ids::new();
    run_steps(
        "child -> non-existent owner with inaccessible API version (accessible parent apiVersion first)",
        vec![
            // setup
            Step::CreateObjectInClient(pods(), make_obj(&pod1ns1, &[&deployment1extensions])),
            Step::CreateObjectInClient(pods(), make_obj(&pod2ns1, &[&deployment1apps])),
            // 2,3: observe child pointing at served apiVersion where owner does not exist
            Step::ProcessEvent(make_add_event(&pod2ns1, &[&deployment1apps])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                    make_node(&deployment1apps).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![queued_virtual(&deployment1apps)],
                ..State::default()
            }),
            // 4,5: observe child pointing at no-longer-served apiVersion
            Step::ProcessEvent(make_add_event(&pod1ns1, &[&deployment1extensions])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                    make_node(&deployment1apps).marked_virtual(),
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                ],
                // mismatched child enqueued for delete attempt
                pending_attempt_to_delete: vec![queued_virtual(&deployment1apps), queued(&pod1ns1)],
                ..State::default()
            }),
            // 6,7: handle attempt to delete virtual parent for accessible apiVersion
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                // lookup of parent, gets 404
                client_actions: vec!["get apps/v1, Resource=deployments ns=ns1 name=deployment1"],
                // virtual parent not found, queued virtual delete event
                pending_graph_changes: vec![make_virtual_delete_event(&deployment1apps)],
                graph_nodes: vec![
                    make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                    make_node(&deployment1apps).marked_virtual(),
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                ],
                pending_attempt_to_delete: vec![queued(&pod1ns1)],
                ..State::default()
            }),
            // 8,9: handle attempt to delete mismatched child
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec!["get /v1, Resource=pods ns=ns1 name=podname1"],
                pending_graph_changes: vec![make_virtual_delete_event(&deployment1apps)],
                graph_nodes: vec![
                    make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                    make_node(&deployment1apps).marked_virtual(),
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                ],
                // restmapper on inaccessible parent, requeued
                pending_attempt_to_delete: vec![queued(&pod1ns1)],
                ..State::default()
            }),
            // 10,11: handle queued virtual delete event
            Step::ProcessPendingGraphChanges(1),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                    // deployment node changed identity to alternative virtual identity
                    make_node(&deployment1extensions).marked_virtual(),
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                ],
                absent_owner_cache: vec![deployment1apps.clone()], // absent apps/v1 parent
                pending_attempt_to_delete: vec![
                    queued(&pod1ns1),                       // child referencing inaccessible version
                    queued(&pod2ns1),                       // children of absent apps/v1 parent
                    queued_virtual(&deployment1extensions), // new virtual parent
                ],
                ..State::default()
            }),
            // 12,13: handle attempt to delete child referencing inaccessible apiVersion
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec!["get /v1, Resource=pods ns=ns1 name=podname1"],
                graph_nodes: vec![
                    make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                    make_node(&deployment1extensions).marked_virtual(),
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                ],
                absent_owner_cache: vec![deployment1apps.clone()],
                pending_attempt_to_delete: vec![
                    queued(&pod2ns1),
                    queued_virtual(&deployment1extensions),
                    queued(&pod1ns1), // child referencing inaccessible apiVersion - requeued to end
                ],
                ..State::default()
            }),
            // 14,15: handle attempt to delete child referencing accessible apiVersion
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec![
                    "get /v1, Resource=pods ns=ns1 name=podname2", // lookup of child pre-delete
                    "delete /v1, Resource=pods ns=ns1 name=podname2", // parent absent, delete
                ],
                graph_nodes: vec![
                    make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                    make_node(&deployment1extensions).marked_virtual(),
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                ],
                absent_owner_cache: vec![deployment1apps.clone()],
                pending_attempt_to_delete: vec![
                    queued_virtual(&deployment1extensions),
                    queued(&pod1ns1),
                ],
                ..State::default()
            }),
            // 16,17: handle attempt to delete virtual parent in inaccessible apiVersion
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod2ns1).with_owners(&[&deployment1apps]),
                    make_node(&deployment1extensions).marked_virtual(),
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                ],
                absent_owner_cache: vec![deployment1apps.clone()],
                pending_attempt_to_delete: vec![
                    queued(&pod1ns1),
                    queued_virtual(&deployment1extensions), // requeued to end
                ],
                ..State::default()
            }),
            // 18,19: observe delete of pod2 from step 14
            // final state: virtual parent for inaccessible apiVersion and child of that parent
            // remain in graph, queued for delete attempts with backoff
            Step::ProcessEvent(make_delete_event(&pod2ns1, &[])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&deployment1extensions).marked_virtual(),
                    make_node(&pod1ns1).with_owners(&[&deployment1extensions]),
                ],
                absent_owner_cache: vec![deployment1apps.clone()],
                pending_attempt_to_delete: vec![
                    queued(&pod1ns1),
                    queued_virtual(&deployment1extensions),
                ],
                ..State::default()
            }),
        ],
    );
}

/// Child pointing at an incorrect apiVersion/kind of a still-existing parent (a core/v1
/// Secret with the UID of an apps/v1 Deployment): deleted at once, without triggering the
/// deletion of the parent's legitimate children.
#[test]
fn case_11_bad_child_good_child_bad_parent_delete_good_parent() {
    let Ids {
        deployment1apps,
        bad_secret_reference_with_deployment_uid: bad_secret,
        bad_child_pod,
        good_child_pod,
        ..
    } = Ids::new();
    run_steps(
        "bad child -> existing owner with incorrect API version (bad child, good child, bad parent delete, good parent)",
        vec![
            // setup
            Step::CreateObjectInClient(deployments(), make_obj(&deployment1apps, &[])),
            Step::CreateObjectInClient(pods(), make_obj(&bad_child_pod, &[&bad_secret])),
            Step::CreateObjectInClient(pods(), make_obj(&good_child_pod, &[&deployment1apps])),
            // 3,4: observe bad child
            Step::ProcessEvent(make_add_event(&bad_child_pod, &[&bad_secret])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    make_node(&bad_secret).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![queued_virtual(&bad_secret)], // virtual parent
                ..State::default()
            }),
            // 5,6: observe good child
            Step::ProcessEvent(make_add_event(&good_child_pod, &[&deployment1apps])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]), // good child added
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    make_node(&bad_secret).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![
                    queued_virtual(&bad_secret), // virtual parent enqueued for delete attempt
                    queued(&good_child_pod),     // good child enqueued for delete attempt
                ],
                ..State::default()
            }),
            // 7,8: process pending delete of virtual parent
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                // lookup of bad parent reference
                client_actions: vec!["get /v1, Resource=secrets ns=ns1 name=secretname"],
                // bad virtual parent not found, queued virtual delete event
                pending_graph_changes: vec![make_virtual_delete_event(&bad_secret)],
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    make_node(&bad_secret).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![queued(&good_child_pod)],
                ..State::default()
            }),
            // 9,10: process pending delete of good child, gets 200, remains
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec![
                    "get /v1, Resource=pods ns=ns1 name=goodpod", // lookup of child pre-delete
                    "get apps/v1, Resource=deployments ns=ns1 name=deployment1", // good parent: 200
                ],
                pending_graph_changes: vec![make_virtual_delete_event(&bad_secret)],
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    make_node(&bad_secret).marked_virtual(),
                ],
                ..State::default()
            }),
            // 11,12: process virtual delete event of bad parent reference
            Step::ProcessPendingGraphChanges(1),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    // parent node switched to alternate identity, still virtual
                    make_node(&deployment1apps).marked_virtual(),
                ],
                absent_owner_cache: vec![bad_secret.clone()], // absence of bad parent coordinates
                pending_attempt_to_delete: vec![
                    queued(&bad_child_pod),           // child of bad parent coordinates
                    queued_virtual(&deployment1apps), // new alternate virtual parent identity
                ],
                ..State::default()
            }),
            // 13,14: process pending delete of bad child
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec![
                    "get /v1, Resource=pods ns=ns1 name=badpod", // lookup of child pre-delete
                    "delete /v1, Resource=pods ns=ns1 name=badpod", // bad parent absence is cached
                ],
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    make_node(&deployment1apps).marked_virtual(),
                ],
                absent_owner_cache: vec![bad_secret.clone()],
                pending_attempt_to_delete: vec![queued_virtual(&deployment1apps)],
                ..State::default()
            }),
            // 15,16: process pending delete of new virtual parent
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                // lookup of virtual parent, returns 200
                client_actions: vec!["get apps/v1, Resource=deployments ns=ns1 name=deployment1"],
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    make_node(&deployment1apps).marked_virtual(),
                ],
                absent_owner_cache: vec![bad_secret.clone()],
                // requeued, not yet observed
                pending_attempt_to_delete: vec![queued_virtual(&deployment1apps)],
                ..State::default()
            }),
            // 17,18: observe good parent
            Step::ProcessEvent(make_add_event(&deployment1apps, &[])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    make_node(&deployment1apps), // parent node made non-virtual
                ],
                absent_owner_cache: vec![bad_secret.clone()],
                // still queued, no longer virtual (same identity: marked observed in place, so the
                // queued item is the node's current incarnation)
                pending_attempt_to_delete: vec![queued(&deployment1apps)],
                ..State::default()
            }),
            // 19,20: observe delete of bad child from step 13
            Step::ProcessEvent(make_delete_event(&bad_child_pod, &[&bad_secret])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    // bad child node removed
                    make_node(&deployment1apps),
                ],
                absent_owner_cache: vec![bad_secret.clone()],
                pending_attempt_to_delete: vec![queued(&deployment1apps)],
                ..State::default()
            }),
            // 21,22: process pending delete of good parent
            // final state: good parent in graph with correct coordinates, good children remain, no
            // pending deletions
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec!["get apps/v1, Resource=deployments ns=ns1 name=deployment1"],
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&deployment1apps),
                ],
                absent_owner_cache: vec![bad_secret.clone()],
                ..State::default()
            }),
        ],
    );
}

#[test]
fn case_12_bad_child_good_child_good_parent_bad_parent_delete() {
    let Ids {
        deployment1apps,
        bad_secret_reference_with_deployment_uid: bad_secret,
        bad_child_pod,
        good_child_pod,
        ..
    } = Ids::new();
    run_steps(
        "bad child -> existing owner with incorrect API version (bad child, good child, good parent, bad parent delete)",
        vec![
            // setup
            Step::CreateObjectInClient(deployments(), make_obj(&deployment1apps, &[])),
            Step::CreateObjectInClient(pods(), make_obj(&bad_child_pod, &[&bad_secret])),
            Step::CreateObjectInClient(pods(), make_obj(&good_child_pod, &[&deployment1apps])),
            // 3,4: observe bad child
            Step::ProcessEvent(make_add_event(&bad_child_pod, &[&bad_secret])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    make_node(&bad_secret).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![queued_virtual(&bad_secret)],
                ..State::default()
            }),
            // 5,6: observe good child
            Step::ProcessEvent(make_add_event(&good_child_pod, &[&deployment1apps])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    make_node(&bad_secret).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![
                    queued_virtual(&bad_secret),
                    queued(&good_child_pod),
                ],
                ..State::default()
            }),
            // 7,8: process pending delete of virtual parent
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec!["get /v1, Resource=secrets ns=ns1 name=secretname"],
                pending_graph_changes: vec![make_virtual_delete_event(&bad_secret)],
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    make_node(&bad_secret).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![queued(&good_child_pod)],
                ..State::default()
            }),
            // 9,10: process pending delete of good child, gets 200, remains
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec![
                    "get /v1, Resource=pods ns=ns1 name=goodpod",
                    "get apps/v1, Resource=deployments ns=ns1 name=deployment1",
                ],
                pending_graph_changes: vec![make_virtual_delete_event(&bad_secret)],
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    make_node(&bad_secret).marked_virtual(),
                ],
                ..State::default()
            }),
            // 11,12: good parent add event
            Step::InsertEvent(make_add_event(&deployment1apps, &[])),
            Step::AssertState(State {
                pending_graph_changes: vec![
                    make_add_event(&deployment1apps, &[]), // good parent observation sneaked in
                    make_virtual_delete_event(&bad_secret), // bad virtual parent not found
                ],
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    make_node(&bad_secret).marked_virtual(),
                ],
                ..State::default()
            }),
            // 13,14: process good parent add
            Step::ProcessPendingGraphChanges(1),
            Step::AssertState(State {
                pending_graph_changes: vec![make_virtual_delete_event(&bad_secret)], // still queued
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    make_node(&deployment1apps), // parent node gets fixed, no longer virtual
                ],
                // child of bad parent coordinates enqueued for delete attempt
                pending_attempt_to_delete: vec![queued(&bad_child_pod)],
                ..State::default()
            }),
            // 15,16: process virtual delete event of bad parent reference
            Step::ProcessPendingGraphChanges(1),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    make_node(&deployment1apps),
                ],
                absent_owner_cache: vec![bad_secret.clone()], // absence of bad parent coordinates
                pending_attempt_to_delete: vec![queued(&bad_child_pod)],
                ..State::default()
            }),
            // 17,18: process pending delete of bad child
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec![
                    "get /v1, Resource=pods ns=ns1 name=badpod", // lookup of child pre-delete
                    "delete /v1, Resource=pods ns=ns1 name=badpod", // bad parent absence is cached
                ],
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                    make_node(&deployment1apps),
                ],
                absent_owner_cache: vec![bad_secret.clone()],
                ..State::default()
            }),
            // 19,20: observe delete of bad child from step 17
            // final state: good parent in graph with correct coordinates, good children remain, no
            // pending deletions
            Step::ProcessEvent(make_delete_event(&bad_child_pod, &[&bad_secret])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&deployment1apps),
                ],
                absent_owner_cache: vec![bad_secret.clone()],
                ..State::default()
            }),
        ],
    );
}

#[test]
fn case_13_good_child_bad_child_good_parent() {
    let Ids {
        deployment1apps,
        bad_secret_reference_with_deployment_uid: bad_secret,
        bad_child_pod,
        good_child_pod,
        ..
    } = Ids::new();
    run_steps(
        "bad child -> existing owner with incorrect API version (good child, bad child, good parent)",
        vec![
            // setup
            Step::CreateObjectInClient(deployments(), make_obj(&deployment1apps, &[])),
            Step::CreateObjectInClient(pods(), make_obj(&bad_child_pod, &[&bad_secret])),
            Step::CreateObjectInClient(pods(), make_obj(&good_child_pod, &[&deployment1apps])),
            // 3,4: observe good child
            Step::ProcessEvent(make_add_event(&good_child_pod, &[&deployment1apps])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]), // good child added
                    make_node(&deployment1apps).marked_virtual(),                // virtual parent
                ],
                pending_attempt_to_delete: vec![queued_virtual(&deployment1apps)],
                ..State::default()
            }),
            // 5,6: observe bad child
            Step::ProcessEvent(make_add_event(&bad_child_pod, &[&bad_secret])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&deployment1apps).marked_virtual(),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]), // bad child added
                ],
                pending_attempt_to_delete: vec![
                    queued_virtual(&deployment1apps), // virtual parent enqueued for delete attempt
                    queued(&bad_child_pod),           // bad child enqueued for delete attempt
                ],
                ..State::default()
            }),
            // 7,8: process pending delete of virtual parent
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                // lookup of good parent reference, returns 200
                client_actions: vec!["get apps/v1, Resource=deployments ns=ns1 name=deployment1"],
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&deployment1apps).marked_virtual(),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                ],
                pending_attempt_to_delete: vec![
                    queued(&bad_child_pod),
                    queued_virtual(&deployment1apps), // requeued to end, still virtual
                ],
                ..State::default()
            }),
            // 9,10: process pending delete of bad child
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec![
                    "get /v1, Resource=pods ns=ns1 name=badpod", // lookup of child pre-delete
                    "get /v1, Resource=secrets ns=ns1 name=secretname", // bad parent: 404
                    "delete /v1, Resource=pods ns=ns1 name=badpod", // delete of bad child
                ],
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&deployment1apps).marked_virtual(),
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                ],
                absent_owner_cache: vec![bad_secret.clone()], // remember absence of bad parent
                pending_attempt_to_delete: vec![queued_virtual(&deployment1apps)],
                ..State::default()
            }),
            // 11,12: observe good parent
            Step::ProcessEvent(make_add_event(&deployment1apps, &[])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&deployment1apps), // good parent no longer virtual
                    make_node(&bad_child_pod).with_owners(&[&bad_secret]),
                ],
                absent_owner_cache: vec![bad_secret.clone()],
                // parent requeued to end, no longer virtual
                pending_attempt_to_delete: vec![queued(&deployment1apps)],
                ..State::default()
            }),
            // 13,14: observe delete of bad child from step 9
            Step::ProcessEvent(make_delete_event(&bad_child_pod, &[&bad_secret])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    // bad child node removed
                    make_node(&deployment1apps),
                ],
                absent_owner_cache: vec![bad_secret.clone()],
                pending_attempt_to_delete: vec![queued(&deployment1apps)],
                ..State::default()
            }),
            // 15,16: process pending delete of good parent
            // final state: good parent in graph with correct coordinates, good children remain, no
            // pending deletions
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec!["get apps/v1, Resource=deployments ns=ns1 name=deployment1"],
                graph_nodes: vec![
                    make_node(&good_child_pod).with_owners(&[&deployment1apps]),
                    make_node(&deployment1apps),
                ],
                absent_owner_cache: vec![bad_secret.clone()],
                ..State::default()
            }),
        ],
    );
}

/// #98040: a cluster-scoped child's reference must not block the collection of the
/// namespaced children of a missing parent.
#[test]
fn case_14_cluster_scoped_bad_child_namespaced_good_child_missing_parent() {
    let Ids { pod1ns1, pod2ns1, node1, pod1nonamespace, .. } = Ids::new();
    run_steps(
        "cluster-scoped bad child, namespaced good child, missing parent",
        vec![
            // setup
            // good child
            Step::CreateObjectInClient(pods(), make_obj(&pod2ns1, &[&pod1ns1])),
            // bad child
            Step::CreateObjectInClient(nodes(), make_obj(&node1, &[&pod1nonamespace])),
            // 2,3: observe bad child
            Step::ProcessEvent(make_add_event(&node1, &[&pod1nonamespace])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod1nonamespace).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![queued_virtual(&pod1nonamespace)], // virtual parent
                ..State::default()
            }),
            // 4,5: observe good child
            Step::ProcessEvent(make_add_event(&pod2ns1, &[&pod1ns1])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                    make_node(&pod1nonamespace).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![
                    queued_virtual(&pod1nonamespace), // virtual parent queued for deletion
                    queued(&pod2ns1),                 // mismatched child queued for deletion
                ],
                ..State::default()
            }),
            // 6,7: process attemptToDelete of bad virtual parent coordinates
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                    make_node(&pod1nonamespace).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![queued(&pod2ns1)], // mismatched child
                ..State::default()
            }),
            // 8,9: process attemptToDelete of good child
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec![
                    "get /v1, Resource=pods ns=ns1 name=podname2", // get good child, returns 200
                    "get /v1, Resource=pods ns=ns1 name=podname1", // get missing parent, returns 404
                    "delete /v1, Resource=pods ns=ns1 name=podname2", // delete good child
                ],
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                    make_node(&pod1nonamespace).marked_virtual(),
                ],
                absent_owner_cache: vec![pod1ns1.clone()], // missing parent cached
                ..State::default()
            }),
            // 10,11: observe deletion of good child
            // steady-state is bad cluster child and bad virtual parent coordinates, with no retries
            Step::ProcessEvent(make_delete_event(&pod2ns1, &[&pod1ns1])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod1nonamespace).marked_virtual(),
                ],
                absent_owner_cache: vec![pod1ns1.clone()],
                ..State::default()
            }),
        ],
    );
}

#[test]
fn case_15_cluster_scoped_bad_child_namespaced_good_child_late_observed_parent() {
    let Ids { pod1ns1, pod2ns1, node1, pod1nonamespace, .. } = Ids::new();
    run_steps(
        "cluster-scoped bad child, namespaced good child, late observed parent",
        vec![
            // setup
            // good parent
            Step::CreateObjectInClient(pods(), make_obj(&pod1ns1, &[])),
            // good child
            Step::CreateObjectInClient(pods(), make_obj(&pod2ns1, &[&pod1ns1])),
            // bad child
            Step::CreateObjectInClient(nodes(), make_obj(&node1, &[&pod1nonamespace])),
            // 3,4: observe bad child
            Step::ProcessEvent(make_add_event(&node1, &[&pod1nonamespace])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod1nonamespace).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![queued_virtual(&pod1nonamespace)],
                ..State::default()
            }),
            // 5,6: observe good child
            Step::ProcessEvent(make_add_event(&pod2ns1, &[&pod1ns1])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                    make_node(&pod1nonamespace).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![queued_virtual(&pod1nonamespace), queued(&pod2ns1)],
                ..State::default()
            }),
            // 7,8: process attemptToDelete of bad virtual parent coordinates
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                    make_node(&pod1nonamespace).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![queued(&pod2ns1)],
                ..State::default()
            }),
            // 9,10: process attemptToDelete of good child
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec![
                    "get /v1, Resource=pods ns=ns1 name=podname2", // get good child, returns 200
                    "get /v1, Resource=pods ns=ns1 name=podname1", // late-observed parent: 200
                ],
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                    make_node(&pod1nonamespace).marked_virtual(),
                ],
                ..State::default()
            }),
            // 11,12: late observe good parent
            Step::ProcessEvent(make_add_event(&pod1ns1, &[])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                    make_node(&pod1ns1),
                ],
                events: vec![WARNING_NODE1_REFERS_TO_POD1], // warn about bad node reference
                // queue bad cluster-scoped child for delete attempt
                pending_attempt_to_delete: vec![queued(&node1)],
                ..State::default()
            }),
            // 13,14: process attemptToDelete of bad child
            // steady state is bad cluster-scoped child remaining with no retries, good parent and
            // good child in graph
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec!["get /v1, Resource=nodes name=nodename"], // bad child: 200
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                    make_node(&pod1ns1),
                ],
                ..State::default()
            }),
        ],
    );
}

#[test]
fn case_16_namespaced_good_child_cluster_scoped_bad_child_missing_parent() {
    let Ids { pod1ns1, pod2ns1, node1, pod1nonamespace, .. } = Ids::new();
    run_steps(
        "namespaced good child, cluster-scoped bad child, missing parent",
        vec![
            // setup
            // good child
            Step::CreateObjectInClient(pods(), make_obj(&pod2ns1, &[&pod1ns1])),
            // bad child
            Step::CreateObjectInClient(nodes(), make_obj(&node1, &[&pod1nonamespace])),
            // 2,3: observe good child
            Step::ProcessEvent(make_add_event(&pod2ns1, &[&pod1ns1])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                    make_node(&pod1ns1).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![queued_virtual(&pod1ns1)], // virtual parent
                ..State::default()
            }),
            // 4,5: observe bad child
            Step::ProcessEvent(make_add_event(&node1, &[&pod1nonamespace])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod1ns1).marked_virtual(),
                ],
                pending_attempt_to_delete: vec![
                    queued_virtual(&pod1ns1), // virtual parent queued for deletion
                    queued(&node1),           // mismatched child queued for deletion
                ],
                ..State::default()
            }),
            // 6,7: process attemptToDelete of good virtual parent coordinates
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                // lookup of missing parent, returns 404
                client_actions: vec!["get /v1, Resource=pods ns=ns1 name=podname1"],
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                    make_node(&pod1ns1).marked_virtual(),
                ],
                // virtual parent not found, queued virtual delete event
                pending_graph_changes: vec![make_virtual_delete_event(&pod1ns1)],
                pending_attempt_to_delete: vec![queued(&node1)], // mismatched child still queued
                ..State::default()
            }),
            // 8,9: process attemptToDelete of bad cluster child
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec!["get /v1, Resource=nodes name=nodename"], // existing node
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                    make_node(&pod1ns1).marked_virtual(),
                ],
                pending_graph_changes: vec![make_virtual_delete_event(&pod1ns1)],
                ..State::default()
            }),
            // 10,11: process virtual delete event for good virtual parent coordinates
            Step::ProcessPendingGraphChanges(1),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                    // missing virtual parent replaced with alternate coordinates, still virtual
                    make_node(&pod1nonamespace).marked_virtual(),
                ],
                absent_owner_cache: vec![pod1ns1.clone()], // cached absence of missing parent
                pending_attempt_to_delete: vec![
                    queued(&pod2ns1),                 // good child of missing parent
                    queued_virtual(&pod1nonamespace), // new virtual parent coordinates
                ],
                ..State::default()
            }),
            // 12,13: process attemptToDelete of good child
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                client_actions: vec![
                    "get /v1, Resource=pods ns=ns1 name=podname2", // lookup of good child
                    "delete /v1, Resource=pods ns=ns1 name=podname2", // delete of good child
                ],
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod2ns1).with_owners(&[&pod1ns1]),
                    make_node(&pod1nonamespace).marked_virtual(),
                ],
                absent_owner_cache: vec![pod1ns1.clone()],
                pending_attempt_to_delete: vec![queued_virtual(&pod1nonamespace)],
                ..State::default()
            }),
            // 14,15: observe deletion of good child
            Step::ProcessEvent(make_delete_event(&pod2ns1, &[&pod1ns1])),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod1nonamespace).marked_virtual(),
                ],
                absent_owner_cache: vec![pod1ns1.clone()],
                pending_attempt_to_delete: vec![queued_virtual(&pod1nonamespace)],
                ..State::default()
            }),
            // 16,17: process attemptToDelete of bad virtual parent coordinates
            // steady-state is bad cluster child and bad virtual parent coordinates, with no retries
            Step::ProcessAttemptToDelete(1),
            Step::AssertState(State {
                graph_nodes: vec![
                    make_node(&node1).with_owners(&[&pod1nonamespace]),
                    make_node(&pod1nonamespace).marked_virtual(),
                ],
                absent_owner_cache: vec![pod1ns1.clone()],
                ..State::default()
            }),
        ],
    );
}
