//! Progress: bars or plain lines, and the kube-rs client that counts the watchers' list pages.

use super::*;

/// Progress output: bars on a terminal, lines elsewhere, nothing when hidden.
pub(super) struct Ui {
    pub(super) mp: MultiProgress,
    pub(super) quiet: bool,
}

impl Ui {
    pub(super) fn new(progress: Progress) -> Ui {
        let target = match progress {
            Progress::Stderr => ProgressDrawTarget::stderr_with_hz(10),
            Progress::Hidden => ProgressDrawTarget::hidden(),
        };
        Ui { mp: MultiProgress::with_draw_target(target), quiet: progress == Progress::Hidden }
    }

    /// Whether bars are drawn (else periodic lines stand in for them).
    pub(super) fn bars(&self) -> bool {
        !self.quiet && !self.mp.is_hidden()
    }

    pub(super) fn say(&self, line: impl AsRef<str>) {
        if self.quiet {
        } else if self.mp.is_hidden() {
            eprintln!("{}", line.as_ref());
        } else {
            let _ = self.mp.println(line);
        }
    }

    /// A line standing in for bars, when they are not drawn.
    pub(super) fn tick(&self, line: impl AsRef<str>) {
        if !self.quiet && self.mp.is_hidden() {
            eprintln!("{}", line.as_ref());
        }
    }

    pub(super) fn bar(&self, len: u64, prefix: &str, template: &str) -> ProgressBar {
        let pb = self.mp.add(ProgressBar::new(len));
        pb.set_style(
            ProgressStyle::with_template(template).expect("a valid template").progress_chars("=> "),
        );
        pb.set_prefix(prefix.to_owned());
        pb
    }
}

pub(super) const BAR: &str = "{prefix:>24} [{bar:32}] {human_pos:>9}/{human_len:<9} {msg}";
pub(super) const SPINNER: &str = "{spinner} {prefix} {elapsed} {msg}";

/// Counts the list requests (pages) kube-gc's watchers make, per resource (`resource_key`).
#[derive(Debug, Default)]
pub(super) struct ListPages(Mutex<HashMap<String, u64>>);

impl ListPages {
    pub(super) fn observe(&self, uri: &http::Uri) {
        let query = uri.query().unwrap_or("");
        if !query.contains("limit=") || query.contains("watch=") {
            return;
        }
        let parts: Vec<&str> = uri.path().trim_matches('/').split('/').collect();
        let key = match parts.as_slice() {
            ["api", _, plural] => (*plural).to_owned(),
            ["apis", group, _, plural] => format!("{plural}.{group}"),
            _ => return,
        };
        *self.0.lock().expect("pages lock").entry(key).or_default() += 1;
    }

    pub(super) fn get(&self, key: &str) -> u64 {
        self.0.lock().expect("pages lock").get(key).copied().unwrap_or(0)
    }
}

/// A kube-rs client for `sim`, from the kubeconfig it writes; `pages` (if any) counts list
/// requests.
pub(super) async fn client(
    sim: &SimCluster,
    pages: Option<Arc<ListPages>>,
) -> anyhow::Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sim.kubeconfig())?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(match pages {
        None => builder.build(),
        Some(pages) => builder
            .with_layer(&tower::util::MapRequestLayer::new(
                move |req: http::Request<kube::client::Body>| {
                    pages.observe(req.uri());
                    req
                },
            ))
            .build(),
    })
}
