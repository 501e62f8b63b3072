//! kube-gc-lab: everything that runs the collector against something.
//!
//! # Where to start
//!
//! - [`demo`] preloads a simcluster (WORKLOAD.md's objects, a million by default), runs kube-gc
//!   against it over HTTP in this process, and reports its warm-up and collection
//!   (`kube-gc-lab demo`, the README's first command).
//! - [`chaos`] runs random garbage-collection scenarios from seeds under simcluster's faults
//!   and collector restarts, with its audit as the oracle of wrongful deletions
//!   (`kube-gc-lab chaos`).
//! - [`tune`] measures the collection rate per `--concurrent-gc-syncs`, API latency and rate
//!   limit (`kube-gc-lab tune`).
//! - [`InProcess`] is kube-gc started in this process, as all of them start it.
//! - `benches/real_server` runs kube-gc and upstream's collector side by side on a real
//!   kube-apiserver (`cargo bench -p kube-gc-lab --bench real_server`).
//!
//! The crates it runs stay apart: simcluster never knows the collector, and the collector
//! never knows simcluster; only this crate depends on both.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod chaos;
pub mod demo;
pub mod in_process;
pub mod tune;

pub use in_process::InProcess;
