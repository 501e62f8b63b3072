//! Which resources to watch, and how to map an apiVersion/kind to a resource.
//!
//! Upstream: `garbagecollector.go` (`GetDeletableResources`) and the restMapper;
//! GC-SPEC.md §6.
//!
//! Legacy discovery (`/api`, `/apis`, one request per group-version), which every server has
//! (1.20 has no aggregated discovery). A group that fails to answer is reported and skipped,
//! as client-go's `ErrGroupDiscoveryFailed`: the other groups are still used, and the caller
//! keeps watching the failed group's resources it already had.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use kube::Client;
use kube_gc_engine::cluster::Resource;

/// A resource as `resource.group` (core group: `resource`), the spelling of
/// `--gc-ignored-resources`.
pub fn resource_key(r: &Resource) -> String {
    if r.group.is_empty() { r.resource.clone() } else { format!("{}.{}", r.resource, r.group) }
}

/// What discovery found.
#[derive(Debug, Default, Clone)]
pub struct Discovered {
    /// Every served (apiVersion, kind), all versions: the restMapper.
    pub mapper: HashMap<(String, String), Resource>,
    /// The resources to watch, as client-go's `ServerPreferredResources` picks them: each
    /// group's resource once, at the group's preferred version if that version serves it,
    /// else at the first version the group lists that does (on v1.20, CronJobs are only in
    /// `batch/v1beta1`); kept if that pick supports list, watch and delete and is not
    /// ignored. Keyed by [`resource_key`].
    pub deletable: BTreeMap<String, Resource>,
    /// Group-versions that failed, with the error.
    pub failed: Vec<(String, String)>,
    /// What a user may call each deletable resource, lower case (plural, singular, kind and
    /// short names, each alone, as `NAME.GROUP` and as `NAME.VERSION.GROUP`), to its
    /// [`resource_key`], as kubectl resolves `deploy/web` or `deployment.apps/web`.
    pub aliases: BTreeMap<String, String>,
    /// The apiVersions (`group/version`) an aggregated API server serves (an APIService with a
    /// `service`), whose lists prove nothing (`Cluster::consistent_lists`); `None` when the
    /// APIServices could not be read, so that any of them may be.
    pub aggregated: Option<BTreeSet<String>>,
    /// The [`resource_key`]s whose version is picked (deletable or not): a later version of
    /// the same group does not pick them again.
    picked: BTreeSet<String>,
}

impl Discovered {
    /// The [`resource_key`] of the deletable resource a user calls `type_name` (any case), as
    /// kubectl resolves it; an error naming it otherwise.
    pub fn resource_key_of(&self, type_name: &str) -> Result<&String, String> {
        self.aliases.get(&type_name.to_lowercase()).ok_or_else(|| {
            format!(
                "the server doesn't have a resource type {type_name:?} that kube-gc collects \
                 (it must be served, support list, watch and delete, and not be one of \
                 --gc-ignored-resources, {})",
                crate::flags::DEFAULT_IGNORED_RESOURCES
            )
        })
    }

    /// The group-versions that failed, as `group/version` (core: `v1`).
    pub fn failed_group_versions(&self) -> BTreeSet<String> {
        self.failed.iter().map(|(gv, _)| gv.clone()).collect()
    }

    /// The watchers to run, by [`resource_key`], given those `watched` now: the deletable
    /// resources, and each watched resource whose group-version failed discovery, at the
    /// version it is watched at (client-go's `ErrGroupDiscoveryFailed` handling in upstream's
    /// Sync), even where another version of its group answered for it: a discovery that
    /// fails now and then must not move a watcher from version to version (each move a
    /// relist, and a warm-up that holds decisions).
    pub fn watchers_wanted<'a>(
        &self,
        watched: impl IntoIterator<Item = (&'a String, &'a Resource)>,
    ) -> BTreeMap<String, Resource> {
        let failed = self.failed_group_versions();
        let mut wanted = self.deletable.clone();
        for (key, resource) in watched {
            if failed.contains(&resource.api_version()) {
                wanted.insert(key.clone(), resource.clone());
            }
        }
        wanted
    }
}

