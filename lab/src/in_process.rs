//! kube-gc running in this process, as the chaos suite, the tests and the demo start it.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// kube-gc, running in this process until [`stop`](InProcess::stop)ped (or dropped, which
/// aborts it).
#[derive(Debug)]
pub struct InProcess {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    debug: kube_gc::http::DebugState,
}

impl InProcess {
    /// Starts kube-gc with `args` (its command line, `kube-gc` first): a client from its
    /// `--kubeconfig`, then [`kube_gc::Controller::run`] on a task.
    pub async fn start<I, T>(args: I) -> anyhow::Result<InProcess>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let flags = <kube_gc::Flags as clap::Parser>::try_parse_from(args)?;
        let client = kube_gc::client(&flags).await?;
        let controller = kube_gc::Controller::start(flags, client).await?;
        let debug = controller.debug.clone();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(controller.run(async move {
            let _ = rx.await;
        }));
        Ok(InProcess { stop: Some(tx), task, debug })
    }

    /// What its debug server reads: serve it with `kube_gc::http::router` (tests call the
    /// router directly rather than find its port).
    pub fn debug(&self) -> &kube_gc::http::DebugState {
        &self.debug
    }

    /// The command line the chaos suite and the tests start kube-gc with against a
    /// simcluster at `kubeconfig`: any free debug port, no rate limit to speak of (1000 qps),
    /// 4 workers per queue; append what differs.
    pub fn simcluster_args(kubeconfig: &std::path::Path) -> Vec<String> {
        let kubeconfig = kubeconfig.display().to_string();
        [
            "kube-gc",
            "--kubeconfig",
            &kubeconfig,
            "--debug-addr",
            "127.0.0.1:0",
            "--secure-port",
            "0",
            "--kube-api-qps",
            "1000",
            "--kube-api-burst",
            "1000",
            "--concurrent-gc-syncs",
            "4",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// Asks kube-gc to shut down and waits for it, at most 10 s (then aborts it).
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if tokio::time::timeout(Duration::from_secs(10), &mut self.task).await.is_err() {
            self.task.abort();
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A file removed when dropped (a kubeconfig written for a run).
#[derive(Debug)]
pub struct TempFile(pub PathBuf);

impl TempFile {
    /// Writes `contents` to `path`.
    pub fn write(path: PathBuf, contents: &str) -> std::io::Result<TempFile> {
        std::fs::write(&path, contents)?;
        Ok(TempFile(path))
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
