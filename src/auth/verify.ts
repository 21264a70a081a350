/**
 * Agent token verification (agent+jwt): steps 1-7 of the 9-step table in the agents-chain spec
 * (../shared/seeds/002_9af9aaa6cc5deb37.txt); steps 8 (replay, replay.ts) and 9 (grant, grant.ts)
 * run as their own pipeline stages. Also the replay window those stages use, derived from step 7.
 */
import { audienceProblem, CLOCK_SKEW_SECONDS, checkTimes, jtiProblem, stringProblem, timeProblem, type TimeClaims } from './claims.js';
import { decodeJws, signatureCheck } from './jws.js';
import { deny, type Denial } from '../errors.js';
import { AGENT_TOKEN_TYPE, MAX_TOKEN_LIFETIME_SECONDS } from '../identity/token-types.js';
import type { Agent } from '../policy/types.js';

export { CLOCK_SKEW_SECONDS };

/**
 * How long a jti is remembered (step 8). A token is accepted from iat - skew to
 * exp + skew, up to 60 + 2 x 30 = 120 s, so the spec's 90 s replay window
 * (step 8 of its table) is widened to cover every instant a token could still
 * pass step 7.
 */
export const REPLAY_WINDOW_SECONDS = MAX_TOKEN_LIFETIME_SECONDS + 2 * CLOCK_SKEW_SECONDS;
/**
 * How long a spent jti is kept, in ms: step 7 compares whole seconds (the
 * clock is floored), so a token still passes during the whole second
 * exp + skew, up to one second past REPLAY_WINDOW_SECONDS after its first
 * possible use.
 */
export const REPLAY_TTL_MS = (REPLAY_WINDOW_SECONDS + 1) * 1000;

export interface AgentClaims extends TimeClaims {
  sub: string;
  /** agents-chain: the agent key's thumbprint. agent-auth-v1: the host's (thumbprint or id), the agent's own, or absent. */
  iss?: string;
  aud: string;
  jti: string;
  /** agent-auth-v1: the capabilities this token may be used for (absent: any the agent holds). */
  capabilities?: string[];
  /** Request binding (Agent Auth, DPoP-style): the method, target URI and body hash the token was minted for. */
  htm?: string;
  htu?: string;
  ath?: string;
}

export interface VerifiedToken {
  agent: Agent;
  claims: AgentClaims;
}

/** Where agents are looked up: the policy's map, or a lookup that also reads registered agents. */
export interface AgentDirectory {
  get(id: string): Agent | undefined | Promise<Agent | undefined>;
}

/**
 * What a token must be for. agents-chain: `aud` is the capability (or a
 * sidecar endpoint's audience). agent-auth-v1: `aud` is one of this service's
 * URLs (its issuer, origin, execute endpoint, or the capability's location),
 * `iss` one of `issuers` or absent, a header `kid` the agent key's thumbprint,
 * and a `capabilities` claim, when present, names the capability.
 */
export type Expected = string | AgentAuthExpected;

/** agent-auth-v1: the service's URLs, who may issue, and (on a capability route) the capability and its location. */
export interface AgentAuthExpected {
  readonly capability?: string;
  readonly location?: string;
  readonly urls: ReadonlySet<string>;
  readonly issuers: (agent: Agent) => readonly string[];
}

/**
 * Steps 1–7 of the spec's verification table, in its order. Step 8 (replay)
 * needs the store and step 9 (grant) the policy's grants: they are their own
 * pipeline stages. The form, header and signature rules are jws.ts's, the claim
 * rules claims.ts's (shared with host and proof tokens). The key is only ever
 * the directory's key for `sub`; a `kid` in the header is never used.
 */
