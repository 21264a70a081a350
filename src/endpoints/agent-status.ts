import { deny } from '../errors.js';
import { jsonReply } from '../http/respond.js';
import { agentView } from './agent-view.js';
import { defineEndpoint } from './endpoint.js';

/** GET /agent/status?agent_id=: the owning host's view of one of its agents. */
export const agentStatus = defineEndpoint({
  name: 'agent_status',
  method: 'GET',
  path: '/agent/status',
  audience: '',
  auth: 'host',
  needs: 'hosts',
  discoveryName: 'status',
  async handle(call, deps) {
    const id = new URLSearchParams(call.target.query ?? '').get('agent_id');
    if (!id) return deny('invalid_query', 'agent_id is required');
    const agent = await deps.registered?.registry.get(id);
    // Another host's agent is reported exactly like an unknown one.
    if (!agent || agent.hostId !== call.host.host.id) return deny('agent_not_found', `no agent "${id}" registered by this host`);
    return jsonReply(200, agentView(agent));
  },
});
