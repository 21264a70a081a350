import { capabilityLocation } from '../auth/profile.js';
import { deny } from '../errors.js';
import { jsonReply } from '../http/respond.js';
import { grantKey } from '../policy/types.js';
import { grantsFor } from '../pipeline/authorize.js';
import { defineEndpoint } from './endpoint.js';
import { grantView } from './grant-view.js';

/**
 * GET /capability/describe?name=: one capability in full (the Agent Auth
 * Protocol's describe_capability): name, description, method, path, input
 * schema, location (its route on the issuer's origin). With an agent token (aud capability_describe) it also says what the
 * caller's grant is: `grant` (status and constraints) and the protocol's
 * `grant_status` (granted / not_granted). Cached privately when it names the
 * caller's grant, publicly otherwise.
 */
export const describeCapability = defineEndpoint({
  name: 'describe_capability',
  method: 'GET',
  path: '/capability/describe',
  audience: 'capability_describe',
  auth: 'optional_agent',
  discoveryName: 'describe_capability',
  handle(call, deps) {
    const name = new URLSearchParams(call.target.query ?? '').getAll('name');
    if (name.length !== 1 || !name[0]) return deny('invalid_query', 'name is required, once: the capability to describe');
    const c = deps.policy.capabilities.get(name[0]);
    if (!c) return deny('not_found', `no capability "${name[0]}"`);
    const agent = call.verified?.agent;
    const grant = agent ? grantView(grantsFor(agent, deps.policy).get(grantKey(agent.id, c.name)), deps.now()) : undefined;
    const body = {
      name: c.name,
      ...(c.description ? { description: c.description } : {}),
      method: c.method,
      path: c.path,
      // input_schema as /capability/list names it; input as the protocol does.
      ...(c.inputSchema ? { input_schema: c.inputSchema, input: c.inputSchema } : {}),
      location: capabilityLocation(deps.policy, c),
      ...(c.mcp ? { mcp: c.mcp } : {}),
      ...(grant ? { grant, grant_status: grant.status === 'active' ? 'granted' : 'not_granted' } : {}),
    };
    return jsonReply(200, body, { 'cache-control': `${grant ? 'private' : 'public'}, max-age=300` });
  },
});
