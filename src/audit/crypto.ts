import { createDecipheriv, createHash } from 'node:crypto';
import { brotliDecompressSync, inflateRawSync } from 'node:zlib';

/** One audit key: 32 bytes, named by the first 16 hex digits of its SHA-256 (so keys can rotate). */
export interface AuditKey {
  id: string;
  key: Buffer;
}

/** The key batches are sealed with, and older keys kept for reading. */
export interface AuditKeyring {
  current: AuditKey;
  all: ReadonlyMap<string, AuditKey>;
}

export function auditKey(raw: Buffer): AuditKey {
  if (raw.length !== 32) throw new Error(`an audit key must be 32 bytes (base64 of 32 bytes), got ${raw.length}`);
  return { id: createHash('sha256').update(raw).digest('hex').slice(0, 16), key: raw };
}

/**
 * Parses a key file or env value: one base64 key per line, the first is
 * current, the rest are old keys kept for reading. `#` starts a comment.
 */
export function parseKeyring(text: string): AuditKeyring {
  const keys = text
    .split('\n')
    .map((l) => l.replace(/#.*/, '').trim())
    .filter(Boolean)
    .map((l) => auditKey(Buffer.from(l, 'base64')));
  if (keys.length === 0) throw new Error('no audit key found (one base64-encoded 32-byte key per line)');
  return { current: keys[0]!, all: new Map(keys.map((k) => [k.id, k])) };
}

/** What a collector receives: one JSON object per batch. Everything but the ciphertext is authenticated as AAD. */
export interface AuditBatch {
  v: 1;
  /** Names the chain (one per spool: a pod's chain survives restarts with its spool, a new spool starts a new one). */
  chain: string;
  seq: number;
  /** SHA-256 (hex) of the previous batch's JSON line; 64 zeros for the first. */
  prev: string;
  count: number;
  first: number;
  last: number;
  kid: string;
  /** Compression applied before encryption. */
  z?: 'br' | 'deflate-raw';
  nonce: string;
  tag: string;
  data: string;
}

/** A batch as the sealer returns it: the ciphertext still as bytes (base64 is written straight into its line). */
export interface SealedBatch extends Omit<AuditBatch, 'data'> {
  data: Buffer;
}

export const GENESIS = '0'.repeat(64);

/** Where a batch sits: which chain, its sequence number, the hash of the batch before it. */
export interface ChainLink {
  chain: string;
  seq: number;
  prev: string;
}

/** AAD: the header fields that chain and name the batch. count/first/last are checked against the decrypted entries. */
export function aad(b: { v: 1; chain: string; seq: number; prev: string; kid: string; z?: string }): Buffer {
  return Buffer.from(JSON.stringify([b.v, b.chain, b.seq, b.prev, b.kid, b.z ?? null]));
}

/** Opens a batch; throws if the key is unknown, anything was altered, or the header does not match the entries. */
export function openBatch<T = unknown>(b: AuditBatch | SealedBatch, keys: AuditKeyring): T[] {
  const key = keys.all.get(b.kid);
  if (!key) throw new Error(`batch ${b.seq}: unknown key id ${b.kid}`);
  const decipher = createDecipheriv('aes-256-gcm', key.key, Buffer.from(b.nonce, 'base64'));
  decipher.setAAD(aad(b));
  decipher.setAuthTag(Buffer.from(b.tag, 'base64'));
  const opened = Buffer.concat([decipher.update(typeof b.data === 'string' ? Buffer.from(b.data, 'base64') : b.data), decipher.final()]);
  const plain = b.z === 'br' ? brotliDecompressSync(opened) : b.z === 'deflate-raw' ? inflateRawSync(opened) : opened;
  const entries = JSON.parse(plain.toString('utf8')) as (T & { timestamp?: number })[];
  const first = entries[0]?.timestamp ?? 0;
  const last = entries.at(-1)?.timestamp ?? 0;
  if (entries.length !== b.count || first !== b.first || last !== b.last) throw new Error(`batch ${b.seq}: header does not match its entries`);
  return entries;
}

/** The chain link: SHA-256 of the batch's exact JSON line (UTF-8 bytes; in practice ASCII: base64, hex and numbers). */
export function batchHash(line: string | Uint8Array): string {
  return createHash('sha256').update(line).digest('hex');
}

/**
 * A batch's JSON line as bytes: exactly `JSON.stringify(batch)` (with `data` in
 * base64). Ciphertext given as bytes is base64-encoded straight into the line:
 * no copy of it ever becomes a string (large strings live in V8's old
 * generation and bring full collections forward).
 */
export function batchLine(b: AuditBatch | SealedBatch): Buffer {
  const head = JSON.stringify({ ...b, data: undefined }); // data (last member) left out
  const dataLength = typeof b.data === 'string' ? b.data.length : 4 * Math.ceil(b.data.length / 3);
  const size = Buffer.byteLength(head) + 9 + dataLength + 1;
  const line = Buffer.allocUnsafeSlow(size);
  let at = line.write(head) - 1; // reopen the object over its closing brace
  at += line.write(',"data":"', at, 'latin1');
  at = typeof b.data === 'string' ? at + line.write(b.data, at, 'latin1') : base64Into(b.data, line, at);
  at += line.write('"}', at, 'latin1');
  return line.subarray(0, at);
}

const BASE64 = Buffer.from('ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/');

/** Standard base64 (padded) of `src`, written into `dst` at `at`; returns the end offset. */
export function base64Into(src: Uint8Array, dst: Uint8Array, at: number): number {
  const whole = src.length - (src.length % 3);
  let o = at;
  for (let i = 0; i < whole; i += 3) {
    const v = (src[i]! << 16) | (src[i + 1]! << 8) | src[i + 2]!;
    dst[o] = BASE64[v >>> 18]!;
    dst[o + 1] = BASE64[(v >>> 12) & 63]!;
    dst[o + 2] = BASE64[(v >>> 6) & 63]!;
    dst[o + 3] = BASE64[v & 63]!;
    o += 4;
  }
  const rest = src.length - whole;
  if (rest > 0) {
    const v = (src[whole]! << 16) | (rest === 2 ? src[whole + 1]! << 8 : 0);
    dst[o] = BASE64[v >>> 18]!;
    dst[o + 1] = BASE64[(v >>> 12) & 63]!;
    dst[o + 2] = rest === 2 ? BASE64[(v >>> 6) & 63]! : 0x3d;
    dst[o + 3] = 0x3d; // =
    o += 4;
  }
  return o;
}
