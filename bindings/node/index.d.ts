/**
 * Type declarations of solewriter for Node: fenced single-writer publication of
 * `current.json`, with the two tables in the host's own better-sqlite3 database (one SQLite
 * per process). Errors are `SolewriterError`s whose `code` names the Rust error class.
 * What a call is handed (options, a configuration, a submission, a tuple, a consumer binding)
 * is read once, each property once, before anything is decided (docs/node.md, "Host objects
 * are read once").
 */

/**
 * Exactly the part of a better-sqlite3 `Database` solewriter uses, as a structural type:
 * better-sqlite3's own `Database` (the types of `@types/better-sqlite3`) is one under
 * `tsc --strict`. Statements are prepared, run and read; transactions are opened with
 * `transaction(fn).immediate()` or `exec('BEGIN IMMEDIATE')`; `journal_mode` and
 * `synchronous` are read and `synchronous` set with `pragma`.
 */
export interface Database {
  prepare(source: string): Statement;
  exec(source: string): unknown;
  pragma(source: string, options?: { simple?: boolean }): unknown;
  transaction(fn: () => unknown): { immediate(): unknown };
  readonly inTransaction: boolean;
  readonly open: boolean;
}

/** The part of a better-sqlite3 `Statement` solewriter uses. */
export interface Statement {
  run(...params: unknown[]): { changes: number };
  get(...params: unknown[]): unknown;
  all(...params: unknown[]): unknown[];
  raw(toggleState?: boolean): Statement;
}

export type ErrorCode =
  | 'INVALID_CONFIG'
  | 'INTERNAL'
  | 'BUSY'
  | 'FENCED'
  | 'LEASE_EXPIRED'
  | 'NOT_ADMITTED'
  | 'REJECTED'
  | 'FOREIGN_SCHEMA'
  | 'ADOPTION_REFUSED'
  | 'IN_TRANSACTION'
  | 'CORRUPT_ROW'
  | 'INCONSISTENT_LEASE'
  | 'FOREIGN_EPOCH'
  | 'EPOCH_EXHAUSTED'
  | 'IO'
  | 'UNSAFE_RUNTIME_DIR'
  | 'NOT_REGULAR_FILE'
  | 'NOT_DURABLE'
  | 'PUBLISHED_NOT_RELEASED'
  | 'RELEASE_FAILED'
  | 'SQLITE'
  | 'DOCUMENT'
  | 'NOT_PUBLISHED'
  | 'READ'
  | 'RANDOM'
  | 'INVALID_INPUT'
  | 'GRANT_SPENT'
  | 'HOST'
  | 'ADDON_MISSING'
  // The project lock: one per Rust `LockError` variant (BUSY, IO and RANDOM are shared)
  | 'KERNEL_LOCK_UNAVAILABLE'
  | 'CLEAR_REFUSED'
  | 'NO_DIRECTORY'
  | 'UNKNOWN_OWNER'
  | 'MALFORMED_LOCK'
  | 'RECOVERY_ABANDONED'
  | 'OWN_IDENTITY'
  | 'UNSAFE_LOCK_DIR'
  | 'LOCK_LOST'
  | 'LOCK'
  | 'MALFORMED_FRAME'
  | 'AUTHORITY_UNAVAILABLE'
  | 'SOURCE'
  | 'INTERPRETATION_MOVED'
  | 'FACT_CONFLICT'
  | 'SNAPSHOT_TOO_LARGE'
  | 'CONSUMER'
  | 'LEDGER';

