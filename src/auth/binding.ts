import { createHash } from 'node:crypto';
import { deny, type Denial } from '../errors.js';
import type { AgentClaims } from './verify.js';

/** The request a bound token must be used on, as the sidecar will forward it. */
export interface BoundRequest {
  method: string;
  /** The raw path as received (no query). */
  path: string;
  /** The body bytes as they will be forwarded (undefined: none). */
  body: Buffer | undefined;
}

/**
 * A token that names its request (`htm`, `htu`, `ath`, as Agent Auth and DPoP
 * do) is used only on that request. `htm` is the method (any case); `htu`
 * the target without query or fragment (one with them is refused), compared as a string with the
 * service's public origin (its issuer's) and the path exactly as received, as
 * RFC 9449 §4.3 compares it (the agent's external URL, not the sidecar's
 * listener); `ath` the base64url SHA-256 of the body bytes (of none: empty).
 * Pure.
 */
export function checkRequestBinding(claims: Pick<AgentClaims, 'htm' | 'htu' | 'ath'>, request: BoundRequest, publicOrigin: string): Denial | undefined {
  if (claims.htm !== undefined && claims.htm.toUpperCase() !== request.method.toUpperCase()) {
    return deny('request_binding_mismatch', `the token is bound to method ${claims.htm}, not ${request.method}`);
  }
  if (claims.htu !== undefined) {
    // RFC 9449 §4.2: htu is the target without query and fragment; one that carries them binds nothing it names.
    if (/[?#]/.test(claims.htu)) return deny('request_binding_mismatch', "the token's htu carries a query or fragment; bind the URL without them");
    if (claims.htu !== `${publicOrigin}${request.path}`)
      return deny('request_binding_mismatch', `the token is bound to ${claims.htu}, not ${publicOrigin}${request.path}`);
  }
  if (claims.ath !== undefined && claims.ath !== bodyHash(request.body)) {
    return deny('request_binding_mismatch', 'the token is bound to another body (ath is not the SHA-256 of these bytes)');
  }
  return undefined;
}

/**
 * What a token lacks where the policy requires binding: htm and htu always,
 * ath whenever the request has a body (a body-less request has nothing a
 * missing ath could let someone change). Pure.
 */
export function missingBinding(claims: Pick<AgentClaims, 'htm' | 'htu' | 'ath'>, body: Buffer | undefined): string | undefined {
  const missing: string[] = (['htm', 'htu'] as const).filter((c) => claims[c] === undefined);
  if (claims.ath === undefined && body !== undefined && body.length > 0) missing.push('ath');
  return missing.length ? `the token carries no ${missing.join(', ')}` : undefined;
}

/** base64url(SHA-256(body)): the `ath` of a request with this body. */
export function bodyHash(body: Uint8Array | undefined): string {
  return createHash('sha256')
    .update(body ?? new Uint8Array())
    .digest('base64url');
}

/** The origin htu names this service by: its issuer's (the URL agents are told to use). */
export function publicOrigin(issuer: string): string {
  try {
    return new URL(issuer).origin;
  } catch {
    return issuer.replace(/\/+$/, '');
  }
}
