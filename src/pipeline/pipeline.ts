import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { deny, isDenial, statusOf, type Denial } from '../errors.js';
import { ClientAbortedError } from '../http/body.js';
import { prepareDenial, writeDenial, writePreparedDenial, writeReply, type PreparedDenial, type PresentedDenial } from '../http/respond.js';
import { appRequestHeaders } from '../app/request.js';
import type { ShedReason } from '../sidecar/admission.js';
import { drainable, OVERLOAD_RETRY_AFTER_SECONDS } from '../sidecar/limits.js';
import { activeGrants } from './authorize.js';
import { Chain, type Progress } from './chain.js';
import type { Deps } from './deps.js';
import { serveEndpoint } from './endpoint.js';
import { describe, FILTERS } from './observe/filters.js';
import { readExecute } from './execute.js';
import { answerPermissionTool, mcpForwarding, type McpForwarding } from './mcp.js';
import type { Arrival, CapabilityCall, CheckedCall, EndpointRoute, Executed, Finished, McpCall, PublicCall, PublicRoute, Reached, Routed } from './phases.js';
import { presentDenial, presentSuccess } from './present.js';
import { providerDenial } from '../egress/errors.js';
import { presentMcpDenial } from '../mcp/present.js';
import { checkBinding, checkReplay, readToken, verifyToken } from './stages/authenticate.js';
import { checkArguments, checkGrant, enforceConstraints } from './stages/authorize.js';
import { readBody } from './stages/body.js';
import { selectVariant, signAsAgent } from './stages/egress.js';
import { checkReference, checkSession, parseJsonRpc, readMcpMessage } from './stages/mcp.js';
import { checkRequestShape, findRoute, parseRequest } from './stages/request.js';

/** Every request: is it well formed, and where does it go? (The audit filter's onRequest ran before.) */
// prettier-ignore
const ROUTING = Chain.of<Arrival, Deps>()
  .then(parseRequest)        // header count, origin-form target
  .then(checkRequestShape)   // singleton headers, query shape
  .then(findRoute); // capability, sidecar endpoint, public route, or unknown_route

/** A capability route: the verification table of ../shared/seeds/002_9af9aaa6cc5deb37.txt, then the arguments. */
// prettier-ignore
const AUTHORIZATION = Chain.of<CapabilityCall, Deps>()
  .then(readToken)           // Authorization: Bearer <agent+jwt>
  .then(verifyToken)         // steps 1–7: typ, sub, iss, aud, signature, lifetime
  .then(checkGrant)          // step 9: active grant (before step 8: an agent without one never fills the window)
  .then(checkReplay)         // step 8: jti unseen in the window, now spent
  .then(readBody)            // bounded buffer: the bytes checked are the bytes sent
  .then(checkBinding)        // a token bound to a request (htm, htu, ath) is used on that one only
  .then(checkArguments)      // step 9b: path, query or JSON body strictly read; max, min, in, not_in, exact; value approvals
  .then(enforceConstraints); // any violation left refuses the call

/** Egress (the agent's own guard): the body first (it may name the capability), then the sidecar signs as the agent, then the same checks. */
// prettier-ignore
const EGRESS_AUTHORIZATION = Chain.of<CapabilityCall, Deps>()
  .then(readBody)            // bounded buffer, as on ingress
  .then(selectVariant)       // message vs message.stream vs message.beta
  .then(signAsAgent)         // the agent's key lives here, not in the agent's container
  .then(verifyToken)         // steps 1–7, exactly as on ingress
  .then(checkGrant)          // step 9, before step 8 as on ingress
  .then(checkReplay)         // step 8
  .then(checkArguments)      // step 9b: model, max_tokens, temperature, ...
  .then(enforceConstraints);

/** An MCP server's endpoint: the message first (it names the tool, prompt or resource, and so the capability), then the same checks. */
// prettier-ignore
const MCP_MESSAGE = Chain.of<CapabilityCall, Deps>()
  .then(readBody)            // bounded buffer: the bytes checked are the bytes sent
  .then(parseJsonRpc)        // one JSON-RPC message, strictly parsed (a batch is refused next)
  .then(readMcpMessage); // session, declared tool / prompt / resource, or unknown_tool

// prettier-ignore
const MCP_AUTHORIZATION = Chain.of<McpCall, Deps>()
  .then(readToken)           // one agent+jwt per HTTP request, aud = the capability the message is
  .then(verifyToken)         // steps 1–7
  .then(checkGrant)          // step 9 (the session grant for session traffic)
  .then(checkReference)      // completion/complete: a grant for the prompt or resource it names too
  .then(checkSession)        // the Mcp-Session-Id is one this agent opened
  .then(checkReplay)         // step 8
  .then(checkBinding)        // htm, htu, ath
  .then(checkArguments)      // step 9b: the tool's own arguments (a resource's URI variables)
  .then(enforceConstraints);

