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

const { coded, unwrap, native } = require('./answer');

/** The JSON text of `value` for the addon, or INVALID_INPUT naming `what`. */
function json(value, what) {
  try {
    const text = JSON.stringify(value);
    if (text === undefined) throw new Error('not representable');
    return text;
  } catch (e) {
    throw coded('INVALID_INPUT', `${what} is not JSON (${e.message})`);
  }
}

/** The frame as JSON text: a string is taken as it is, an object is serialized. */
function frameText(frame) {
  return typeof frame === 'string' ? frame : json(frame, 'the frame');
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
   * either null when half-stamped; for an object frame `jsonrpc` is the frame's own message
   * object, or the frame itself when legacy) or `{ type: 'disconnected', writer }`. A present
   * but malformed envelope throws MALFORMED_FRAME: it is never taken for legacy.
   */
  function parseBridgeFrame(frame) {
    const parsed = unwrap(native(() => addon.parseBridgeFrameJson(frameText(frame))));
    // An object frame keeps the host's own message object (the core parsed a copy of it).
    if (parsed.type === 'message' && typeof frame === 'object') {
      parsed.jsonrpc = parsed.context === null ? frame : frame.message;
    }
    return parsed;
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
    constructor() {
      this.native = native(() => new addon.NativeWriteGuard());
    }

    /** `admitWrite` with this guard. */
    admitWrite({ context, componentId, parentOf }) {
      requireId(componentId, 'componentId');
      requireFunction(parentOf);
      return unwrap(native(() => this.native.admitWrite(json(context ?? null, 'context'), componentId, parentOf)));
    }

    /**
     * Admits moving `nodeId` under `newParentId` (paths derived from the tree before the
     * move): both subtrees are acquired in one step, or neither. `{ admitted: true, from, to }`
     * or a denial.
     */
    admitMove({ context, nodeId, newParentId, parentOf }) {
      requireId(nodeId, 'nodeId');
      requireId(newParentId, 'newParentId');
      requireFunction(parentOf);
      return unwrap(
        native(() => this.native.admitMove(json(context ?? null, 'context'), nodeId, newParentId, parentOf)),
      );
    }

    /** Releases exactly `lock` (as an admission returned it): `{ released }`. */
    releaseWrite(lock) {
      return unwrap(native(() => this.native.release(json(lock, 'the lock'))));
    }

    /**
     * The disconnect sweep of the writer `{ agentId, sessionId }`: frees every lock it holds
     * (returned) and bars it from acquiring again, so a write of it still in flight is denied
     * `writer-disconnected`. Another session of the same agent is another writer.
     */
    releaseAgent(writer) {
      return unwrap(native(() => this.native.releaseAgent(json(writer, 'the writer'))));
    }

    /** A copy of every held lock, sorted. */
    heldLocks() {
      return unwrap(native(() => this.native.heldLocks()));
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
  function admitWrite({ context, componentId, parentOf, writeGuard }) {
    if (writeGuard === undefined || writeGuard === null) {
      requireId(componentId, 'componentId');
      requireFunction(parentOf);
      return unwrap(native(() => addon.admitUnguardedWrite(json(context ?? null, 'context'), componentId, parentOf)));
    }
    if (!(writeGuard instanceof WriteGuard)) throw coded('INVALID_INPUT', 'writeGuard must be a WriteGuard');
    return writeGuard.admitWrite({ context, componentId, parentOf });
  }

  return { WriteGuard, admitWrite, parseBridgeFrame, parseAgentEnvelope };
}

module.exports = { writeGuardApi };
