import type { VerificationKey } from '../policy/types.js';
import { createHash, createPublicKey, generateKeyPair } from 'node:crypto';
import { promisify } from 'node:util';
import type { JWK } from 'jose';
import { ed25519KeyProblem } from './ed25519.js';

/** A public key refused on import; `member` names the JWK member at fault (a policy error points at it). */
export class AgentKeyError extends Error {
  constructor(
    message: string,
    readonly member?: 'kty' | 'crv' | 'x' | 'd',
  ) {
    super(message);
    this.name = 'AgentKeyError';
  }
}

/**
 * Imports an Ed25519 public JWK as a verification key: the one place a public
 * key enters (policy agents and hosts, registration, keygen --public-of). Never
 * accepts a private key, and never a key anyone could forge signatures for
 * (small order, non-canonical: see ed25519.ts).
 */
export async function importAgentKey(jwk: Record<string, unknown>): Promise<VerificationKey> {
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') {
    throw new AgentKeyError('not an Ed25519 OKP key', jwk.kty !== 'OKP' ? 'kty' : jwk.crv !== 'Ed25519' ? 'crv' : 'x');
  }
  if ('d' in jwk) throw new AgentKeyError('private key material ("d") given where a public key belongs', 'd');
  const x = Buffer.from(jwk.x, 'base64url');
  if (x.length !== 32 || x.toString('base64url') !== jwk.x) throw new AgentKeyError('"x" must be 32 bytes, base64url without padding', 'x');
  const problem = ed25519KeyProblem(x);
  if (problem) throw new AgentKeyError(`"x" is not a safe Ed25519 public key: ${problem}; signatures could be forged for it without any private key`, 'x');
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: jwk.x }, format: 'jwk' });
}

/** A public key as it arrives in a request (registration, rotation, a self-registering host): imported and named, or why not. */
export async function readPublicKey(jwk: Record<string, unknown>): Promise<{ key: VerificationKey; thumbprint: string } | string> {
  try {
    return { key: await importAgentKey(jwk), thumbprint: await thumbprintOf(jwk) };
  } catch (err) {
    return (err as Error).message;
  }
}

/** Printable ASCII, 1 to 128 characters: a name that becomes a header or a log field (an agent's, a host's). */
export const DISPLAY_NAME = /^[\x20-\x7e]{1,128}$/;

/**
 * RFC 7638 thumbprint (SHA-256) of a public key: the agent's `iss`. An OKP key's required members are crv, kty
 * and x, in that (lexicographic) order, with no whitespace; the values are JSON strings (RFC 8037 §2, A.3).
 */
export async function thumbprintOf(jwk: Record<string, unknown>): Promise<string> {
  const members = JSON.stringify({ crv: String(jwk.crv), kty: 'OKP', x: String(jwk.x) });
  return createHash('sha256').update(members).digest('base64url');
}

export interface AgentKeyPair {
  privateJwk: JWK;
  publicJwk: JWK;
  thumbprint: string;
}

export async function generateAgentKeyPair(): Promise<AgentKeyPair> {
  const { privateKey, publicKey } = await promisify(generateKeyPair)('ed25519');
  // Members as jose's exportJWK gives them (crv, d, x, kty): keys written before read the same.
  const { crv, d, x } = privateKey.export({ format: 'jwk' });
  const publicJwk: JWK = { crv: crv!, x: publicKey.export({ format: 'jwk' }).x!, kty: 'OKP' };
  const privateJwk: JWK = { crv: crv!, d: d!, x: x!, kty: 'OKP' };
  return { privateJwk, publicJwk, thumbprint: await thumbprintOf(publicJwk) };
}
