import { ED25519 } from './ed25519-verify.js';
import { parseStrictJsonBytes } from '../json/strict.js';
import type { VerificationKey } from '../policy/types.js';

/**
 * Compact JWS (RFC 7515 §7.1) with EdDSA (RFC 8037): the one decoder for every
 * token the sidecar reads (agent+jwt, host+jwt, agent-proof+jwt). Like jose it
 * is split in two: this module checks the form, the protected header and the
 * signature; claims.ts checks what the payload says. It does not pick a key:
 * the caller finds it from the claims (never from the header) and then calls
 * signatureValid.
 *
 * Form: exactly three segments of canonical base64url (RFC 4648 §5 alphabet,
 * no padding, no whitespace, the unused low bits of the last character zero,
 * §3.5), so one token has exactly one spelling; header and payload are JSON
 * objects without duplicate keys (strict parser); the signature is 64 bytes.
 */

/**
 * Header members understood. `alg` and `typ` are checked; `kid` is a hint many
 * signers add, never used to choose a key (the key is always the one the claims
 * name), so it cannot change what the signature means. Every other member is
 * refused, not ignored: `crit` (RFC 7515 §4.1.11: a recipient must refuse
 * extensions it does not understand), `b64` (RFC 7797 changes what was signed),
 * `jwk`/`jku`/`x5u`/`x5c`/`x5t` (a key or certificate the token brings along),
 * `zip`, `cty`, `enc`, and names not defined anywhere. jose refuses `crit` and
 * `b64` too but ignores unknown members; an allowlist is stricter, and no
 * signer of these tokens needs more.
 */
const HEADER_MEMBERS = new Set(['alg', 'typ', 'kid']);

/** Three segments of the base64url alphabet, the last one 86 characters (64 bytes); one regex test, no allocation. */
const COMPACT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{86}$/;

/** base64url alphabet value of each ASCII code, -1 outside it. */
const B64URL_VALUE = new Int8Array(128).fill(-1);
for (const [i, c] of [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'].entries()) B64URL_VALUE[c.charCodeAt(0)] = i;

export interface DecodedJws {
  header: Readonly<Record<string, unknown>>;
  payload: Record<string, unknown>;
}

/**
 * Decodes a compact JWS whose header must say `typ` and `alg: EdDSA`. Returns
 * the reason as a string when it is refused (all of it `token_invalid`). Pure.
 */
export function decodeJws(token: string, typ: string): DecodedJws | string {
  if (!COMPACT.test(token)) {
    return token.split('.').length !== 3
      ? 'token is not a compact JWS (three segments separated by ".")'
      : 'token segments must be canonical base64url (no padding or whitespace) and the signature 64 bytes';
  }
  const a = token.indexOf('.');
  const b = token.indexOf('.', a + 1);
  if (!lastCharCanonical(token, 0, a) || !lastCharCanonical(token, a + 1, b) || !lastCharCanonical(token, b + 1, token.length)) {
    return 'token segments must be canonical base64url (the unused low bits of the last character are not zero)';
  }
  const header = acceptedHeader(token.slice(0, a), typ);
  if (typeof header === 'string') return header;
  const payload = decodeObject(token.slice(a + 1, b));
  if (!payload) return 'token payload is not a JSON object (or has duplicate keys)';
  return { header, payload };
}

/**
 * Headers already accepted, by their exact segment: a signer sends the same
 * header on every token, so parsing and checking it again is skipped (about
 * 2 µs per call). Bounded; only accepted headers are kept, frozen.
 */
const ACCEPTED_HEADERS = new Map<string, Map<string, Readonly<Record<string, unknown>>>>();
const MAX_ACCEPTED_HEADERS = 1024;

function acceptedHeader(segment: string, typ: string): Readonly<Record<string, unknown>> | string {
  let accepted = ACCEPTED_HEADERS.get(typ);
  if (!accepted) ACCEPTED_HEADERS.set(typ, (accepted = new Map<string, Readonly<Record<string, unknown>>>()));
  const known = accepted.get(segment);
  if (known) return known;
  const header = decodeObject(segment);
  if (!header) return 'token header is not a JSON object (or has duplicate keys)';
  const refused = headerProblem(header, typ);
  if (refused) return refused;
  if (accepted.size >= MAX_ACCEPTED_HEADERS) accepted.clear();
  accepted.set(segment, Object.freeze(header));
  return header;
}

function headerProblem(header: Record<string, unknown>, typ: string): string | undefined {
  if (header.typ !== typ) return `token typ must be "${typ}"`;
  if (header.alg !== 'EdDSA') return 'token alg must be "EdDSA"';
  if (header.kid !== undefined && typeof header.kid !== 'string') return 'token kid must be a string';
  for (const name in header) {
    if (HEADER_MEMBERS.has(name)) continue;
    if (name === 'crit') return 'token header has "crit": no extension is understood here (RFC 7515 §4.1.11)';
    if (name === 'b64') return 'token header has "b64": unencoded payloads (RFC 7797) are not accepted';
    return `token header member "${name}" is not understood (only alg, typ and kid are allowed)`;
  }
  return undefined;
}

/**
 * RFC 4648 §3.5 canonical base64url of s[start, end): the alphabet only, a
 * length that is not 1 (mod 4), and zero bits below the last character's
 * share of the last byte. No allocation.
 */
export function canonicalBase64url(s: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    const c = s.charCodeAt(i);
    if (c >= 128 || B64URL_VALUE[c]! < 0) return false;
  }
  return lastCharCanonical(s, start, end);
}

/** The length and last-character rule alone, for a range already known to be in the alphabet. */
function lastCharCanonical(s: string, start: number, end: number): boolean {
  const n = end - start;
  const rem = n % 4;
  if (n <= 0 || rem === 1) return false;
  // Two characters carry one byte (4 bits left over), three carry two bytes (2 bits).
  return rem === 0 || (B64URL_VALUE[s.charCodeAt(end - 1)]! & (rem === 2 ? 0x0f : 0x03)) === 0;
}

function decodeObject(seg: string): Record<string, unknown> | undefined {
  try {
    const v = parseStrictJsonBytes(Buffer.from(seg, 'base64url'));
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Ed25519 over the JWS signing input, with `key` only: the check jose's
 * compactVerify makes, by the process's verifier (libsodium, or node:crypto
 * where it cannot load: auth/ed25519-verify.ts). Call it on a token decodeJws
 * accepted. The key was vetted on import (identity/keys.ts): OpenSSL itself
 * accepts keys of small order, for which node:crypto would be forgeable.
 */
export function signatureValid(token: string, key: VerificationKey): boolean {
  const dot = token.lastIndexOf('.');
  const signature = Buffer.from(token.slice(dot + 1), 'base64url');
  if (signature.length !== 64) return false;
  return ED25519.verifier.verify(Buffer.from(token.slice(0, dot)), signature, key);
}

/** The same, off the event loop when the process's verifier can (AGENTS_CHAIN_ED25519=pool); else synchronously. */
export function signatureCheck(token: string, key: VerificationKey): boolean | Promise<boolean> {
  const { verifyAsync } = ED25519.verifier;
  if (!verifyAsync) return signatureValid(token, key);
  const dot = token.lastIndexOf('.');
  return verifyAsync(Buffer.from(token.slice(0, dot)), Buffer.from(token.slice(dot + 1), 'base64url'), key);
}
