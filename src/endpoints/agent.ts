import type { ServerResponse } from 'node:http';
import { findActiveGrant } from '../auth/grant.js';
import type { AccessRequest } from '../approvals/types.js';
import { URL_ARGUMENT_METHODS, argumentLookup, planArguments } from '../constraints/arguments.js';
import { evaluateConstraints } from '../constraints/evaluate.js';
import { constraintContext } from '../context/constraint-context.js';
import { denialEnvelope, type ConstraintAwareResult } from '../context/envelope.js';
import { deny, isDenial, type Denial } from '../errors.js';
import { parseStrictJsonBytes } from '../json/strict.js';
import { grantKey, type Capability, type Policy } from '../policy/types.js';
import { matchRoute } from '../routing/match.js';
import { checkQueryShape, keyReadAs, readConstrainedQuery } from '../routing/query.js';
import { parseTarget } from '../routing/target.js';
import { jsonMethodOverride } from '../http/method-override.js';
import { upstreamRequestHeaders } from '../http/headers.js';
import { presentSuccess } from '../pipeline/present.js';
import { sendJson } from '../http/respond.js';
import { agentStatus, capabilityList, discovery, register, revoke } from './registration.js';
import { readBody, violationDenial, type Call, type Deps } from '../pipeline/stages.js';

/** Refuses; with the capability known, constraint-aware mode answers with the envelope. */
type Refuse = (d: Denial, capability?: Capability) => void;

/** The sidecar's own agent endpoints; the caller's token is already verified for the endpoint's audience. */
export async function serveEndpoint(call: Call, res: ServerResponse, deps: Deps, refuse: Refuse): Promise<void> {
  const route = call.route!;
  if (route.kind !== 'endpoint') return;
  switch (route.endpoint) {
    case 'constraint_context': return constraintContextEndpoint(call, res, deps);
    case 'request_permission': return requestPermission(call, res, deps, refuse);
    case 'request_status': return requestStatus(call, res, deps, refuse);
    case 'discovery': return discovery(call, res, deps);
    case 'capability_list': return capabilityList(call, res, deps, refuse);
    case 'register': return register(call, res, deps, refuse);
    case 'agent_status': return agentStatus(call, res, deps, refuse);
    case 'revoke': return revoke(call, res, deps, refuse);
  }
}

/** GET /agent/constraints: the caller's own limits, as a system-prompt block (or JSON). */
function constraintContextEndpoint(call: Call, res: ServerResponse, deps: Deps): void {
  const ctx = constraintContext(deps.policy, call.verified!.agent.id, deps.now());
  if (/application\/json/i.test(call.req.headers.accept ?? '')) return sendJson(res, 200, ctx, { 'x-request-id': call.requestId });
  res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', 'x-request-id': call.requestId });
  res.end(ctx.text);
}

/**
 * POST /agent/request-permission {capability, args, reason, path?}: builds the
 * exact call that would run, confirms it needs approval, files the request and
 * (unless `Prefer: respond-async`) holds the connection until it is final.
 */
