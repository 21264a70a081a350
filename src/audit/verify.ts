import { batchHash, GENESIS, openBatch, type AuditBatch, type AuditKeyring } from './crypto.js';

export interface ChainProblem {
  line: number;
  seq?: number;
  problem: string;
}

/**
 * Checks exported batches (one JSON line each, in delivery order): every tag
 * verifies, sequence numbers have no gaps or reorderings, and each batch
 * names the hash of the one before it.
 */
export function verifyChain(lines: readonly string[], keys: AuditKeyring): { batches: number; entries: number; problems: ChainProblem[] } {
  const problems: ChainProblem[] = [];
  let prevLine: string | undefined;
  let prevSeq: number | undefined;
  let entries = 0;
  let batches = 0;
  lines.forEach((line, i) => {
    if (!line.trim()) return;
    const n = i + 1;
    let b: AuditBatch;
    try {
      b = JSON.parse(line) as AuditBatch;
    } catch {
      problems.push({ line: n, problem: 'not a JSON batch' });
      prevLine = undefined;
      return;
    }
    batches++;
    try {
      entries += openBatch(b, keys).length;
    } catch (err) {
      problems.push({ line: n, seq: b.seq, problem: `authentication failed (altered or wrong key): ${(err as Error).message}` });
    }
    if (prevSeq === undefined) {
      if (b.seq === 1 && b.prev !== GENESIS) problems.push({ line: n, seq: b.seq, problem: 'first batch does not start the chain' });
    } else {
      if (b.seq <= prevSeq) problems.push({ line: n, seq: b.seq, problem: `out of order: seq ${b.seq} after ${prevSeq}` });
      else if (b.seq !== prevSeq + 1) problems.push({ line: n, seq: b.seq, problem: `gap: batches ${prevSeq + 1}..${b.seq - 1} missing` });
      if (prevLine !== undefined && b.prev !== batchHash(prevLine)) problems.push({ line: n, seq: b.seq, problem: 'chain broken: prev is not the hash of the batch before' });
    }
    prevSeq = b.seq;
    prevLine = line;
  });
  return { batches, entries, problems };
}
