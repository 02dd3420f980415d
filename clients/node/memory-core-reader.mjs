/**
 * Memory Core hook reader, our own implementation.
 *
 * This module applies the rules of the Memory Core's Stop-hook reader to a
 * `live-lane-awareness-projection.v1` document. That is the `current.json` published by the Memory
 * Core's JavaScript writer, and solewriter publishes the same format under its "Memory Core profile".
 * The code is written here from a reading of the upstream source. It is not a copy of it, but a
 * caller sees the same behaviour:
 * - the same statuses (`rendered`, `absent`, `invalid`, `invalid-config`, `binding-mismatch`);
 * - the same diagnostics strings;
 * - the same rendered rows, byte for byte;
 * - the same row/byte budget and truncation markers.
 *
 * Upstream (public repository neomjs/neo), the versions followed:
 * - `ai/scripts/lifecycle/hookProjectionReader.mjs` at f91101982a5c6a661b5b86a053648592f1a90f7d.
 *   Its rules are the same as at 8ac193c0eaf086957f62cd71e8c21cd45f1453af; the two differ only in a
 *   JSDoc tag.
 * - The guards that reader imports:
 *   - `ai/services/graph/lifecycleFrontier.mjs` `validateLifecycleFrontier` at
 *     831b649e6c4e8c53aebe8a08c7368163f6e1aaef. This is the version that takes the reader's
 *     `{now, agentId}`, as the reader passes them. An older version, 30b5858b…, takes the frontier only.
 *   - `ai/services/graph/computedRouteResult.mjs` `validateComputedRouteResult` at
 *     cf3d2e37e042d558ee28573a6e74dc12a11f0fdd. The guard is the same at 5753297f….
 *   - `ai/graph/normalizeAgentIdentityNodeId.mjs` at edaa4a58aa7172fd93a440a317ba2fbcbaa8dd77.
 * - For the document shape: the writer, `ai/services/memory-core/hookProjectionLease.mjs`
 *   (`buildProjectionEnvelope`, `projectChannel`), at 1ae816fda6bb80b5e451bfcfe0c2b194c10bb265.
 *
 * Only the frontier-guard branches that the reader can reach are implemented. The reader always
 * passes a finite clock and a non-empty, normalized agent id, so these two branches never fire and
 * are left out:
 * - the guard's "reader validation requires now + agentId" refusal;
 * - its "reader clock … is not parseable" error.
 *
 * Reading: the file is read through one descriptor (one open, reads until end of file, one close),
 * so an atomic rename of `current.json` by a concurrent writer yields the old document or the new
 * one, never a mix of the two; upstream's single `readFileSync` has the same property. Error
 * messages are Node's own and match upstream's, e.g. `ENOENT: no such file or directory, open
 * '<path>'` for a missing file and `EISDIR: illegal operation on a directory, read` for a directory.
 *
 * Deliberate differences from upstream:
 * 1. The read is bounded. A file larger than `MAX_PROJECTION_BYTES` (64 MiB) is refused as
 *    `absent`, with the diagnostic `projection file is larger than the 67108864-byte read limit`.
 *    Upstream reads any size.
 * 2. Some hostile documents make upstream throw out of `readHookProjection`. Two examples:
 *    - a `null` route item, whose `.id` is read;
 *    - an object whose `toString` is not a function, which breaks the conversion to text.
 *    Here such a document gives `invalid`, with an empty render and one diagnostic beginning
 *    `projection could not be rendered: `. Within the size limit, every document that upstream
 *    handles without throwing gives the same result here.
 * 3. `renderHookProjection` is added. It runs the same path without the file read, taking the
 *    document as text or as an already parsed value.
 *
 * No dependencies: only `node:` built-ins. Node 20 or later.
 */

import {closeSync, fstatSync, openSync, readSync} from 'node:fs';
import {Buffer} from 'node:buffer';

/** The projection format this reader accepts. */
export const HOOK_PROJECTION_SCHEMA_VERSION = 'live-lane-awareness-projection.v1';

/** Largest `current.json` the reader will read (bytes); a larger file is `absent`. */
export const MAX_PROJECTION_BYTES = 64 * 1024 * 1024;

/** Every result carries this policy: the projection never changes hook admission. */
export const PROJECTION_POLICY = Object.freeze({admissionEffect: 'none', fallback: 'existing-bare-policy'});

const HEADER = 'Live lane awareness — source data only; informational, no admission change:';
const BUDGET_MARKER = '[projection truncated by configured byte budget]';
const ATTESTED_FIELDS = Object.freeze(
    ['targetId', 'capability', 'agentId', 'harnessType', 'instanceKeyDigest', 'workspaceKeyDigest']);

