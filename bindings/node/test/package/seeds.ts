// The write guard (seed 002) and the ledger (seed 003) through the installed package, typed
// (`npm run typecheck`; scripts/node_package_test.sh compiles it with tsc --strict too).
import {
  admitWrite,
  Ledger,
  parseBridgeFrame,
  WriteGuard,
  type Admission,
  type LedgerRead,
  type ParentOf,
} from 'solewriter';

/** One Bridge frame handled the seed's way: parse, admit, mutate only when admitted. */
export function handle(frame: string, writeGuard: WriteGuard, tree: Map<string, string | null>, mutate: () => void): Admission | null {
  const parsed = parseBridgeFrame(frame);
  if (parsed.type === 'disconnected') {
    writeGuard.releaseAgent(parsed.writer);
    return null;
  }
  const parentOf: ParentOf = (id) => tree.get(id);
  const admission = admitWrite({ context: parsed.context, componentId: String(parsed.jsonrpc.params.id), parentOf, writeGuard });
  const { admitted, reason, conflict } = admission; // the seed's destructuring
  if (admitted) mutate();
  else if (reason === 'conflict' && conflict) console.error(conflict.subtreePath.join('/'));
  return admission;
}

/** A product read of the last `limit` commits from HEAD, with their hunks. */
export function recent(dir: string, repo: string, limit: number): LedgerRead {
  const ledger = new Ledger({ dir, repo });
  const read = ledger.demand({ heads: [ledger.resolve('HEAD')], limit, hunks: true });
  if (read.persisted.state === 'discarded') console.error(`a writer (${read.persisted.writer?.pid}) holds the ledger`);
  return read;
}
