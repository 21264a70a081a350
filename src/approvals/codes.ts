import { createHash, randomInt, timingSafeEqual } from 'node:crypto';

// No 0/O, 1/I/L: codes get read aloud and typed from Slack.
const ALPHABET = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789';

/** A fresh single-use approval code, 10 characters (~49 bits). */
export function newApprovalCode(): string {
  let out = '';
  for (let i = 0; i < 10; i++) out += ALPHABET[randomInt(ALPHABET.length)];
  return out;
}

export function hashCode(code: string): string {
  return createHash('sha256').update(code.trim().toUpperCase()).digest('hex');
}

/** Constant-time comparison of a presented code with the stored hash. */
export function codeMatches(presented: unknown, storedHash: string): boolean {
  if (typeof presented !== 'string' || presented.length === 0 || presented.length > 64) return false;
  return timingSafeEqual(Buffer.from(hashCode(presented), 'hex'), Buffer.from(storedHash, 'hex'));
}
