/**
 * Types of `solewriter/memory-core`: the Memory Core's own writer surface
 * (`makeHookProjectionWriter` of its `hookProjectionWriter.mjs`) on a solewriter store of the
 * Memory Core profile.
 */
import type { ChannelSpec, Database, TargetTuple } from 'solewriter';

/** The Memory Core's profile. */
export const PROFILE: 'live-lane-awareness-projection.v1';

/** The tuple fields a target id is derived from, in order. */
export const TARGET_TUPLE_FIELDS: readonly string[];

/** The 32-hex target id of an attested tuple (TypeError naming the missing fields). */
export function deriveTargetId(tuple: TargetTuple): string;

/** The writer's configuration leaves; none has a default. */
export interface HookProjectionWriterConfig {
  /**
   * The directory, of any name, holding `<targetId>/current.json`: its missing ancestors are made
   * (mode 0700) when the writer is made, itself at the first publication.
   */
  hookProjectionRoot: string;
  /** The lease's time to live (ms, an integer). */
  hookProjectionLeaseTtlMs: number;
  /** How long a publication waits for the target's lock (ms, an integer). */
  hookProjectionBusyTimeoutMs: number;
  /** The channel registry: each channel's owning producer, envelope schema, size bound and watermark kind. */
  hookProjectionChannels: ChannelSpec[];
}

export interface SubmitChannelParams {
  tuple: TargetTuple;
  channel: string;
  envelope: { schemaVersion: string } & Record<string, unknown>;
  sourceWatermark: string;
  capturedAt: string;
  expiresAt: string;
  isTargetAdmitted: (targetId: string) => boolean;
  mayProduceChannel: (params: { targetId: string; channel: string }) => boolean;
}

export type SubmissionResult =
  | { accepted: true; outcome: 'advanced' | 'replayed' }
  | {
      accepted: false;
      outcome: 'source-conflict' | 'regressed-watermark' | 'target-not-admitted' | 'foreign-producer' | 'unknown-channel' | 'schema-mismatch';
      reason: string;
    };

export type PublishResult =
  | { published: true; channels: number; targetId: string; epoch: number }
  | { published: false; reason: 'held'; retryAfterMs: number; targetId: string }
  | {
      published: false;
      reason: 'superseded-epoch' | 'foreign-token' | 'lease-expired' | 'not-held' | 'lease-expired-at-write' | `write-failed: ${string}`;
      targetId: string;
      epoch?: number;
    };

export interface HookProjectionWriter {
  deriveTargetId(tuple: TargetTuple): string;
  /** Adopts the JavaScript writer's tables (first boot after the switch), then initializes; idempotent. */
  ensureSchema(): {
    schema: 'created' | 'present' | 'upgraded';
    adoption: 'converted' | 'alreadyAdopted' | 'nothingToAdopt';
  };
  submitChannel(params: SubmitChannelParams): SubmissionResult;
  publish(params: { tuple: TargetTuple; consumerBinding: Record<string, unknown> }): PublishResult;
}

/**
 * The writer, on solewriter. TypeError when `getDb` or a config leaf is missing or malformed;
 * INVALID_CONFIG (an `Error` with a `code`) when a leaf holds a value the store refuses, or `fs`
 * is not Node's — the whole configuration is checked here, before anything touches the store.
 */
export function makeHookProjectionWriter(params: {
  getDb: () => Database | null | undefined;
  config: HookProjectionWriterConfig;
  /** Node's own `node:fs`, or absent: solewriter does its own file I/O, and refuses a substitute (INVALID_CONFIG). */
  fs?: typeof import('node:fs');
  /** The broker clock (ms), read at every clock step of a publication; the system clock when absent. */
  clock?: () => number;
}): HookProjectionWriter;
