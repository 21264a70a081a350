import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { deny, isDenial, statusOf, type Denial } from '../errors.js';
import type { Logger } from '../log.js';
import { grantKey, type Capability, type EndpointAuth, type Route } from '../policy/types.js';
import { callEntry } from './audit-entry.js';
import { callMetrics } from './call-metrics.js';
import { ClientAbortedError } from '../http/body.js';
import { serveEndpoint } from '../endpoints/agent.js';
import type { Upstream } from '../app/upstream.js';
import { upstreamRequestHeaders } from '../http/headers.js';
import { presentDenial } from './present.js';
import { sendJson } from '../http/respond.js';
import {
  applyValueApprovals, checkAnyGrant, checkAuditAvailable, checkGrant, checkHostReplay, checkReplay, checkRequestShape, enforceConstraints, evaluateArguments, findRoute,
  ifTokenSent, readArguments, readBody, readToken, selectVariant, signAsAgent, verifyHost, verifyToken, type Call, type Deps, type Stage,
} from './stages.js';

/** Every request: is it well formed, and where does it go? */
const ROUTING: Stage[] = [checkAuditAvailable, checkRequestShape, findRoute];

/** A capability route: the seed's verification table, then the arguments. */
const AUTHORIZATION: Stage[] = [
  readToken,           // Authorization: Bearer <agent+jwt>
  verifyToken,         // steps 1–7: typ, sub, iss, aud, signature, lifetime
  checkGrant,          // step 9: active grant (before step 8: an agent without one never fills the window)
  checkReplay,         // step 8: jti unseen in the window, now spent
  readBody,            // bounded buffer: the bytes checked are the bytes sent
  readArguments,       // path, query or JSON body, strictly parsed
  evaluateArguments,   // step 9b: max, min, in, not_in, exact
  applyValueApprovals, // values a human approved with scope=value pass
  enforceConstraints,  // any violation left refuses the call
];

/**
 * Egress (the agent's own guard): the body first (it may name the
 * capability), then the sidecar signs as the agent, then the same checks.
 */
const EGRESS_AUTHORIZATION: Stage[] = [
  readBody,            // bounded buffer, as on ingress
  selectVariant,       // message vs message.stream vs message.beta
  signAsAgent,         // the agent's key lives here, not in the agent's container
  verifyToken,         // steps 1–7, exactly as on ingress
  checkGrant,          // step 9, before step 8 as on ingress
  checkReplay,         // step 8
  readArguments,
  evaluateArguments,   // step 9b: model, max_tokens, temperature, ...
  applyValueApprovals,
  enforceConstraints,
];

/** The sidecar's own endpoints, by who may call them: an agent token for the endpoint's audience, a host token, anyone. */
const AGENT_AUTHENTICATION: Stage[] = [readToken, verifyToken, checkAnyGrant, checkReplay];
const ENDPOINT_AUTHENTICATION: Record<EndpointAuth, Stage[]> = {
  agent: AGENT_AUTHENTICATION,
  host: [readToken, verifyHost, checkHostReplay],
  none: [],
  optional_agent: [ifTokenSent(AGENT_AUTHENTICATION)],
};

/** Public routes: no token, but the body is still bounded and buffered (no slow body can pin an upstream connection). */
const PUBLIC: Stage[] = [readBody];

function stagesFor(route: Route, egress: boolean): Stage[] {
  if (route.kind === 'endpoint') return ENDPOINT_AUTHENTICATION[route.auth];
  if (route.kind === 'public') return PUBLIC;
  return egress ? EGRESS_AUTHORIZATION : AUTHORIZATION;
}

export interface PipelineDeps extends Deps {
  upstream: Upstream;
  log: Logger;
}

export async function handleCall(req: IncomingMessage, res: ServerResponse, deps: PipelineDeps): Promise<void> {
  const call: Call = { req, requestId: randomUUID(), startedAt: deps.now(), startedHr: performance.now() };
  try {
    const denial = (await runStages(ROUTING, call, deps)) ?? (await runStages(stagesFor(call.route!, deps.policy.egress !== undefined), call, deps));
    if (denial) return refuse(call, res, denial, deps);
    if (call.route!.kind === 'endpoint') {
      await serveEndpoint(call, res, deps, (d, cap) => refuse(call, res, d, deps, cap));
      call.outcome ??= { status: res.statusCode };
      return;
    }
    const written = await recordBeforeForwarding(call, deps);
    if (written) return refuse(call, res, written, deps);
    const sent = performance.now();
    const forwarded = await forward(call, res, deps);
    call.upstreamSeconds = (performance.now() - sent) / 1000;
    if (isDenial(forwarded)) return refuse(call, res, forwarded, deps);
    const permission = call.route!.kind === 'capability' ? 'not_required' : undefined;
    call.outcome = { status: forwarded.status, upstreamStatus: forwarded.status, responseBytes: forwarded.bytes, permission };
    deps.log.debug('call forwarded', { ...describe(call), status: forwarded.status });
  } catch (err) {
    if (err instanceof ClientAbortedError) {
      // Nothing to answer, but the decision (and a spent jti) is still audited.
      call.outcome = { status: statusOf('client_closed_request'), denial: deny('client_closed_request', err.message) };
      return void deps.log.info('client went away', { ...describe(call) });
    }
    deps.log.error('call failed', { ...describe(call), error: (err as Error).message });
    if (!res.headersSent) refuse(call, res, deny('internal_error', 'the sidecar failed to handle this call'), deps);
    else res.destroy();
  } finally {
    // Every decision is recorded; a refused record is logged, the spool's health gates the next calls.
    if (deps.audit && call.outcome) {
      deps.audit.record(callEntry(call, call.outcome, deps.now())).catch((err: Error) => deps.log.error('audit record failed', { requestId: call.requestId, error: err.message }));
    }
    if (deps.metrics && call.outcome) deps.metrics.callFinished(callMetrics(call, call.outcome, performance.now()));
  }
}

