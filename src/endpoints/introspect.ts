import { decodeJws } from '../auth/jws.js';
import { expectedToken } from '../auth/profile.js';
import { verifyAgentToken, type AgentClaims, type Expected } from '../auth/verify.js';
import { deny, isDenial } from '../errors.js';
import { readJsonObject } from '../http/json-body.js';
import { jsonReply } from '../http/respond.js';
import { AGENT_TOKEN_TYPE } from '../identity/token-types.js';
import type { Agent, Policy } from '../policy/types.js';
import { grantsFor } from '../pipeline/authorize.js';
import type { Deps } from '../pipeline/deps.js';
import { agentLookup } from '../registration/directory.js';
import { defineEndpoint } from './endpoint.js';

const INACTIVE = { active: false } as const;

/**
 * POST /agent/introspect {token}: is this agent token one the sidecar would
 * accept, and for whom (the Agent Auth Protocol's introspect, RFC 7662's
 * shape). Like the reference server it needs no caller authentication: the
 * token in the body is the credential, and whoever holds it could use it.
 * Active means steps 1-7 pass now (form, agent, issuer, audience, signature,
 * lifetime); the answer names the agent, its host and its active grants (for
 * an agents-chain token, the grant of the capability it is for). Unlike the
 * reference, the token's jti is neither spent nor looked up: introspecting a
 * token never uses it up, and `active` does not say whether it was used
 * already. Every refusal is `{"active": false}`, with no reason.
 */
export const introspect = defineEndpoint({
  name: 'introspect',
  method: 'POST',
  path: '/agent/introspect',
  audience: '',
  auth: 'none',
  discoveryName: 'introspect',
  async handle(call, deps) {
    const body = await readJsonObject(call.req, 'introspect needs a JSON object {token}', deps.limits.maxControlBodyBytes);
    if (isDenial(body)) return body;
    if (typeof body.token !== 'string' || body.token === '') return deny('invalid_body', 'introspect needs a JSON object {token}');
    const jws = decodeJws(body.token, AGENT_TOKEN_TYPE);
    const expected = typeof jws === 'string' ? undefined : expectationOf(deps.policy, jws.payload);
    if (!expected) return jsonReply(200, INACTIVE, NO_STORE);
    const verified = await verifyAgentToken(body.token, expected, agentLookup(deps), Math.floor(deps.now() / 1000));
    if (isDenial(verified)) return jsonReply(200, INACTIVE, NO_STORE);
    return jsonReply(200, await activeView(verified.agent, verified.claims, deps), NO_STORE);
  },
});

/** An answer about one token is never cached. */
const NO_STORE = { 'cache-control': 'no-store' };

/**
 * What the token must be for, read from its own (unverified) claims: a
 * capability or an endpoint audience of this service (agents-chain), or this
 * service's URL (agent-auth-v1). Anything else is no token of this service.
 */
function expectationOf(policy: Policy, payload: Record<string, unknown>): Expected | undefined {
  const aud = payload.aud;
  if (typeof aud !== 'string') return undefined;
  if (policy.provider.tokenProfile === 'agent-auth-v1') {
    const caps = payload.capabilities;
    const only = Array.isArray(caps) && caps.length === 1 && typeof caps[0] === 'string' ? policy.capabilities.get(caps[0]) : undefined;
    return expectedToken(policy, only, '');
  }
  const capability = policy.capabilities.get(aud);
  if (!capability && !policy.routes.some((r) => r.kind === 'endpoint' && r.audience !== '' && r.audience === aud)) return undefined;
  return expectedToken(policy, capability, aud);
}

async function activeView(agent: Agent, claims: AgentClaims, deps: Deps) {
  const { policy } = deps;
  const now = deps.now();
  // agents-chain: a capability token is good for its capability only; a v1 token for its capabilities claim, if any.
  const scope = policy.capabilities.has(claims.aud) ? [claims.aud] : claims.capabilities;
  const grants = [...grantsFor(agent, policy).values()].filter(
    (g) =>
      g.agent === agent.id &&
      g.status === 'active' &&
      (g.expiresAt === undefined || g.expiresAt > now) &&
      policy.capabilities.has(g.capability) &&
      (!scope || scope.includes(g.capability)),
  );
  const record = agent.hostId !== undefined ? await deps.registered?.registry.get(agent.id) : undefined;
  return {
    active: true,
    agent_id: agent.id,
    host_id: agent.hostId ?? null,
    user_id: null,
    name: agent.name,
    mode: record?.mode ?? 'autonomous',
    agent_capability_grants: grants
      .map((g) => ({ capability: g.capability, status: 'active', constraints: g.constraints }))
      .sort((a, b) => (a.capability < b.capability ? -1 : 1)),
    aud: claims.aud,
    iat: claims.iat,
    exp: claims.exp,
    jti: claims.jti,
    expires_at: null,
  };
}
