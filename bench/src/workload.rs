//! The warm-up workload (shape `deploy-rs-pods`), generated exactly as `WORKLOAD.md` specifies.
//!
//! Every graph benchmark of kube-gc, and the warm-up harness, takes its input from here, so
//! figures are comparable across runs, machines and implementations fed the same input: a
//! generator that follows `WORKLOAD.md` produces the same objects, with byte-identical strings,
//! in the same order. `tests/workload_golden.rs` checks every golden row of that file.
//!
//! # Shape
//!
//! Of `N` objects, `F = N*79/1000` families (Deployment → ReplicaSet → 8 Pods), `V = N/100`
//! Pods whose ReplicaSet is never listed (each makes one virtual node), and `S = N - 10F - V`
//! unowned ConfigMaps; delivered `owners-first` (canonical), `dependents-first` (reversed) or
//! `random` (Fisher–Yates with its own splitmix64 stream).
//!
//! # Events
//!
//! [`Workload::events`] are the `N` add events of the warm-up, each carrying the watched
//! resource's interned type and an [`ObjectMeta`] in which every string is its own allocation,
//! as a decoder would produce it: made in delivery order, one event's strings after the one's
//! before it. [`Workload::update_pass`] and [`Workload::delete_pass`] build
//! the optional no-op update and delete passes, in the same order. Generating is never timed.
//!
//! # Examples
//!
//! ```
//! use kube_gc_bench::workload::{Order, Workload, WorkloadConfig};
//!
//! let w = Workload::generate(&WorkloadConfig::new(1000, Order::OwnersFirst));
//! assert_eq!(w.events().len(), 1000);
//! assert_eq!(w.counts().graph_nodes(), 1010);
//! assert_eq!(w.expected_attempt_to_delete(), 10);
//! ```

use std::fmt;
use std::str::FromStr;

use kube_gc_engine::{Event, EventType, ObjectMeta, ObjectType, OwnerReference};

pub use kube_gc_workload::{DEFAULT_NAMESPACES, DEFAULT_SEED};

/// The first resourceVersion handed out.
const FIRST_RESOURCE_VERSION: u64 = 1_000_001;

/// The order events are delivered in.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum Order {
    /// The canonical order: every listed owner before its dependents.
    #[default]
    OwnersFirst,
    /// The canonical list reversed: every owner first appears as a virtual node.
    DependentsFirst,
    /// Fisher–Yates over the canonical list with the `shuffleRNG` stream.
    Random,
}

impl Order {
    /// Every order, in `WORKLOAD.md`'s order.
    pub const ALL: [Order; 3] = [Order::OwnersFirst, Order::DependentsFirst, Order::Random];

    /// The name `WORKLOAD.md` and the command line use.
    pub fn as_str(self) -> &'static str {
        match self {
            Order::OwnersFirst => "owners-first",
            Order::DependentsFirst => "dependents-first",
            Order::Random => "random",
        }
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Order {
    type Err = String;
    fn from_str(s: &str) -> Result<Order, String> {
        Order::ALL.into_iter().find(|o| o.as_str() == s).ok_or_else(|| {
            format!("unknown order {s:?}: expected owners-first, dependents-first or random")
        })
    }
}

/// The workload's parameters (`WORKLOAD.md` § Parameters).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct WorkloadConfig {
    /// N, the number of listed objects (and of add events).
    pub objects: usize,
    /// Seed of the three splitmix64 streams (default 1).
    pub seed: u64,
    /// Number of namespaces (default 1000).
    pub namespaces: usize,
    /// Delivery order.
    pub order: Order,
}

impl WorkloadConfig {
    /// `objects` objects in `order`, with the default seed and namespaces.
    pub fn new(objects: usize, order: Order) -> WorkloadConfig {
        WorkloadConfig { objects, seed: DEFAULT_SEED, namespaces: DEFAULT_NAMESPACES, order }
    }

    /// The counts this configuration gives.
    pub fn counts(&self) -> Counts {
        Counts::for_objects(self.objects)
    }
}

