import { constraintContext } from '../context/constraint-context.js';
import { jsonReply } from '../http/respond.js';
import { grantsFor } from '../pipeline/authorize.js';
import { defineEndpoint } from './endpoint.js';

/** GET /agent/constraints: the caller's own limits, as a system-prompt block (or JSON). */
export const constraintContextEndpoint = defineEndpoint({
  name: 'constraint_context',
  method: 'GET',
  path: '/agent/constraints',
  audience: 'constraint_context',
  auth: 'agent',
  discoveryName: 'constraints',
  handle(call, deps) {
    const { agent } = call.verified;
    const ctx = constraintContext(deps.policy, agent.id, deps.now(), grantsFor(agent, deps.policy));
    if (/application\/json/i.test(call.req.headers.accept ?? '')) return jsonReply(200, ctx);
    return { status: 200, text: ctx.text, contentType: 'text/plain; charset=utf-8' };
  },
});
