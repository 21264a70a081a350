import { deny, isDenial, type Denial } from '../errors.js';
import { jsonReply, type Reply } from '../http/respond.js';
import { parseStrictJsonBytes } from '../json/strict.js';
import { keptCallerHeaders } from '../app/request.js';
import { sessionIdOf } from '../mcp/sessions.js';
import { activeGrants, authorize, grantsFor } from '../pipeline/authorize.js';
import type { Deps } from '../pipeline/deps.js';
import { accessRequestReply, pendingBody, statusUrl } from './access-request-view.js';
import { defineEndpoint, type EndpointPhases } from './endpoint.js';
import { mcpPlannedCall, plannedCall } from './planned-call.js';

/**
 * POST /agent/request-permission {capability, args, reason, path?}: builds the
 * exact call that would run, confirms it needs approval (the same
 * authorization as the call itself), files the request and (unless
 * `Prefer: respond-async`) holds the connection until it is final.
 */
export const requestPermission = defineEndpoint({
  name: 'request_permission',
  method: 'POST',
  path: '/agent/request-permission',
  audience: 'request_permission',
  auth: 'agent',
  needs: 'accessRequests',
  discoveryName: 'request_permission',
  readsBody: true,
  handle: (call, deps) => (deps.approvals ? ask(call, deps, deps.approvals) : deny('not_found', 'request_permission is not configured')),
});

/** `respondAsync`: the MCP tool's `wait: false` (an MCP client cannot set Prefer per call). */
type Call = EndpointPhases['agent'] & { readonly body?: Buffer | undefined; readonly respondAsync?: boolean };
type Approvals = NonNullable<Deps['approvals']>;

async function ask(call: Call, deps: Deps, approvals: Approvals): Promise<Reply | Denial> {
  const input = readInput(call.body);
  if (isDenial(input)) return input;
  const { capability: capName, args, reason, path, method } = input;
  if (typeof capName !== 'string') return deny('invalid_body', '"capability" must be a capability name');
  if (typeof reason !== 'string' || !reason.trim() || reason.length > 2000)
    return deny('invalid_body', '"reason" must be a non-empty string (at most 2000 characters)');
  const cap = deps.policy.capabilities.get(capName);
  if (!cap) return deny('not_found', `no capability "${capName}"`);
  // From here on a refusal is about this capability: the envelope names it and shows the caller's limits.
  const about = (d: Denial): Denial => ({ ...d, capability: cap.name });
  if (method !== undefined && method !== cap.method) return about(deny('invalid_body', `"method" must be ${cap.method}, the method of ${cap.name}`));
  const { agent } = call.verified;
  // The grant first: an agent without one learns nothing about paths or arguments.
  const granted = activeGrants(agent, [cap.name], deps.policy, deps.now());
  if (isDenial(granted)) return about(granted);
  const foreign = foreignSession(call, deps);
  if (foreign) return about(foreign);
  const planned = cap.mcp ? mcpPlannedCall(cap, args, deps.limits) : plannedCall(deps.policy, cap, args, path, deps.limits);
  if (isDenial(planned)) return about(planned);
  const authorization = await authorize(
    agent,
    [cap.name],
    {
      method: cap.method,
      params: planned.params,
      query: planned.query,
      body: planned.body,
      headers: { 'content-type': 'application/json' },
      ...(planned.arguments ? { parsed: { value: planned.arguments } } : {}),
    },
    { policy: deps.policy, now: deps.now, approvals },
  );
  if (isDenial(authorization)) return about(authorization);
  const { violations, absentFields } = authorization;
  if (violations.length === 0) return about(deny('approval_not_needed', `this call to ${cap.name} is within your limits: call it directly`));
  const created = await approvals.create({
    agentId: agent.id,
    agentName: agent.name,
    capability: cap.name,
    method: cap.method,
    target: planned.target,
    body: planned.body,
    args: args ?? null,
    reason: reason.trim(),
    violations,
    absentFields,
    headers: keptCallerHeaders(call.req.rawHeaders, deps.tokenHeader),
  });
  if (isDenial(created)) return about(created);
  if (call.respondAsync === true || /respond-async/i.test(String(call.req.headers.prefer ?? ''))) {
    return jsonReply(202, pendingBody(created), { 'preference-applied': 'respond-async', location: statusUrl(created) });
  }
  const final = await approvals.waitForFinal(created.id);
  if (isDenial(final)) {
    // The sidecar is shutting down: the request stays pending; its status URL answers once a human decides.
    return {
      ...final,
      extra: { body: { requestId: created.id, statusUrl: statusUrl(created) }, headers: { location: statusUrl(created), 'retry-after': '1' } },
    };
  }
  return accessRequestReply(deps.policy, final ?? created, grantsFor(agent, deps.policy));
}

/** The approved call would run with the caller's headers: an MCP session among them must be the caller's own. */
function foreignSession(call: Call, deps: Deps): Denial | undefined {
  const session = sessionIdOf(call.req.rawHeaders);
  if (session === null) return deny('invalid_header', 'header "mcp-session-id" appears more than once');
  if (session === undefined || deps.mcpSessions.ownerOf(session) === call.verified.agent.thumbprint) return undefined;
  return deny('session_not_found', 'no MCP session with this id was opened by this agent here');
}

function readInput(body: Buffer | undefined): Record<string, unknown> | Denial {
  try {
    const v = parseStrictJsonBytes(body ?? Buffer.from('{}'));
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not an object');
    return v as Record<string, unknown>;
  } catch (err) {
    return deny('invalid_body', `request_permission needs a JSON object {capability, args, reason}: ${(err as Error).message}`);
  }
}
