import type { ServerResponse } from 'node:http';
import { deny, type Denial } from '../errors.js';
import { thumbprintOf, importAgentKey } from '../identity/keys.js';
import { grantKey, type Grant, type VerificationKey } from '../policy/types.js';
import { verifyAgentProof } from '../registration/agent-proof.js';
import { discoveryDocument } from '../registration/discovery.js';
import { deriveGrants } from '../registration/grants.js';
import type { RegisteredAgent } from '../registration/registry.js';
import { readStrictJsonObject, sendJson } from '../http/respond.js';
import type { Call, Deps } from '../pipeline/stages.js';

type Refuse = (d: Denial) => void;

const NAME = /^[\x20-\x7e]{1,128}$/;

/** GET /.well-known/agent-configuration: public, cacheable for an hour. */
export function discovery(call: Call, res: ServerResponse, deps: Deps): void {
  sendJson(res, 200, discoveryDocument(deps.policy), { 'cache-control': 'public, max-age=3600', 'x-request-id': call.requestId });
}

/**
 * GET /capability/list?cursor=&limit=: the policy's capabilities by name;
 * with an agent token (aud capability_list) each says what the caller's grant is.
 */
export function capabilityList(call: Call, res: ServerResponse, deps: Deps, refuse: Refuse): void {
  const params = new URLSearchParams(call.target?.query ?? '');
  const limit = Number(params.get('limit') ?? 50);
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > 200) return refuse(deny('invalid_query', 'limit must be a whole number from 1 to 200'));
  const cursor = params.get('cursor');
  const after = cursor ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
  const names = [...deps.policy.capabilities.keys()].sort().filter((n) => n > after);
  const page = names.slice(0, limit);
  const agent = call.verified?.agent;
  const grants = agent ? (agent.grants ?? deps.policy.grants) : undefined;
  const now = deps.now();
  const capabilities = page.map((name) => {
    const c = deps.policy.capabilities.get(name)!;
    return {
      name, ...(c.description ? { description: c.description } : {}), method: c.method, path: c.path,
      ...(c.inputSchema ? { input_schema: c.inputSchema } : {}),
      ...(grants ? { grant: grantView(grants.get(grantKey(agent!.id, name)), now) } : {}),
    };
  });
  const more = names.length > limit;
  sendJson(res, 200, { capabilities, ...(more ? { next_cursor: Buffer.from(page.at(-1)!).toString('base64url') } : {}) }, { 'x-request-id': call.requestId });
}

function grantView(g: Grant | undefined, now: number) {
  if (!g) return { status: 'none' };
  const status = g.status === 'revoked' ? 'revoked' : g.expiresAt !== undefined && g.expiresAt <= now ? 'expired' : 'active';
  return { status, constraints: g.constraints, ...(g.expiresAt !== undefined ? { expires_at: new Date(g.expiresAt).toISOString() } : {}) };
}

/**
 * POST /agent/register (host token carrying agent_public_key, body with the
 * agent's proof of possession): the key must be a safe Ed25519 key, the proof
 * signed by it and bound to this host token; the agent id is derived from the
 * key, so registering one key twice is idempotent; grants are the host's
 * defaults narrowed by the request.
 */