/** Strict durability: the decision is on disk before the app sees the call. */
async function recordBeforeForwarding(call: Call, deps: PipelineDeps): Promise<Denial | undefined> {
  if (!deps.audit || deps.audit.durability !== 'strict') return undefined;
  try {
    await deps.audit.record({ ...callEntry(call, { status: 0, permission: 'not_required' }, deps.now()), event: 'forwarding' });
    return undefined;
  } catch {
    return deps.policy.audit.onAuditFailure === 'allow' ? undefined : deny('audit_unavailable', 'the audit trail could not record this call; it was not forwarded');
  }
}

async function runStages(stages: Stage[], call: Call, deps: Deps): Promise<Denial | undefined> {
  for (const stage of stages) {
    const denial = await stage(call, deps);
    if (denial) return denial;
  }
  return undefined;
}

function forward(call: Call, res: ServerResponse, deps: PipelineDeps) {
  const { req, route, verified } = call;
  const isCapability = route!.kind === 'capability';
  const egress = deps.egress;
  // Egress: the provider learns nothing of the agent's identity headers, and gets the sidecar's key only.
  const identity = verified && route!.kind === 'capability' && !egress
    ? { agentId: verified.agent.id, agentName: verified.agent.name, capability: route!.capability.name }
    : undefined;
  const headers = upstreamRequestHeaders(req.rawHeaders, {
    tokenHeader: isCapability && !egress ? deps.tokenHeader : undefined,
    // The provider key goes only on calls that were checked; an unmapped path passes through as the agent
    // sent it (with whatever key the agent itself has, usually none), never with the sidecar's key.
    credential: isCapability ? egress?.credential : undefined,
    dropHost: egress !== undefined && !isCapability,
    identity,
    // The app's client address is the sidecar's peer (the caller's own headers for it are dropped); egress tells the provider nothing.
    clientAddress: egress ? undefined : req.socket.remoteAddress,
    requestId: call.requestId,
    bodyLength: call.body?.length,
  });
  const body = call.body;
  const wrap = isCapability && deps.policy.context.constraintAware && deps.policy.context.envelope === 'all'
    ? { capability: (route as Extract<Route, { kind: 'capability' }>).capability.name, constraints: call.grant?.constraints }
    : undefined;
  return deps.upstream.forward({
    method: req.method!, target: req.url!, headers, body, requestId: call.requestId,
    permission: isCapability ? 'not_required' : undefined,
    wrap: wrap && { policy: deps.policy, ...wrap },
  }, res);
}

function refuse(call: Call, res: ServerResponse, denial: Denial, deps: PipelineDeps, capability?: Capability): void {
  const constraints = call.grant?.constraints ?? (capability && call.verified ? deps.policy.grants.get(grantKey(call.verified.agent.id, capability.name))?.constraints : undefined);
  const { status, body } = presentDenial(deps.policy, call.route, constraints, denial, capability);
  call.outcome = { status, denial };
  // Before the signature is checked the agent is only claimed; the log says so.
  const claimed = call.verified ? undefined : denial.agentId;
  deps.log.warn('call denied', { ...describe(call), claimedAgent: claimed, code: denial.code, status, reason: denial.message });
  if (res.headersSent) return void res.destroy();
  const headers: Record<string, string> = { 'x-request-id': call.requestId };
  if (status === 401) headers['www-authenticate'] = wwwAuthenticate(denial, deps.policy.provider.issuer);
  // An unread body would otherwise be drained into a connection we no longer trust.
  if (!call.req.complete) headers.connection = 'close';
  sendJson(res, status, body, headers);
}

/**
 * Two challenges: RFC 6750 Bearer (no error attribute when no token was sent
 * at all), and Agent Auth's pointer to the discovery document.
 */
function wwwAuthenticate(denial: Denial, issuer: string): string {
  const realm = `Bearer realm="${issuer}"`;
  const bearer = denial.code === 'token_missing' ? realm : `${realm}, error="invalid_token", error_description="${denial.code}"`;
  return `${bearer}, AgentAuth discovery="${issuer.replace(/\/+$/, '')}/.well-known/agent-configuration"`;
}

function describe(call: Call): Record<string, unknown> {
  const route = call.route;
  return {
    requestId: call.requestId,
    method: call.req.method,
    path: call.target?.path ?? call.req.url,
    capability: route?.kind === 'capability' ? route.capability.name : route?.kind === 'endpoint' ? route.endpoint : undefined,
    agent: call.verified?.agent.id,
    durationMs: Date.now() - call.startedAt,
  };
}