/// Adds one group-version's resource list to `out`. A group's lists are added preferred
/// version first, then the others in the order the group lists them: a resource takes the
/// first version that serves it ([`Discovered::deletable`]), every version maps.
pub fn add_resource_list(
    out: &mut Discovered,
    group: &str,
    version: &str,
    list: &k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList,
    ignored: &BTreeSet<String>,
) {
    for r in &list.resources {
        if r.name.contains('/') {
            continue; // subresources (pods/status, …)
        }
        let resource = Resource {
            group: r.group.clone().unwrap_or_else(|| group.to_owned()),
            version: r.version.clone().unwrap_or_else(|| version.to_owned()),
            resource: r.name.clone(),
            kind: r.kind.clone(),
            namespaced: r.namespaced,
        };
        out.mapper
            .entry((resource.api_version(), resource.kind.clone()))
            .or_insert_with(|| resource.clone());
        let verbs = &r.verbs;
        let deletable = ["delete", "list", "watch"].iter().all(|v| verbs.iter().any(|x| x == v));
        let key = resource_key(&resource);
        // Picked before, at the preferred version or an earlier one: as client-go's
        // `ServerPreferredResources`, the verbs are those of the version picked.
        if !out.picked.insert(key.clone()) {
            continue;
        }
        if deletable && !ignored.contains(&key) {
            let names = [r.name.clone(), r.singular_name.clone(), r.kind.to_lowercase()]
                .into_iter()
                .chain(r.short_names.iter().flatten().cloned())
                .filter(|n| !n.is_empty())
                .map(|n| n.to_lowercase());
            // As kubectl: each name alone, and qualified as `NAME.GROUP` and
            // `NAME.VERSION.GROUP` (`deployment.apps`, what `kubectl get -o name` prints).
            let group = resource.group.to_lowercase();
            let version = resource.version.to_lowercase();
            for name in names {
                let qualified = (!group.is_empty())
                    .then(|| [format!("{name}.{group}"), format!("{name}.{version}.{group}")]);
                for alias in std::iter::once(name).chain(qualified.into_iter().flatten()) {
                    // The core and older groups come first: they keep a name several groups
                    // share.
                    out.aliases.entry(alias).or_insert_with(|| key.clone());
                }
            }
            out.aliases.entry(key.clone()).or_insert_with(|| key.clone());
            out.deletable.entry(key).or_insert(resource);
        }
    }
}