/** Egress in front of a remote MCP server: the sidecar signs as the agent, per message. */
// prettier-ignore
const MCP_EGRESS_AUTHORIZATION = Chain.of<McpCall, Deps>()
  .then(signAsAgent)
  .then(verifyToken)
  .then(checkGrant)
  .then(checkReference)
  .then(checkSession)
  .then(checkReplay)
  .then(checkArguments)
  .then(enforceConstraints);

/** POST /capability/execute: read into the capability's own call, then checked exactly as a direct call of it. */
// prettier-ignore
const EXECUTE = Chain.of<Routed<EndpointRoute>, Deps>()
  .then(readBody)            // the execute body, bounded
  .then(readExecute)         // {capability, arguments} → the capability's route, target and body
  .then(readToken)
  .then(verifyToken)         // steps 1–7 for that capability
  .then(checkGrant)          // step 9
  .then(checkReplay)         // step 8
  .then(checkBinding)        // htm, htu, ath: the execute request the agent sent
  .then(checkArguments)      // step 9b on the built request
  .then(enforceConstraints);

/** Public routes: no token, but the body is still bounded and buffered (no slow body can pin an upstream connection). */
const PUBLIC = Chain.of<Routed<PublicRoute>, Deps>().then(readBody);

/** One call: request filters, the stages, the answer, then every filter's response phase (audit, metrics, logs). */
export async function handleCall(req: IncomingMessage, res: ServerResponse, deps: Deps, shedFor?: ShedReason): Promise<void> {
  const arrival: Arrival = { req, requestId: randomUUID(), startedAt: deps.now(), startedHr: performance.now() };
  const progress: Progress = { reached: arrival };
  const decided = shedFor ? Promise.resolve(shed(arrival, res, deps, shedFor)) : decide(arrival, res, deps, progress);
  const done = await decided.catch((err: unknown) => failed(err, res, deps, progress.reached));
  for (const filter of FILTERS) {
    try {
      filter.onResponse?.(done, deps);
    } catch (err) {
      // One observer failing must not keep the others (the audit entry first) from seeing the call.
      deps.log.error('response filter failed', { requestId: arrival.requestId, error: (err as Error).message });
    }
  }
}

async function decide(arrival: Arrival, res: ServerResponse, deps: Deps, progress: Progress): Promise<Finished> {
  for (const filter of FILTERS) {
    const refused = filter.onRequest?.(arrival, deps);
    if (refused) return refuse(arrival, refused, res, deps);
  }
  const routed = await ROUTING.run(arrival, deps, progress);
  if (isDenial(routed)) return refuse(progress.reached, routed, res, deps);
  if (isCapability(routed)) {
    if (routed.route.mcp) return mcpCall(routed, res, deps, progress);
    const checked = await (deps.policy.egress ? EGRESS_AUTHORIZATION : AUTHORIZATION).run(routed, deps, progress);
    return isDenial(checked) ? refuse(progress.reached, checked, res, deps) : forward(checked, res, deps);
  }
  if (isEndpoint(routed) && routed.route.endpoint === 'execute') {
    const checked = await EXECUTE.run(routed, deps, progress);
    return isDenial(checked) ? refuse(progress.reached, checked, res, deps) : forward(checked, res, deps);
  }
  if (isEndpoint(routed)) {
    const answer = await serveEndpoint(routed, deps, progress);
    if (isDenial(answer)) return refuse(progress.reached, answer, res, deps);
    // A caller who hung up while waiting for a human gets nothing; the answer is still recorded.
    if (!res.destroyed) writeReply(res, answer, { 'x-request-id': arrival.requestId });
    return { call: progress.reached, outcome: { kind: 'answered', status: answer.status } };
  }
  if (!isPublic(routed)) return refuse(progress.reached, deny('internal_error', 'a route of no known kind'), res, deps);
  const buffered = await PUBLIC.run(routed, deps, progress);
  return isDenial(buffered) ? refuse(progress.reached, buffered, res, deps) : forward(buffered, res, deps);
}

/**
 * Past the admission bounds: refused before anything is read (the audit entry and the count still record it).
 * Thousands a second are written when it matters, so the answer is built once per deps and reason. A small
 * unread body is discarded by Node and the connection kept: a reconnect costs the sidecar more than the refusal.
 */
function shed(arrival: Arrival, res: ServerResponse, deps: Deps, why: ShedReason): Finished {
  const { denial, prepared } = shedReply(arrival, deps, why);
  writePreparedDenial(res, prepared, arrival.requestId, !drainable(arrival.req));
  return { call: arrival, outcome: { kind: 'refused', status: prepared.status, denial } };
}