/// The counts of `WORKLOAD.md` (integer arithmetic).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Counts {
    /// N: the objects in all.
    pub objects: usize,
    /// F: Deployment → ReplicaSet → 8 Pods families.
    pub families: usize,
    /// S: unowned ConfigMaps.
    pub configmaps: usize,
    /// V: Pods whose owner ReplicaSet is never listed.
    pub virtual_owner_pods: usize,
}

impl Counts {
    /// The counts for `n` objects.
    ///
    /// # Panics
    ///
    /// If `n` is so small that `10F + V > N` cannot happen; it never does (F ≤ 0.079 N).
    pub fn for_objects(n: usize) -> Counts {
        let families = n * 79 / 1000;
        let virtual_owner_pods = n / 100;
        let configmaps = n - 10 * families - virtual_owner_pods;
        Counts { objects: n, families, configmaps, virtual_owner_pods }
    }

    /// Nodes after warm-up: N + V (each missing owner becomes one virtual node).
    pub fn graph_nodes(&self) -> usize {
        self.objects + self.virtual_owner_pods
    }
}

pub use kube_gc_workload::SplitMix64;
use kube_gc_workload::{namespace_name, numbered};

/// A generated workload: the warm-up's add events, in delivery order.
#[derive(Debug)]
pub struct Workload {
    config: WorkloadConfig,
    counts: Counts,
    events: Vec<Event>,
    /// `canonical[i]`: the canonical (owners-first) position of the `i`-th delivered event.
    canonical: Vec<u32>,
}

/// The namespace names, `ns-%04d`.
fn namespace_names(n: usize) -> Vec<String> {
    (0..n).map(namespace_name).collect()
}

/// The pieces every object is built from.
struct Builder {
    namespaces: Vec<String>,
    resource_version: u64,
    deployment: ObjectType,
    replica_set: ObjectType,
    pod: ObjectType,
    config_map: ObjectType,
}

impl Builder {
    fn meta(
        &mut self,
        ns: usize,
        name: String,
        uid: String,
        owner: Option<OwnerReference>,
    ) -> ObjectMeta {
        let resource_version = self.resource_version.to_string();
        self.resource_version += 1;
        ObjectMeta {
            uid,
            name,
            // Every string its own allocation, as a decoder would produce it.
            namespace: self.namespaces[ns % self.namespaces.len()].clone(),
            resource_version,
            owner_references: owner.into_iter().collect(),
            finalizers: Vec::new(),
            deletion_timestamp: false,
            // As a decoder reads it from every object a server sends.
            creation_time: Some(1_700_000_000),
            deletion_time: None,
        }
    }
}