export async function verifyAgentToken(token: string, expected: Expected, agents: AgentDirectory, nowSeconds: number): Promise<VerifiedToken | Denial> {
  // A string: the seed's profile, aud = that capability (or endpoint audience).
  const seed = typeof expected === 'string';
  // 1–2: decode header and payload, confirm typ, alg and the header members; claim types.
  const jws = decodeJws(token, AGENT_TOKEN_TYPE);
  if (typeof jws === 'string') return deny('token_invalid', jws);
  const claims = readClaims(jws.payload, seed);
  if (typeof claims === 'string') return deny('token_invalid', claims);

  // 3: sub names a registered agent.
  const agent = await agents.get(claims.sub);
  if (!agent) return deny('agent_not_found', `no agent "${claims.sub}" is registered`);
  if (seed) {
    // 4: iss is that agent's key thumbprint.
    if (claims.iss !== agent.thumbprint) return denyAs(agent, 'token_invalid', "token iss is not the thumbprint of the agent's key");
    // 5: aud is the capability being called.
    if (claims.aud !== expected) return denyAs(agent, 'capability_denied', `token is for "${claims.aud}", not "${expected}"`);
  } else {
    const refused = agentAuthProblem(agent, jws.header.kid, claims, expected);
    if (refused) return refused;
  }
  // 6: signature, with the policy's key only.
  const valid = signatureCheck(token, agent.key);
  if (!(typeof valid === 'boolean' ? valid : await valid)) return denyAs(agent, 'token_invalid', 'token signature is invalid');
  // 7: lifetime and clock.
  const late = checkTimes(claims, nowSeconds);
  if (late) return { ...late, agentId: agent.id };
  return { agent, claims };
}

/** A denial after step 3 names the agent the token claimed to be. */
function denyAs(agent: Agent, ...args: Parameters<typeof deny>): Denial {
  return { ...deny(...args), agentId: agent.id };
}

/**
 * Steps 4–5 in the Agent Auth profile: the key is the one `sub` names (a
 * header `kid` must be its thumbprint, never a way to pick another key), the
 * issuer is the agent's host or the agent itself, the audience this service.
 */
function agentAuthProblem(agent: Agent, kid: unknown, claims: AgentClaims, expected: AgentAuthExpected): Denial | undefined {
  if (kid !== undefined && kid !== agent.thumbprint) return denyAs(agent, 'token_invalid', "token kid is not the thumbprint of the agent's key");
  if (claims.iss !== undefined && !expected.issuers(agent).includes(claims.iss))
    return denyAs(agent, 'token_invalid', "token iss is neither the agent's host nor the agent's key thumbprint");
  // A capability's location names it only with a capabilities claim of that one capability (as the reference reads it).
  const atLocation = claims.aud === expected.location && claims.capabilities?.length === 1 && claims.capabilities[0] === expected.capability;
  if (!expected.urls.has(claims.aud) && !atLocation)
    return denyAs(agent, 'token_invalid', `token aud "${claims.aud}" is not this service (${[...expected.urls][0]})`);
  if (claims.capabilities && expected.capability !== undefined && !claims.capabilities.includes(expected.capability))
    return denyAs(agent, 'capability_denied', `the token's capabilities claim does not include "${expected.capability}"`);
  return undefined;
}

function readClaims(p: Record<string, unknown>, seed: boolean): AgentClaims | string {
  const v1 = !seed;
  const problem =
    stringProblem(p, 'sub') ??
    (v1 && p.iss === undefined ? undefined : stringProblem(p, 'iss')) ??
    audienceProblem(p, v1 ? "this service's URL" : 'the capability name') ??
    timeProblem(p) ??
    jtiProblem(p);
  if (problem) return problem;
  const claims: AgentClaims = {
    sub: p.sub as string,
    aud: p.aud as string,
    iat: p.iat as number,
    exp: p.exp as number,
    jti: p.jti as string,
  };
  if (p.iss !== undefined) claims.iss = p.iss as string;
  if (p.nbf !== undefined) claims.nbf = p.nbf as number;
  if (v1 && p.capabilities !== undefined) {
    const caps = p.capabilities;
    if (!Array.isArray(caps) || caps.length === 0 || !caps.every((c) => typeof c === 'string' && c !== ''))
      return 'claim "capabilities" must be a non-empty array of capability names';
    claims.capabilities = caps as string[];
  }
  for (const name of ['htm', 'htu', 'ath'] as const) {
    const v = p[name];
    if (v === undefined) continue;
    if (typeof v !== 'string' || v === '') return `claim "${name}" must be a non-empty string`;
    claims[name] = v;
  }
  return claims;
}