export interface SolewriterError extends Error {
  code: ErrorCode;
  /**
   * For FENCED: superseded | token-mismatch | expired | released | never-granted. For
   * UNKNOWN_OWNER: an `UnknownReason`. For MALFORMED_LOCK, UNSAFE_LOCK_DIR, LOCK_LOST: what is wrong.
   */
  reason?: string;
  /** For FENCED superseded: the epoch of the successor. */
  currentEpoch?: number;
  /** For the project lock's errors: the lock (or recovery claim) file. */
  lock?: string;
  /** For BUSY (project lock): the recorded owner, or null (no record yet, or no longer). For UNKNOWN_OWNER: the owner. */
  owner?: LockOwner | null;
  /** For CLEAR_REFUSED: why. */
  refused?: 'held' | 'known' | 'nonce-mismatch';
  /** For CLEAR_REFUSED: the record found (null when held without a record). */
  record?: LockRecord | null;
  /** For CLEAR_REFUSED known: the owner's judgement. */
  ownership?: LockOwnership | null;
  /** For UNKNOWN_OWNER: the reason in words. */
  detail?: string;
  /** For NO_DIRECTORY, UNSAFE_LOCK_DIR: the directory. */
  dir?: string;
  /** For RECOVERY_ABANDONED: how many claim levels deep. */
  depth?: number;
  /** For IO (project lock): the step and the path. */
  step?: string;
  path?: string;
  /** For SQLITE: better-sqlite3's code (e.g. `SQLITE_CONSTRAINT_FOREIGNKEY`). */
  sqliteCode?: string;
  /**
   * For REJECTED: why the submission was refused — `unknown-channel`, `not-channel-owner`,
   * `target-not-admitted`, `oversized`, `schema-invalid`, `invalid-range`, `invalid-watermark`,
   * `stored-watermark-of-another-kind`, `regressed` (or `other`, a kind of a later core).
   */
  rejection?: string;
  /** For REJECTED regressed: the submitted and the stored watermark, as text. */
  submitted?: string;
  stored?: string;
  /**
   * On an error of `publish` / `publishAsync` (and `publishNow`, and a target's of
   * `publishManyNow`): `true` when the publication
   * did not use its grant — it could not start (BUSY, IO, IN_TRANSACTION, HOST at its start,
   * ...) or its options were refused by the addon. The `Grant` object is then handed back,
   * usable again (for a `release`, or another publication). Absent: the Grant is spent.
   */
  grantUnused?: true;
}

/** Every code an error of this package carries (`SolewriterError.code`); no call throws another. */
export const ERROR_CODES: readonly ErrorCode[];

/** The kind of watermark a channel's producer emits (`integer` when absent). */
export type WatermarkKind = 'integer' | 'instant' | 'instant-sequence' | 'text';

export interface ChannelSpec {
  name: string;
  owner: string;
  envelopeSchema: string;
  maxEnvelopeBytes: number;
  /** `integer` (a number), `instant` (`toISOString()` text), `instant-sequence` (`<instant>:<n>`) or `text` (ordered as text). */
  watermark?: WatermarkKind;
  /** A self-contained JSON Schema every envelope of the channel must satisfy (REJECTED otherwise). */
  envelopeJsonSchema?: Record<string, unknown> | boolean;
}

/** A store's profile: solewriter's own document format (the default) or the Memory Core's. */
export type Profile = 'solewriter.hook-projection.v2' | 'live-lane-awareness-projection.v1';

/** A publication's options: the Memory Core profile publishes the hooks' consumer binding with every document. */
export interface PublishOptions {
  consumerBinding?: Record<string, unknown>;
}

/**
 * A store's configuration, checked once by the constructor (INVALID_CONFIG names the first field
 * missing, unknown, mistyped or out of range). There is no default for any field but the test
 * hooks `clock` and `probe`.
 */
export type StoreConfig = StoreConfigFields & (
  | {
      /** The host's runtime root, an existing directory; documents go to hook-projections/<target>/current.json. */
      runtimeRoot: string;
      hookProjectionRoot?: undefined;
    }
  | {
      /**
       * The directory, of any name, that holds <target>/current.json (made, mode 0700, at the first
       * publication; then it must be the effective user's and not group- or other-writable). Its
       * parent must be an existing directory.
       */
      hookProjectionRoot: string;
      runtimeRoot?: undefined;
    }
);

