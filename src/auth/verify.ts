import { verify } from 'node:crypto';
import { deny, type Denial } from '../errors.js';
import { AGENT_TOKEN_TYPE, MAX_TOKEN_LIFETIME_SECONDS } from '../identity/client.js';
import { parseStrictJsonBytes } from '../json/strict.js';
import type { Agent, VerificationKey } from '../policy/types.js';

/** Seconds of clock difference tolerated between agent and sidecar. */
export const CLOCK_SKEW_SECONDS = 30;
/**
 * How long a jti is remembered. A token is accepted from iat - skew to
 * exp + skew, up to 60 + 2 x 30 = 120 s, so the seed's 90 s window is
 * widened to cover every instant a token could still pass step 7.
 */
export const REPLAY_WINDOW_SECONDS = MAX_TOKEN_LIFETIME_SECONDS + 2 * CLOCK_SKEW_SECONDS;

export interface AgentClaims {
  sub: string;
  iss: string;
  aud: string;
  iat: number;
  exp: number;
  jti: string;
}

export interface VerifiedToken {
  agent: Agent;
  claims: AgentClaims;
}

const B64URL = /^[A-Za-z0-9_-]+$/;

/**
 * Steps 1–7 of the seed's verification table, in its order. Step 8 (replay)
 * needs the store and step 9 (grant) the policy's grants: they are their own
 * pipeline stages. The key is only ever the policy's key for `sub`; `kid`,
 * `jwk`, `jku` and `x5u` in the header are ignored.
 */
/** Where agents are looked up: the policy's map, or a lookup that also reads registered agents. */
export interface AgentDirectory {
  get(id: string): Agent | undefined | Promise<Agent | undefined>;
}

export async function verifyAgentToken(
  token: string,
  capability: string,
  agents: AgentDirectory,
  nowSeconds: number,
): Promise<VerifiedToken | Denial> {
  // 1–2: decode header and payload, confirm typ.
  const parts = token.split('.');
  if (parts.length !== 3 || !parts.every((p) => B64URL.test(p))) return deny('token_invalid', 'token is not a compact JWS');
  const header = decodeSegment(parts[0]!);
  const payload = decodeSegment(parts[1]!);
  if (!header) return deny('token_invalid', 'token header is not a JSON object (or has duplicate keys)');
  if (!payload) return deny('token_invalid', 'token payload is not a JSON object (or has duplicate keys)');
  if (header.typ !== AGENT_TOKEN_TYPE) return deny('token_invalid', `token typ must be "${AGENT_TOKEN_TYPE}"`);
  if (header.alg !== 'EdDSA') return deny('token_invalid', 'token alg must be "EdDSA"');
  const claims = readClaims(payload);
  if (typeof claims === 'string') return deny('token_invalid', claims);

  // 3: sub names a registered agent.
  const agent = await agents.get(claims.sub);
  if (!agent) return deny('agent_not_found', `no agent "${claims.sub}" is registered`);
  // 4: iss is that agent's key thumbprint.
  if (claims.iss !== agent.thumbprint) return denyAs(agent, 'token_invalid', 'token iss is not the thumbprint of the agent\'s key');
  // 5: aud is the capability being called.
  if (claims.aud !== capability) return denyAs(agent, 'capability_denied', `token is for "${claims.aud}", not "${capability}"`);
  // 6: signature, with the policy's key only.
  if (!signatureValid(token, agent.key)) return denyAs(agent, 'token_invalid', 'token signature is invalid');
  // 7: lifetime and clock.
  if (claims.exp <= claims.iat) return denyAs(agent, 'token_invalid', 'token exp must be after iat');
  if (claims.exp - claims.iat > MAX_TOKEN_LIFETIME_SECONDS) {
    return denyAs(agent, 'token_invalid', `token lifetime exceeds ${MAX_TOKEN_LIFETIME_SECONDS} seconds`);
  }
  if (claims.iat > nowSeconds + CLOCK_SKEW_SECONDS) return denyAs(agent, 'token_invalid', 'token iat is in the future');
  if (typeof payload.nbf === 'number' && payload.nbf > nowSeconds + CLOCK_SKEW_SECONDS) {
    return denyAs(agent, 'token_invalid', 'token is not valid yet (nbf)');
  }
  if (claims.exp + CLOCK_SKEW_SECONDS < nowSeconds) return denyAs(agent, 'token_expired', 'token has expired');
  return { agent, claims };
}

/**
 * Ed25519 over the JWS signing input (RFC 8037). node:crypto directly: the
 * same check jose's compactVerify makes, at well under half the cost on
 * Node 20 (see `make bench`). alg and typ were already pinned above.
 */
/** A denial after step 3 names the agent the token claimed to be. */
function denyAs(agent: Agent, ...args: Parameters<typeof deny>): Denial {
  return { ...deny(...args), agentId: agent.id };
}

export function signatureValid(token: string, key: VerificationKey): boolean {
  const dot = token.lastIndexOf('.');
  const signature = Buffer.from(token.slice(dot + 1), 'base64url');
  if (signature.length !== 64) return false;
  return verify(null, Buffer.from(token.slice(0, dot)), key, signature);
}

export function decodeSegment(seg: string): Record<string, unknown> | undefined {
  try {
    const v = parseStrictJsonBytes(Buffer.from(seg, 'base64url'));
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function readClaims(p: Record<string, unknown>): AgentClaims | string {
  for (const name of ['sub', 'iss'] as const) {
    if (typeof p[name] !== 'string' || p[name] === '') return `token ${name} must be a non-empty string`;
  }
  if (typeof p.aud !== 'string') return 'token aud must be a single string (the capability name)';
  for (const name of ['iat', 'exp'] as const) {
    if (!Number.isSafeInteger(p[name])) return `token ${name} must be an integer number of seconds`;
  }
  if (p.nbf !== undefined && !Number.isSafeInteger(p.nbf)) return 'token nbf must be an integer number of seconds';
  const jti = p.jti;
  if (typeof jti !== 'string' || jti.length < 1 || jti.length > 128) return 'token jti must be a string of 1 to 128 characters';
  return { sub: p.sub as string, iss: p.iss as string, aud: p.aud, iat: p.iat as number, exp: p.exp as number, jti };
}
