//! Where the client's configuration comes from, in kubectl's order: `--kubeconfig`, the files
//! `$KUBECONFIG` lists (merged), `~/.kube/config`, the in-cluster service account.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::{Error, Flags, Result};

/// The client configuration `flags` and the environment call for (see the module docs).
pub async fn client_config(flags: &Flags) -> Result<kube::Config> {
    let options = KubeConfigOptions::default();
    if let Some(path) = &flags.kubeconfig {
        // Named explicitly: it must be there.
        let kubeconfig = read(path)?;
        return Ok(kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?);
    }
    if let Some(list) = std::env::var_os("KUBECONFIG")
        && let Some(kubeconfig) = merge_list(&list)?
    {
        return Ok(kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?);
    }
    let home = std::env::var_os("HOME").map(|h| Path::new(&h).join(".kube").join("config"));
    if let Some(path) = home.filter(|p| p.exists()) {
        return Ok(kube::Config::from_custom_kubeconfig(read(&path)?, &options).await?);
    }
    Ok(kube::Config::incluster()?)
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
