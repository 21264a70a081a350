import { deny } from '../errors.js';
import { grantsFor } from '../pipeline/authorize.js';
import { accessRequestReply } from './access-request-view.js';
import { defineEndpoint } from './endpoint.js';

/** GET /agent/request-permission/{id}: the caller's own request, pending or final. */
export const requestStatus = defineEndpoint({
  name: 'request_status',
  method: 'GET',
  path: '/agent/request-permission/{id}',
  audience: 'request_permission',
  auth: 'agent',
  needs: 'accessRequests',
  async handle(call, deps) {
    const { agent } = call.verified;
    const id = call.params.id;
    const r = deps.approvals && id ? await deps.approvals.get(id) : undefined;
    if (!r || r.agentId !== agent.id) return deny('not_found', 'no such access request for this agent');
    return accessRequestReply(deps.policy, r, grantsFor(agent, deps.policy));
  },
});
