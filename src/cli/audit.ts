import { readFile } from 'node:fs/promises';
import { openBatch, parseKeyring, type AuditBatch } from '../audit/crypto.js';
import { verifyChain } from '../audit/verify.js';
import { parseCommand, required, UsageError } from './args.js';

const USAGE = `Usage: agents-chain audit decrypt --audit-key-file KEY [FILE|-]
       agents-chain audit verify  --audit-key-file KEY [FILE|-]

Reads exported audit batches (one JSON batch per line, as the exporters write
and POST them; "-" or no FILE reads stdin).
  decrypt   prints every entry as one JSON line
  verify    checks each batch's tag and the hash chain; reports altered,
            missing and reordered batches; exits 1 if there is any
`;

export async function auditCommand(argv: string[]): Promise<number> {
  const [action, ...rest] = argv;
  if (action === '--help' || action === '-h') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (action !== 'decrypt' && action !== 'verify') throw new UsageError(`unknown audit action "${action ?? ''}"\n\n${USAGE}`);
  const args = parseCommand(rest, { 'audit-key-file': { type: 'string' } }, USAGE, true);
  if (!args) return 0;
  const keys = parseKeyring(await readFile(required(args.values['audit-key-file'], '--audit-key-file', USAGE), 'utf8'));
  const file = args.positionals[0] ?? '-';
  const text = file === '-' ? await readStdin() : await readFile(file, 'utf8');
  const lines = text.split('\n');
  if (action === 'verify') {
    const r = verifyChain(lines, keys);
    for (const p of r.problems) {
      const where = p.seq !== undefined ? ` (${r.chains.length > 1 ? `chain ${p.chain}, ` : ''}seq ${p.seq})` : '';
      process.stderr.write(`line ${p.line}${where}: ${p.problem}\n`);
    }
    process.stdout.write(
      `${r.batches} batches in ${r.chains.length} chain${r.chains.length === 1 ? '' : 's'}, ${r.entries} entries, ${r.problems.length} problems\n`,
    );
    return r.problems.length ? 1 : 0;
  }
  for (const line of lines) {
    if (!line.trim()) continue;
    for (const entry of openBatch(JSON.parse(line) as AuditBatch, keys)) process.stdout.write(`${JSON.stringify(entry)}\n`);
  }
  return 0;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
