//! Watches the objects a run expects the collector to delete, and notes when each goes.

use std::collections::HashSet;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::StreamExt;
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::watcher::{self, Event};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// What a [`Tracker`] has seen so far.
#[derive(Debug, Default)]
struct Seen {
    initialized: bool,
    present: HashSet<String>,
    first_deletion: Option<Instant>,
    last_deletion: Option<Instant>,
}

/// The objects matching a label selector, followed by a metadata watch (one LIST and one WATCH
/// on the server, plus re-watches).
#[derive(Debug, Clone)]
pub struct Tracker {
    seen: Arc<Mutex<Seen>>,
    task: Arc<tokio::task::JoinHandle<()>>,
}

impl Tracker {
    /// Starts following the objects of `api` labelled `label`.
    pub fn start<K>(api: Api<PartialObjectMeta<K>>, label: &str) -> Tracker
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let config = watcher::Config::default().labels(label);
        let stream = watcher::watcher(api, config);
        let s = seen.clone();
        let task = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            let mut init: HashSet<String> = HashSet::new();
            while let Some(event) = stream.next().await {
                let Ok(event) = event else { continue };
                let mut seen = s.lock().expect("tracker lock");
                match event {
                    Event::Init => init.clear(),
                    Event::InitApply(o) => {
                        init.insert(key(&o));
                    }
                    Event::InitDone => {
                        seen.present = std::mem::take(&mut init);
                        seen.initialized = true;
                    }
                    Event::Apply(o) => {
                        seen.present.insert(key(&o));
                    }
                    Event::Delete(o) => {
                        if seen.present.remove(&key(&o)) {
                            let now = Instant::now();
                            seen.first_deletion.get_or_insert(now);
                            seen.last_deletion = Some(now);
                        }
                    }
                }
            }
        });
        Tracker { seen, task: Arc::new(task) }
    }

    /// Objects present, once the first list is in.
    pub fn present(&self) -> Option<usize> {
        let seen = self.seen.lock().expect("tracker lock");
        seen.initialized.then_some(seen.present.len())
    }

    /// When the first and the last of the followed objects were deleted.
    pub fn deletions(&self) -> (Option<Instant>, Option<Instant>) {
        let seen = self.seen.lock().expect("tracker lock");
        (seen.first_deletion, seen.last_deletion)
    }

    /// Stops the watch.
    pub fn stop(&self) {
        self.task.abort();
    }
}

fn key<K: ResourceExt>(o: &K) -> String {
    format!("{}/{}", o.namespace().unwrap_or_default(), o.name_any())
}