/** The fields of a store's configuration besides its root. */
export interface StoreConfigFields {
  /** The channel registry (names unique; an empty array is allowed). */
  channels: ChannelSpec[];
  /** The lease's time to live: an integer from 1 to 2^53 - 1 ms. */
  leaseTtlMs: number;
  /** How long the per-target lock is waited for: an integer from 1 to 2^53 - 1 ms. SQLite's own wait is the connection's `timeout`. */
  busyTimeoutMs: number;
  /** The store's profile (`initialize` made the tables of it); the generic one when absent. */
  profile?: Profile;
  /**
   * A broker clock (ms; tests); the system clock otherwise. Read at every clock step of a
   * machine — a publication's snapshot, draft, grant, revalidation and deadline, some inside its
   * transaction — and once per submission or inspection; one that throws, answers no whole
   * number of ms, or begins or ends a transaction on the connection stops the call (HOST), before
   * any rename.
   */
  clock?: () => number;
  /**
   * Called at each named step of a publication (composed, temp-written, transaction-open,
   * revalidated, deadline-checked, renamed, released, unlocked, directory-synced): for tests
   * (stall, crash). From transaction-open to released the publication holds the target lock
   * and SQLite's write lock; at every other step it holds neither. In `publishAsync` /
   * `publishNowAsync` a promise returned at a step outside the transaction (composed,
   * temp-written, unlocked, directory-synced) pauses the publication there, between two
   * event-loop turns and holding no lock, until it settles; elsewhere the returned value is
   * ignored.
   */
  probe?: (step: string, targetId: string) => void | Promise<unknown>;
}

/** The seven attested values naming a target. */
export interface TargetTuple {
  schemaVersion: string;
  capability: string;
  agentId: string;
  harnessType: string;
  instanceKeyDigest: string;
  workspaceKeyDigest: string;
  projectionKind: string;
}

export interface Submission {
  targetId: string;
  channel: string;
  /** A number for a channel of kind `integer`, a string for the other kinds. */
  sourceWatermark: number | string;
  envelopeJson: string;
  capturedAt: number;
  expiresAt: number;
}

/** What `Grant.exportSecret` returns: the grant's fields and its raw token (a secret). */
export interface ExportedGrant {
  targetId: string;
  epoch: number;
  holder: string;
  acquiredAt: number;
  expiresAt: number;
  /** The raw holder token, 64 lowercase hex: whoever holds it holds the grant. */
  token: string;
}

/**
 * A lease grant as its holder keeps it. The raw token (256 bits from the OS) is in a private
 * field; the store keeps only its SHA-256, which is never a credential. JSON, `util.inspect`
 * and spreading show the public fields only.
 *
 * A Grant object is used once: the first `publish`, `publishAsync` or `release` that reaches
 * the store spends it, whatever its outcome; a later use (and `exportSecret`) throws
 * GRANT_SPENT. A publication refused before the store, or one whose error carries
 * `grantUnused: true`, hands it back. The rule is per object (a `fromSecret` copy is another
 * object); the store's fence is what keeps any copy from renaming twice under one epoch.
 */
export class Grant {
  readonly targetId: string;
  readonly epoch: number;
  readonly holder: string;
  readonly acquiredAt: number;
  readonly expiresAt: number;
  private constructor();
  /** A grant exported by `exportSecret` (INVALID_INPUT when malformed). */
  static fromSecret(exported: ExportedGrant): Grant;
  /** The grant with its raw token, to hand to another process or keep: treat it as a secret. GRANT_SPENT once spent. */
  exportSecret(): ExportedGrant;
  /** The public fields only. */
  toJSON(): Omit<ExportedGrant, 'token'>;
}

export interface HeldBy {
  epoch: number;
  holder: string;
  expiresAt: number;
  retryAfterMs: number;
}

export interface Published {
  targetId: string;
  epoch: number;
  bytes: number;
  publishedAt: number;
  path: string;
}

/**
 * One target's entry in the answer of `publishManyNow` / `publishManyNowAsync`: what
 * `publishNow` answers for that target (`published` or `held`), or `error`: the coded error
 * `publishNow` would throw for it (BUSY for its busy target lock, FENCED, NOT_ADMITTED, ...;
 * a failure of the batch's shared transaction — its begin, a statement inside it, its commit —
 * is every target's of it). The entries are in the order of the targets given.
 */
export type BatchResult = { published: Published } | { held: HeldBy } | { error: SolewriterError };

