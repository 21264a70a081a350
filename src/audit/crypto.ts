import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

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
  const keys = text.split('\n').map((l) => l.replace(/#.*/, '').trim()).filter(Boolean).map((l) => auditKey(Buffer.from(l, 'base64')));
  if (keys.length === 0) throw new Error('no audit key found (one base64-encoded 32-byte key per line)');
  return { current: keys[0]!, all: new Map(keys.map((k) => [k.id, k])) };
}

/** What a collector receives: one JSON object per batch. Everything but the ciphertext is authenticated as AAD. */
export interface AuditBatch {
  v: 1;
  seq: number;
  /** SHA-256 (hex) of the previous batch's JSON line; 64 zeros for the first. */
  prev: string;
  count: number;
  first: number;
  last: number;
  kid: string;
  nonce: string;
  tag: string;
  data: string;
}

export const GENESIS = '0'.repeat(64);

function aad(b: Omit<AuditBatch, 'nonce' | 'tag' | 'data'>): Buffer {
  return Buffer.from(JSON.stringify([b.v, b.seq, b.prev, b.count, b.first, b.last, b.kid]));
}

/** Seals entries into one batch: AES-256-GCM, fresh 96-bit nonce, header bound as AAD. */
export function sealBatch<E extends { timestamp: number }>(entries: readonly E[], seq: number, prev: string, key: AuditKey): AuditBatch {
  const header = {
    v: 1 as const, seq, prev, count: entries.length,
    first: entries[0]?.timestamp ?? 0, last: entries.at(-1)?.timestamp ?? 0, kid: key.id,
  };
  const nonce = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key.key, nonce);
  cipher.setAAD(aad(header));
  const data = Buffer.concat([cipher.update(Buffer.from(JSON.stringify(entries), 'utf8')), cipher.final()]);
  return { ...header, nonce: nonce.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64') };
}

/** Opens a batch; throws if the key is unknown or anything (header or data) was altered. */
export function openBatch<T = unknown>(b: AuditBatch, keys: AuditKeyring): T[] {
  const key = keys.all.get(b.kid);
  if (!key) throw new Error(`batch ${b.seq}: unknown key id ${b.kid}`);
  const decipher = createDecipheriv('aes-256-gcm', key.key, Buffer.from(b.nonce, 'base64'));
  decipher.setAAD(aad(b));
  decipher.setAuthTag(Buffer.from(b.tag, 'base64'));
  const plain = Buffer.concat([decipher.update(Buffer.from(b.data, 'base64')), decipher.final()]);
  return JSON.parse(plain.toString('utf8')) as T[];
}

/** The chain link: SHA-256 of the batch's exact JSON line (ASCII: base64, hex and numbers only). */
export function batchHash(line: string): string {
  return createHash('sha256').update(Buffer.from(line, 'latin1')).digest('hex');
}