/// An `apps/v1` controller owner reference, strings freshly allocated.
fn controller_ref(kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
        uid: uid.to_owned(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

impl Workload {
    /// Generates the workload of `config` (see the module docs). Takes about a second per
    /// million objects in an optimized build.
    ///
    /// # Panics
    ///
    /// If `config.namespaces` is zero, or N does not fit in `u32` positions.
    pub fn generate(config: &WorkloadConfig) -> Workload {
        assert!(config.namespaces > 0, "the workload needs at least one namespace");
        assert!(u32::try_from(config.objects).is_ok(), "at most 2^32 objects");
        let counts = config.counts();
        let Counts { families: f_count, configmaps: s_count, virtual_owner_pods: v_count, .. } =
            counts;
        let mut uid_rng = SplitMix64::new(config.seed);
        let mut name_rng = SplitMix64::new(config.seed.wrapping_add(1));
        let mut b = Builder {
            namespaces: namespace_names(config.namespaces),
            resource_version: FIRST_RESOURCE_VERSION,
            deployment: ObjectType::new("apps/v1", "Deployment"),
            replica_set: ObjectType::new("apps/v1", "ReplicaSet"),
            pod: ObjectType::new("v1", "Pod"),
            config_map: ObjectType::new("v1", "ConfigMap"),
        };

        // Canonical order: [Deployment 0..F) ++ [ReplicaSet 0..F) ++ [Pods] ++ [ConfigMaps]
        // ++ [virtual-owner Pods]. Families are drawn one at a time, so build the three
        // family lists side by side and concatenate.
        let mut deployments = Vec::with_capacity(f_count);
        let mut replica_sets = Vec::with_capacity(f_count);
        let mut events = Vec::with_capacity(config.objects);
        let mut pods = Vec::with_capacity(8 * f_count);
        for f in 0..f_count {
            let d_uid = uid_rng.uid();
            let rs_uid = uid_rng.uid();
            let pod_uids: [String; 8] = std::array::from_fn(|_| uid_rng.uid());
            let d_name = numbered("app-", f, 0);
            let mut rs_name = String::with_capacity(23);
            rs_name.push_str(&d_name);
            rs_name.push('-');
            name_rng.push_suffix(&mut rs_name, 10);
            let rs_owner = controller_ref("Deployment", &d_name, &d_uid);
            let pod_owner = controller_ref("ReplicaSet", &rs_name, &rs_uid);
            deployments.push(Event::new(
                EventType::Add,
                b.deployment,
                b.meta(f, d_name, d_uid, None),
            ));
            let rs_meta = b.meta(f, rs_name.clone(), rs_uid, Some(rs_owner));
            replica_sets.push(Event::new(EventType::Add, b.replica_set, rs_meta));
            for pod_uid in pod_uids {
                let mut pod_name = String::with_capacity(29);
                pod_name.push_str(&rs_name);
                pod_name.push('-');
                name_rng.push_suffix(&mut pod_name, 5);
                let meta = b.meta(f, pod_name, pod_uid, Some(pod_owner.clone()));
                pods.push(Event::new(EventType::Add, b.pod, meta));
            }
        }
        events.append(&mut deployments);
        events.append(&mut replica_sets);
        events.append(&mut pods);
        for s in 0..s_count {
            let uid = uid_rng.uid();
            let meta = b.meta(s, numbered("cm-", s, 0), uid, None);
            events.push(Event::new(EventType::Add, b.config_map, meta));
        }
        for v in 0..v_count {
            let gone_uid = uid_rng.uid();
            let pod_uid = uid_rng.uid();
            let mut gone_name = numbered("gone-", v, 11);
            gone_name.push('-');
            name_rng.push_suffix(&mut gone_name, 10);
            let mut pod_name = String::with_capacity(30);
            pod_name.push_str(&gone_name);
            pod_name.push('-');
            name_rng.push_suffix(&mut pod_name, 5);
            let owner = controller_ref("ReplicaSet", &gone_name, &gone_uid);
            let meta = b.meta(v, pod_name, pod_uid, Some(owner));
            events.push(Event::new(EventType::Add, b.pod, meta));
        }
        debug_assert_eq!(events.len(), config.objects);

        let mut canonical: Vec<u32> = (0..events.len() as u32).collect();
        match config.order {
            Order::OwnersFirst => {}
            Order::DependentsFirst => {
                events.reverse();
                canonical.reverse();
            }
            Order::Random => {
                let mut shuffle_rng = SplitMix64::new(config.seed.wrapping_add(2));
                for i in (1..events.len()).rev() {
                    let j = (shuffle_rng.next() % (i as u64 + 1)) as usize;
                    events.swap(i, j);
                    canonical.swap(i, j);
                }
            }
        }
        // A decoder allocates an object's strings as the object arrives. Ordering moved only
        // the events, whose strings stayed where construction put them: in `random` order,
        // reading one event's strings then missed the cache every time, scattered over the
        // whole input, which no watcher's batch does. Copying the events in delivery order
        // lays their strings out in that order, as behind a watcher.
        let events = events.to_vec();
        Workload { config: *config, counts, events, canonical }
    }

    /// The configuration this workload was generated from.
    pub fn config(&self) -> &WorkloadConfig {
        &self.config
    }

    /// The counts of this workload.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The warm-up: N add events in delivery order.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Takes the add events out of the workload.
    pub fn into_events(self) -> Vec<Event> {
        self.events
    }

    /// One no-op update per object (old = new = the same object), in delivery order.
    pub fn update_pass(&self) -> Vec<Event> {
        self.events
            .iter()
            .map(|e| Event::update(e.object_type, e.object.clone(), e.object.clone()))
            .collect()
    }

    /// One delete per object, in delivery order.
    pub fn delete_pass(&self) -> Vec<Event> {
        self.events
            .iter()
            .map(|e| Event::new(EventType::Delete, e.object_type, e.object.clone()))
            .collect()
    }

    /// The canonical (owners-first) position of the `i`-th delivered event.
    pub fn canonical_position(&self, i: usize) -> usize {
        self.canonical[i] as usize
    }

    /// How many items the graph builder queues to attemptToDelete during the warm-up
    /// (`WORKLOAD.md` § Events): one per virtual node created, i.e. V, plus one per
    /// ReplicaSet delivered after one of its Pods, plus one per Deployment delivered after
    /// its ReplicaSet. V for `owners-first`, V + 2F for `dependents-first`.
    pub fn expected_attempt_to_delete(&self) -> usize {
        let f = self.counts.families;
        // delivery position of each canonical position
        let mut at = vec![0u32; self.canonical.len()];
        for (i, &c) in self.canonical.iter().enumerate() {
            at[c as usize] = i as u32;
        }
        let (deployments, replica_sets, pods) = (0, f, 2 * f);
        let mut count = self.counts.virtual_owner_pods;
        for family in 0..f {
            let rs = at[replica_sets + family];
            let first_pod = (0..8).map(|p| at[pods + 8 * family + p]).min().unwrap_or(u32::MAX);
            count += usize::from(rs > first_pod);
            count += usize::from(at[deployments + family] > rs);
        }
        count
    }

    /// The `WORKLOAD.md` golden row (TSV) of the `i`-th delivered event: idx, apiVersion,
    /// kind, namespace, name, uid, resourceVersion, owner kind/name/uid (or `-`).
    pub fn golden_row(&self, i: usize) -> String {
        let e = &self.events[i];
        let m = &e.object;
        let owner = match m.owner_references.first() {
            Some(r) => format!("{}/{}/{}", r.kind, r.name, r.uid),
            None => "-".to_owned(),
        };
        format!(
            "{i}\t{}\t{}\t{}\t{}\t{}\t{}\t{owner}",
            e.object_type.api_version(),
            e.object_type.kind(),
            m.namespace,
            m.name,
            m.uid,
            m.resource_version
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_the_reference_stream() {
        // The first outputs of splitmix64 seeded with 0 (Vigna's reference implementation).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(r.next(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn order_round_trips_through_its_name() {
        for o in Order::ALL {
            assert_eq!(o.as_str().parse::<Order>(), Ok(o));
        }
        assert!("sideways".parse::<Order>().is_err());
    }

    #[test]
    fn strings_have_the_lengths_of_the_spec() {
        let w = Workload::generate(&WorkloadConfig::new(100_000, Order::OwnersFirst));
        let c = w.counts();
        let lens = |i: usize| {
            let m = &w.events()[i].object;
            (m.uid.len(), m.name.len(), m.namespace.len())
        };
        assert_eq!(lens(0), (36, 12, 7));
        assert_eq!(lens(c.families), (36, 23, 7));
        assert_eq!(lens(2 * c.families), (36, 29, 7));
        assert_eq!(lens(10 * c.families), (36, 11, 7));
        assert_eq!(lens(10 * c.families + c.configmaps), (36, 30, 7));
        let gone = &w.events()[10 * c.families + c.configmaps].object.owner_references[0];
        assert_eq!(gone.name.len(), 24);
    }

    #[test]
    fn strings_are_laid_out_in_delivery_order() {
        // A shuffled list whose strings stayed in construction order would have about half its
        // neighbours' UIDs at falling addresses; copied in delivery order, nearly none.
        let w = Workload::generate(&WorkloadConfig::new(20_000, Order::Random));
        let addresses: Vec<usize> =
            w.events().iter().map(|e| e.object.uid.as_ptr() as usize).collect();
        let falling = addresses.windows(2).filter(|pair| pair[1] < pair[0]).count();
        assert!(
            falling < addresses.len() / 20,
            "{falling} of {} UIDs before the previous one",
            addresses.len()
        );
    }
}
