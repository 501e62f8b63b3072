//! The control plane under test: `scripts/testenv` (a real kube-apiserver v1.20.2 + etcd on
//! loopback), started once per test run and stopped when [`TestEnv`] is dropped, panics
//! included.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};

/// The repository root (the workspace that holds `scripts/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("controller/ has a parent").to_owned()
}

fn testenv_script() -> PathBuf {
    repo_root().join("scripts/testenv")
}

/// Runs `scripts/testenv <args>`; its stderr (progress lines) goes to ours.
pub fn testenv(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new(testenv_script())
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run scripts/testenv {args:?}"))?;
    if !out.status.success() {
        bail!("scripts/testenv {args:?} failed: {}", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A free TCP port on 127.0.0.1 (bound, then released; good enough on a test machine).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

/// A running testenv.
#[derive(Debug)]
pub struct TestEnv {
    /// Its directory (kubeconfig, logs, PIDs).
    pub dir: PathBuf,
    /// `<dir>/kubeconfig`.
    pub kubeconfig: PathBuf,
    /// Whether this process started it (and so stops it).
    owned: bool,
}

impl TestEnv {
    /// Starts a fresh testenv in `dir`, or adopts the one named by `$KUBE_GC_E2E_TESTENV`
    /// (already started; left running at the end).
    pub fn start(dir: &Path) -> anyhow::Result<TestEnv> {
        if let Ok(existing) = std::env::var("KUBE_GC_E2E_TESTENV") {
            let dir = PathBuf::from(existing);
            let kubeconfig = dir.join("kubeconfig");
            if !kubeconfig.exists() {
                bail!("KUBE_GC_E2E_TESTENV={}: no kubeconfig there", dir.display());
            }
            eprintln!("[e2e] using the running testenv {}", dir.display());
            return Ok(TestEnv { dir, kubeconfig, owned: false });
        }
        std::fs::create_dir_all(dir)?;
        let dir = dir.canonicalize()?;
        let out = testenv(&["start", dir.to_str().expect("utf-8 path")])?;
        let kubeconfig = PathBuf::from(out.trim());
        if !kubeconfig.exists() {
            bail!("scripts/testenv start printed {out:?}, not a kubeconfig");
        }
        Ok(TestEnv { dir, kubeconfig, owned: true })
    }

    /// A handle on the testenv in `dir` that does not stop it when dropped.
    pub fn adopt(dir: &Path) -> TestEnv {
        TestEnv { dir: dir.to_owned(), kubeconfig: dir.join("kubeconfig"), owned: false }
    }

    fn dir_str(&self) -> &str {
        self.dir.to_str().expect("utf-8 path")
    }

    /// A kube-rs client for the admin user.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig)?;
        let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
        config.read_timeout = Some(Duration::from_secs(30));
        // The scenarios create objects in bursts; client-side throttling would only slow them.
        Ok(kube::Client::try_from(config)?)
    }

    /// Stops kube-apiserver only (etcd keeps running).
    pub fn apiserver_stop(&self) -> anyhow::Result<()> {
        testenv(&["apiserver-stop", self.dir_str()]).map(drop)
    }

    /// `kill -9` of kube-apiserver (a crash; etcd keeps running).
    pub fn apiserver_kill(&self) -> anyhow::Result<()> {
        let pid = std::fs::read_to_string(self.dir.join("kube-apiserver.pid"))?;
        let status = Command::new("kill").arg("-KILL").arg(pid.trim()).status()?;
        if !status.success() {
            bail!("kill -9 kube-apiserver (pid {}) failed", pid.trim());
        }
        // Wait until it is gone, so that the next start finds it dead.
        let proc = PathBuf::from(format!("/proc/{}", pid.trim()));
        for _ in 0..100 {
            let zombie_or_gone = std::fs::read_to_string(proc.join("stat"))
                .map_or(true, |s| s.split(' ').nth(2) == Some("Z"));
            if zombie_or_gone {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Starts kube-apiserver again, same port, same etcd; returns once it is ready.
    pub fn apiserver_start(&self) -> anyhow::Result<()> {
        testenv(&["apiserver-start", self.dir_str()]).map(drop)
    }

    /// Starts upstream's kube-controller-manager (garbage collector only) with `args`; returns
    /// once its garbage collector has synced.
    pub fn kcm_start(&self, args: &[&str]) -> anyhow::Result<()> {
        let mut all = vec!["kcm", self.dir_str()];
        all.extend_from_slice(args);
        testenv(&all).map(drop)
    }

    /// Stops kube-controller-manager.
    pub fn kcm_stop(&self) -> anyhow::Result<()> {
        testenv(&["kcm-stop", self.dir_str()]).map(drop)
    }

    /// `<dir>/kube-controller-manager.log`.
    pub fn kcm_log(&self) -> PathBuf {
        self.dir.join("kube-controller-manager.log")
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if self.owned {
            // Stops kube-controller-manager too, if a failed scenario left it running.
            if let Err(e) = testenv(&["stop", self.dir_str()]) {
                eprintln!("[e2e] stopping the testenv failed: {e:#}");
            }
        }
    }
}
