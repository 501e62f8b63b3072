//! Where the client's configuration comes from, in kubectl's order: `--kubeconfig`, the files
//! `$KUBECONFIG` lists (merged), `~/.kube/config`, the in-cluster service account.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::{Error, Flags, Result};

/// The client configuration `flags` and the environment call for (see the module docs).
pub async fn client_config(flags: &Flags) -> Result<kube::Config> {
    if let Some(path) = &flags.kubeconfig {
        // Named explicitly: it must be there.
        return from_kubeconfig(read(path)?).await;
    }
    if let Some(list) = std::env::var_os("KUBECONFIG")
        && let Some(kubeconfig) = merge_list(&list)?
    {
        return from_kubeconfig(kubeconfig).await;
    }
    let home = std::env::var_os("HOME").map(|h| Path::new(&h).join(".kube").join("config"));
    if let Some(path) = home.filter(|p| p.exists()) {
        return from_kubeconfig(read(&path)?).await;
    }
    Ok(kube::Config::incluster()?)
}

/// `kubeconfig`'s current context, its proxy from the environment chosen as kubectl chooses
/// it ([`proxy_from_env`]).
async fn from_kubeconfig(kubeconfig: Kubeconfig) -> Result<kube::Config> {
    let options = KubeConfigOptions::default();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?;
    proxy_from_env(&mut config, |name| std::env::var(name).ok());
    Ok(config)
}

/// The proxy for a kubeconfig's cluster, as kubectl (Go's `ProxyFromEnvironment`) picks it:
/// the kubeconfig's `proxy-url`, else `HTTPS_PROXY` unless the API server is `localhost`, a
/// loopback address, or covered by `NO_PROXY`.
/// kube-rs matches `NO_PROXY` against the proxy's own address instead, so a server
/// `NO_PROXY` excludes went through the proxy, and a proxy `NO_PROXY` names (a local one)
/// was dropped for every server; this redoes its choice when it came from the environment.
fn proxy_from_env(config: &mut kube::Config, var: impl Fn(&str) -> Option<String>) {
    let first = |names: [&str; 2]| names.into_iter().filter_map(&var).find(|v| !v.is_empty());
    let Some(env_proxy) = first(["HTTPS_PROXY", "https_proxy"]) else { return };
    if config
        .proxy_url
        .as_ref()
        .is_some_and(|p| env_proxy.parse::<http::Uri>().ok().as_ref() != Some(p))
    {
        return; // the kubeconfig's own proxy-url
    }
    // Go never proxies a request to `localhost` or a loopback address (kind, minikube).
    let host = config.cluster_url.host().unwrap_or_default().trim_matches(['[', ']']);
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback());
    let no_proxy = first(["NO_PROXY", "no_proxy"]).unwrap_or_default();
    let matcher = hyper_util::client::proxy::matcher::Matcher::builder()
        .https(env_proxy.as_str())
        .no(no_proxy)
        .build();
    config.proxy_url = (!loopback)
        .then(|| matcher.intercept(&config.cluster_url))
        .flatten()
        .map(|i| i.uri().clone());
}

/// The files of a `$KUBECONFIG` value merged as kubectl merges them: paths separated as the
/// platform separates `PATH` (`:` here), empty entries and files that do not exist skipped, the
/// first file to set a value winning. `None` when no listed file exists.
pub fn merge_list(list: &OsStr) -> Result<Option<Kubeconfig>> {
    let mut merged: Option<Kubeconfig> = None;
    for path in std::env::split_paths(list) {
        if path.as_os_str().is_empty() || !path.exists() {
            continue;
        }
        let next = read(&path)?;
        merged = Some(match merged {
            None => next,
            Some(m) => m.merge(next).map_err(|source| Error::Kubeconfig { path, source })?,
        });
    }
    Ok(merged)
}