/** What `endLease` did (the Rust `EndOutcome`). */
export type LeaseEnd =
  | { ended: { epoch: number; holder: string; acquiredAt: number; expiresAt: number } }
  | { nothingHeld: { epoch: number; why: 'unheld' | 'released' } }
  | { nothingHeld: { epoch: number; why: 'expired'; closed: true } };

/**
 * Adds the two tables of `options.profile` (the generic profile when absent) to a WAL database
 * (idempotent), or upgrades tables of schema 1; refuses another shape or profile.
 */
export function initialize(db: Database, options?: { profile?: Profile }): 'created' | 'present' | 'upgraded';

/** What `adoptJsWriterTables` did. */
export type Adoption =
  | { outcome: 'converted'; leases: number; channels: number }
  | { outcome: 'alreadyAdopted' }
  | { outcome: 'nothingToAdopt' };

/**
 * Converts the tables of the Memory Core's own JavaScript writer into solewriter's in one
 * immediate transaction (see docs/memory-core.md); `tuples` are the attested tuples of the host's
 * targets. Throws ADOPTION_REFUSED (with `table`, `rowid`, `column`, `problem`, or `reason`),
 * FOREIGN_SCHEMA, BUSY or IN_TRANSACTION, having changed nothing.
 */
export function adoptJsWriterTables(
  db: Database,
  tuples: TargetTuple[],
  options?: { clock?: () => number; profile?: Profile; channels?: ChannelSpec[] },
): Adoption;

export class ProjectionStore {
  constructor(db: Database, config: StoreConfig);
  /**
   * The configuration as checked, the store's only copy: frozen, every field present (absent
   * ones `undefined`), `runtimeRoot` absolute. The addon's machinery is private to the store.
   */
  readonly config: Readonly<StoreConfig>;
  admitTarget(tuple: TargetTuple): string;
  submit(producer: string, submission: Submission): 'inserted' | 'advanced' | 'replayed' | 'degraded';
  acquire(targetId: string, holder: string): { granted: Grant } | { held: HeldBy };
  /**
   * Publishes with a grant, then releases it. BUSY: the grant was not used and was released if
   * the store let it. Spends the Grant object (GRANT_SPENT on a second use) unless the error
   * carries `grantUnused: true`.
   */
  publish(grant: Grant, options?: PublishOptions): Published;
  publishNow(targetId: string, holder: string, options?: PublishOptions): { published: Published } | { held: HeldBy };
  /**
   * `publish` that blocks the event loop only for its transaction: the target lock's wait and
   * the file effects outside the transaction (the draft's temp file and fsync, the directory
   * chain and its parent fsyncs, the orphan sweep; after the commit the directory fsync) run
   * on the libuv thread pool; every SQL statement and the whole transaction run on the JS
   * thread in one turn. Rejects like `publish`, and with IN_TRANSACTION when the host holds a
   * transaction open on the connection when this one would begin (nothing renamed, the draft
   * removed, the grant untouched). Spends the Grant object at once, synchronously, as `publish`
   * does.
   */
  publishAsync(grant: Grant, options?: PublishOptions): Promise<Published>;
  /** `publishNow` that blocks the event loop only for its transaction (see `publishAsync`). */
  publishNowAsync(targetId: string, holder: string, options?: PublishOptions): Promise<{ published: Published } | { held: HeldBy }>;
  /**
   * `publishNow` of each of `targetIds`, all in ONE write transaction of the store (one durable
   * commit for the batch): each target's grant, revalidation, rename and release under a
   * savepoint of its own, so each is fenced exactly as one `publishNow` is; the targets' locks
   * are taken in the order of their ids before the transaction, and a takeover of an expired
   * grant publishes in an envelope of its own after it. Answers one `BatchResult` per target,
   * in the order given; a target that fails (its lock busy, fenced, not admitted, ...) fails
   * alone. Throws, having touched nothing, INVALID_INPUT for an empty array, a target given
   * twice, a target id or holder that is not one (and a chosen token: a batch draws one per
   * target), IN_TRANSACTION inside a transaction of the host's, and HOST when a callback of
   * the host's (its clock) fails during the batch.
   */
  publishManyNow(targetIds: readonly string[], holder: string, options?: PublishOptions): BatchResult[];
  /**
   * `publishManyNow` that blocks the event loop only for its transaction (see `publishAsync`).
   * While the lock of a later target is waited for, on a timer between turns, the locks of the
   * earlier targets are held across those turns (no transaction is open then).
   */
  publishManyNowAsync(targetIds: readonly string[], holder: string, options?: PublishOptions): Promise<BatchResult[]>;
  /** The conditional release. Spends the Grant object whatever its outcome (GRANT_SPENT on a second use). */
  release(grant: Grant): { released: true } | { notHolder: { reason: string; currentEpoch?: number } };
  /**
   * An operator's end of the target's current grant, whoever holds it (the core's
   * `Release::end()`, as `solewriter lease end` runs it). `ended`: that grant was released at
   * its epoch — its holder's next publish is FENCED (`released`) and writes nothing, the next
   * grant gets a higher epoch. `nothingHeld`: no live grant (`why`); an expired grant is
   * marked released all the same (`closed: true`), so a clock set back cannot revive it; an
   * unheld or released row is left as it is.
   * Throws NOT_ADMITTED, BUSY, IN_TRANSACTION.
   */
  endLease(targetId: string): LeaseEnd;
  readProjection(targetId: string): any;
  inspect(): {
    leases: Array<{
      targetId: string;
      epoch: number;
      state: 'unheld' | 'held' | 'expired' | 'released';
      holder: string | null;
      acquiredAt: number | null;
      expiresAt: number | null;
    }>;
    channels: Array<{
      targetId: string;
      channel: string;
      /** A number for a channel of kind `integer`, a string for the other kinds (as stored). */
      sourceWatermark: number | string;
      updatedAt: number;
      degradedReason: string | null;
    }>;
  };
}