async function requestPermission(call: Call, res: ServerResponse, deps: Deps, refuse: Refuse): Promise<void> {
  const approvals = deps.approvals!;
  const bodyDenial = await readBody(call, deps);
  if (bodyDenial) return refuse(bodyDenial);
  let input: Record<string, unknown>;
  try {
    const v = parseStrictJsonBytes(call.body ?? Buffer.from('{}'));
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not an object');
    input = v as Record<string, unknown>;
  } catch (err) {
    return refuse(deny('invalid_body', `request_permission needs a JSON object {capability, args, reason}: ${(err as Error).message}`));
  }
  const { capability: capName, args, reason, path, method } = input;
  if (typeof capName !== 'string') return refuse(deny('invalid_body', '"capability" must be a capability name'));
  if (typeof reason !== 'string' || !reason.trim() || reason.length > 2000) return refuse(deny('invalid_body', '"reason" must be a non-empty string (at most 2000 characters)'));
  const cap = deps.policy.capabilities.get(capName);
  if (!cap) return refuse(deny('not_found', `no capability "${capName}"`));
  if (method !== undefined && method !== cap.method) return refuse(deny('invalid_body', `"method" must be ${cap.method}, the method of ${cap.name}`), cap);
  const agent = call.verified!.agent;
  const grant = findActiveGrant(deps.policy.grants, agent.id, cap.name, deps.now());
  if (isDenial(grant)) return refuse(grant, cap);

  const planned = plannedCall(deps.policy, cap, args, path, deps.maxBodyBytes, deps.maxQueryParams);
  if (isDenial(planned)) return refuse(planned, cap);
  const plan = planArguments(grant.constraints, cap.method, planned.params);
  const query = readConstrainedQuery(planned.query, plan.query);
  if (isDenial(query)) return refuse(query, cap);
  const lookup = argumentLookup(plan, planned.params, query, args);
  const violations = evaluateConstraints(grant.constraints, lookup);
  // An absent field is never remembered as an approved value (scope=value would then wave through omissions).
  const absentFields = [...new Set(violations.map((v) => v.field))].filter((f) => !lookup(f).present);
  if (violations.length === 0 || (await approvals.covering(agent.id, cap.name, violations))) {
    return refuse(deny('approval_not_needed', `this call to ${cap.name} is within your limits: call it directly`), cap);
  }
  const created = await approvals.create({
    agentId: agent.id, agentName: agent.name, capability: cap.name, method: cap.method, target: planned.target,
    body: planned.body, args: args ?? null, reason: reason.trim(), violations, absentFields,
    headers: callerHeaders(call.req.rawHeaders, deps.tokenHeader),
  });
  if (created === 'limit') return refuse(deny('access_request_limit', 'too many access requests are waiting for a human; retry later'), cap);

  if (/respond-async/i.test(String(call.req.headers.prefer ?? ''))) {
    return sendJson(res, 202, pendingBody(created), { 'x-request-id': call.requestId, 'preference-applied': 'respond-async', location: statusUrl(created) });
  }
  const final = await approvals.waitForFinal(created.id);
  if (final === 'released') {
    // The sidecar is shutting down: the request stays pending; its status URL answers once a human decides.
    return void sendJson(res, 503, { error: 'shutting_down', message: 'the sidecar is shutting down; the request is still pending: poll its status URL', requestId: created.id, statusUrl: statusUrl(created) }, { 'x-request-id': call.requestId, location: statusUrl(created), 'retry-after': '1' });
  }
  const { status, body } = outcomeResponse(deps.policy, final ?? created, violationDenial(violations));
  if (!res.destroyed) sendJson(res, status, body, permissionHeaders(call, final ?? created));
}

/** GET /agent/request-permission/{id}: the caller's own request, pending or final. */
async function requestStatus(call: Call, res: ServerResponse, deps: Deps, refuse: Refuse): Promise<void> {
  const r = await deps.approvals!.get(call.params!.id!);
  if (!r || r.agentId !== call.verified!.agent.id) return refuse(deny('not_found', 'no such access request for this agent'));
  const { status, body } = outcomeResponse(deps.policy, r, violationDenial(r.violations));
  sendJson(res, status, body, permissionHeaders(call, r));
}

interface PlannedCall {
  target: string;
  query: string | undefined;
  params: Record<string, string>;
  body?: Buffer;
}