fn read(path: &Path) -> Result<Kubeconfig> {
    Kubeconfig::read_from(path)
        .map_err(|source| Error::Kubeconfig { path: PathBuf::from(path), source })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `NO_PROXY` is matched against the API server (names and their subdomains, addresses,
    /// CIDRs), not against the proxy; a kubeconfig's own `proxy-url` stays.
    #[test]
    fn no_proxy_is_matched_against_the_api_server() {
        let proxy_for = |server: &str, from_kubeconfig: Option<&str>, env: &[(&str, &str)]| {
            let mut config = kube::Config::new(server.parse().unwrap());
            config.proxy_url = from_kubeconfig.map(|p| p.parse().unwrap());
            let env: Vec<(String, String)> =
                env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            proxy_from_env(&mut config, |name| {
                env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
            });
            config.proxy_url.map(|p| p.to_string())
        };
        let proxy = "http://proxy.corp:3128";
        let via = Some("http://proxy.corp:3128/".to_owned());
        let env = |no: &'static str| [("HTTPS_PROXY", proxy), ("NO_PROXY", no)];
        // kube-rs set the environment's proxy; NO_PROXY decides by the server.
        let k = Some(proxy);
        assert_eq!(proxy_for("https://10.1.2.3:6443", k, &env("10.0.0.0/8")), None);
        assert_eq!(proxy_for("https://api.corp:6443", k, &env(".corp")), None);
        assert_eq!(proxy_for("https://api.corp:6443", k, &env("api.corp")), None);
        assert_eq!(proxy_for("https://api.example:6443", k, &env("10.0.0.0/8,.corp")), via);
        // kube-rs dropped it because NO_PROXY names the proxy itself: the server still needs it.
        assert_eq!(proxy_for("https://api.example:6443", None, &env("proxy.corp")), via);
        // The kubeconfig's own proxy-url, whatever the environment says.
        let own = Some("http://other:8080");
        let other = Some("http://other:8080/".to_owned());
        assert_eq!(proxy_for("https://10.1.2.3:6443", own, &env("10.0.0.0/8")), other);
        // Never for a server on loopback, as Go's rule.
        for local in ["https://127.0.0.1:6443", "https://localhost:6443", "https://[::1]:6443"] {
            assert_eq!(proxy_for(local, k, &env("")), None, "{local}");
        }
        // No proxy in the environment: nothing changes.
        assert_eq!(proxy_for("https://10.1.2.3:6443", None, &[("NO_PROXY", "*")]), None);
    }

    /// A fresh directory of this test's own.
    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kube-gc-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    const CLUSTERS: &str = "apiVersion: v1
kind: Config
current-context: test
clusters:
- name: test
  cluster:
    server: https://first.example:6443
contexts:
- name: test
  context: {cluster: test, user: alice}
";

    const USERS: &str = "apiVersion: v1
kind: Config
current-context: other
clusters:
- name: test
  cluster:
    server: https://second.example:6443
users:
- name: alice
  user: {token: secret}
";

    #[tokio::test]
    async fn a_list_is_merged_as_kubectl_merges_it() {
        let dir = scratch("merged");
        let first = write(&dir, "clusters", CLUSTERS);
        let second = write(&dir, "users", USERS);
        let missing = dir.join("missing");
        let list =
            std::env::join_paths([missing.as_path(), first.as_path(), second.as_path()]).unwrap();
        let merged = merge_list(&list).unwrap().expect("two files exist");
        // The first file to set a value wins; the second adds what the first lacks.
        assert_eq!(merged.current_context.as_deref(), Some("test"));
        let config =
            kube::Config::from_custom_kubeconfig(merged, &KubeConfigOptions::default()).await;
        let config = config.unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://first.example:6443/");
    }

    #[test]
    fn a_list_of_missing_files_is_no_configuration() {
        let dir = scratch("missing");
        let list = std::env::join_paths([dir.join("a"), dir.join("b")]).unwrap();
        assert!(merge_list(&list).unwrap().is_none());
    }

    #[test]
    fn a_broken_file_in_the_list_is_named() {
        let dir = scratch("broken");
        let broken = write(&dir, "broken", "clusters: [");
        let err = merge_list(broken.as_os_str()).unwrap_err();
        assert!(err.to_string().contains("broken"), "{err}");
    }
}
