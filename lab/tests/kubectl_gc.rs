//! `kubectl gc` on bad input: every mistake an operator can make gets one clear line, never a
//! panic and never an answer about another object. Runs the plugin's answer step on a
//! snapshot of a simcluster holding a ConfigMap and a Pod it owns.

#[path = "../../simcluster/tests/common/mod.rs"]
mod common;

use clap::Parser;
use common::{client, start};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, PostParams};
use kube_gc::plugin::{Args, answer};
use kube_gc::standalone::{Progress, Snapshot};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Quiet;

impl Progress for Quiet {
    fn start(&self, _: usize) {}
    fn page(&self, _: &str, _: u64) {}
    fn resource_done(&self) {}
}

/// Counts the pages listed.
#[derive(Default)]
struct Counted(AtomicUsize);

impl Progress for Counted {
    fn start(&self, _: usize) {}
    fn page(&self, _: &str, _: u64) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn resource_done(&self) {}
}

fn args(line: &[&str]) -> Args {
    Args::try_parse_from(std::iter::once("kubectl-gc").chain(line.iter().copied()))
        .unwrap_or_else(|e| panic!("{line:?} should parse: {e}"))
}

#[tokio::test]
async fn bad_input_gets_a_clear_error() {
    let sim = start().await;
    let client = client(&sim).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm = serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap();
    let cm = cms.create(&PostParams::default(), &cm).await.unwrap();
    let uid = cm.metadata.uid.clone().unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid}
        ]},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    // An unknown type is refused right after discovery: nothing is listed for it.
    let listing = Counted::default();
    let refused = Snapshot::list_checked(client.clone(), &listing, |discovered| {
        discovered.resource_key_of("widgets").map(drop)
    })
    .await
    .expect_err("a snapshot for an unknown type");
    assert!(refused.to_string().contains("doesn't have a resource type \"widgets\""), "{refused}");
    assert_eq!(listing.0.load(Ordering::SeqCst), 0, "listed before refusing");
    let snapshot = Snapshot::list(client, &Quiet).await.expect("the snapshot lists");

    // What works, so that the refusals below are about the input, not the setup.
    for good in [&["explain", "pod/p"][..], &["explain", "pods", "p"], &["explain", "--uid", &uid]]
    {
        let out = answer(&args(good), &snapshot, "default").await;
        assert!(out.is_ok(), "{good:?}: {out:?}");
    }
    let explained = answer(&args(&["explain", "Pod/p"]), &snapshot, "default").await.unwrap();
    assert!(explained.contains("owner"), "{explained}");

    let refused: &[(&[&str], &str, &str)] = &[
        (&["explain", "pod"], "default", "give TYPE/NAME"),
        (&["explain", "pod", "p", "q"], "default", "give one object"),
        (&["explain"], "default", "give one object"),
        (&["explain", "widgets/p"], "default", "doesn't have a resource type \"widgets\""),
        (&["explain", "pod/missing"], "default", "not found in namespace \"default\""),
        (&["explain", "pod/p"], "elsewhere", "not found in namespace \"elsewhere\""),
        (&["explain", "--uid", "not-a-uid"], "default", "no object with UID"),
        (&["tree", "pod/p", "-o", "dot"], "default", "-o dot is for blast-radius"),
    ];
    for (line, namespace, expected) in refused {
        let err = answer(&args(line), &snapshot, namespace).await.expect_err(&format!("{line:?}"));
        assert!(err.contains(expected), "{line:?}: {err:?} should say {expected:?}");
        assert!(!err.contains('\n'), "{line:?}: one line, not {err:?}");
    }

    // Refused by the argument parser, with its usage message.
    for line in [
        &["explain", "pod/p", "--uid", &uid][..],
        &["blast-radius", "pod/p", "--policy", "sideways"],
        &["tree", "pod/p", "--depth", "-1"],
        &["explain", "pod/p", "-o", "yaml"],
        &["delete", "pod/p"],
    ] {
        let parsed =
            Args::try_parse_from(std::iter::once("kubectl-gc").chain(line.iter().copied()));
        assert!(parsed.is_err(), "{line:?} should be refused");
    }
}
