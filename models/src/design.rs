//! The design under check: the real one, or one of the traps the seed warns about (plus the
//! ones found while building the proof), each built as a deliberately broken variant. The
//! verification crate shows that the model checkers find a violation in every trap while
//! the real design passes the same checks.

/// Which publication, acquisition and release protocol the model runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Design {
    /// The solewriter design: the draft and its temp file with no lock held, then (the target
    /// lock taken right before the transaction) revalidation, confirmation of the draft,
    /// deadline check, rename and sweep inside ONE serialized transaction; release conditional
    /// on token hash AND epoch; the directory fsync after both locks are let go.
    Real,
    /// Trap: atomic rename without the single-writer check (the lease is checked only at
    /// acquisition; publication is an unguarded temp-write-and-rename).
    RenameWithoutCheck,
    /// Trap: the fencing epoch in the published JSON used as the guard — read the file,
    /// compare epochs, then rename, with no transaction around it.
    JsonEpochGuard,
    /// Trap: "remote lease + unguarded local write" — revalidate in one transaction, commit,
    /// then rename outside it (and outside the target lock).
    CommitThenRename,
    /// Trap: release conditional on the token hash only.
    ReleaseTokenOnly,
    /// Trap: release conditional on the epoch only.
    ReleaseEpochOnly,
    /// Trap: revalidation that ignores expiry (and no deadline check before the rename).
    IgnoreExpiry,
    /// Trap: a renewal that extends `expires_at` while publishing.
    Renewal,
    /// Trap found while building the model: acquisition as read-decide in one transaction
    /// and write in another (a deferred transaction upgraded too late).
    SplitAcquire,
    /// Trap found while building the model: writing `current.json` in place instead of a
    /// temp sibling plus rename.
    InPlaceWrite,
    /// Not a trap — defence in depth: the store's write lock is lost right after the
    /// revalidation (as when the process closes a descriptor of the database file and SQLite's
    /// POSIX locks vanish); the target lock is still held. Must pass.
    StoreLockLost,
    /// Not a trap — defence in depth: the target lock is never taken (the store's write lock
    /// alone). Must pass.
    TargetLockSkipped,
    /// Liveness trap (safe, not live): the target lock taken for the draft and kept until the
    /// directory fsync after the commit, as before liveness was proven. A holder frozen in its
    /// draft or after its commit keeps its successor out: the liveness check must catch it.
    LockAcrossDraft,
}

impl Design {
    /// The variants that lose one of the two locks and must still pass every check: each
    /// lock alone fences the takeover.
    pub const ONE_LOCK: [Design; 2] = [Design::StoreLockLost, Design::TargetLockSkipped];

    /// The variants that are safe but not live: the liveness check must catch each.
    pub const LIVENESS_TRAPS: [Design; 1] = [Design::LockAcrossDraft];

    /// Every safety trap variant.
    pub const TRAPS: [Design; 9] = [
        Design::RenameWithoutCheck,
        Design::JsonEpochGuard,
        Design::CommitThenRename,
        Design::ReleaseTokenOnly,
        Design::ReleaseEpochOnly,
        Design::IgnoreExpiry,
        Design::Renewal,
        Design::SplitAcquire,
        Design::InPlaceWrite,
    ];
}
