//! The project lock (seed 003), its pure half: who owns the lock, and whether that owner is
//! alive, dead or cannot be told from here.

pub mod ownership;
