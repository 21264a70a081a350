import { deny, isDenial } from '../errors.js';
import { readJsonObject } from '../http/json-body.js';
import { jsonReply } from '../http/respond.js';
import { agentView } from './agent-view.js';
import { defineEndpoint } from './endpoint.js';

/** POST /agent/revoke {agent_id}: the owning host revokes; the next call of that agent on any replica is refused. */
export const revoke = defineEndpoint({
  name: 'revoke',
  method: 'POST',
  path: '/agent/revoke',
  audience: '',
  auth: 'host',
  needs: 'hosts',
  discoveryName: 'revoke',
  async handle(call, deps) {
    const body = await readJsonObject(call.req, 'revoke needs a JSON object {agent_id}', deps.limits.maxControlBodyBytes);
    if (isDenial(body)) return body;
    const id = body.agent_id;
    if (typeof id !== 'string') return deny('invalid_body', 'revoke needs a JSON object {agent_id}');
    const registry = deps.registered?.registry;
    const agent = await registry?.get(id);
    if (!registry || !agent || agent.hostId !== call.host.host.id) return deny('agent_not_found', `no agent "${id}" registered by this host`);
    const revoked = (await registry.revoke(id, deps.now())) ?? (await registry.get(id)) ?? agent;
    return jsonReply(200, agentView(revoked));
  },
});
