import type { VerificationKey } from '../policy/types.js';
import { createPublicKey } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK } from 'jose';

/** Imports an Ed25519 public JWK as a verification key (never accepts a private key). */
export async function importAgentKey(jwk: Record<string, unknown>): Promise<VerificationKey> {
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') throw new Error('not an Ed25519 OKP key');
  if ('d' in jwk) throw new Error('private key material ("d") given where a public key belongs');
  const x = Buffer.from(jwk.x, 'base64url');
  if (x.length !== 32 || x.toString('base64url') !== jwk.x) throw new Error('"x" must be 32 bytes, base64url without padding');
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: jwk.x }, format: 'jwk' });
}

/** RFC 7638 thumbprint (SHA-256) of a public key: the agent's `iss`. */
export function thumbprintOf(jwk: Record<string, unknown>): Promise<string> {
  return calculateJwkThumbprint({ kty: 'OKP', crv: String(jwk.crv), x: String(jwk.x) } as JWK, 'sha256');
}

export interface AgentKeyPair {
  privateJwk: JWK;
  publicJwk: JWK;
  thumbprint: string;
}

export async function generateAgentKeyPair(): Promise<AgentKeyPair> {
  const { privateKey, publicKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519', extractable: true });
  const privateJwk = await exportJWK(privateKey);
  const publicJwk = await exportJWK(publicKey);
  return { privateJwk, publicJwk, thumbprint: await thumbprintOf(publicJwk as Record<string, unknown>) };
}