/** One exact process generation, as a lock record names its owner. */
export interface LockOwner {
  pid: number;
  /** Linux: `starttime` of `/proc/<pid>/stat` (distinguishes a reused pid). */
  startToken: number;
  bootId: string;
  /** The inode of the owner's PID namespace. */
  pidNamespace: number;
}

/** A project lock record. */
export interface LockRecord {
  owner: LockOwner;
  /** What excluded other writers when it was written. */
  guard: 'kernel' | 'record-only';
  /** This acquisition's nonce, 64 hex (what `clear` takes). */
  nonce: string;
  /** Wall clock ms (diagnostic only). */
  acquiredAt: number;
}

/** A record's owner judged from here (the Rust `Ownership`). */
export type LockOwnership =
  | { state: 'alive' }
  | { state: 'dead'; reason: 'kernel-lock-free' | 'no-such-process' | 'pid-reused' | 'exited' }
  | {
      state: 'unknown';
      reason:
        | 'other-pid-namespace'
        | 'namespace-unreadable'
        | 'other-boot'
        | 'hidden'
        | 'permission-denied'
        | 'process-unreadable'
        | 'boot-unreadable'
        | 'unsupported';
      detail: string;
    };

/** What `ProjectLock.status()` found (the Rust `LockStatus`). */
export interface LockStatus {
  /** The lock file's path. */
  lock: string;
  /** The kernel lock: held by another, free, never created, or not used (record-only). */
  kernel: 'held' | 'free' | 'no-file' | 'not-used';
  record: LockRecord | null;
  /** Null without a record. With the kernel lock free, a kernel-guarded record is dead. */
  ownership: LockOwnership | null;
}

/** How long `acquire` may wait for a live owner; there is no default. */
export type LockWait = 'noWait' | { timeoutMs: number };

/** A held project lock. */
export class ProjectLockGuard {
  private constructor();
  /** This acquisition's record. */
  readonly record: LockRecord;
  /** Returns while this guard still holds the lock; throws LOCK_LOST otherwise. */
  verify(): void;
  /** Removes the record if it still carries this nonce, then lets the kernel lock go. */
  release(): { removed: true } | { notHolder: { found: LockRecord | null } };
}

/**
 * The project lock of a directory (the Rust `ProjectLock` with the system process probe):
 * a kernel `flock` plus a lock record; dead owners are recovered. Synchronous: `acquire` with
 * `{ timeoutMs }` blocks the event loop at most that long.
 */
