import { deny, isDenial, type Denial } from '../errors.js';
import { readJsonObject } from '../http/json-body.js';
import { jsonReply, type Reply } from '../http/respond.js';
import { readPublicKey } from '../identity/keys.js';
import type { Deps } from '../pipeline/deps.js';
import { verifyAgentProof } from '../registration/agent-proof.js';
import { agentView } from './agent-view.js';
import { defineEndpoint, type EndpointPhases } from './endpoint.js';

/**
 * POST /agent/rotate-key {agent_id, public_key, agent_proof} (host token of the
 * owning host): the Agent Auth Protocol's key rotation. The agent keeps its id
 * and grants; tokens signed by its old key are refused from the next call on,
 * on every replica. As at registration, the host proves it holds the new key
 * (agent_proof signed by it, bound to this host token), so a host cannot move
 * its agent onto a key someone else holds. Agents the policy lists have their
 * key in the policy: key_managed_by_policy.
 */
export const rotateKey = defineEndpoint({
  name: 'rotate_key',
  method: 'POST',
  path: '/agent/rotate-key',
  audience: '',
  auth: 'host',
  needs: 'hosts',
  discoveryName: 'rotate_key',
  handle: rotate,
});

const SHAPE = 'rotate-key needs a JSON object {agent_id, public_key, agent_proof}';

async function rotate(call: EndpointPhases['host'], deps: Deps): Promise<Reply | Denial> {
  const body = await readJsonObject(call.req, SHAPE, deps.limits.maxControlBodyBytes);
  if (isDenial(body)) return body;
  const { agent_id: id, public_key: jwk } = body;
  if (typeof id !== 'string' || typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) return deny('invalid_body', SHAPE);
  if (deps.policy.agents.has(id))
    return deny('key_managed_by_policy', `agent "${id}" is listed in the policy: change its publicKey there (keygen, then let the sidecar reload)`);
  const registry = deps.registered?.registry;
  const agent = await registry?.get(id);
  if (!registry || !agent || agent.hostId !== call.host.host.id) return deny('agent_not_found', `no agent "${id}" registered by this host`);
  if (agent.status !== 'active') return deny('capability_denied', `agent "${id}" is revoked: a revoked agent gets no new key; register a new key instead`);
  const read = await readPublicKey(jwk as Record<string, unknown>);
  if (typeof read === 'string') return deny('invalid_agent_key', `public_key is refused: ${read}`);
  const { key, thumbprint } = read;
  const unproven = verifyAgentProof(body.agent_proof, { key, thumbprint }, call.token, deps.policy.provider.issuer, Math.floor(deps.now() / 1000));
  if (unproven) return unproven;
  if ([...deps.policy.agents.values()].some((a) => a.thumbprint === thumbprint))
    return deny('invalid_body', 'this key belongs to an agent listed in the policy');
  // The key another registered agent is named after stays that agent's.
  const namesake = `agt_${thumbprint}`;
  if (namesake !== id && (await registry.get(namesake))) return deny('capability_denied', `this key is already registered, as agent "${namesake}"`);
  const publicKey = { kty: 'OKP', crv: 'Ed25519', x: String((jwk as Record<string, unknown>).x) } as const;
  const rotated = await registry.rotateKey(id, { publicKey, thumbprint }, deps.now());
  if (!rotated) return deny('capability_denied', `agent "${id}" was revoked meanwhile`);
  return jsonReply(200, agentView(rotated));
}