/** The exact request that runs if a human approves: the capability's route, the given path, the args as JSON body. */
function plannedCall(policy: Policy, cap: Capability, args: unknown, path: unknown, maxBodyBytes: number, maxQueryParams?: number): PlannedCall | Denial {
  const hasParams = cap.path.includes('{');
  const raw = path === undefined ? (hasParams ? undefined : cap.path) : path;
  if (typeof raw !== 'string') return deny('invalid_body', `"path" is required: ${cap.name} is ${cap.method} ${cap.path}`);
  const target = parseTarget(raw);
  if (isDenial(target)) return target;
  const match = matchRoute(policy.routes, cap.method, target.segments);
  if (!match || match.route.kind !== 'capability' || match.route.capability.name !== cap.name) {
    return deny('invalid_path', `"${target.path}" is not a path of ${cap.name} (${cap.method} ${cap.path})`);
  }
  // The same request-shape rules as a normal call: what a human approves is what runs.
  const shape = checkQueryShape(target.query, maxQueryParams);
  if (shape) return shape;
  if (URL_ARGUMENT_METHODS.has(cap.method)) {
    const empty = args === undefined || args === null || (typeof args === 'object' && !Array.isArray(args) && Object.keys(args).length === 0);
    if (!empty) return deny('invalid_body', `${cap.method} calls carry their arguments in "path" (e.g. "${cap.path}?name=value"); "args" must be empty`);
    return { target: raw, query: target.query, params: match.params };
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return deny('invalid_body', '"args" must be the JSON object the call would send');
  const body = Buffer.from(JSON.stringify(args));
  if (jsonMethodOverride(body, args)) return deny('invalid_body', 'the "_method" override is not accepted; use the real HTTP method');
  if (body.length > (cap.maxBodyBytes ?? maxBodyBytes)) return deny('body_too_large', `"args" exceed the ${cap.name} body limit`);
  // Under every reading an app gives a query key, as a normal call (keyReadAs): "Amount", "amount%00x".
  const shadow = keyReadAs(target.query, new Set(Object.keys(args)));
  if (shadow) return deny('invalid_query', `"${shadow}" is in both the query and "args"; send it once`);
  return { target: raw, query: target.query, params: match.params, body };
}

function permissionHeaders(call: Call, r: AccessRequest): Record<string, string> {
  return r.state === 'approved' && r.outcome ? { 'x-request-id': call.requestId, 'agent-permission': 'approved' } : { 'x-request-id': call.requestId };
}

/** The caller's own headers (accept, user-agent, ...) that a normal call would forward, minus what belongs to request_permission. */
function callerHeaders(raw: readonly string[], tokenHeader: string): string[] {
  const skip = new Set(['prefer', 'content-type', 'content-length', 'x-request-id']);
  const kept = upstreamRequestHeaders(raw, { tokenHeader, requestId: '' });
  const out: string[] = [];
  for (let i = 0; i < kept.length; i += 2) if (!skip.has(kept[i]!.toLowerCase())) out.push(kept[i]!, kept[i + 1]!);
  return out;
}

function statusUrl(r: AccessRequest): string {
  return `/agent/request-permission/${r.id}`;
}

function pendingBody(r: AccessRequest): Record<string, unknown> {
  return { requestId: r.id, status: 'pending', statusUrl: statusUrl(r), expiresAt: new Date(r.expiresAt).toISOString() };
}

/** The agent's view of an access request. */
function outcomeResponse(policy: Policy, r: AccessRequest, violation: Denial): { status: number; body: unknown } {
  const constraints = policy.grants.get(grantKey(r.agentId, r.capability))?.constraints;
  const ctx = {
    capability: r.capability,
    activeConstraints: constraints && Object.keys(constraints).length ? constraints : undefined,
    requestPermission: true,
  };
  if (r.state === 'pending' || (r.state === 'approved' && !r.outcome)) return { status: 202, body: pendingBody(r) };
  if (r.state === 'approved') {
    const outcome = r.outcome!;
    const grant = {
      requestId: r.id, scope: r.scope ?? 'once', approvedAt: new Date(r.resolvedAt ?? r.createdAt).toISOString(),
      ...(r.scope === 'value'
        ? { expiresAt: new Date((r.resolvedAt ?? r.createdAt) + policy.accessRequests!.valueApprovalTtlMs).toISOString(), values: Object.fromEntries(r.violations.map((v) => [v.field, v.actual])) }
        : {}),
    } as const;
    const body: ConstraintAwareResult & { resultStatus: number } = {
      ...presentSuccess(policy, r.capability, undefined, outcome.body, grant),
      success: outcome.status < 400,
      resultStatus: outcome.status,
    };
    return { status: 200, body };
  }
  // A human's answer (or silence) is not an error code: `error` stays for machine refusals.
  const { error: _code, ...base } = denialEnvelope(violation, ctx);
  const expired = r.state === 'expired';
  return {
    status: 403,
    body: {
      ...base,
      permission: expired ? 'expired' : 'denied',
      reason: expired ? 'no human answered before the request expired' : r.denyReason,
      guidance: expired
        ? `No human answered your request to call ${r.capability} in time. Do not assume approval: adjust the arguments to fit your limits, or ask again later with a clearer reason.`
        : `A human denied your request to call ${r.capability}${r.denyReason ? `: "${r.denyReason}"` : ''}. Do not retry the same call; adjust the arguments to fit your limits or tell the user it was refused.`,
    },
  };
}
