'use strict';
/**
 * The subtree write guard for Node hosts (seed 002, in the seed's own shapes): Bridge frame
 * parsing, `admitWrite({ context, componentId, parentOf, writeGuard })` answering `{ admitted,
 * reason, conflict }`, and the per-heap `WriteGuard` (held locks and the disconnect sweep). The
 * decisions are the Rust core's (`core/src/subtree`), run by the addon; nothing here decides.
 *
 * `parentOf(id)` is the host's tree: it returns the parent's id, `null` at a root, or
 * `undefined` for an id not in the tree (which denies `unresolvable-target`). A `parentOf` that
 * throws (or returns anything else) fails the call with HOST, and nothing is acquired: the path
 * is derived before any lock is asked. Every call is synchronous and never blocks: locks have
 * no wait — an overlapping write of another writer is denied at once.
 */

const { coded, native } = require('./answer');
const { readHost, fieldsOf, jsonText } = require('./copy');

/** The JSON text of `value` for the addon, or INVALID_INPUT naming `what`. */
function json(value, what) {
  const text = jsonText(value, what);
  if (text === undefined) throw coded('INVALID_INPUT', `${what} is not JSON (not representable)`);
  return text;
}

/** The frame as JSON text: a string as it is, bytes (a socket's Buffer) as UTF-8, an object serialized. */
function frameText(frame) {
  if (typeof frame === 'string') return frame;
  if (readHost('the frame', () => frame instanceof Uint8Array)) {
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(frame);
    } catch {
      throw coded('MALFORMED_FRAME', 'the frame is not UTF-8 text');
    }
  }
  return json(frame, 'the frame');
}

/**
 * The context as the addon reads it: only null and undefined are a legacy frame's; an object's
 * string ids are read from its own fields (anything else there is absent: half-stamped); any
 * other value is a present but malformed context, which admission denies `incomplete-identity`
 * — never legacy, whatever its JSON form would be (`NaN`, an object whose `toJSON` answers null).
 */
function contextText(context) {
  if (context === null || context === undefined) return 'null';
  if (typeof context !== 'object' || Array.isArray(context)) return '"malformed"';
  const { agentId, sessionId } = fieldsOf(context, ['agentId', 'sessionId'], 'the context');
  const id = (value) => (typeof value === 'string' ? value : null);
  return JSON.stringify({ agentId: id(agentId), sessionId: id(sessionId) });
}

/** The fields of the request object of an admission, each read once, or INVALID_INPUT. */
function requestOf(request, what, fields) {
  if (request === null || typeof request !== 'object') throw coded('INVALID_INPUT', `${what} takes one object`);
  return fieldsOf(request, fields, `${what}: the request`);
}

function requireFunction(parentOf) {
  if (typeof parentOf !== 'function') throw coded('INVALID_INPUT', 'parentOf must be a function (id) => parentId | null | undefined');
}

function requireId(id, what) {
  if (typeof id !== 'string') throw coded('INVALID_INPUT', `${what} must be a string`);
}