const BINDING_STATUSES = new Set(['attested', 'unverified', 'conflicted', 'stale']);
const BINDING_SCOPES = new Set(['agent-instance', 'agent', 'route-only']);
const WRAPPER_STATUSES = new Set(['fresh', 'missing', 'stale', 'degraded']);
const NO_ROW_STATUSES = new Set(['missing', 'stale', 'degraded']);

// lifecycle-frontier.v1
const FRONTIER_SCHEMA = 'lifecycle-frontier.v1';
const FRONTIER_STATUSES = ['fresh', 'empty', 'missing', 'stale', 'degraded'];
const FRONTIER_SCOPES = ['agent-instance', 'agent', 'omitted'];
/** Stage → presentation rank (a plain object: membership is an own-property test, as upstream). */
const STAGE_ORDER = Object.freeze({
    'own-pr-repair': 0,
    'own-pr-reviewer-routing': 1,
    'requested-review': 2,
    'claimed-a2a-task': 3,
    'direct-message': 4,
});
const HEAD_BOUND_STAGES = new Set(['own-pr-repair', 'own-pr-reviewer-routing', 'requested-review']);
const ITEM_TEXT_FIELDS = ['id', 'kind', 'state', 'source', 'subjectId', 'checkedAt'];

// computed-route.v1
const ROUTE_SCHEMA = 'computed-route.v1';
const ROUTE_STATUSES = ['fresh', 'empty', 'missing', 'stale', 'degraded'];
const ROUTE_KINDS = ['computed-ranked', 'current-focus-substitution', 'none'];
const ROUTE_KINDS_WITH_ITEMS = new Set(['computed-ranked', 'current-focus-substitution']);

// ---------------------------------------------------------------------------------------------
// Value helpers

/** A non-null, non-array object. */
const isRecord = value => value !== null && typeof value === 'object' && !Array.isArray(value);

/** A string with at least one non-whitespace character. */
const hasText = value => typeof value === 'string' && value.trim() !== '';

/** A string of length ≥ 1 (whitespace counts): the route/frontier guards' notion. */
const isFilledString = value => typeof value === 'string' && value.length > 0;

/** Epoch milliseconds of a Date, a finite number or a parseable string; NaN otherwise. */
function epochOf(value) {
    if (value instanceof Date) return value.getTime();
    if (typeof value === 'number') return Number.isFinite(value) ? value : NaN;
    if (typeof value === 'string') return Date.parse(value);
    return NaN;
}

/** A parseable ISO-ish string (the frontier guard's timestamp test). */
const isParseableStamp = value => typeof value === 'string' && !Number.isNaN(Date.parse(value));

/**
 * Projection text made safe for one hook line: every run of control characters becomes a space,
 * every run of whitespace becomes one space, and the ends are trimmed.
 */
function flatten(value) {
    return String(value ?? '')
        .replace(/[\u0000-\u001f\u007f]+/g, ' ')
        .replace(/\s+/g, ' ')
        .trim();
}

/** External text rendered as a JSON string literal, so it reads as data. */
const quoted = value => JSON.stringify(flatten(value));

const byteLength = text => Buffer.byteLength(text, 'utf8');

// ---------------------------------------------------------------------------------------------
// Results

function emptyResult(status, diagnostics) {
    return {
        status,
        render: '',
        policy: PROJECTION_POLICY,
        rowsRendered: 0,
        rowsOmitted: 0,
        truncated: false,
        diagnostics: [...diagnostics],
    };
}

function renderedResult(status, diagnostics, bounded) {
    return {status, policy: PROJECTION_POLICY, diagnostics, ...bounded};
}

// ---------------------------------------------------------------------------------------------
// Inputs from the hook's config boundary

/** `{budget}` when both limits are positive integers, else `{problem}`. */
function checkBudget(budget) {
    if (!isRecord(budget)) return {problem: 'budget must be a plain object'};
    const {maxRows, maxBytes} = budget;
    if (!(Number.isInteger(maxRows) && maxRows > 0)) {
        return {problem: 'budget.maxRows must be a positive integer from config'};
    }
    if (!(Number.isInteger(maxBytes) && maxBytes > 0)) {
        return {problem: 'budget.maxBytes must be a positive integer from config'};
    }
    return {budget: {maxRows, maxBytes}};
}

/**
 * The reader-side checks, in upstream's order: budget, then (for a file read) the path, then the
 * attested binding, its six fields, and the clock. Returns `{refusal}` or `{budget, clock}`.
 */
