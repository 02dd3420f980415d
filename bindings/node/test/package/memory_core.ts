// The Memory Core's writer through `solewriter/memory-core`, typed (`npm run typecheck`): the
// calls the Memory Core makes, unchanged but for the import and two configuration leaves.
import fs from 'node:fs';
import Database from 'better-sqlite3';
import { makeHookProjectionWriter, type PublishResult, type SubmissionResult } from 'solewriter/memory-core';
import { readProjection, type ProjectionStore, type Profile } from 'solewriter';

export function wire(file: string, root: string): [SubmissionResult, PublishResult] {
  const db = new Database(file);
  const writer = makeHookProjectionWriter({
    getDb: () => db,
    config: {
      hookProjectionRoot: root,
      hookProjectionLeaseTtlMs: 15000,
      hookProjectionBusyTimeoutMs: 1000,
      hookProjectionChannels: [
        { name: 'computed-route', owner: 'golden-path', envelopeSchema: 'computed-route.v1', maxEnvelopeBytes: 262144, watermark: 'instant-sequence' },
      ],
    },
    fs,
    clock: () => Date.now(),
  });
  writer.ensureSchema();
  const tuple = {
    schemaVersion: 'live-lane-awareness-projection.v1',
    capability: 'self-awareness',
    agentId: '@neo-gpt',
    harnessType: 'codex',
    instanceKeyDigest: 'instance-digest',
    workspaceKeyDigest: 'workspace-digest',
    projectionKind: 'live-lane-awareness',
  };
  const targetId: string = writer.deriveTargetId(tuple);
  const submitted = writer.submitChannel({
    tuple,
    channel: 'computed-route',
    envelope: { schemaVersion: 'computed-route.v1', targetId },
    sourceWatermark: '2026-07-28T18:29:00.000Z:1',
    capturedAt: '2026-07-28T18:29:00.000Z',
    expiresAt: '2026-07-28T18:40:00.000Z',
    isTargetAdmitted: () => true,
    mayProduceChannel: () => true,
  });
  const published = writer.publish({ tuple, consumerBinding: { status: 'attested' } });
  if (!published.published && published.reason === 'held') console.log(published.retryAfterMs);
  return [submitted, published];
}

// The store's own reading of what the writer published, typed: `readProjection` takes the
// store's profile, and `inspect()` answers a text watermark (a channel of a kind other than
// `integer`) as the string it is.

export function readBack(store: ProjectionStore, runtimeRoot: string, targetId: string): string {
  const profile: Profile = 'live-lane-awareness-projection.v1';
  const document = readProjection(runtimeRoot, targetId, profile);
  const watermark: ReturnType<ProjectionStore['inspect']>['channels'][number]['sourceWatermark'] = '2026-07-28T18:29:00.000Z:1';
  const stored = store.inspect().channels.map((c) => (typeof c.sourceWatermark === 'string' ? c.sourceWatermark : String(c.sourceWatermark)));
  return `${document.fencingEpoch} ${watermark} ${stored.join(',')}`;
}

// A test's store and root in one call (`solewriter/testing`), and a store whose documents live
// directly under a projection root of any name.
import { testStore } from 'solewriter/testing';
import { ProjectionStore as Store, type StoreConfig } from 'solewriter';

export function testBed(): string {
  const bed = testStore(Database);
  const config: StoreConfig = { hookProjectionRoot: bed.hookProjectionRoot, channels: [], leaseTtlMs: 15000, busyTimeoutMs: 1000 };
  const store = new Store(bed.db, config);
  const held = store.inspect().leases.length;
  bed.close();
  return `${bed.dir} ${held}`;
}
