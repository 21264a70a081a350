import { deny, isDenial, type Denial } from '../errors.js';
import { readJsonObject } from '../http/json-body.js';
import { jsonReply, type Reply } from '../http/respond.js';
import { DISPLAY_NAME, readPublicKey } from '../identity/keys.js';
import type { Deps } from '../pipeline/deps.js';
import { verifyAgentProof } from '../registration/agent-proof.js';
import { deriveGrants } from '../registration/grants.js';
import type { RegisteredAgent } from '../registration/registry.js';
import { agentView } from './agent-view.js';
import { defineEndpoint, type EndpointPhases } from './endpoint.js';

/**
 * POST /agent/register (host token carrying agent_public_key, body with the
 * agent's proof of possession): the key must be a safe Ed25519 key, the proof
 * signed by it and bound to this host token; the agent id is derived from the
 * key, so registering one key twice is idempotent; grants are the host's
 * defaults narrowed by the request.
 */
export const register = defineEndpoint({
  name: 'register',
  method: 'POST',
  path: '/agent/register',
  audience: '',
  auth: 'host',
  needs: 'hosts',
  discoveryName: 'register',
  handle: registerAgent,
});

async function registerAgent(call: EndpointPhases['host'], deps: Deps): Promise<Reply | Denial> {
  const { host, claims } = call.host;
  const body = await readJsonObject(
    call.req,
    'registration needs a JSON object {name, agent_proof, capabilities?, mode?, reason?, host_name?}',
    deps.limits.maxControlBodyBytes,
  );
  if (isDenial(body)) return body;
  if (!claims.agent_public_key) return deny('token_invalid', "a registration token carries the new agent's key as agent_public_key");
  const read = await readPublicKey(claims.agent_public_key);
  if (typeof read === 'string') return deny('invalid_agent_key', `agent_public_key is refused: ${read}`);
  const { key, thumbprint } = read;
  const unproven = verifyAgentProof(body.agent_proof, { key, thumbprint }, call.token, deps.policy.provider.issuer, Math.floor(deps.now() / 1000));
  if (unproven) return unproven;
  if (typeof body.name !== 'string' || !DISPLAY_NAME.test(body.name)) return deny('invalid_body', 'name must be 1 to 128 printable ASCII characters');
  const mode = body.mode ?? 'autonomous';
  if (mode !== 'delegated' && mode !== 'autonomous') return deny('invalid_body', 'mode must be delegated or autonomous');
  if (body.reason !== undefined && typeof body.reason !== 'string') return deny('invalid_body', 'reason must be a string');
  const protocol = protocolFields(body);
  if (protocol) return protocol;
  const grants = deriveGrants(host, body.capabilities);
  if (isDenial(grants)) return grants;
  const id = `agt_${thumbprint}`;
  if ([...deps.policy.agents.values()].some((a) => a.thumbprint === thumbprint || a.id === id))
    return deny('invalid_body', 'this key belongs to an agent listed in the policy');
  const registry = deps.registered?.registry;
  if (!registry) return deny('not_found', 'agent registration is not served here');
  const agent: RegisteredAgent = {
    id,
    name: body.name,
    hostId: host.id,
    publicKey: { kty: 'OKP', crv: 'Ed25519', x: String(claims.agent_public_key.x) },
    thumbprint,
    mode,
    ...(typeof body.reason === 'string' ? { reason: body.reason.slice(0, 1000) } : {}),
    status: 'active',
    grants,
    registeredAt: deps.now(),
  };
  const result = await registry.register(agent, host.maxAgents);
  if (!('agent' in result)) {
    return result.outcome === 'limit'
      ? deny('agent_limit_reached', `host "${host.id}" already has its maximum of ${host.maxAgents} agents`)
      : deny('capability_denied', 'this agent key was revoked; a revoked key stays revoked: register a new key');
  }
  if (result.agent.hostId !== host.id) return deny('capability_denied', 'this agent was registered by another host');
  if (result.agent.thumbprint !== thumbprint)
    return deny('capability_denied', "this key was replaced by a key rotation (rotate-key): a retired key stays retired; register the agent's new key");
  return jsonReply(result.outcome === 'created' ? 201 : 200, agentView(result.agent));
}

/**
 * The Agent Auth Protocol's other registration fields (as its reference
 * server reads them). host_name, preferred_method, login_hint and
 * binding_message steer a human approval of the registration; this sidecar
 * has none (an agent is active at once, within its host's defaults), so
 * they are checked for type and otherwise unused. force_approval: true asks
 * for that approval, and is refused rather than silently skipped.
 */
function protocolFields(body: Record<string, unknown>): Denial | undefined {
  for (const name of ['host_name', 'preferred_method', 'login_hint', 'binding_message'] as const) {
    const v = body[name];
    if (v !== undefined && (typeof v !== 'string' || v.length > 1000)) return deny('invalid_body', `${name} must be a string of at most 1000 characters`);
  }
  const force = body.force_approval;
  if (force !== undefined && typeof force !== 'boolean') return deny('invalid_body', 'force_approval must be a boolean');
  if (force === true)
    return deny(
      'invalid_body',
      "force_approval is not served here: registrations are not approved by a human; agents are active at once, within their host's defaults",
    );
  return undefined;
}
