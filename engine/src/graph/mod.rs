//! (being written)
/// The graph.
#[derive(Debug)]
pub struct Graph;
