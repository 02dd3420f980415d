//! The subtree write guard (seed 002), its stateful half.

pub mod write_guard;
