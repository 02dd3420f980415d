/**
 * Types of `solewriter/testing`: a test's WAL database and projection root in a temporary
 * directory of its own.
 */
import type { Database } from 'solewriter';

export interface TestStore {
  /** The temporary directory (mode 0700) holding the database and the projection root. */
  dir: string;
  /** The database, opened as the Memory Core opens its store: WAL, busy_timeout 5000, foreign_keys ON. */
  db: Database;
  dbPath: string;
  /** `<dir>/hook-projections`, for the Memory Core writer's `hookProjectionRoot` (made at the first publication). */
  hookProjectionRoot: string;
  /** `dir`, for a `ProjectionStore`'s `runtimeRoot`. */
  runtimeRoot: string;
  /** Closes the database and removes the directory; idempotent. */
  close(): void;
}

/** A WAL database and a projection root in a new temporary directory. `Database`: better-sqlite3's constructor. */
export function testStore(Database: new (file: string) => Database, options?: { prefix?: string }): TestStore;
