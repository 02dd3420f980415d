/**
 * Type declarations of solewriter for Node: fenced single-writer publication of
 * `current.json`, with the two tables in the host's own better-sqlite3 database (one SQLite
 * per process). Errors are `SolewriterError`s whose `code` names the Rust error class.
 */

/** The part of a better-sqlite3 `Database` solewriter uses. */
export interface Database {
  prepare(sql: string): any;
  exec(sql: string): any;
  pragma(source: string, options?: { simple?: boolean }): any;
  transaction<F extends (...args: any[]) => any>(fn: F): F & { immediate: F };
  readonly inTransaction: boolean;
}

export type ErrorCode =
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
  | 'EPOCH_EXHAUSTED'
  | 'IO'
  | 'UNSAFE_RUNTIME_DIR'
  | 'NOT_DURABLE'
  | 'PUBLISHED_NOT_RELEASED'
  | 'RELEASE_FAILED'
  | 'SQLITE'
  | 'DOCUMENT'
  | 'NOT_PUBLISHED'
  | 'READ'
  | 'RANDOM'
  | 'INVALID_INPUT'
  | 'HOST'
  | 'ADDON_MISSING';

export interface SolewriterError extends Error {
  code: ErrorCode;
  /** For FENCED: superseded | token-mismatch | expired | released | never-granted. */
  reason?: string;
  /** For FENCED superseded: the epoch of the successor. */
  currentEpoch?: number;
}

export interface ChannelSpec {
  name: string;
  owner: string;
  envelopeSchema: string;
  maxEnvelopeBytes: number;
}

export interface StoreConfig {
  /** The host's runtime root (must exist); documents go to hook-projections/<target>/current.json. */
  runtimeRoot: string;
  channels: ChannelSpec[];
  leaseTtlMs: number;
  /** How long the per-target lock is waited for (default 5000). SQLite's own wait is the connection's `timeout`. */
  busyTimeoutMs?: number;
  /** A broker clock for tests (ms); the system clock otherwise. */
  clock?: () => number;
  /**
   * Called at each named step of a publication (transaction-open, revalidated, composed,
   * temp-written, deadline-checked, renamed, directory-synced, released), inside its
   * transaction and holding its locks: for tests (stall, crash).
   */
  probe?: (step: string, targetId: string) => void;
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
  sourceWatermark: number;
  envelopeJson: string;
  capturedAt: number;
  expiresAt: number;
}

export interface Grant {
  targetId: string;
  epoch: number;
  /** SHA-256 of the holder token, hex: the credential publish and release present. */
  tokenHash: string;
  holder: string;
  acquiredAt: number;
  expiresAt: number;
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

/** What `endLease` did (the Rust `EndOutcome`). */
export type LeaseEnd =
  | { ended: { epoch: number; holder: string; acquiredAt: number; expiresAt: number } }
  | { nothingHeld: { epoch: number; why: 'unheld' | 'released' | 'expired' } };

/** Adds the two tables to a WAL database (idempotent); refuses another shape. */
export function initialize(db: Database): 'created' | 'present';

/** What `adoptJsWriterTables` did. */
export type Adoption =
  | { outcome: 'converted'; leases: number; channels: number }
  | { outcome: 'alreadyAdopted' }
  | { outcome: 'nothingToAdopt' };

/**
 * Converts the tables of the Memory Core's own JavaScript writer into solewriter's in one
 * immediate transaction (see the README); `tuples` are the attested tuples of the host's
 * targets. Throws ADOPTION_REFUSED (with `table`, `rowid`, `column`, `problem`, or `reason`),
 * FOREIGN_SCHEMA, BUSY or IN_TRANSACTION, having changed nothing.
 */
export function adoptJsWriterTables(
  db: Database,
  tuples: TargetTuple[],
  options?: { clock?: () => number },
): Adoption;

export class ProjectionStore {
  constructor(db: Database, config: StoreConfig);
  admitTarget(tuple: TargetTuple): string;
  submit(producer: string, submission: Submission): 'inserted' | 'advanced' | 'replayed' | 'degraded';
  acquire(targetId: string, holder: string, options?: { tokenHex?: string }): { granted: Grant } | { held: HeldBy };
  publish(grant: Pick<Grant, 'targetId' | 'epoch' | 'tokenHash'>): Published;
  publishNow(targetId: string, holder: string, options?: { tokenHex?: string }): { published: Published } | { held: HeldBy };
  release(
    grant: Pick<Grant, 'targetId' | 'epoch' | 'tokenHash'>,
  ): { released: true } | { notHolder: { reason: string; currentEpoch?: number } };
  /**
   * An operator's end of the target's current grant, whoever holds it (the core's
   * `Release::end()`, as `solewriter lease end` runs it). `ended`: that grant was released at
   * its epoch — its holder's next publish is FENCED (`released`) and writes nothing, the next
   * grant gets a higher epoch. `nothingHeld`: no live grant (`why`), nothing was written.
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
      sourceWatermark: number;
      updatedAt: number;
      degradedReason: string | null;
    }>;
  };
}

/** The target id (64 hex) of an attested tuple. */
export function targetId(tuple: TargetTuple): string;

/** Reads and validates a published document. */
export function readProjection(runtimeRoot: string, targetId: string): any;

/** The JS executor of the machines' SQL effects (exported for tests and inspection). */
export function executeSqlEffect(db: Database, effect: { kind: string; targetId: string; [k: string]: unknown }): object;

/** The statements of the JS executor. */
export const SQL: Record<string, string>;