/** The write guard's classes and functions over the loaded `addon`. */
function writeGuardApi(addon) {
  /**
   * Parses one Bridge frame (a JSON string or an already-parsed object): `{ type: 'message',
   * jsonrpc, context }` (`context` null for a legacy frame, else `{ agentId, sessionId }` with
   * either null when half-stamped) or `{ type: 'disconnected', writer }`. `jsonrpc` is the
   * message the core parsed and checked — a copy, never the host's object, so what is admitted
   * is what was parsed. A present but malformed envelope throws MALFORMED_FRAME: it is never
   * taken for legacy. Bytes (a socket's Buffer) are read as UTF-8.
   */
  function parseBridgeFrame(frame) {
    const text = frameText(frame);
    return native(() => addon.parseBridgeFrameJson(text));
  }

  /**
   * `parseBridgeFrame` for a frame that must carry a JSON-RPC message: `{ jsonrpc, context }`.
   * A disconnect frame throws MALFORMED_FRAME (route frames with `parseBridgeFrame`).
   */
  function parseAgentEnvelope(frame) {
    const parsed = parseBridgeFrame(frame);
    if (parsed.type !== 'message') {
      throw coded('MALFORMED_FRAME', 'an agent_disconnected frame carries no message; route it with parseBridgeFrame');
    }
    return { jsonrpc: parsed.jsonrpc, context: parsed.context };
  }

  /** The held-lock authority of one heap. One per heap; locks are held until released or swept. */
  class WriteGuard {
    /** The addon's guard: private, so every call into it goes through this class's checks. */
    #native;

    constructor() {
      this.#native = native(() => new addon.NativeWriteGuard());
    }

    /** `admitWrite` with this guard. */
    admitWrite(request) {
      const { context, componentId, parentOf } = requestOf(request, 'admitWrite', ['context', 'componentId', 'parentOf']);
      requireId(componentId, 'componentId');
      requireFunction(parentOf);
      const text = contextText(context);
      return native(() => this.#native.admitWrite(text, componentId, parentOf));
    }

    /**
     * Admits moving `nodeId` under `newParentId` (paths derived from the tree before the
     * move): both subtrees are acquired in one step, or neither. `{ admitted: true, from, to }`
     * or a denial.
     */
    admitMove(request) {
      const { context, nodeId, newParentId, parentOf } = requestOf(request, 'admitMove', ['context', 'nodeId', 'newParentId', 'parentOf']);
      requireId(nodeId, 'nodeId');
      requireId(newParentId, 'newParentId');
      requireFunction(parentOf);
      return native(() => this.#native.admitMove(contextText(context), nodeId, newParentId, parentOf));
    }

    /**
     * Releases exactly `lock`: `{ released }`. Release the lock of a `granted` admission when
     * the writer's edit is done; a `reentrant` admission added nothing (its lock may be the
     * very one an earlier `granted` took, and releasing it ends that edit's hold too).
     */
    releaseWrite(lock) {
      const text = json(lock, 'the lock');
      return native(() => this.#native.release(text));
    }

    /**
     * The disconnect sweep of the writer `{ agentId, sessionId }`: frees every lock it holds
     * (returned) and bars it from acquiring again, so a write of it still in flight is denied
     * `writer-disconnected`. Another session of the same agent is another writer.
     */
    releaseAgent(writer) {
      const text = json(writer, 'the writer');
      return native(() => this.#native.releaseAgent(text));
    }

    /** A copy of every held lock, sorted. */
    heldLocks() {
      return native(() => this.#native.heldLocks());
    }
  }

  /**
   * The seed's admission: `{ admitted: true, reason: 'legacy' | 'granted' | 'reentrant', lock }`
   * (mutate), or `{ admitted: false, reason, conflict, message }` (throw to the agent; do not
   * mutate) with `reason` one of 'incomplete-identity', 'unresolvable-target',
   * 'no-write-guard', 'conflict' (then `conflict` is a copy of the held lock),
   * 'writer-disconnected', 'authority-unavailable'. Without a `writeGuard` an agent write is
   * denied `no-write-guard`; a `writeGuard` that is not a WriteGuard throws INVALID_INPUT.
   */
  function admitWrite(request) {
    const { context, componentId, parentOf, writeGuard } = requestOf(request, 'admitWrite', ['context', 'componentId', 'parentOf', 'writeGuard']);
    if (writeGuard === undefined || writeGuard === null) {
      requireId(componentId, 'componentId');
      requireFunction(parentOf);
      const text = contextText(context);
      return native(() => addon.admitUnguardedWrite(text, componentId, parentOf));
    }
    if (!(writeGuard instanceof WriteGuard)) throw coded('INVALID_INPUT', 'writeGuard must be a WriteGuard');
    return writeGuard.admitWrite({ context, componentId, parentOf });
  }

  return { WriteGuard, admitWrite, parseBridgeFrame, parseAgentEnvelope };
}

module.exports = { writeGuardApi };
