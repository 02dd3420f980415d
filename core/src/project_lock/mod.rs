//! The project lock (seed 003), its pure half: who owns the lock, whether that owner is alive,
//! dead or cannot be told from here ([`ownership`]), and acquisition, recovery and release as
//! step machines ([`machine`]), and an operator's clear of an unknown owner's record
//! ([`clear`]), and who must act on each of their failing ends (`kinds`).

pub mod clear;
mod kinds;
pub mod machine;
pub mod ownership;
