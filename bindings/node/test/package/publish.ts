// One real publication through the installed package, typed: compiled with `tsc --strict`
// (tsconfig.json beside it; `npm run typecheck` checks it in the repository) and then run by
// scripts/node_package_test.sh in a scratch project: node publish.js DIR. Prints what it
// published; check.cjs reads current.json back.
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import {
  initialize,
  Grant,
  ProjectionStore,
  readProjection,
  targetId,
  type BatchResult,
  type ChannelSpec,
  type ErrorCode,
  type Published,
  type SolewriterError,
  type TargetTuple,
} from 'solewriter';

const dir: string = process.argv[2];
const db = new Database(path.join(dir, 'host.sqlite'), { timeout: 5000 });
db.pragma('journal_mode = WAL');
const created: 'created' | 'present' | 'upgraded' = initialize(db);
const runtimeRoot = path.join(dir, 'runtime');
fs.mkdirSync(runtimeRoot);
const channels: ChannelSpec[] = [
  { name: 'computed-route', owner: 'router', envelopeSchema: 'computed-route.v1', maxEnvelopeBytes: 4096 },
];
const store = new ProjectionStore(db, { runtimeRoot, channels, leaseTtlMs: 60000, busyTimeoutMs: 1000 });
const tuple: TargetTuple = {
  schemaVersion: '1',
  capability: 'hook-projection',
  agentId: 'agent-ts',
  harnessType: 'claude-code',
  instanceKeyDigest: 'inst',
  workspaceKeyDigest: 'ws',
  projectionKind: 'live-lane',
};
const target: string = store.admitTarget(tuple);
const now = Date.now();
store.submit('router', {
  targetId: target,
  channel: 'computed-route',
  sourceWatermark: 1,
  envelopeJson: '{"schema":"computed-route.v1","notAuthority":true,"route":"typescript"}',
  capturedAt: now,
  expiresAt: now + 60000,
});
const got = store.acquire(target, 'host-ts');
if (!('granted' in got)) throw new Error(`not granted: ${JSON.stringify(got)}`);
const copy: Grant = Grant.fromSecret(got.granted.exportSecret());
const published: Published = store.publish(got.granted);
try {
  store.publish(got.granted);
  throw new Error('a Grant object published twice');
} catch (e) {
  const { code }: SolewriterError = e as SolewriterError;
  if (code !== 'GRANT_SPENT') throw e;
}
try {
  store.publish(copy);
  throw new Error('a released grant published again');
} catch (e) {
  const { code, reason }: SolewriterError = e as SolewriterError;
  if (code !== 'FENCED' || reason !== 'released') throw e;
}
if (targetId(tuple) !== target || readProjection(runtimeRoot, target).fencingEpoch !== published.epoch) {
  throw new Error('targetId or readProjection disagrees');
}
db.close();
console.log(JSON.stringify({ runtimeRoot, target, published, created }));

/** Never called: what the types must refuse (tsc fails on an `@ts-expect-error` that is not needed). */
export function refused(): void {
  // @ts-expect-error a plain object is not a connection
  initialize({ prepare: () => null });
  // @ts-expect-error a file name is not a connection
  new ProjectionStore('host.sqlite', { runtimeRoot, channels, leaseTtlMs: 1, busyTimeoutMs: 1 });
  // @ts-expect-error there is no default for the lease's time to live
  new ProjectionStore(db, { runtimeRoot, channels, busyTimeoutMs: 1 });
}

/** Never called: a batch answers one `BatchResult` per target, in the order given. */
export async function batched(): Promise<Array<number | 'held' | ErrorCode>> {
  const now: BatchResult[] = store.publishManyNow([target], 'host-ts');
  const later: BatchResult[] = await store.publishManyNowAsync([target], 'host-ts', { consumerBinding: {} });
  // @ts-expect-error a batch takes an array of target ids
  store.publishManyNow(target, 'host-ts');
  return [...now, ...later].map((r) => ('published' in r ? r.published.epoch : 'held' in r ? 'held' : r.error.code));
}