export class ProjectLock {
  constructor(dir: string, options?: { recordOnly?: boolean });
  /** Throws BUSY (with `owner`), UNKNOWN_OWNER, MALFORMED_LOCK, UNSAFE_LOCK_DIR, ...; INVALID_INPUT without `wait`. */
  acquire(options: { wait: LockWait }): ProjectLockGuard;
  /** Read without writing; throws NO_DIRECTORY for a missing directory. */
  status(): LockStatus;
  /**
   * Removes the record carrying `nonce` if its owner is unknown from here; throws
   * CLEAR_REFUSED (`refused`, `record`) having removed nothing.
   */
  clear(nonce: string): { removed: LockRecord } | { noLock: true };
}

// ---- The subtree write guard (seed 002) ----

/** A writer: the (agentId, sessionId) pair. */
export interface Writer {
  agentId: string;
  sessionId: string;
}

/** The writer context a Bridge frame carried; either id is null when half-stamped. */
export interface AgentContext {
  agentId: string | null;
  sessionId: string | null;
}

/** A held subtree lock: the writer and the absolute root→node component path. */
export interface SubtreeLock extends Writer {
  subtreePath: string[];
}

/** A parsed Bridge frame; `jsonrpc` is the parsed copy of the message (for a legacy frame: the frame). */
export type BridgeFrame =
  | { type: 'message'; jsonrpc: any; context: AgentContext | null }
  | { type: 'disconnected'; writer: Writer };

/** The host's tree: the parent's id, `null` at a root, `undefined` for an id not in the tree. */
export type ParentOf = (id: string) => string | null | undefined;

/** Why a write or move was denied (nothing was mutated, no lock taken). */
export type DenialReason =
  | 'incomplete-identity'
  | 'unresolvable-target'
  | 'no-write-guard'
  | 'conflict'
  | 'writer-disconnected'
  | 'authority-unavailable';

/** A denial: `conflict` is a copy of the held lock when `reason` is 'conflict', else null. */
export interface Denied {
  admitted: false;
  reason: DenialReason;
  conflict: SubtreeLock | null;
  message: string;
}

/** An admission: mutate. `lock` is null for a legacy (context-less) frame. */
export type Admission =
  | { admitted: true; reason: 'legacy'; lock: null; conflict: null }
  /** Release a `granted` lock when the edit is done; a `reentrant` admission added nothing. */
  | { admitted: true; reason: 'granted' | 'reentrant'; lock: SubtreeLock; conflict: null }
  | Denied;

/** What `admitWrite` takes (the seed's shape). */
export interface WriteRequest {
  context: AgentContext | null | undefined;
  componentId: string;
  parentOf: ParentOf;
}

/** Parses a Bridge frame (text or object); throws MALFORMED_FRAME, never taking it for legacy. */
export function parseBridgeFrame(frame: string | Uint8Array | object): BridgeFrame;
/** `{ jsonrpc, context }` of a message frame; throws MALFORMED_FRAME (also for a disconnect frame). */
export function parseAgentEnvelope(frame: string | Uint8Array | object): { jsonrpc: any; context: AgentContext | null };

/**
 * The held-lock authority of one heap (the core's `GuardState`). Synchronous, never blocks:
 * an overlapping write of another writer is denied at once. A call made from inside a
 * `parentOf` of the same guard is denied 'authority-unavailable' (admissions) or throws
 * AUTHORITY_UNAVAILABLE (the others).
 */
export class WriteGuard {
  constructor();
  /** Throws HOST if `parentOf` throws or answers anything else; nothing is acquired then. */
  admitWrite(request: WriteRequest): Admission;
  /** Both subtrees (where the node is, where it will be) in one step, or neither. */
  admitMove(request: {
    context: AgentContext | null | undefined;
    nodeId: string;
    newParentId: string;
    parentOf: ParentOf;
  }): { admitted: true; from: SubtreeLock; to: SubtreeLock } | Denied;
  /** Releases exactly `lock`. */
  releaseWrite(lock: SubtreeLock): { released: boolean };
  /** The disconnect sweep: frees the writer's locks (returned) and bars it from acquiring again. */
  releaseAgent(writer: Writer): SubtreeLock[];
  /** A copy of every held lock, sorted. */
  heldLocks(): SubtreeLock[];
}

