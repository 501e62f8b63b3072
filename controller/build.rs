//! Stamps the binary with the commit it was built from, for `kube-gc --version`:
//! `KUBE_GC_GIT_COMMIT` from the environment (an image build without `.git` passes it), else
//! `git rev-parse`, else `unknown`.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=KUBE_GC_GIT_COMMIT");
    // Rebuild when HEAD moves (a checkout or a commit); harmless where there is no .git.
    println!("cargo:rerun-if-changed=../.git/HEAD");
    println!("cargo:rerun-if-changed=../.git/refs/heads");
    let commit = std::env::var("KUBE_GC_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=KUBE_GC_GIT_COMMIT={commit}");
}

fn git_commit() -> Option<String> {
    let out = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let commit = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!commit.is_empty()).then_some(commit)
}