export async function register(call: Call, res: ServerResponse, deps: Deps, refuse: Refuse): Promise<void> {
  const { host, claims } = call.host!;
  const registry = deps.registered!.registry;
  const body = await readStrictJsonObject(call.req);
  if (typeof body === 'string') return refuse(deny('invalid_body', `registration needs a JSON object {name, agent_proof, capabilities?, mode?, reason?}: ${body}`));
  if (!claims.agent_public_key) return refuse(deny('token_invalid', 'a registration token carries the new agent\'s key as agent_public_key'));
  let thumbprint: string;
  let key: VerificationKey;
  try {
    key = await importAgentKey(claims.agent_public_key);
    thumbprint = await thumbprintOf(claims.agent_public_key);
  } catch (err) {
    return refuse(deny('invalid_agent_key', `agent_public_key is refused: ${(err as Error).message}`));
  }
  const unproven = verifyAgentProof(body.agent_proof, { key, thumbprint }, call.token!, deps.policy.provider.issuer, Math.floor(deps.now() / 1000));
  if (unproven) return refuse(unproven);
  if (typeof body.name !== 'string' || !NAME.test(body.name)) return refuse(deny('invalid_body', 'name must be 1 to 128 printable ASCII characters'));
  const mode = body.mode ?? 'autonomous';
  if (mode !== 'delegated' && mode !== 'autonomous') return refuse(deny('invalid_body', 'mode must be delegated or autonomous'));
  if (body.reason !== undefined && typeof body.reason !== 'string') return refuse(deny('invalid_body', 'reason must be a string'));
  const grants = deriveGrants(host, body.capabilities);
  if (typeof grants === 'string') return refuse(deny('capability_denied', grants));
  const id = `agt_${thumbprint}`;
  if ([...deps.policy.agents.values()].some((a) => a.thumbprint === thumbprint || a.id === id)) {
    return refuse(deny('invalid_body', 'this key belongs to an agent listed in the policy'));
  }
  const agent: RegisteredAgent = {
    id, name: body.name, hostId: host.id, publicKey: { kty: 'OKP', crv: 'Ed25519', x: String(claims.agent_public_key.x) }, thumbprint,
    mode, ...(typeof body.reason === 'string' ? { reason: body.reason.slice(0, 1000) } : {}), status: 'active', grants, registeredAt: deps.now(),
  };
  const result = await registry.register(agent, host.maxAgents);
  if (!('agent' in result)) {
    return refuse(result.outcome === 'limit'
      ? deny('agent_limit_reached', `host "${host.id}" already has its maximum of ${host.maxAgents} agents`)
      : deny('capability_denied', 'this agent key was revoked; a revoked key stays revoked: register a new key'));
  }
  if (result.agent.hostId !== host.id) return refuse(deny('capability_denied', 'this agent was registered by another host'));
  sendJson(res, result.outcome === 'created' ? 201 : 200, agentView(result.agent), { 'x-request-id': call.requestId });
}

/** GET /agent/status?agent_id=: the owning host's view of one of its agents. */
export async function agentStatus(call: Call, res: ServerResponse, deps: Deps, refuse: Refuse): Promise<void> {
  const id = new URLSearchParams(call.target?.query ?? '').get('agent_id');
  if (!id) return refuse(deny('invalid_query', 'agent_id is required'));
  const agent = await deps.registered!.registry.get(id);
  // Another host's agent is reported exactly like an unknown one.
  if (!agent || agent.hostId !== call.host!.host.id) return refuse(deny('agent_not_found', `no agent "${id}" registered by this host`));
  sendJson(res, 200, agentView(agent), { 'x-request-id': call.requestId });
}

/** POST /agent/revoke {agent_id}: the owning host revokes; the next call of that agent on any replica is refused. */
export async function revoke(call: Call, res: ServerResponse, deps: Deps, refuse: Refuse): Promise<void> {
  const body = await readStrictJsonObject(call.req);
  if (typeof body === 'string') return refuse(deny('invalid_body', `revoke needs a JSON object {agent_id}: ${body}`));
  const id = body.agent_id;
  if (typeof id !== 'string') return refuse(deny('invalid_body', 'revoke needs a JSON object {agent_id}'));
  const registry = deps.registered!.registry;
  const agent = await registry.get(id);
  if (!agent || agent.hostId !== call.host!.host.id) return refuse(deny('agent_not_found', `no agent "${id}" registered by this host`));
  const revoked = (await registry.revoke(id, deps.now())) ?? (await registry.get(id))!;
  sendJson(res, 200, agentView(revoked), { 'x-request-id': call.requestId });
}

/** The wire shape (snake_case, as the Agent Auth draft names things). */
export function agentView(a: RegisteredAgent) {
  return {
    agent_id: a.id, host_id: a.hostId, name: a.name, status: a.status, mode: a.mode,
    registered_at: new Date(a.registeredAt).toISOString(), ...(a.revokedAt ? { revoked_at: new Date(a.revokedAt).toISOString() } : {}),
    agent_capability_grants: a.grants.map((g) => ({ capability: g.capability, status: a.status === 'active' ? 'active' : 'revoked', constraints: g.constraints })),
  };
}
