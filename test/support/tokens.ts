import { createPrivateKey, randomUUID, sign } from 'node:crypto';
import type { JWK } from 'jose';

/**
 * Signs arbitrary header and payload text with an Ed25519 private JWK, so a
 * test can build exactly the malformed token it wants (duplicate keys, wrong
 * typ, odd lifetimes) with a valid signature.
 */
export function signRaw(headerJson: string, payloadJson: string, privateJwk: JWK): string {
  const h = Buffer.from(headerJson).toString('base64url');
  const p = Buffer.from(payloadJson).toString('base64url');
  const key = createPrivateKey({ key: privateJwk as never, format: 'jwk' });
  const sig = sign(null, Buffer.from(`${h}.${p}`), key).toString('base64url');
  return `${h}.${p}.${sig}`;
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
  return signRaw(JSON.stringify(header), JSON.stringify(full), privateJwk);
}
