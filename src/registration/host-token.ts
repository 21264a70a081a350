import { audienceProblem, checkTimes, jtiProblem, stringProblem, timeProblem, type TimeClaims } from '../auth/claims.js';
import { decodeJws, signatureValid } from '../auth/jws.js';
import { deny, type Denial } from '../errors.js';
import { HOST_TOKEN_TYPE } from '../identity/client.js';
import type { Host } from '../policy/types.js';

export interface HostClaims extends TimeClaims {
  iss: string;
  aud: string;
  jti: string;
  /** Registration tokens: the new agent's public key (an Ed25519 JWK, public part only). */
  agent_public_key?: Record<string, unknown>;
}

export interface VerifiedHostToken {
  host: Host;
  claims: HostClaims;
}

/**
 * A host's token (typ host+jwt), through the same decoder and claim rules as
 * an agent token (auth/jws.ts, auth/claims.ts) and in the same order: form and
 * header, claim types, `iss` names a trusted host (its key thumbprint), `aud`
 * is this service's issuer, the signature with that host's key only, the
 * lifetime (at most 60 s). The jti is spent by its own stage (the replay
 * store). Pure.
 */
export function verifyHostToken(token: string, hosts: ReadonlyMap<string, Host>, issuer: string, nowSeconds: number): VerifiedHostToken | Denial {
  const jws = decodeJws(token, HOST_TOKEN_TYPE);
  if (typeof jws === 'string') return deny('token_invalid', jws);
  const p = jws.payload;
  const key = p.agent_public_key;
  const problem =
    stringProblem(p, 'iss') ??
    audienceProblem(p, "the service's issuer") ??
    timeProblem(p) ??
    jtiProblem(p) ??
    (key !== undefined && (typeof key !== 'object' || key === null || Array.isArray(key)) ? 'agent_public_key must be a JWK object' : undefined);
  if (problem) return deny('token_invalid', problem);
  const claims: HostClaims = { iss: p.iss as string, aud: p.aud as string, iat: p.iat as number, exp: p.exp as number, jti: p.jti as string };
  if (p.nbf !== undefined) claims.nbf = p.nbf as number;
  if (key) claims.agent_public_key = key as Record<string, unknown>;
  const host = hosts.get(claims.iss);
  if (!host) return deny('host_not_found', 'no trusted host has this key (iss is not a host key thumbprint in the policy)');
  if (claims.aud !== issuer) return deny('token_invalid', `token is for "${claims.aud}", not this service ("${issuer}")`);
  if (!signatureValid(token, host.key)) return deny('token_invalid', 'token signature is invalid');
  return checkTimes(claims, nowSeconds) ?? { host, claims };
}
