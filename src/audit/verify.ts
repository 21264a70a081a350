import { batchHash, GENESIS, openBatch, type AuditBatch, type AuditKeyring } from './crypto.js';

export interface ChainProblem {
  line: number;
  chain?: string;
  seq?: number;
  problem: string;
}

export interface ChainReport {
  batches: number;
  entries: number;
  /** Chain ids seen, in order of first appearance (one per spool; several when a collector merges pods). */
  chains: string[];
  problems: ChainProblem[];
}

/**
 * Checks exported batches (one JSON line each, in delivery order): every tag
 * verifies, and within each chain sequence numbers have no gaps or
 * reorderings and each batch names the hash of the one before it. Chains are
 * told apart by their id, so a file that merges several pods' batches checks.
 */
export function verifyChain(lines: readonly string[], keys: AuditKeyring): ChainReport {
  const problems: ChainProblem[] = [];
  const heads = new Map<string, { seq: number; line?: string }>();
  let entries = 0;
  let batches = 0;
  lines.forEach((line, i) => {
    if (!line.trim()) return;
    const n = i + 1;
    let b: AuditBatch;
    try {
      b = JSON.parse(line) as AuditBatch;
      if (typeof b !== 'object' || b === null || Array.isArray(b)) throw new Error('not an object');
    } catch {
      problems.push({ line: n, problem: 'not a JSON batch' });
      return;
    }
    // Delivery is at least once: a batch received twice in a row is a retry, not a reordering.
    if (heads.get(b.chain)?.line === line) return;
    batches++;
    const at = { line: n, chain: b.chain, seq: b.seq };
    try {
      entries += openBatch(b, keys).length;
    } catch (err) {
      problems.push({ ...at, problem: `authentication failed (altered or wrong key): ${(err as Error).message}` });
    }
    const head = heads.get(b.chain);
    if (!head) {
      if (b.seq === 1 && b.prev !== GENESIS) problems.push({ ...at, problem: 'first batch does not start the chain' });
    } else {
      if (b.seq <= head.seq) problems.push({ ...at, problem: `out of order: seq ${b.seq} after ${head.seq}` });
      else if (b.seq !== head.seq + 1) problems.push({ ...at, problem: `gap: batches ${head.seq + 1}..${b.seq - 1} missing` });
      if (head.line !== undefined && b.prev !== batchHash(head.line))
        problems.push({ ...at, problem: 'chain broken: prev is not the hash of the batch before' });
    }
    heads.set(b.chain, { seq: b.seq, line });
  });
  return { batches, entries, chains: [...heads.keys()], problems };
}
