use serde_json::json;

use super::*;

fn check(args: &[&str]) -> Result<(), String> {
    Args::try_parse_from(std::iter::once("kubectl-gc").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?
        .check()
}

#[test]
fn arguments_that_name_no_one_object_are_refused_before_listing() {
    for bad in [
        &["explain"][..],
        &["explain", "deploy"],
        &["explain", "deploy/"],
        &["explain", "/web"],
        &["tree", "deploy", "web", "extra"],
        &["blast-radius", "deploy/web", "--uid", "0e6b7c1a-0000-4000-8000-000000000001"],
    ] {
        assert!(check(bad).is_err(), "{bad:?} accepted");
    }
    let dot = check(&["tree", "deploy/web", "-o", "dot"]).unwrap_err();
    assert!(dot.contains("blast-radius"), "{dot}");
    for good in [
        &["explain", "deploy/web"][..],
        &["explain", "deploy", "web"],
        &["tree", "--uid", "0e6b7c1a-0000-4000-8000-000000000001"],
        &["blast-radius", "replicasets.apps/web-1", "-o", "dot", "--policy", "orphan"],
    ] {
        assert_eq!(check(good), Ok(()), "{good:?}");
    }
}

fn object(kind: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "namespace": "ns", "name": name, "uid": "u"})
}

#[test]
fn explain_text_names_the_blocker_and_its_finalizer() {
    let mut blocker = object("Pod", "held");
    blocker["beingDeleted"] = json!(true);
    blocker["finalizers"] = json!(["example.com/hold"]);
    let mut deeper = object("Pod", "deeper");
    deeper["blockingDependents"] = json!([]);
    deeper["blockingDependentsTotal"] = json!(0);
    blocker["blockingDependents"] = json!([deeper]);
    blocker["blockingDependentsTotal"] = json!(1);
    let e = json!({
        "object": object("ReplicationController", "web"),
        "observed": true,
        "beingDeleted": true,
        "owners": [],
        "next": {"action": "waitForBlockingDependents", "detail": {"blockingDependents": 1}},
        "retries": 2,
        "lastError": "etcd is slow",
        "finalizers": [{
            "name": "foregroundDeletion",
            "removedBy": "the garbage collector",
            "waitingForTotal": 1,
            "waitingFor": [blocker],
        }],
    });
    let text = explain_text(&e);
    assert!(
        text.starts_with("ReplicationController ns/web (uid u): observed, being deleted"),
        "{text}"
    );
    assert!(text.contains("Next: wait for 1 blocking dependent(s)"), "{text}");
    assert!(text.contains("Retrying: 2 failed attempt(s); last error: etcd is slow"), "{text}");
    assert!(
        text.contains("Finalizer foregroundDeletion (removed by the garbage collector)"),
        "{text}"
    );
    assert!(
        text.contains("Pod ns/held: being deleted; held by finalizers example.com/hold"),
        "{text}"
    );
}

#[test]
fn explain_text_names_the_watchers_a_held_decision_waits_for() {
    use kube_gc_engine::collector::HeldDecision;
    use kube_gc_engine::inspect::{Decision, Explanation};
    let uid = "00000000-0000-4000-8000-000000000001";
    let held = |decision, being_deleted| Explanation {
        object: kube_gc_engine::ObjectReference::new("apps/v1", "ReplicaSet", "ns", "web", uid),
        observed: true,
        being_deleted,
        owners: Vec::new(),
        decision: Decision::WaitForWatchers {
            decision,
            behind: vec![
                ("v1/configmaps".into(), std::time::Duration::from_millis(12_400)),
                ("discovery".into(), std::time::Duration::from_secs(2)),
            ],
        },
        retries: 0,
        last_error: None,
        warming_up: false,
        finalizers: Vec::new(),
        live_read_error: None,
    };
    for (decision, being_deleted, next) in [
        (HeldDecision::Orphaning, true, "orphan its dependents"),
        (HeldDecision::ForegroundDeletion, true, "remove its foregroundDeletion finalizer"),
        (
            HeldDecision::ForegroundDeletion,
            false,
            "delete it, as its owner's foreground deletion asks,",
        ),
    ] {
        let text = explain_text(&explanation_json(&held(decision, being_deleted)));
        let want = format!(
            "Next: {next} once these watchers catch up: v1/configmaps (behind 12s), discovery (behind 2s)"
        );
        assert!(text.contains(&want), "{text}");
    }
}

#[test]
fn radius_and_tree_text_list_every_object() {
    let mut kept = object("Pod", "shared");
    kept["keptBy"] = json!([object("ConfigMap", "keep")]);
    let r = json!({
        "policy": "background",
        "deleted": [object("ReplicationController", "web"), object("Pod", "a")],
        "deletedByKind": {"v1/Pod": 1, "v1/ReplicationController": 1},
        "kept": [kept],
        "orphaned": [],
    });
    let text = radius_text(&r);
    assert!(
        text.contains(
            "A background delete removes 2 object(s):\n  ReplicationController ns/web\n  Pod ns/a\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("Kept: Pod ns/shared (another owner stays: ConfigMap ns/keep)"),
        "{text}"
    );
    let mut down = object("ReplicationController", "web");
    let mut child = object("Pod", "a");
    child["beingDeleted"] = json!(true);
    down["children"] = json!([child]);
    let up = object("ReplicationController", "web");
    let text = tree_text(&json!({"up": up, "down": down}));
    assert!(
        text.contains("↓ ReplicationController ns/web\n  ↓ Pod ns/a (being deleted)\n"),
        "{text}"
    );
}
