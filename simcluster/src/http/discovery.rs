//! Discovery: `/version`, `/api`, `/apis`, each group and each group version's resources.

use super::*;

pub(super) fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-simcluster",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub(super) fn api_versions(app: &App) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": app.address}],
    })
}

pub(super) fn group_json(group: &str, versions: &[String]) -> Value {
    let gv = |v: &String| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    json!({
        "name": group,
        "versions": versions.iter().map(gv).collect::<Vec<_>>(),
        "preferredVersion": gv(&versions[0]),
    })
}

pub(super) fn group_list(store: &Store) -> Value {
    let groups: Vec<Value> = store.groups().iter().map(|(g, vs)| group_json(g, vs)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(super) fn api_group(store: &Store, group: &str) -> Result<Response> {
    let groups = store.groups();
    let (_, versions) = groups.iter().find(|(g, _)| g == group).ok_or_else(not_found_path)?;
    let mut g = group_json(group, versions);
    g["kind"] = "APIGroup".into();
    g["apiVersion"] = "v1".into();
    Ok(ok_json(&g))
}

pub(super) fn resource_list(store: &Store, group: &str, version: &str) -> Result<Response> {
    let resources: Vec<Value> = store
        .resources()
        .iter()
        .filter(|d| d.group == group && d.version == version)
        .map(|d| {
            let mut r = json!({
                "name": d.plural,
                "singularName": d.singular,
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
            });
            if !d.short_names.is_empty() {
                r["shortNames"] = d.short_names.clone().into();
            }
            r
        })
        .collect();
    if resources.is_empty() {
        return Err(not_found_path());
    }
    let gv = if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
    Ok(ok_json(&json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    })))
}