function checkInputs({attestedBinding, budget, now}, projectionPath, withPath) {
    const checked = checkBudget(budget);
    if (checked.problem) return {refusal: emptyResult('invalid-config', [checked.problem])};
    if (withPath && !hasText(projectionPath)) {
        return {refusal: emptyResult('absent', ['projection path is not configured'])};
    }
    if (!isRecord(attestedBinding)) {
        return {refusal: emptyResult('invalid-config', ['attested binding is not configured'])};
    }
    const missing = ATTESTED_FIELDS.filter(field => !hasText(attestedBinding[field]));
    if (missing.length) {
        return {refusal: emptyResult('invalid-config', [`attested binding missing ${missing.join(', ')}`])};
    }
    const clock = epochOf(now);
    if (!Number.isFinite(clock)) {
        return {refusal: emptyResult('invalid-config', ['reader clock is not parseable'])};
    }
    return {budget: checked.budget, clock};
}

// ---------------------------------------------------------------------------------------------
// The file: one descriptor, bounded

const messageOf = error => (error instanceof Error ? error.message : String(error));

/**
 * Reads the whole file through one descriptor, at most `MAX_PROJECTION_BYTES + 1` bytes.
 * Returns `{text}` (decoded as UTF-8, as `readFileSync(path, 'utf8')` would) or `{problem}`.
 */
