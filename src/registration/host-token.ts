import { CLOCK_SKEW_SECONDS, decodeSegment, signatureValid } from '../auth/verify.js';
import { deny, type Denial } from '../errors.js';
import { HOST_TOKEN_TYPE, MAX_TOKEN_LIFETIME_SECONDS } from '../identity/client.js';
import type { Host } from '../policy/types.js';

export interface HostClaims {
  iss: string;
  aud: string;
  iat: number;
  exp: number;
  jti: string;
  /** Registration tokens: the new agent's public key (an Ed25519 JWK, public part only). */
  agent_public_key?: Record<string, unknown>;
}

export interface VerifiedHostToken {
  host: Host;
  claims: HostClaims;
}

const B64URL = /^[A-Za-z0-9_-]+$/;

/**
 * A host's token (typ host+jwt), the same checks as an agent token in the
 * same order: shape, typ/alg, `iss` names a trusted host (its key
 * thumbprint), `aud` is this service's issuer, the signature with that
 * host's key only, a lifetime of at most 60 s. The jti is spent by its own
 * stage (the replay store). Pure.
 */
export function verifyHostToken(token: string, hosts: ReadonlyMap<string, Host>, issuer: string, nowSeconds: number): VerifiedHostToken | Denial {
  const parts = token.split('.');
  if (parts.length !== 3 || !parts.every((p) => B64URL.test(p))) return deny('token_invalid', 'token is not a compact JWS');
  const header = decodeSegment(parts[0]!);
  const p = decodeSegment(parts[1]!);
  if (!header || !p) return deny('token_invalid', 'token header and payload must be JSON objects (without duplicate keys)');
  if (header.typ !== HOST_TOKEN_TYPE) return deny('token_invalid', `a host token's typ must be "${HOST_TOKEN_TYPE}"`);
  if (header.alg !== 'EdDSA') return deny('token_invalid', 'token alg must be "EdDSA"');
  if (typeof p.iss !== 'string' || !p.iss) return deny('token_invalid', 'token iss must be the host key\'s thumbprint');
  if (typeof p.aud !== 'string') return deny('token_invalid', 'token aud must be a single string (the service\'s issuer)');
  if (!Number.isSafeInteger(p.iat) || !Number.isSafeInteger(p.exp)) return deny('token_invalid', 'token iat and exp must be integer seconds');
  if (typeof p.jti !== 'string' || p.jti.length < 1 || p.jti.length > 128) return deny('token_invalid', 'token jti must be a string of 1 to 128 characters');
  const host = hosts.get(p.iss);
  if (!host) return deny('host_not_found', 'no trusted host has this key (iss is not a host key thumbprint in the policy)');
  if (p.aud !== issuer) return deny('token_invalid', `token is for "${p.aud}", not this service ("${issuer}")`);
  if (!signatureValid(token, host.key)) return deny('token_invalid', 'token signature is invalid');
  const iat = p.iat as number;
  const exp = p.exp as number;
  if (exp <= iat || exp - iat > MAX_TOKEN_LIFETIME_SECONDS) return deny('token_invalid', `token lifetime must be 1 to ${MAX_TOKEN_LIFETIME_SECONDS} seconds`);
  if (iat > nowSeconds + CLOCK_SKEW_SECONDS) return deny('token_invalid', 'token iat is in the future');
  if (exp + CLOCK_SKEW_SECONDS < nowSeconds) return deny('token_expired', 'token has expired');
  const key = p.agent_public_key;
  if (key !== undefined && (typeof key !== 'object' || key === null || Array.isArray(key))) return deny('token_invalid', 'agent_public_key must be a JWK object');
  return { host, claims: { iss: p.iss, aud: p.aud, iat, exp, jti: p.jti, ...(key ? { agent_public_key: key as Record<string, unknown> } : {}) } };
}
