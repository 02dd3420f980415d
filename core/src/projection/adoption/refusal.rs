//! Why an adoption was refused. Every refusal names what it did not understand — the table,
//! and for a value the row (by SQLite `rowid`) and the column — and the adoption changed
//! nothing.

/// Why the tables the JavaScript writer made were not adopted. Nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AdoptionRefused {
    /// A table is not of the JavaScript writer's shape (nor solewriter's): a column unknown,
    /// missing or declared otherwise, an index, trigger or view attached, one table of the two.
    #[error("{table} is not the JavaScript writer's table ({reason}); nothing was changed")]
    Shape {
        /// The table.
        table: &'static str,
        /// What did not match.
        reason: String,
    },
    /// One stored value is not one the JavaScript writer writes, or cannot be carried over.
    #[error("{table} rowid {rowid}, column {column}: {problem}; nothing was changed")]
    Value {
        /// The table.
        table: &'static str,
        /// The row's SQLite `rowid`.
        rowid: i64,
        /// The column.
        column: &'static str,
        /// What is wrong with the value.
        problem: ValueProblem,
    },
    /// Two different attested tuples give the same 128-bit JavaScript-writer target id.
    #[error("two attested tuples give the JavaScript writer's target id {legacy_id}; nothing was changed")]
    AmbiguousTuples {
        /// The 32-hex-digit id.
        legacy_id: String,
    },
    /// The tables are solewriter's, of another profile than the one asked for (a store's
    /// profile is fixed when it is made).
    #[error("the store's tables are solewriter's, of profile {found}, not {wanted}; nothing was changed")]
    OtherProfile {
        /// The store's profile.
        found: &'static str,
        /// The profile asked for.
        wanted: &'static str,
    },
    /// The tables are solewriter's, of an earlier schema: `initialize` upgrades them.
    #[error("the store's tables are solewriter's, of an earlier schema: initialize upgrades them; nothing was changed")]
    EarlierSchema,
    /// The registry declares a watermark kind the store's profile does not publish.
    #[error("{0}; nothing was changed")]
    Registry(crate::projection::channel::RegistryError),
    /// The adoption's broker time is beyond what the store holds.
    #[error("broker time {0} ms is out of range; nothing was changed")]
    ClockOutOfRange(u64),
}

/// What is wrong with one stored value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueProblem {
    /// The value is of another SQLite storage class than the writer stores there.
    #[error("a {found} value where the writer stores {expected}")]
    WrongType {
        /// What the writer stores.
        expected: &'static str,
        /// The storage class found (`typeof`).
        found: String,
    },
    /// A lease state other than `held` and `released`.
    #[error("unknown state `{0}`")]
    UnknownState(String),
    /// A time that is not `YYYY-MM-DDTHH:MM:SS.sssZ` (after 1970).
    #[error("unparsable time `{0}`")]
    UnparsableTime(String),
    /// Not lowercase hex of the length the writer stores (32 digits for a target id, 64 for a
    /// token hash).
    #[error("`{0}` is not lowercase hex of the expected length")]
    BadHex(String),
    /// A watermark that is not of its channel's declared kind (for `integer`: a decimal
    /// without sign or leading zeros, at most [`crate::EXACT_INTEGER_MAX`]).
    #[error(
        "watermark `{watermark}` is not a valid {kind} watermark, the kind its channel declares"
    )]
    UnorderableWatermark {
        /// The stored text.
        watermark: String,
        /// The channel's declared kind (`text` for a channel no longer registered).
        kind: crate::projection::watermark::WatermarkKind,
    },
    /// A negative number, or one beyond what the store holds.
    #[error("{0} is out of range")]
    OutOfRange(i64),
    /// A channel name or instance digest solewriter's name rule refuses.
    #[error("`{0}` is not a name solewriter accepts ([a-z0-9][a-z0-9._-]*, at most 64 bytes)")]
    BadName(String),
    /// An envelope that is not a JSON object.
    #[error("the envelope is not a JSON object")]
    NotJsonObject,
    /// A `conflict_reason` other than the one the writer records.
    #[error("unknown conflict reason `{0}`")]
    UnknownConflictReason(String),
    /// No attested tuple given to the adoption derives this 128-bit target id.
    #[error("no attested tuple given derives target id `{0}`")]
    UnmappedTarget(String),
    /// A value the writer leaves NULL in this state (a released row's token hash).
    #[error("must be NULL in this state")]
    NotNull,
    /// A released row whose `expires_at` is not the 0 the writer's release stores.
    #[error("a released row's expires_at is {0}, the writer's release stores 0")]
    ReleasedExpiry(i64),
    /// A grant that does not end after it starts.
    #[error("expires_at {expires_at} is not after acquired_at {acquired_at}")]
    EndsBeforeStart {
        /// `acquired_at`.
        acquired_at: i64,
        /// `expires_at`.
        expires_at: i64,
    },
    /// A grant acquired at or after the adoption's broker time: it cannot be ended now.
    #[error("acquired at {acquired_at} ms, not before the adoption's time {now} ms")]
    AcquiredNotBeforeNow {
        /// `acquired_at`.
        acquired_at: i64,
        /// The adoption's broker time.
        now: u64,
    },
    /// An epoch below 1 (every grant of the writer raises it from 0 to at least 1).
    #[error("fencing epoch {0}, the writer's grants start at 1")]
    EpochBelowOne(i64),
}