const SHED_REPLIES = new WeakMap<Deps, Map<ShedReason, { denial: Denial; prepared: PreparedDenial }>>();

function shedReply(arrival: Arrival, deps: Deps, why: ShedReason): { denial: Denial; prepared: PreparedDenial } {
  let byReason = SHED_REPLIES.get(deps);
  if (!byReason) SHED_REPLIES.set(deps, (byReason = new Map<ShedReason, { denial: Denial; prepared: PreparedDenial }>()));
  let reply = byReason.get(why);
  if (!reply) {
    const seconds = String(OVERLOAD_RETRY_AFTER_SECONDS);
    const cause =
      why === 'in_flight'
        ? `more than ${deps.limits.maxInFlight} calls are in flight here`
        : `calls wait more than ${deps.limits.maxEventLoopDelayMs} ms for this sidecar's CPU`;
    const denial: Denial = {
      ...deny('overloaded', `${cause}; retry in ${seconds} s`),
      extra: { headers: { 'retry-after': seconds } },
    };
    // Nothing of the call is read yet: its presentation depends on the policy alone (an egress preset's shape).
    reply = { denial, prepared: prepareDenial(denial, presentRefusal(arrival, denial, deps)) };
    byReason.set(why, reply);
  }
  return reply;
}

/** One message to an MCP server: read, then checked as the capability it is (or answered here: the request_permission tool). */
async function mcpCall(routed: CapabilityCall, res: ServerResponse, deps: Deps, progress: Progress): Promise<Finished> {
  const read = await MCP_MESSAGE.run(routed, deps, progress);
  if (isDenial(read)) return refuse(progress.reached, read, res, deps);
  if (read.mcp.kind === 'request_permission') {
    const answer = await answerPermissionTool(read, deps, progress);
    if (isDenial(answer)) return refuse(progress.reached, answer, res, deps);
    if (!res.destroyed) writeReply(res, answer, { 'x-request-id': read.requestId });
    return { call: progress.reached, outcome: { kind: 'answered', status: answer.status } };
  }
  const checked = await (deps.egress ? MCP_EGRESS_AUTHORIZATION : MCP_AUTHORIZATION).run(read, deps, progress);
  if (isDenial(checked)) return refuse(progress.reached, checked, res, deps);
  const plan = mcpForwarding(checked, deps);
  if (isDenial(plan)) return refuse(checked, plan, res, deps);
  try {
    return await forward(checked, res, deps, plan);
  } finally {
    plan.release();
  }
}

/** The call passed every check (or needs none): the onForward filters, then the app. */
async function forward(call: (CheckedCall & Partial<Executed>) | PublicCall, res: ServerResponse, deps: Deps, mcp?: McpForwarding): Promise<Finished> {
  for (const filter of FILTERS) {
    // Most filters have no onForward, and the audit filter's is a promise only with strict durability: no await otherwise.
    const pending = filter.onForward?.(call, deps);
    const refused = pending && (await pending);
    if (refused) return refuse(call, refused, res, deps);
  }
  const checked = 'verified' in call ? call : undefined;
  const executed = checked?.forwardAs;
  const capability = checked?.route.capability.name;
  const headers = appRequestHeaders(
    call.req.rawHeaders,
    {
      requestId: call.requestId,
      // An executed call's body is the one built from its arguments (none for a GET): never the execute request's length.
      bodyLength: executed ? (call.body?.length ?? 0) : call.body?.length,
      clientAddress: call.req.socket.remoteAddress,
      checked: checked && capability ? { agentId: checked.verified.agent.id, agentName: checked.verified.agent.name, capability } : undefined,
    },
    deps,
  );
  const { context } = deps.policy;
  // An MCP answer is JSON-RPC: never wrapped; list answers are filtered to what the agent may call (and must arrive readable).
  const rewrite = mcp?.rewrite;
  if (rewrite) dropHeader(headers, 'accept-encoding');
  // An executed call's body is the one built from its arguments: the execute request's content headers describe another.
  if (executed) for (const name of EXECUTE_CONTENT_HEADERS) dropHeader(headers, name);
  if (executed && call.body) headers.push('content-type', 'application/json');
  const envelope =
    checked && capability && !mcp && context.constraintAware && context.envelope === 'all'
      ? (result: unknown) => presentSuccess(deps.policy, capability, checked.grants[0].constraints, result)
      : undefined;
  // The protocol's execute answers {data: <result>}: framed as it streams (with the envelope, wrapped whole).
  const wrap = executed && envelope ? (result: unknown) => ({ data: envelope(result) }) : envelope;
  const frame = executed && !envelope ? { prefix: '{"data":', suffix: '}' } : undefined;
  const sent = performance.now();
  const answer = await deps.upstream.forward(
    {
      method: executed?.method ?? call.req.method ?? 'GET',
      target: executed?.target ?? call.req.url ?? '/',
      headers,
      body: call.body,
      requestId: call.requestId,
      permission: checked ? 'not_required' : undefined,
      wrap,
      frame,
      rewrite,
      stream: mcp?.stream,
      onHeaders: mcp && ((status, h) => mcp.answered(status, h)),
    },
    res,
  );
  const upstreamSeconds = (performance.now() - sent) / 1000;
  // Nobody is left to answer when the caller hung up: the call is recorded as 499, nothing is written.
  if (isDenial(answer) && answer.code === 'client_closed_request')
    return { call, outcome: { kind: 'refused', status: statusOf('client_closed_request'), denial: answer }, upstreamSeconds };
  if (isDenial(answer)) return { ...refuse(call, answer, res, deps), upstreamSeconds };
  return { call, outcome: { kind: 'forwarded', status: answer.status, responseBytes: answer.bytes }, upstreamSeconds };
}

