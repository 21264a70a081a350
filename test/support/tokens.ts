import { createPrivateKey, randomUUID, sign, type JsonWebKey } from 'node:crypto';
import type { JWK } from 'jose';

/** base64url of a UTF-8 string (or bytes), no padding. */
export function b64url(s: string | Uint8Array): string {
  return Buffer.from(s).toString('base64url');
}

/**
 * Signs raw header and payload JSON text with an Ed25519 private JWK, exactly
 * as given (duplicate keys, odd types, anything), and returns the compact JWS.
 */
export function signRaw(privateJwk: JWK, headerJson: string, payloadJson: string): string {
  const h = b64url(headerJson);
  const p = b64url(payloadJson);
  const key = createPrivateKey({ key: privateJwk as JsonWebKey, format: 'jwk' });
  const sig = sign(null, Buffer.from(`${h}.${p}`), key).toString('base64url');
  return `${h}.${p}.${sig}`;
}

/** Signs already-encoded header and payload segments as they are (non-canonical base64url included). */
export function signSegments(privateJwk: JWK, h: string, p: string): string {
  const key = createPrivateKey({ key: privateJwk as JsonWebKey, format: 'jwk' });
  return `${h}.${p}.${sign(null, Buffer.from(`${h}.${p}`), key).toString('base64url')}`;
}

/**
 * Another spelling of the same bytes: the last character of a base64url
 * segment with some of its unused low bits set (RFC 4648 §3.5). Decoders that
 * ignore those bits (Buffer.from(s, 'base64url')) read the same bytes.
 */
export function nonCanonical(segment: string): string {
  const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const unused = segment.length % 4 === 2 ? 0x0f : segment.length % 4 === 3 ? 0x03 : 0;
  if (!unused) throw new Error('a segment whose length is a multiple of 4 has no unused bits');
  const last = ALPHABET.indexOf(segment.at(-1)!);
  return segment.slice(0, -1) + ALPHABET[last | 1]!;
}

/** Same as signRaw, from objects. */
export function signClaims(privateJwk: JWK, header: Record<string, unknown>, payload: Record<string, unknown>): string {
  return signRaw(privateJwk, JSON.stringify(header), JSON.stringify(payload));
}

/** Replaces the payload of a compact JWS, keeping the original signature. */
export function withPayload(token: string, payloadJson: string): string {
  const [h, , s] = token.split('.');
  return `${h}.${b64url(payloadJson)}.${s}`;
}

export interface ClaimsInput {
  sub: string;
  iss: string;
  aud: unknown;
  iat?: unknown;
  exp?: unknown;
  jti?: unknown;
  [extra: string]: unknown;
}

/** A token from claims, with the standard header unless one is given. */
export function tokenWith(privateJwk: JWK, claims: ClaimsInput, header: Record<string, unknown> = { alg: 'EdDSA', typ: 'agent+jwt' }): string {
  const now = Math.floor(Date.now() / 1000);
  const full = { iat: now, exp: now + 60, jti: randomUUID(), ...claims };
  return signRaw(privateJwk, JSON.stringify(header), JSON.stringify(full));
}