/** The seed's admission; without a `writeGuard` an agent write is denied 'no-write-guard'. */
export function admitWrite(request: WriteRequest & { writeGuard: WriteGuard | null | undefined }): Admission;

// ---- The event ledger (seed 003) ----

/** A `commit/<oid>` fact, as the ledger stores it. */
export interface CommitFact {
  commit: string;
  parents: string[];
  /** Seconds since the epoch. */
  author_time: number;
  subject: string;
}

/** A `hunks/<oid>` fact, as the ledger stores it: changed line ranges against the first parent. */
export interface HunkFact {
  commit: string;
  files: { path: string; hunks: { old_start: number; old_lines: number; new_start: number; new_lines: number }[] }[];
}

/** Which history to read: each head's first-parent chain, each commit once, at most `limit`. */
export interface HistoryQuery {
  /** Commit ids (from `resolve`). Empty: no fact is needed — no git, no snapshot, no lock. */
  heads: string[];
  limit?: number;
  /** Also each commit's hunk facts. */
  hunks?: boolean;
}

/** What became of the facts a read derived. */
export type Persisted =
  | { state: 'replaced'; added: number }
  | { state: 'unchanged' }
  | { state: 'discarded'; added: number; writer: LockOwner | null };

/** A ledger read's answer. */
export interface LedgerRead {
  history: { commit: CommitFact; hunks?: HunkFact }[];
  persisted: Persisted;
}

/** The stored snapshot, judged without git and without the lock. */
export type SnapshotStatus =
  | { path: string; state: 'absent' }
  | { path: string; state: 'reusable'; interpretation: string; facts: number; bytes: number }
  | { path: string; state: 'rejected'; reason: string };

/**
 * The ledger of a project directory over a Git repository (the Rust `Ledger`). Synchronous.
 * `demand` never waits for a live writer; `build` waits as its `wait` allows.
 */
export class Ledger {
  constructor(options: { dir: string; repo: string; recordOnly?: boolean; gitEnv?: Record<string, string> });
  /** The commit id `rev` names now (runs git; not a fact). Throws SOURCE. */
  resolve(rev: string): string;
  /** The demand read. Throws SOURCE, UNKNOWN_OWNER, MALFORMED_LOCK, INTERPRETATION_MOVED, ... */
  demand(query: HistoryQuery): LedgerRead;
  /** The sole-writer build. Throws BUSY (with `owner`) after the wait, LOCK_LOST, SOURCE, ... */
  build(query: HistoryQuery & { wait: LockWait }): LedgerRead;
  /** `demand` on the libuv thread pool (its git runs leave the event loop free). */
  demandAsync(query: HistoryQuery): Promise<LedgerRead>;
  /** `build` on the libuv thread pool (its wait and git runs leave the event loop free). */
  buildAsync(query: HistoryQuery & { wait: LockWait }): Promise<LedgerRead>;
  /** `lock` is null when the directory does not exist. */
  status(): { snapshot: SnapshotStatus; lock: LockStatus | null };
}

/** The target id (64 hex) of an attested tuple. */
export function targetId(tuple: TargetTuple): string;
/** The target id of a tuple in a store of `profile` (32 hex digits for the Memory Core's). */
export function targetIdFor(profile: Profile, tuple: TargetTuple): string;

/**
 * Reads and validates `<runtimeRoot>/hook-projections/<targetId>/current.json` in the format of
 * `profile` (the generic one when absent; a Memory Core document is checked for its format,
 * epoch and target). Throws NOT_PUBLISHED when there is none.
 */
export function readProjection(runtimeRoot: string, targetId: string, profile?: Profile): any;

/** The JS executor of the machines' SQL effects (exported for tests and inspection). */
export function executeSqlEffect(db: Database, effect: { kind: string; targetId: string; [k: string]: unknown }): object;

/** The statements of the JS executor. */
export const SQL: Record<string, string>;
