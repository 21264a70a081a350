/**
 * Claim validation shared by every token (jose's jwtVerify half; jws.ts is the
 * compactVerify half). Types are read before any lookup (steps 1-2 of the
 * verification table in the agents-chain spec, ../shared/seeds/002_9af9aaa6cc5deb37.txt);
 * times are judged after the signature (step 7). Pure.
 */
import { deny, type Denial } from '../errors.js';
import { MAX_TOKEN_LIFETIME_SECONDS } from '../identity/token-types.js';

/** Seconds of clock difference tolerated between a signer and the sidecar. */
export const CLOCK_SKEW_SECONDS = 30;

/** The time claims every token carries, as integer seconds (read by timeProblem, judged by checkTimes). */
export interface TimeClaims {
  iat: number;
  exp: number;
  nbf?: number;
}

/** Each returns why a claim has the wrong type, or undefined; the caller then reads the claims as typed. */
export function stringProblem(p: Record<string, unknown>, name: string): string | undefined {
  const v = p[name];
  return typeof v === 'string' && v !== '' ? undefined : `token ${name} must be a non-empty string`;
}

/** `aud` as one string: an array is refused (an audience list would let one token serve several services or capabilities). */
export function audienceProblem(p: Record<string, unknown>, what: string): string | undefined {
  return typeof p.aud === 'string' ? undefined : `token aud must be a single string (${what})`;
}

/** A single-use id of 1 to 128 characters. */
export function jtiProblem(p: Record<string, unknown>): string | undefined {
  const v = p.jti;
  return typeof v === 'string' && v.length >= 1 && v.length <= 128 ? undefined : 'token jti must be a string of 1 to 128 characters';
}

/** iat and exp (and nbf, when present) as integer seconds. */
export function timeProblem(p: Record<string, unknown>): string | undefined {
  if (!Number.isSafeInteger(p.iat)) return 'token iat must be an integer number of seconds';
  if (!Number.isSafeInteger(p.exp)) return 'token exp must be an integer number of seconds';
  if (p.nbf !== undefined && !Number.isSafeInteger(p.nbf)) return 'token nbf must be an integer number of seconds';
  return undefined;
}

/** Step 7: exp after iat, at most 60 s of lifetime, not issued (or valid) in the future, not expired; 30 s of skew. */
export function checkTimes(t: TimeClaims, nowSeconds: number): Denial | undefined {
  if (t.exp <= t.iat) return deny('token_invalid', 'token exp must be after iat');
  if (t.exp - t.iat > MAX_TOKEN_LIFETIME_SECONDS) return deny('token_invalid', `token lifetime exceeds ${MAX_TOKEN_LIFETIME_SECONDS} seconds`);
  if (t.iat > nowSeconds + CLOCK_SKEW_SECONDS) return deny('token_invalid', 'token iat is in the future');
  if (t.nbf !== undefined && t.nbf > nowSeconds + CLOCK_SKEW_SECONDS) return deny('token_invalid', 'token is not valid yet (nbf)');
  if (t.exp + CLOCK_SKEW_SECONDS < nowSeconds) return deny('token_expired', 'token has expired');
  return undefined;
}
