/**
 * Audit helpers only tests need: sealing arbitrary objects (the sidecar seals
 * AuditEntry values through `entryHead`), and the built-in secret-key rule as
 * a predicate. They go through the production sealer and pattern, so a test
 * built on them still tests src/audit.
 */
import { randomBytes } from 'node:crypto';
import { parseKeyring, type AuditBatch, type AuditKey, type AuditKeyring, type ChainLink } from '../../src/audit/crypto.js';
import { asciiJson } from '../../src/audit/entry.js';
import { SECRET_KEY_PATTERN } from '../../src/audit/redact.js';
import { RawJson } from '../../src/audit/raw-json.js';
import { BatchSealer } from '../../src/audit/sealer.js';
import { AuditTrail, type AuditTrailOptions } from '../../src/audit/trail.js';
import { parseStrictJsonBytes } from '../../src/json/strict.js';
import { createLogger } from '../../src/log.js';

/**
 * Any object's JSON without `args` and without its closing brace, in ASCII
 * (what `entryHead` builds for an AuditEntry). The object is not copied: its
 * args are unset while it is serialised and restored at once.
 */
export function headWithoutArgs(entry: { args?: unknown }): string {
  const args = entry.args;
  if (args === undefined) return asciiJson(entry).slice(0, -1);
  let json: string;
  entry.args = undefined;
  try {
    json = asciiJson(entry);
  } finally {
    entry.args = args;
  }
  return json.slice(0, -1);
}

/** Adds any object with a timestamp to a batch; `args`, if present, is written last. */
export function addEntry<E extends { timestamp: number; args?: unknown }>(sealer: BatchSealer, entry: E): void {
  sealer.addParts(entry.timestamp, headWithoutArgs(entry), entry.args);
}

/** Seals `entries` into one batch as link `link`, with the ciphertext as base64 (as a batch line carries it). */
export async function sealBatch<E extends { timestamp: number; args?: unknown }>(entries: readonly E[], link: ChainLink, key: AuditKey): Promise<AuditBatch> {
  const sealer = new BatchSealer(key);
  for (const e of entries) addEntry(sealer, e);
  const sealed = await sealer.seal(link);
  return { ...sealed, data: sealed.data.toString('base64') };
}

/** The built-in rule for one key (the trail combines the same pattern with a policy's `audit.redact`). */
export function isSecretKey(key: string): boolean {
  return SECRET_KEY_PATTERN.test(key);
}

/**
 * A real AuditTrail whose one exporter keeps every sealed line in memory (`lines`), with a fresh key, a
 * silent logger and a flush timer too slow to matter (tests flush or drain). `options` override any of it.
 */
export function memoryTrail(options: Partial<AuditTrailOptions> = {}): { trail: AuditTrail; keys: AuditKeyring; lines: Buffer[] } {
  const keys = options.keyring ?? parseKeyring(randomBytes(32).toString('base64'));
  const lines: Buffer[] = [];
  const exporter = { name: 'mem', export: async (line: Buffer) => void lines.push(line) };
  const trail = new AuditTrail({ keyring: keys, exporters: [exporter], flushIntervalMs: 60_000, log: createLogger('error', () => {}), ...options });
  return { trail, keys, lines };
}

/** A verified body as the pipeline hands it to the trail: the strictly parsed value, its bytes and every key. */
export function rawJson(text: string): RawJson {
  const bytes = Buffer.from(text);
  const keys: string[] = [];
  return new RawJson(parseStrictJsonBytes(bytes, keys), bytes, keys);
}
