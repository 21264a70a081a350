import { deny } from '../errors.js';
import { jsonReply } from '../http/respond.js';
import { grantKey } from '../policy/types.js';
import { grantsFor } from '../pipeline/authorize.js';
import { defineEndpoint } from './endpoint.js';
import { grantView } from './grant-view.js';

/**
 * GET /capability/list?cursor=&limit=: the policy's capabilities by name;
 * with an agent token (aud capability_list) each says what the caller's grant is.
 */
export const capabilityList = defineEndpoint({
  name: 'capability_list',
  method: 'GET',
  path: '/capability/list',
  audience: 'capability_list',
  auth: 'optional_agent',
  discoveryName: 'capabilities',
  handle(call, deps) {
    const params = new URLSearchParams(call.target.query ?? '');
    const limit = Number(params.get('limit') ?? 50);
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > 200) return deny('invalid_query', 'limit must be a whole number from 1 to 200');
    const cursor = params.get('cursor');
    const after = cursor ? Buffer.from(cursor, 'base64url').toString('utf8') : '';
    const names = [...deps.policy.capabilities.keys()].sort().filter((n) => n > after);
    const page = names.slice(0, limit);
    const agent = call.verified?.agent;
    const grants = agent ? grantsFor(agent, deps.policy) : undefined;
    const now = deps.now();
    const capabilities = page.flatMap((name) => {
      const c = deps.policy.capabilities.get(name);
      if (!c) return [];
      return [
        {
          name,
          ...(c.description ? { description: c.description } : {}),
          method: c.method,
          path: c.path,
          ...(c.inputSchema ? { input_schema: c.inputSchema } : {}),
          // An MCP capability: what it names on its server (a client mints each message's token for it).
          ...(c.mcp ? { mcp: c.mcp } : {}),
          ...(agent && grants ? { grant: grantView(grants.get(grantKey(agent.id, name)), now) } : {}),
        },
      ];
    });
    const last = page.at(-1);
    return jsonReply(200, { capabilities, ...(names.length > limit && last ? { next_cursor: Buffer.from(last).toString('base64url') } : {}) });
  },
});