/// `call`, failed if it has no answer within [`CALL_TIMEOUT`](crate::kube_cluster::CALL_TIMEOUT):
/// a connection the network dropped would otherwise hold discovery, and with it the resync
/// loop (new CustomResourceDefinitions unwatched, orphaning waiting), until the kernel gave up
/// on it. A group-version that times out is a failed group, as one that answers with an error.
async fn answered<T>(
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, kube::Error> {
    let timeout = crate::kube_cluster::CALL_TIMEOUT;
    match tokio::time::timeout(timeout, call).await {
        Ok(answer) => answer,
        Err(_) => Err(kube::Error::Service(format!("discovery: no answer in {timeout:?}").into())),
    }
}

/// Runs legacy discovery. Fails only when nothing at all could be listed.
pub async fn discover(
    client: &Client,
    ignored: &BTreeSet<String>,
) -> Result<Discovered, kube::Error> {
    let mut out = Discovered::default();
    // Core group: /api → versions → /api/v1.
    let core = answered(client.list_core_api_versions()).await?;
    // The first version is the preferred one (client-go's legacy group).
    for version in &core.versions {
        match answered(client.list_core_api_resources(version)).await {
            Ok(list) => add_resource_list(&mut out, "", version, &list, ignored),
            Err(e) => out.failed.push((version.clone(), e.to_string())),
        }
    }
    // Named groups: /apis → for each group, every served version.
    let groups = answered(client.list_api_groups()).await?;
    for g in &groups.groups {
        let preferred = g
            .preferred_version
            .as_ref()
            .map(|p| p.version.clone())
            .or_else(|| g.versions.first().map(|v| v.version.clone()));
        // Preferred first: it picks every resource it serves; the others pick the rest.
        let mut versions: Vec<_> = g.versions.iter().collect();
        versions.sort_by_key(|v| preferred.as_deref() != Some(v.version.as_str()));
        for v in versions {
            match answered(client.list_api_group_resources(&v.group_version)).await {
                Ok(list) => add_resource_list(&mut out, &g.name, &v.version, &list, ignored),
                Err(e) => out.failed.push((v.group_version.clone(), e.to_string())),
            }
        }
    }
    out.aggregated = if groups.groups.iter().any(|g| g.name == "apiregistration.k8s.io") {
        match answered(client.request::<ApiServiceList>(api_services_request())).await {
            Ok(list) => Some(aggregated_api_versions(&list)),
            Err(e) => {
                tracing::warn!(
                    error = %crate::error::one_line(&e),
                    "cannot read the APIServices: owners will be proven absent by GET only"
                );
                None
            }
        }
    } else {
        // No aggregation layer: the API server serves every group itself.
        Some(BTreeSet::new())
    };
    Ok(out)
}

/// `GET /apis/apiregistration.k8s.io/v1/apiservices`.
fn api_services_request() -> http::Request<Vec<u8>> {
    http::Request::get("/apis/apiregistration.k8s.io/v1/apiservices")
        .body(Vec::new())
        .expect("a valid request")
}

/// What discovery reads of an APIService list.
#[derive(serde::Deserialize, Debug, Default)]
pub struct ApiServiceList {
    #[serde(default)]
    items: Vec<ApiService>,
}

#[derive(serde::Deserialize, Debug, Default)]
struct ApiService {
    #[serde(default)]
    spec: ApiServiceSpec,
}

#[derive(serde::Deserialize, Debug, Default)]
struct ApiServiceSpec {
    #[serde(default)]
    group: String,
    #[serde(default)]
    version: String,
    /// Where an aggregated API server runs; absent for the API server's own groups.
    #[serde(default)]
    service: Option<serde_json::Value>,
}

/// The apiVersions of `list`'s APIServices that name a service (core: `v1`).
pub fn aggregated_api_versions(list: &ApiServiceList) -> BTreeSet<String> {
    list.items
        .iter()
        .filter(|a| a.spec.service.as_ref().is_some_and(|s| !s.is_null()))
        .map(|a| match a.spec.group.as_str() {
            "" => a.spec.version.clone(),
            group => format!("{group}/{}", a.spec.version),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Only APIServices that name a service are aggregated; the API server's own groups (no
    /// service, or `null`) are not.
    #[test]
    fn aggregated_api_versions_are_those_with_a_service() {
        let list: ApiServiceList = serde_json::from_str(
            r#"{"items":[
                {"spec":{"version":"v1"}},
                {"spec":{"group":"apps","version":"v1","service":null}},
                {"spec":{"group":"metrics.k8s.io","version":"v1beta1",
                         "service":{"namespace":"kube-system","name":"metrics-server"}}},
                {"spec":{"group":"widgets.example.com","version":"v1","service":{"name":"w"}}},
                {"metadata":{"name":"odd"}}
            ]}"#,
        )
        .unwrap();
        let found: Vec<String> = aggregated_api_versions(&list).into_iter().collect();
        assert_eq!(found, ["metrics.k8s.io/v1beta1", "widgets.example.com/v1"]);
    }
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIResource, APIResourceList};

    fn res(name: &str, kind: &str, verbs: &[&str]) -> APIResource {
        APIResource {
            name: name.into(),
            kind: kind.into(),
            namespaced: true,
            verbs: verbs.iter().map(|v| v.to_string()).collect(),
            ..Default::default()
        }
    }

    /// Every name kubectl takes for a type resolves, bare or qualified with the group (and
    /// version): `deployment.apps/web` is what `kubectl get -o name` prints.
    #[test]
    fn types_resolve_by_every_name_kubectl_takes() {
        let mut out = Discovered::default();
        let deployments = APIResource {
            short_names: Some(vec!["deploy".into()]),
            singular_name: "deployment".into(),
            ..res("deployments", "Deployment", &["delete", "list", "watch"])
        };
        let list =
            APIResourceList { group_version: "apps/v1".into(), resources: vec![deployments] };
        add_resource_list(&mut out, "apps", "v1", &list, &BTreeSet::new());
        let pods = APIResourceList {
            group_version: "v1".into(),
            resources: vec![res("pods", "Pod", &["delete", "list", "watch"])],
        };
        add_resource_list(&mut out, "", "v1", &pods, &BTreeSet::new());
        for name in [
            "deployments",
            "deployment",
            "Deployment",
            "deploy",
            "deployments.apps",
            "deployment.apps",
            "Deployment.apps",
            "deploy.apps",
            "deployments.v1.apps",
            "deployment.v1.apps",
        ] {
            assert_eq!(
                out.resource_key_of(name).map(String::as_str),
                Ok("deployments.apps"),
                "{name}"
            );
        }
        assert_eq!(out.resource_key_of("pod").map(String::as_str), Ok("pods"));
        for unknown in ["deployments.batch", "deployments.v2.apps", "pods.apps", "events"] {
            let err = out.resource_key_of(unknown).expect_err(unknown);
            assert!(err.contains("--gc-ignored-resources"), "{err}");
        }
    }

    /// Upstream's TestGetDeletableResources, "no error" case: only resources supporting
    /// delete, list and watch are kept.
    #[test]
    fn get_deletable_resources_keeps_only_list_watch_delete() {
        let mut out = Discovered::default();
        let list = APIResourceList {
            group_version: "apps/v1".into(),
            resources: vec![
                res("pods", "Pod", &["delete", "list", "watch"]),
                res("services", "Service", &[]),
                res("pods/status", "Pod", &["get", "list", "watch", "delete"]),
            ],
        };
        add_resource_list(&mut out, "apps", "v1", &list, &BTreeSet::new());
        let widgets = APIResourceList {
            group_version: "acme/v1".into(),
            resources: vec![res("widgets", "Widget", &["delete"])],
        };
        add_resource_list(&mut out, "acme", "v1", &widgets, &BTreeSet::new());
        assert_eq!(out.deletable.keys().collect::<Vec<_>>(), ["pods.apps"]);
        // Every served kind is mappable, deletable or not.
        assert!(out.mapper.contains_key(&("apps/v1".into(), "Service".into())));
        assert!(out.mapper.contains_key(&("acme/v1".into(), "Widget".into())));
    }

    /// A watched resource whose group-version fails discovery keeps its watcher where it is,
    /// though another version of its group answered for it; one that answered is watched
    /// as discovery says.
    #[test]
    fn a_failed_group_version_keeps_its_watchers_where_they_are() {
        let widgets =
            |version: &str| Resource::new(&format!("acme/{version}"), "widgets", "Widget", true);
        let gadgets =
            |version: &str| Resource::new(&format!("acme/{version}"), "gadgets", "Gadget", true);
        let mut found = Discovered::default();
        found.deletable.insert("widgets.acme".into(), widgets("v1beta1"));
        found.deletable.insert("gadgets.acme".into(), gadgets("v1beta1"));
        found.failed.push(("acme/v1".into(), "timed out".into()));
        let watched = [
            ("widgets.acme".to_owned(), widgets("v1")),
            ("gadgets.acme".to_owned(), gadgets("v1beta1")),
            ("old.acme".to_owned(), Resource::new("acme/v1", "olds", "Old", true)),
            ("gone.other".to_owned(), Resource::new("other/v1", "gones", "Gone", true)),
        ];
        let wanted = found.watchers_wanted(watched.iter().map(|(k, r)| (k, r)));
        let versions: Vec<(&str, &str)> =
            wanted.iter().map(|(k, r)| (k.as_str(), r.version.as_str())).collect();
        assert_eq!(
            versions,
            [("gadgets.acme", "v1beta1"), ("old.acme", "v1"), ("widgets.acme", "v1")]
        );
    }

    #[test]
    fn ignored_resources_are_not_watched() {
        let mut out = Discovered::default();
        let list = APIResourceList {
            group_version: "v1".into(),
            resources: vec![
                res("events", "Event", &["delete", "list", "watch"]),
                res("configmaps", "ConfigMap", &["delete", "list", "watch"]),
            ],
        };
        let ignored: BTreeSet<String> = ["events".to_string()].into();
        add_resource_list(&mut out, "", "v1", &list, &ignored);
        assert_eq!(out.deletable.keys().collect::<Vec<_>>(), ["configmaps"]);
    }

    /// client-go's `ServerPreferredResources`, which upstream's `GetDeletableResources`
    /// reads: a resource is watched at its group's preferred version when that version serves
    /// it, else at the first version the group lists that does (v1.20's CronJobs, only in
    /// `batch/v1beta1`), with the verbs of the version picked; every version maps.
    #[tokio::test]
    async fn a_resource_missing_from_the_preferred_version_is_watched_at_another() {
        use crate::test_server::{Reply, Script};
        let api = r#"{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[]}"#;
        let core = r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[]}"#;
        // The preferred version listed second: it is still asked first.
        let groups = r#"{"kind":"APIGroupList","groups":[{"name":"batch",
            "versions":[{"groupVersion":"batch/v1beta1","version":"v1beta1"},
                        {"groupVersion":"batch/v1","version":"v1"},
                        {"groupVersion":"batch/v2alpha1","version":"v2alpha1"}],
            "preferredVersion":{"groupVersion":"batch/v1","version":"v1"}}]}"#;
        let verbs = r#""verbs":["delete","list","watch"]"#;
        let v1 = format!(
            r#"{{"kind":"APIResourceList","groupVersion":"batch/v1","resources":[
                {{"name":"jobs","namespaced":true,"kind":"Job",{verbs}}},
                {{"name":"jobs/status","namespaced":true,"kind":"Job",{verbs}}},
                {{"name":"tasks","namespaced":true,"kind":"Task","verbs":["get"]}}]}}"#
        );
        let v1beta1 = format!(
            r#"{{"kind":"APIResourceList","groupVersion":"batch/v1beta1","resources":[
                {{"name":"jobs","namespaced":true,"kind":"Job",{verbs}}},
                {{"name":"cronjobs","namespaced":true,"kind":"CronJob",{verbs}}},
                {{"name":"tasks","namespaced":true,"kind":"Task",{verbs}}}]}}"#
        );
        let v2alpha1 = format!(
            r#"{{"kind":"APIResourceList","groupVersion":"batch/v2alpha1","resources":[
                {{"name":"cronjobs","namespaced":true,"kind":"CronJob",{verbs}}}]}}"#
        );
        let server = Script::new(vec![
            Reply::json(200, api, false),
            Reply::json(200, core, false),
            Reply::json(200, groups, false),
            Reply::json(200, v1, false),
            Reply::json(200, v1beta1, false),
            Reply::json(200, v2alpha1, false),
            // No aggregation layer: no APIService list is asked for.
        ]);
        let client = kube::Client::new(server.clone(), "default");
        let found = discover(&client, &BTreeSet::new()).await.expect("discovered");
        let asked: Vec<String> = server.requests().into_iter().map(|r| r.uri).collect();
        assert_eq!(
            asked[3..],
            ["/apis/batch/v1", "/apis/batch/v1beta1", "/apis/batch/v2alpha1"],
            "the preferred version first, then the group's order"
        );
        let watched: Vec<(&str, &str)> =
            found.deletable.iter().map(|(k, r)| (k.as_str(), r.version.as_str())).collect();
        // Tasks are picked at v1, which does not let them be deleted: not watched, as
        // upstream, though v1beta1 would.
        assert_eq!(watched, [("cronjobs.batch", "v1beta1"), ("jobs.batch", "v1")]);
        for (api_version, kind) in
            [("batch/v1", "Job"), ("batch/v1beta1", "Job"), ("batch/v1beta1", "CronJob")]
        {
            assert!(found.mapper.contains_key(&(api_version.into(), kind.into())), "{kind}");
        }
        assert_eq!(found.resource_key_of("cronjob").map(String::as_str), Ok("cronjobs.batch"));
    }

    /// A discovery request whose answer never comes (a connection the network dropped) fails
    /// after the call timeout: the whole discovery when it is `/api`, only its group-version
    /// (reported as failed, the others used) when it is one group's resources.
    #[tokio::test(start_paused = true)]
    async fn a_discovery_request_without_an_answer_fails_after_the_timeout() {
        use crate::test_server::{Reply, Script};
        let never = |reply: Reply| Reply { delay: Duration::from_secs(24 * 3600), ..reply };
        let api = r#"{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[]}"#;
        let core = r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[]}"#;
        let apps = r#"{"kind":"APIGroupList","groups":[{"name":"apps",
            "versions":[{"groupVersion":"apps/v1","version":"v1"}],
            "preferredVersion":{"groupVersion":"apps/v1","version":"v1"}}]}"#;
        let started = tokio::time::Instant::now();
        let hung = Script::new(vec![never(Reply::json(200, api, false))]);
        let client = kube::Client::new(hung, "default");
        let error = discover(&client, &BTreeSet::new()).await.expect_err("no answer");
        assert!(error.to_string().contains("no answer"), "{error}");
        assert_eq!(started.elapsed(), crate::kube_cluster::CALL_TIMEOUT);

        let one_group_hung = Script::new(vec![
            Reply::json(200, api, false),
            Reply::json(200, core, false),
            Reply::json(200, apps, false),
            never(Reply::json(200, "{}", false)),
        ]);
        let client = kube::Client::new(one_group_hung, "default");
        let found = discover(&client, &BTreeSet::new()).await.expect("the other groups");
        let failed: Vec<&str> = found.failed.iter().map(|(gv, _)| gv.as_str()).collect();
        assert_eq!(failed, ["apps/v1"]);
    }
}
