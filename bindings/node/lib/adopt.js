'use strict';
/**
 * The JS executor of the adoption of the Memory Core's own JavaScript writer's tables
 * (`ai/services/memory-core/hookProjection*.mjs` of the public neomjs/neo repository). It
 * decides nothing: the addon surveys and plans (the core's `projection::adoption`, the same
 * decisions as the Rust adapter's `adopt_js_writer_tables`); this file runs the reading
 * statements and the planned statements on the host's own better-sqlite3 connection, all in
 * ONE `BEGIN IMMEDIATE` transaction — a refusal or a failure rolls everything back.
 */

/** A planned parameter as better-sqlite3 binds it (integers as BigInt: exact to 2^63 - 1). */
function bindParam(p) {
  if (p === null) return null;
  if ('int' in p) return BigInt(p.int);
  if ('text' in p) return p.text;
  return Buffer.from(p.blobHex, 'hex');
}

/**
 * Runs the adoption on `db` (inside the caller's `run.immediate()`): `{ outcome:
 * 'nothingToAdopt' | 'alreadyAdopted' }` or `{ outcome: 'converted', leases, channels }`.
 * `addon` is the package's, `answer(call)` runs a call into it (`native`); `host`:
 * `{ profile, channelsJson, tuplesJson, nowMs }` — the store's profile, its channel registry as
 * JSON (each channel's watermark kind), the attested tuples as JSON and the broker time
 * (undefined: system clock), all read from the host's objects before the transaction began.
 */
function adoptOn(db, addon, answer, host) {
  const s = answer(() => addon.adoptionStatements());
  const read = (sql, ...params) => db.prepare(sql).raw(true).all(...params);
  const [leases, channels] = s.tables;
  const { survey } = answer(() =>
    addon.adoptionSurvey(host.profile, read(s.catalog), read(s.columns, leases), read(s.columns, channels)),
  );
  if (survey !== 'jsWriterTables') return { outcome: survey };
  const plan = answer(() =>
    addon.adoptionPlan(host.nowMs, host.profile, host.channelsJson, host.tuplesJson, read(s.rows[0]), read(s.rows[1])),
  );
  for (const { sql, params } of plan.statements) db.prepare(sql).run(...params.map(bindParam));
  return { outcome: 'converted', leases: plan.leases, channels: plan.channels };
}

module.exports = { adoptOn, bindParam };