function readBounded(projectionPath) {
    const tooLarge = {problem: `projection file is larger than the ${MAX_PROJECTION_BYTES}-byte read limit`};
    let fd;
    try {
        fd = openSync(projectionPath, 'r');
        const declared = fstatSync(fd).size;
        if (declared > MAX_PROJECTION_BYTES) return tooLarge;
        // One byte past the declared size, so a file that is longer than stat said is still read whole.
        const ceiling = MAX_PROJECTION_BYTES + 1;
        let buffer = Buffer.allocUnsafe(Math.min(ceiling, declared + 1));
        let filled = 0;
        for (;;) {
            if (filled === buffer.length) {
                if (buffer.length === ceiling) break;
                const larger = Buffer.allocUnsafe(Math.min(ceiling, buffer.length * 2));
                buffer.copy(larger, 0, 0, filled);
                buffer = larger;
            }
            const count = readSync(fd, buffer, filled, buffer.length - filled, null);
            if (count === 0) break;
            filled += count;
        }
        if (filled > MAX_PROJECTION_BYTES) return tooLarge;
        return {text: buffer.toString('utf8', 0, filled)};
    } catch (error) {
        return {problem: messageOf(error)};
    } finally {
        if (fd !== undefined) {
            try {
                closeSync(fd);
            } catch {
                // The bytes are already in hand; a failed close changes nothing the reader reports.
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The projection document

/** Every document-level error, in upstream's order; an empty list means the shape holds. */
function documentErrors(doc, attested) {
    if (!isRecord(doc)) return ['projection is not a plain object'];
    const errors = [];
    if (doc.schemaVersion !== HOOK_PROJECTION_SCHEMA_VERSION) {
        errors.push(`schemaVersion must be ${HOOK_PROJECTION_SCHEMA_VERSION}`);
    }
    if (doc.notAuthority !== true) errors.push('notAuthority must be true');

    const pub = doc.publication;
    if (!isRecord(pub)) {
        errors.push('publication is required');
    } else {
        if (!hasText(pub.targetId) || pub.targetId !== attested.targetId) {
            errors.push(`publication.targetId does not match trusted target ${quoted(attested.targetId)}`);
        }
        const epoch = Number(pub.fencingEpoch);
        if (!(Number.isInteger(epoch) && epoch >= 1)) {
            errors.push('publication.fencingEpoch must be a positive integer');
        }
        if (!Number.isFinite(epochOf(pub.generatedAt))) {
            errors.push('publication.generatedAt must be a parseable time');
        }
        const marks = pub.producerWatermarks;
        if (!isRecord(marks) || !Object.values(marks).every(hasText)) {
            errors.push('publication.producerWatermarks must be a string-valued object');
        }
    }

    if (!isRecord(doc.consumerBinding)) errors.push('consumerBinding is required');
    if (!Array.isArray(doc.contextViews)) errors.push('contextViews must be an array');

    const coverage = doc.coverage;
    const coverageOk = isRecord(coverage) && Array.isArray(coverage.sources) &&
        Array.isArray(coverage.degradedSources) &&
        [...coverage.sources, ...coverage.degradedSources].every(entry => typeof entry === 'string');
    if (!coverageOk) errors.push('coverage must carry string-valued sources and degradedSources arrays');
    return errors;
}

// ---------------------------------------------------------------------------------------------
// Consumer binding

/** Upstream's agent-identity canonical form: trimmed, one leading `@`, `ns:` ids left as they are. */
function canonicalAgent(identity) {
    if (typeof identity !== 'string') return identity;
    const trimmed = identity.trim();
    if (trimmed === '' || trimmed.includes(':')) return trimmed;
    return `@${trimmed.replace(/^@+/, '')}`;
}

/**
 * How far the published binding lets this reader go: `lifecycle` (its own rows), `route-only`
 * (the global route but no lifecycle), or `foreign` (nothing). A binding that claims agent scope
 * for another recipient is foreign; one that declares `route-only` may still differ.
 */
function bindingMode(binding, attested, clock) {
    const problems = [];
    if (!hasText(binding.capability)) problems.push('capability missing');
    if (!hasText(binding.agentId)) problems.push('agentId missing');
    if (!hasText(binding.harnessType)) problems.push('harnessType missing');
    if (!BINDING_STATUSES.has(binding.status)) problems.push(`unsupported status ${quoted(binding.status)}`);
    if (!BINDING_SCOPES.has(binding.scopeResolution)) {
        problems.push(`unsupported scopeResolution ${quoted(binding.scopeResolution)}`);
    }
    if (!(isRecord(binding.provenance) && hasText(binding.provenance.producer))) {
        problems.push('provenance.producer missing');
    }
    const conflicts = Array.isArray(binding.conflicts) ? binding.conflicts : null;
    if (!conflicts) problems.push('conflicts must be an array');
    const asserted = epochOf(binding.assertedAt);
    const expires = epochOf(binding.expiresAt);
    if (!Number.isFinite(asserted)) problems.push('assertedAt is not parseable');
    if (!Number.isFinite(expires)) problems.push('expiresAt is not parseable');
    if (Number.isFinite(asserted) && Number.isFinite(expires) && !(expires > asserted)) {
        problems.push('expiresAt is not after assertedAt');
    }

    const publishedAgent = canonicalAgent(binding.agentId);
    const readerAgent = canonicalAgent(attested.agentId);
    const differences = [];
    if (binding.capability !== attested.capability) {
        differences.push(`capability ${quoted(binding.capability)} != ${quoted(attested.capability)}`);
    }
    if (publishedAgent !== readerAgent) {
        differences.push(`agentId ${quoted(publishedAgent)} != ${quoted(readerAgent)}`);
    }
    if (binding.harnessType !== attested.harnessType) {
        differences.push(`harnessType ${quoted(binding.harnessType)} != ${quoted(attested.harnessType)}`);
    }
    if (binding.workspaceKeyDigest !== attested.workspaceKeyDigest) differences.push('workspaceKeyDigest differs');
    if (binding.scopeResolution !== 'agent' && binding.instanceKeyDigest !== attested.instanceKeyDigest) {
        differences.push('instanceKeyDigest differs');
    }

    const routeOnlyDeclared = binding.scopeResolution === 'route-only';
    if (!routeOnlyDeclared && differences.length) {
        return {mode: 'foreign', reason: `consumer binding mismatch: ${differences.join('; ')}`};
    }

    const expired = Number.isFinite(expires) && expires <= clock;
    const conflicted = conflicts !== null && conflicts.length > 0;
    if (routeOnlyDeclared || binding.status !== 'attested' || expired || problems.length || conflicted) {
        const parts = [];
        if (binding.status && binding.status !== 'attested') parts.push(`status ${binding.status}`);
        if (expired) parts.push(`binding expired at ${binding.expiresAt}`);
        if (conflicted) parts.push(`conflicted (${conflicts.map(entry => flatten(entry)).join(', ')})`);
        parts.push(...problems, ...differences);
        return {mode: 'route-only', reason: parts.length ? parts.join('; ') : 'binding resolved route-only'};
    }
    return {mode: 'lifecycle', reason: 'attested categorical recipient'};
}

// ---------------------------------------------------------------------------------------------
// Channel wrappers (the writer's per-channel slots)

const unusable = (status, reason) => ({usable: false, status, reason});

/**
 * Checks one channel slot on its own: status, provenance watermark against the publication,
 * citations, capture/expiry window, expiry at the reader's clock, and a typed envelope.
 */
function checkSlot(slot, clock, publishedWatermark) {
    if (!isRecord(slot)) return unusable('missing', 'channel wrapper missing');
    if (!WRAPPER_STATUSES.has(slot.status)) return unusable('degraded', `unsupported channel status ${quoted(slot.status)}`);
    if (slot.status !== 'fresh') {
        return unusable(slot.status, flatten(slot.degradedReason) || `channel status ${slot.status}`);
    }
    if (!hasText(slot.sourceWatermark)) return unusable('degraded', 'channel provenance watermark missing');
    if (!hasText(publishedWatermark) || slot.sourceWatermark !== publishedWatermark) {
        return unusable('degraded', 'channel provenance watermark does not match publication');
    }
    if (!Array.isArray(slot.citations) || !slot.citations.every(entry => typeof entry === 'string')) {
        return unusable('degraded', 'channel citations provenance is invalid');
    }
    const captured = epochOf(slot.capturedAt);
    const expires = epochOf(slot.expiresAt);
    if (!Number.isFinite(captured) || !Number.isFinite(expires) || !(expires > captured)) {
        return unusable('degraded', 'channel capture/expiry window is invalid');
    }
    if (expires <= clock) return unusable('stale', `channel expired at ${slot.expiresAt}`);
    if (!isRecord(slot.envelope)) return unusable('degraded', 'typed channel envelope missing');
    return {usable: true, status: 'fresh', reason: '', envelope: slot.envelope};
}

// ---------------------------------------------------------------------------------------------
// lifecycle-frontier.v1 at read time (the guard upstream calls with the reader's now + agent)

function frontierItemErrors(item, index, errors) {
    const at = `items[${index}]`;
    if (!Object.hasOwn(STAGE_ORDER, item?.stage)) errors.push(`${at}.stage is not a known lifecycle stage`);
    for (const field of ITEM_TEXT_FIELDS) {
        if (!isFilledString(item?.[field])) errors.push(`${at}.${field} is required`);
    }
    if (!isParseableStamp(item?.actionableSince)) errors.push(`${at}.actionableSince must be a parseable ISO timestamp`);
    if (HEAD_BOUND_STAGES.has(item?.stage) && !isFilledString(item?.headSha)) {
        errors.push(`${at}.headSha is required for the PR-derived stage "${item?.stage}"`);
    }
    if (!Array.isArray(item?.citations)) {
        errors.push(`${at}.citations must be an array`);
    } else if (!item.citations.every(entry => typeof entry === 'string')) {
        errors.push(`${at}.citations must contain only strings`);
    }
}

/** The frontier contract's order: stage rank, oldest `actionableSince`, then id. */
function inContractOrder(items) {
    const sorted = [...items].sort((left, right) =>
        (STAGE_ORDER[left?.stage] - STAGE_ORDER[right?.stage]) ||
        (Date.parse(left?.actionableSince) - Date.parse(right?.actionableSince)) ||
        String(left?.id).localeCompare(String(right?.id)));
    return sorted.every((item, index) => item === items[index]);
}

function frontierErrors(frontier, clock, agentId) {
    if (!isRecord(frontier)) return ['frontier is not a plain object'];
    const errors = [];
    if (frontier.schemaVersion !== FRONTIER_SCHEMA) errors.push(`schemaVersion must be "${FRONTIER_SCHEMA}"`);
    if (!FRONTIER_STATUSES.includes(frontier.status)) errors.push(`status must be one of ${FRONTIER_STATUSES.join(', ')}`);
    if (frontier.notAuthority !== true) errors.push('notAuthority must be true');
    for (const field of ['capturedAt', 'expiresAt']) {
        if (!isParseableStamp(frontier[field])) errors.push(`${field} must be a parseable ISO timestamp`);
    }
    if (!isFilledString(frontier.sourceWatermark)) errors.push('sourceWatermark is required');
    if (isParseableStamp(frontier.capturedAt) && isParseableStamp(frontier.expiresAt) &&
        !(Date.parse(frontier.expiresAt) > Date.parse(frontier.capturedAt))) {
        errors.push(`expiresAt ${frontier.expiresAt} is not after capturedAt ${frontier.capturedAt}`);
    }

    const scope = frontier.scope;
    if (!isRecord(scope)) {
        errors.push('scope is required');
    } else if (!FRONTIER_SCOPES.includes(scope.resolution)) {
        errors.push(`scope.resolution must be one of ${FRONTIER_SCOPES.join(', ')}`);
    } else if (scope.resolution !== 'omitted') {
        if (!isFilledString(scope.agentId)) {
            errors.push('an attested scope must carry a non-empty agentId');
        } else if (scope.agentId !== agentId) {
            errors.push(`frontier is scoped to ${scope.agentId}, not the consuming agent ${agentId}`);
        }
    }

    if (isParseableStamp(frontier.expiresAt) && Date.parse(frontier.expiresAt) <= clock) {
        errors.push(`frontier expired at ${frontier.expiresAt}`);
    }

    const coverage = frontier.coverage;
    if (!isRecord(coverage)) {
        errors.push('coverage is required');
    } else {
        for (const field of ['sources', 'degradedSources']) {
            const list = coverage[field];
            if (!Array.isArray(list)) errors.push(`coverage.${field} must be an array`);
            else if (!list.every(entry => typeof entry === 'string')) errors.push(`coverage.${field} must contain only strings`);
        }
        if (Array.isArray(coverage.degradedSources)) {
            const namesDegraded = coverage.degradedSources.length > 0;
            if (namesDegraded && frontier.status !== 'degraded') {
                errors.push(`status is "${frontier.status}" while coverage names degraded sources`);
            }
            if (!namesDegraded && frontier.status === 'degraded') {
                errors.push('status is "degraded" while coverage names no degraded source');
            }
        }
    }

    if (!Array.isArray(frontier.items)) {
        errors.push('items must be an array');
    } else {
        const items = frontier.items;
        if (scope?.resolution === 'omitted' && items.length) errors.push('an omitted scope must carry zero items');
        items.forEach((item, index) => frontierItemErrors(item, index, errors));
        if (!inContractOrder(items)) {
            errors.push('items are not in contract order (stage, then actionableSince oldest-first, then id)');
        }
    }
    return errors;
}

function lifecycleRows(slot, attested, clock, binding, publishedWatermark) {
    if (binding.mode !== 'lifecycle') return [`Lifecycle unavailable — ${flatten(binding.reason)}`];
    const checked = checkSlot(slot, clock, publishedWatermark);
    if (!checked.usable) return [`Lifecycle ${checked.status} — ${flatten(checked.reason)}`];

    const frontier = checked.envelope;
    const errors = frontierErrors(frontier, clock, canonicalAgent(attested.agentId));
    if (errors.length) {
        const joined = errors.join('; ');
        return [`Lifecycle ${/expired at/.test(joined) ? 'stale' : 'degraded'} — ${flatten(joined)}`];
    }
    if (!Array.isArray(frontier.coverage?.sources) || frontier.coverage.sources.length === 0) {
        return ['Lifecycle degraded — channel provenance names no source'];
    }
    if (frontier.sourceWatermark !== slot.sourceWatermark) {
        return ['Lifecycle degraded — typed envelope watermark does not match channel provenance'];
    }
    if (NO_ROW_STATUSES.has(frontier.status)) {
        return [`Lifecycle ${frontier.status} — no response-required rows rendered (as of ${frontier.capturedAt})`];
    }
    if (frontier.status === 'empty' || frontier.items.length === 0) {
        return [`Lifecycle empty — no response-required rows (as of ${frontier.capturedAt})`];
    }
    const asOf = flatten(frontier.capturedAt);
    return frontier.items.map(item =>
        `Lifecycle ${flatten(item.id)} [${flatten(item.stage)}/${flatten(item.state)}] ${flatten(item.subjectId)}` +
        ` — actionable since ${flatten(item.actionableSince)} (as of ${asOf})`);
}

// ---------------------------------------------------------------------------------------------
// computed-route.v1 at read time

function routeShapeErrors(route) {
    if (!isRecord(route)) return ['result is not a plain object'];
    const errors = [];
    if (route.schemaVersion !== ROUTE_SCHEMA) {
        errors.push(`schemaVersion must be "${ROUTE_SCHEMA}"; got ${JSON.stringify(route.schemaVersion)}`);
    }
    if (!ROUTE_STATUSES.includes(route.status)) errors.push(`status must be one of ${ROUTE_STATUSES.join(', ')}`);
    if (route.notAuthority !== true) errors.push('notAuthority must be true');
    const body = route.route;
    if (!isRecord(body)) {
        errors.push('route must be a plain object');
    } else {
        if (!ROUTE_KINDS.includes(body.kind)) errors.push(`route.kind must be one of ${ROUTE_KINDS.join(', ')}`);
        if (!Array.isArray(body.items)) {
            errors.push('route.items must be an array');
        } else if (body.kind === 'none' && body.items.length) {
            errors.push('route.kind "none" must carry zero route.items');
        } else if (ROUTE_KINDS_WITH_ITEMS.has(body.kind) && !body.items.length) {
            errors.push(`route.kind "${body.kind}" must carry at least one route.item`);
        }
    }
    for (const field of ['routeVersion', 'sourceManifestHash', 'sourceWatermark']) {
        if (!isFilledString(route[field])) errors.push(`${field} (route identity) must be a non-empty string`);
    }
    return errors;
}

/** `null` when the route may render, else `{status, reason}`. */
function routeRefusal(route, clock) {
    const errors = routeShapeErrors(route);
    if (errors.length) return {status: 'degraded', reason: errors.join('; ')};
    if (!(isRecord(route.provenance) && hasText(route.provenance.producer))) {
        return {status: 'degraded', reason: 'provenance.producer missing'};
    }
    const captured = epochOf(route.capturedAt);
    const expires = epochOf(route.expiresAt);
    if (!Number.isFinite(captured) || !Number.isFinite(expires) || !(expires > captured)) {
        return {status: 'degraded', reason: 'route capture/expiry window is invalid'};
    }
    if (expires <= clock || route.status === 'stale' || route.freshness?.status === 'stale') {
        return {status: 'stale', reason: `route expired or declared stale at ${route.expiresAt}`};
    }
    if (!(isRecord(route.freshness) && route.freshness.status === 'fresh')) {
        return {status: 'degraded', reason: 'route freshness is not fresh'};
    }
    return null;
}

function routeRows(slot, clock, publishedWatermark) {
    const checked = checkSlot(slot, clock, publishedWatermark);
    if (!checked.usable) return [`Route ${checked.status} — ${flatten(checked.reason)}`];

    const route = checked.envelope;
    const refusal = routeRefusal(route, clock);
    if (refusal) return [`Route ${refusal.status} — ${flatten(refusal.reason)}`];
    if (route.sourceWatermark !== slot.sourceWatermark) {
        return ['Route degraded — typed envelope watermark does not match channel provenance'];
    }
    if (NO_ROW_STATUSES.has(route.status)) {
        return [`Route ${route.status} — no ranked rows rendered (as of ${route.capturedAt})`];
    }
    const version = flatten(route.routeVersion);
    const asOf = flatten(route.capturedAt);
    if (route.status === 'empty' || route.route.items.length === 0) {
        const advisory = route.advisoryFallback?.items;
        const count = Array.isArray(advisory) ? advisory.length : 0;
        return [`Route ${version} empty (as of ${asOf}); declared-intent advisory remains non-executable` +
            ` (${count} ${count === 1 ? 'item' : 'items'})`];
    }
    return route.route.items.map((item, index) =>
        `Route ${version} #${index + 1} ${flatten(item.id)} — ${quoted(item.title)}` +
        ` (as of ${asOf}; advisory, no automatic action)`);
}

// ---------------------------------------------------------------------------------------------
// Context-view references

function contextViewRow(entry, clock, watermarks) {
    if (!isRecord(entry) || !hasText(entry.channel) || !entry.channel.startsWith('context-view:') ||
        !Object.hasOwn(entry, 'envelope')) {
        return 'Context view degraded — invalid channel wrapper';
    }
    const checked = checkSlot(entry, clock, watermarks[entry.channel]);
    if (!checked.usable) return `Context view ${checked.status} — ${flatten(checked.reason)}`;
    const view = checked.envelope;
    const wellFormed = isRecord(view) && hasText(view.operationId) && hasText(view.schemaVersion) &&
        hasText(view.targetScope) && isRecord(view.presetArgs) && hasText(view.capabilityStatus) &&
        hasText(view.purpose);
    if (!wellFormed) return 'Context view degraded — invalid invocation reference';
    const operation = flatten(view.operationId);
    if (view.capabilityStatus !== 'available') {
        return `Context view ${operation} unavailable — capability ${flatten(view.capabilityStatus)}`;
    }
    return `Context view ${operation} — ${quoted(view.purpose)} (invoke explicitly; scope ${flatten(view.targetScope)})`;
}

// ---------------------------------------------------------------------------------------------
// Budget

function truncationNote(omitted) {
    return `\n[projection truncated: ${omitted} ${omitted === 1 ? 'row' : 'rows'} omitted by configured row/byte budget]`;
}

/**
 * Header plus at most `maxRows` rows, then rows dropped from the end until the text (with its
 * truncation note) fits `maxBytes` UTF-8 bytes. If even the header and note do not fit, the bare
 * budget marker stands in, or nothing when that does not fit either.
 */
function boundRows(rows, {maxRows, maxBytes}) {
    if (rows.length === 0) return {render: '', rowsRendered: 0, rowsOmitted: 0, truncated: false};
    let kept = Math.min(rows.length, maxRows);
    const compose = () => {
        const omitted = rows.length - kept;
        return `${HEADER}\n${rows.slice(0, kept).join('\n')}${omitted > 0 ? truncationNote(omitted) : ''}`;
    };
    let render = compose();
    while (kept > 0 && byteLength(render) > maxBytes) {
        kept -= 1;
        render = compose();
    }
    if (byteLength(render) > maxBytes) {
        const fallback = byteLength(BUDGET_MARKER) <= maxBytes ? BUDGET_MARKER : '';
        return {render: fallback, rowsRendered: 0, rowsOmitted: rows.length, truncated: true};
    }
    const omitted = rows.length - kept;
    return {render, rowsRendered: kept, rowsOmitted: omitted, truncated: omitted > 0};
}

// ---------------------------------------------------------------------------------------------
// Evaluation of a parsed document

function evaluate(doc, attested, budget, clock) {
    const errors = documentErrors(doc, attested);
    if (errors.length) return emptyResult('invalid', errors);

    const binding = bindingMode(doc.consumerBinding, attested, clock);
    if (binding.mode === 'foreign') {
        const rows = [`Lifecycle unavailable — ${flatten(binding.reason)}; projection enrichment withheld`];
        return renderedResult('binding-mismatch', [binding.reason], boundRows(rows, budget));
    }

    const watermarks = doc.publication.producerWatermarks;
    const rows = [
        ...lifecycleRows(doc.lifecycleActions, attested, clock, binding, watermarks['lifecycle-frontier']),
        ...routeRows(doc.computedRoute, clock, watermarks['computed-route']),
    ];
    for (const entry of doc.contextViews) rows.push(contextViewRow(entry, clock, watermarks));
    const bounded = boundRows(rows, budget);
    return renderedResult(bounded.render ? 'rendered' : 'invalid', [], bounded);
}

function evaluateSafely(doc, attested, budget, clock) {
    try {
        return evaluate(doc, attested, budget, clock);
    } catch (error) {
        // Upstream throws here (deliberate difference 2 at the top); this reader stays total.
        return emptyResult('invalid', [`projection could not be rendered: ${messageOf(error)}`]);
    }
}

function parseText(text) {
    try {
        return {doc: JSON.parse(text)};
    } catch (error) {
        return {problem: messageOf(error)};
    }
}

// ---------------------------------------------------------------------------------------------
// Public API

/**
 * Reads one `current.json` and renders it for a Stop hook.
 *
 * @param {Object} params
 * @param {String} params.projectionPath The trusted local `current.json` path.
 * @param {Object} params.attestedBinding `{targetId, capability, agentId, harnessType,
 *   instanceKeyDigest, workspaceKeyDigest}` from the hook's own config.
 * @param {{maxRows: Number, maxBytes: Number}} params.budget Positive integers; no defaults.
 * @param {Date|Number|String} params.now The reader's clock.
 * @returns {{status: String, render: String, policy: Object, rowsRendered: Number,
 *   rowsOmitted: Number, truncated: Boolean, diagnostics: String[]}}
 */
export function readHookProjection({projectionPath, attestedBinding, budget, now} = {}) {
    const inputs = checkInputs({attestedBinding, budget, now}, projectionPath, true);
    if (inputs.refusal) return inputs.refusal;
    const read = readBounded(projectionPath);
    if (read.problem !== undefined) return emptyResult('absent', [read.problem]);
    const parsed = parseText(read.text);
    if (parsed.problem !== undefined) return emptyResult('absent', [parsed.problem]);
    return evaluateSafely(parsed.doc, attestedBinding, inputs.budget, inputs.clock);
}

/**
 * `readHookProjection` without the file: `document` is the document's text (a string, or bytes
 * decoded as UTF-8) or an already parsed value. Unparseable text is `absent`, as an unparseable
 * file is.
 */
export function renderHookProjection({document, attestedBinding, budget, now} = {}) {
    const inputs = checkInputs({attestedBinding, budget, now}, undefined, false);
    if (inputs.refusal) return inputs.refusal;
    let doc = document;
    if (typeof document === 'string' || document instanceof Uint8Array) {
        const text = typeof document === 'string' ? document : Buffer.from(document).toString('utf8');
        const parsed = parseText(text);
        if (parsed.problem !== undefined) return emptyResult('absent', [parsed.problem]);
        doc = parsed.doc;
    }
    return evaluateSafely(doc, attestedBinding, inputs.budget, inputs.clock);
}

/**
 * Maps the hook's resolved `stopHook.projection` config subtree (`path`, the six attested fields,
 * `maxRows`, `maxBytes`) onto `readHookProjection`.
 */
export function readConfiguredHookProjection({config, now} = {}) {
    return readHookProjection({
        projectionPath: config?.path,
        attestedBinding: {
            targetId: config?.targetId,
            capability: config?.capability,
            agentId: config?.agentId,
            harnessType: config?.harnessType,
            instanceKeyDigest: config?.instanceKeyDigest,
            workspaceKeyDigest: config?.workspaceKeyDigest,
        },
        budget: {maxRows: config?.maxRows, maxBytes: config?.maxBytes},
        now,
    });
}

/** The directive, followed by a blank line and the render when the render has any text. */
export function appendHookProjection(directive, render) {
    return hasText(render) ? `${directive}\n\n${render}` : directive;
}
