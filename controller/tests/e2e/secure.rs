//! The secure port against the real kube-apiserver, as an operator's Prometheus would meet it:
//! health checks open; `/metrics` and the debug graph 401 without a token or with one the API
//! server does not know, 403 for a ServiceAccount without RBAC (naming it), 200 for one bound
//! to a ClusterRole granting the paths. Tokens come from the TokenRequest API, as a projected
//! ServiceAccount token would.

use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};

use super::cluster::Ctx;
use super::env::free_port;
use super::https::{Trust, https_get};

const GRAPH: &str = "/debug/controllers/garbagecollector/graph";

/// See the module docs.
pub async fn secure_port_authenticates_and_authorizes(cx: &mut Ctx<'_>) -> anyhow::Result<()> {
    let ns = cx.ns.clone();
    let role = format!("kube-gc-e2e-scraper-{}", cx.suffix);
    let client = cx.client.clone();
    for name in ["scraper", "nobody"] {
        let sa = ServiceAccount {
            metadata: ObjectMeta { name: Some(name.into()), ..ObjectMeta::default() },
            ..ServiceAccount::default()
        };
        Api::<ServiceAccount>::namespaced(client.clone(), &ns)
            .create(&PostParams::default(), &sa)
            .await?;
    }
    let cluster_role = ClusterRole {
        metadata: ObjectMeta { name: Some(role.clone()), ..ObjectMeta::default() },
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(vec!["/metrics".into(), format!("{GRAPH}*")]),
            verbs: vec!["get".into()],
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    };
    Api::<ClusterRole>::all(client.clone()).create(&PostParams::default(), &cluster_role).await?;
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta { name: Some(role.clone()), ..ObjectMeta::default() },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "scraper".into(),
            namespace: Some(ns.clone()),
            ..Subject::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(client.clone()).create(&PostParams::default(), &binding).await?;
    let result = check(cx, &ns).await;
    // Leave the cluster and the collector as the next scenario expects them.
    for api_result in [
        Api::<ClusterRoleBinding>::all(client.clone())
            .delete(&role, &DeleteParams::default())
            .await
            .map(|_| ()),
        Api::<ClusterRole>::all(client).delete(&role, &DeleteParams::default()).await.map(|_| ()),
    ] {
        if let Err(e) = api_result {
            eprintln!("    (cleanup: {e})");
        }
    }
    cx.collector.stop()?;
    cx.collector.start(&[])?;
    result
}

async fn token(client: &kube::Client, ns: &str, sa: &str) -> anyhow::Result<String> {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let answer = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .create_token_request(sa, &PostParams::default(), &request)
        .await
        .with_context(|| format!("TokenRequest for {ns}/{sa}"))?;
    Ok(answer.status.context("TokenRequest without status")?.token)
}

async fn check(cx: &mut Ctx<'_>, ns: &str) -> anyhow::Result<()> {
    let scraper = token(&cx.client, ns, "scraper").await?;
    let nobody = token(&cx.client, ns, "nobody").await?;
    // kube-gc with a certificate the test issued, so the client verifies it.
    let issued = super::https::issue()?;
    let tag = format!("e2e-tls-{}", cx.suffix);
    let (dir, cert_flag, key_flag) =
        super::https::tls_files(&tag, &issued.cert_pem, &issued.key_pem)?;
    let port = free_port();
    cx.collector.stop()?;
    cx.collector.start(&[
        &format!("--secure-port={port}"),
        "--bind-address=127.0.0.1",
        &cert_flag,
        &key_flag,
    ])?;
    let trust = Trust::Ca(issued.ca);

    for path in ["/healthz", "/readyz", "/livez"] {
        let (code, body) = https_get(port, path, None, &trust).await?;
        ensure!(code == 200, "{path} without credentials: {code} {body}");
    }
    for path in ["/metrics", GRAPH] {
        let (code, body) = https_get(port, path, None, &trust).await?;
        ensure!(code == 401, "{path} without a token: {code}, want 401: {body:.200}");
        let (code, body) = https_get(port, path, Some("not-a-token"), &trust).await?;
        ensure!(code == 401, "{path} with an unknown token: {code}, want 401: {body:.200}");
        let (code, body) = https_get(port, path, Some(&nobody), &trust).await?;
        let user = format!("system:serviceaccount:{ns}:nobody");
        ensure!(
            code == 403 && body.contains(&user),
            "{path} with a token without RBAC: {code}, want 403 naming {user}: {body:.200}"
        );
    }
    // The binding was made before kube-gc started, but the API server's RBAC cache may take a
    // moment; a denial is cached for 10 s, so wait past it.
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let (metrics, body) = https_get(port, "/metrics", Some(&scraper), &trust).await?;
        if metrics == 200 {
            ensure!(
                body.contains("workqueue_depth"),
                "the metrics answer holds no workqueue_depth: {body:.300}"
            );
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "/metrics with an authorized token: {metrics}, want 200: {body:.200}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (code, body) =
        https_get(port, &format!("{GRAPH}?uid=none"), Some(&scraper), &trust).await?;
    ensure!(
        code == 200 && body.contains("digraph"),
        "{GRAPH} with an authorized token: {code}: {body:.200}"
    );
    // The role grants GETs of its paths and nothing else.
    let (code, body) =
        https_get(port, "/debug/controllers/garbagecollector/tree", Some(&scraper), &trust).await?;
    ensure!(code == 403, "a path outside the role: {code}, want 403: {body:.200}");
    eprintln!(
        "    ✓ health open; 401 without or with an unknown token; 403 without RBAC; 200 with it"
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