/** Writes the refusal (plain, or the envelope for a capability) and says how the call ended. */
function refuse(call: Reached, denial: Denial, res: ServerResponse, deps: Deps): Finished {
  const presented = presentRefusal(call, denial, deps);
  writeDenial(res, denial, presented, { requestId: call.requestId, issuer: deps.policy.provider.issuer, closeConnection: !call.req.complete });
  return { call, outcome: { kind: 'refused', status: presented.status, denial } };
}

/** The refusal's status and body: plain, the envelope for a capability, JSON-RPC for MCP, or an egress provider's shape. */
function presentRefusal(call: Reached, denial: Denial, deps: Deps): PresentedDenial {
  const capability = call.route?.kind === 'capability' ? call.route.capability.name : denial.capability;
  const constraints = constraintsFor(call, capability, deps);
  const plain =
    (call.rpc && presentMcpDenial(deps.policy, { id: call.rpc.id, message: call.mcp }, capability, constraints, denial)) ??
    presentDenial(deps.policy, capability, constraints, denial);
  // Egress: the SDK reads only its provider's error shape (the sidecar's own endpoints keep theirs).
  const preset = deps.policy.egress?.preset;
  return preset && call.route?.kind !== 'endpoint' ? providerDenial(preset.name, denial, plain, { capability, activeConstraints: constraints }) : plain;
}

/** The limits the envelope shows: the call's own grant, or (an endpoint's denial about a capability) the caller's grant for it. */
function constraintsFor(call: Reached, capability: string | undefined, deps: Deps) {
  if (call.route?.kind === 'capability') return call.grants?.[0].constraints;
  const agent = call.verified?.agent;
  if (!agent || !capability) return undefined;
  // An endpoint's refusal about a capability (request_permission) shows the caller's limits, if it holds an active grant.
  const active = activeGrants(agent, [capability], deps.policy, deps.now());
  return isDenial(active) ? undefined : active[0].constraints;
}

/** Something threw: a client that went away is only recorded; anything else is an internal error, logged. */
function failed(err: unknown, res: ServerResponse, deps: Deps, call: Reached): Finished {
  if (err instanceof ClientAbortedError) {
    // Nothing to answer, but the decision (and a spent jti) is still audited.
    return { call, outcome: { kind: 'refused', status: statusOf('client_closed_request'), denial: deny('client_closed_request', err.message) } };
  }
  deps.log.error('call failed', { ...describe(call), error: (err as Error).message });
  const denial = deny('internal_error', 'the sidecar failed to handle this call');
  try {
    return refuse(call, denial, res, deps);
  } catch {
    // Even the refusal could not be written: cut the connection; the call is still audited and counted.
    res.destroy();
    return { call, outcome: { kind: 'refused', status: statusOf('internal_error'), denial } };
  }
}

const EXECUTE_CONTENT_HEADERS = [
  'content-type',
  'content-md5',
  'digest',
  'content-digest',
  'repr-digest',
  'content-range',
  'content-language',
  'content-location',
];

function dropHeader(headers: string[], name: string): void {
  for (let i = headers.length - 2; i >= 0; i -= 2) if (headers[i]?.toLowerCase() === name) headers.splice(i, 2);
}

function isCapability(call: Routed): call is CapabilityCall {
  return call.route.kind === 'capability';
}

function isEndpoint(call: Routed): call is Routed<EndpointRoute> {
  return call.route.kind === 'endpoint';
}

function isPublic(call: Routed): call is Routed<PublicRoute> {
  return call.route.kind === 'public';
}
