//! (being written)
pub mod event;
pub use event::*;
/// Ingester.
#[derive(Debug)]
pub struct Ingester;
/// Sequential.
#[derive(Debug)]
pub struct SequentialGraph;
