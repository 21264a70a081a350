import type { IncomingMessage } from 'node:http';
import { extractToken, tokenSent } from '../auth/extract.js';
import { findActiveGrant } from '../auth/grant.js';
import { refusedByReset, replayKey, ReplayStoreUnavailableError, type ReplayStore } from '../auth/replay.js';
import { REPLAY_TTL_MS, REPLAY_WINDOW_SECONDS, verifyAgentToken, type AgentDirectory, type VerifiedToken } from '../auth/verify.js';
import type { AgentSigner } from '../identity/client.js';
import type { RegisteredAgents } from '../registration/directory.js';
import { verifyHostToken, type VerifiedHostToken } from '../registration/host-token.js';
import { argumentLookup, planArguments, type ArgumentPlan } from '../constraints/arguments.js';
import { evaluateConstraints } from '../constraints/evaluate.js';
import type { ApprovalService } from '../approvals/service.js';
import type { SidecarMetrics } from '../metrics/metrics.js';
import type { AuditTrail } from '../audit/trail.js';
import { deny, isDenial, type ConstraintViolation, type Denial } from '../errors.js';
import { parseStrictJsonBytes, StrictJsonError } from '../json/strict.js';
import type { Capability, Grant, Policy, Route } from '../policy/types.js';
import { matchRoute } from '../routing/match.js';
import { checkQueryShape, keyReadAs, readConstrainedQuery } from '../routing/query.js';
import { parseTarget, type RequestTarget } from '../routing/target.js';
import { checkJsonRepresentation, hasBody, readBodyLimited } from '../http/body.js';
import { bodyOverrideDenial } from '../http/method-override.js';
import { DEFAULT_MAX_HEADERS, repeatedSingleton, tooManyHeaders } from '../http/headers.js';

/** What a stage needs from outside the request: configuration and the stores. */
export interface Deps {
  policy: Policy;
  replay: ReplayStore;
  tokenHeader: string;
  maxBodyBytes: number;
  /** Caller headers accepted (--max-headers); more are refused with 431 [DEFAULT_MAX_HEADERS]. */
  maxHeaders?: number;
  /** Query pairs accepted (--max-query-params) [DEFAULT_MAX_QUERY_PARAMS]. */
  maxQueryParams?: number;
  now: () => number;
  /** Present when request_permission is configured. */
  approvals?: ApprovalService;
  /** Present when an audit key is configured. */
  audit?: AuditTrail;
  metrics?: SidecarMetrics;
  /** Agents registered by hosts (present when the policy lists hosts). */
  registered?: RegisteredAgents;
  /** Egress mode: the agent's signer and the provider credential header set on every forwarded call. */
  egress?: { signer: AgentSigner; credential: [name: string, value: string] };
}

/** One call as it moves through the pipeline; each stage fills in its part. */
export interface Call {
  req: IncomingMessage;
  requestId: string;
  startedAt: number;
  /** performance.now() at arrival, for sub-millisecond timings. */
  startedHr: number;
  /** Seconds spent in the upstream exchange, when the call was forwarded. */
  upstreamSeconds?: number;
  /** A verified host token (registration endpoints). */
  host?: VerifiedHostToken;
  /** Egress: further capabilities the same call also is (each needs a grant). */
  alsoRequires?: string[];
  target?: RequestTarget;
  route?: Route;
  params?: Record<string, string>;
  token?: string;
  verified?: VerifiedToken;
  grant?: Grant;
  /** Egress: the grants of `alsoRequires`; their constraints are checked too. */
  alsoGrants?: Grant[];
  body?: Buffer;
  plan?: ArgumentPlan;
  query?: Map<string, string>;
  json?: unknown;
  /** Every object key of `json` (the audit trail checks them for secrets without walking the body). */
  jsonKeys?: string[];
  violations?: ConstraintViolation[];
  /** How the call ended, for the audit entry. */
  outcome?: { status: number; upstreamStatus?: number; responseBytes?: number; denial?: Denial; permission?: 'not_required' | 'approved' };
}

/** A stage continues (undefined) or refuses with a typed denial. */
export type Stage = (call: Call, deps: Deps) => Denial | undefined | Promise<Denial | undefined>;

/** No call is served without its audit record: a full or broken spool refuses (unless the policy says allow). */
export const checkAuditAvailable: Stage = (_call, deps) => {
  if (!deps.audit || deps.audit.available) return undefined;
  if (deps.policy.audit.onAuditFailure === 'allow') {
    deps.audit.servedWhileUnavailable();
    return undefined;
  }
  return deny('audit_unavailable', 'the audit trail cannot record this call right now; retry later');
};

export const checkRequestShape: Stage = (call, deps) => {
  // First: past the limit, an app that reads only its first N headers would miss what the sidecar adds or checked.
  const maxHeaders = deps.maxHeaders ?? DEFAULT_MAX_HEADERS;
  if (tooManyHeaders(call.req.rawHeaders, maxHeaders)) return deny('too_many_headers', `the request has more than ${maxHeaders} headers`);
  const target = parseTarget(call.req.url);
  if (isDenial(target)) return target;
  call.target = target;
  const repeated = repeatedSingleton(call.req.rawHeaders);
  if (repeated) return deny('invalid_header', `header "${repeated}" appears more than once`);
  return checkQueryShape(target.query, deps.maxQueryParams);
};

/** Egress paths that are in no preset table, with `unmapped: pass`: forwarded (with the provider key) unchecked, but audited. */
const UNMAPPED: Route = { kind: 'public', method: '*', template: { source: '(unmapped)', segments: [] } };

export const findRoute: Stage = (call, deps) => {
  const match = matchRoute(deps.policy.routes, call.req.method ?? '', call.target!.segments);
  if (!match && deps.policy.egress?.unmapped === 'pass') {
    call.route = UNMAPPED;
    call.params = {};
    return undefined;
  }
  if (!match) return deny('unknown_route', `no capability is mapped to ${call.req.method} ${call.target!.path}`);
  call.route = match.route;
  call.params = match.params;
  return undefined;
};

export const readToken: Stage = (call, deps) => {
  const token = extractToken(call.req.rawHeaders, deps.tokenHeader);
  if (isDenial(token)) return token;
  call.token = token;
  return undefined;
};

/** Steps 1–7 of the verification table; `aud` is the capability (or the sidecar endpoint's audience). */
export const verifyToken: Stage = async (call, deps) => {
  const route = call.route!;
  const audience = route.kind === 'endpoint' ? route.audience : capabilityOf(call);
  const t0 = performance.now();
  const verified = await verifyAgentToken(call.token!, audience, agentDirectory(deps), Math.floor(deps.now() / 1000));
  deps.metrics?.tokenVerification.observe((performance.now() - t0) / 1000);
  if (isDenial(verified)) return verified;
  call.verified = verified;
  return undefined;
};

/** Policy agents first; then agents hosts registered, read from the registry on every call. */
function agentDirectory(deps: Deps): AgentDirectory {
  return { get: (id) => deps.policy.agents.get(id) ?? deps.registered?.get(id, deps.policy) };
}

/**
 * Step 8: the token id is unseen in the replay window (and is now spent).
 * Keyed by the agent key's thumbprint (iss), not the policy-local agent id:
 * one id is spent once for every sidecar sharing the store. Runs after
 * step 9, so an agent without a grant never takes room in the window.
 */
export const checkReplay: Stage = (call, deps) => {
  const { claims } = call.verified!;
  return spend(deps, replayKey('agent', claims.iss, claims.jti), claims.jti, claims.iat);
};

async function spend(deps: Deps, key: string, jti: string, iat: number): Promise<Denial | undefined> {
  try {
    // A store that lost its ids: a token from before the loss may have been used already (asked again after the claim, which may find the loss).
    const before = resetDenial(deps, jti, iat);
    if (before) return before;
    const fresh = await deps.replay.claim(key, REPLAY_TTL_MS);
    return fresh ? resetDenial(deps, jti, iat) : deny('token_replayed', `token ${jti} was already used`);
  } catch (err) {
    if (err instanceof ReplayStoreUnavailableError) return deny('replay_store_unavailable', err.message);
    return deny('replay_store_unavailable', `replay store failed: ${(err as Error).message}`);
  }
}

function resetDenial(deps: Deps, jti: string, iat: number): Denial | undefined {
  if (!refusedByReset(deps.replay.lastReset?.(), iat, deps.now(), REPLAY_WINDOW_SECONDS * 1000)) return undefined;
  return deny('replay_window_reset', `token ${jti} was issued before (or within the clock skew after) the moment the replay store was found to have lost its data; retry with a fresh token in a few seconds`);
}

/** A host's token (registration, status, revoke): a trusted host, this service's issuer, a live signature. */
export const verifyHost: Stage = (call, deps) => {
  const verified = verifyHostToken(call.token!, deps.policy.hosts, deps.policy.provider.issuer, Math.floor(deps.now() / 1000));
  if (isDenial(verified)) return verified;
  call.host = verified;
  return undefined;
};

/** A host token is single-use too: its jti is spent in the same replay window. */
export const checkHostReplay: Stage = (call, deps) => {
  const { claims } = call.host!;
  return spend(deps, replayKey('host', claims.iss, claims.jti), claims.jti, claims.iat);
};

/** Runs `stages` only when the caller sent a token (endpoints that answer anyone, and say more to a known agent). */
export function ifTokenSent(stages: Stage[]): Stage {
  return async (call, deps) => {
    // Like Envoy's allow_missing: no token is an anonymous caller; a bad one is refused, never read as anonymous.
    if (!tokenSent(call.req.rawHeaders, deps.tokenHeader)) return undefined;
    for (const stage of stages) {
      const denial = await stage(call, deps);
      if (denial) return denial;
    }
    return undefined;
  };
}

/** Step 9: an active, unexpired grant. */
export const checkGrant: Stage = (call, deps) => {
  const agent = call.verified!.agent;
  const grants = agent.grants ?? deps.policy.grants;
  const grant = findActiveGrant(grants, agent.id, capabilityOf(call), deps.now());
  if (isDenial(grant)) return grant;
  for (const also of call.alsoRequires ?? []) {
    const other = findActiveGrant(grants, agent.id, also, deps.now());
    if (isDenial(other)) return deny('capability_denied', `this call is also "${also}", which has no active grant`);
    (call.alsoGrants ??= []).push(other);
  }
  call.grant = grant;
  return undefined;
};

/**
 * The sidecar's own agent endpoints (capability list with a token, constraint
 * context, request_permission) need no grant for a capability, yet spend a
 * jti: only an agent holding at least one active grant may spend one there,
 * so an agent without grants cannot fill the replay window (step 9's rule,
 * widened to "any capability"). It can still list capabilities without a token.
 */
export const checkAnyGrant: Stage = (call, deps) => {
  const agent = call.verified!.agent;
  const grants = agent.grants ?? deps.policy.grants;
  const now = deps.now();
  for (const name of deps.policy.capabilities.keys()) {
    if (!isDenial(findActiveGrant(grants, agent.id, name, now))) return undefined;
  }
  return deny('capability_denied', `agent "${agent.id}" holds no active grant; the sidecar's agent endpoints answer only agents with one (GET /capability/list answers without a token)`);
};

/**
 * Buffers the body (bounded) so the bytes checked are the bytes forwarded.
 * A body that overrides the method ("_method" in a form or JSON body) is
 * refused on every route that has one, public ones included: the app would
 * route it as another method, one the policy may guard with a token.
 */
export const readBody: Stage = async (call, deps) => {
  if (!hasBody(call.req)) return undefined;
  const route = call.route!;
  const limit = route.kind === 'capability' ? (route.capability.maxBodyBytes ?? deps.maxBodyBytes) : deps.maxBodyBytes;
  const body = await readBodyLimited(call.req, limit);
  if (isDenial(body)) return body;
  call.body = body;
  return bodyOverrideDenial(call.req, body, limit);
};

/**
 * Egress: one route may be several capabilities (Anthropic's /v1/messages is
 * message, message.stream with "stream": true, message.beta with an
 * anthropic-beta header). The first variant that applies names the call.
 */
export const selectVariant: Stage = (call) => {
  const route = call.route!;
  if (route.kind !== 'capability' || !route.variants) return undefined;
  let json: Record<string, unknown> | undefined;
  const applies: Capability[] = [];
  for (const v of route.variants) {
    if (v.header && call.req.headers[v.header] !== undefined) applies.push(v.capability);
    if (v.bodyFlag && call.body?.length) {
      if (json === undefined) {
        try {
          const parsed = parseStrictJsonBytes(call.body);
          json = typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
        } catch (err) {
          return deny('invalid_body', `the body is not valid JSON: ${(err as Error).message}`);
        }
      }
      const flag = json[v.bodyFlag];
      // Only a real boolean: a provider that coerced "true" or 1 would stream what was checked as a plain call.
      if (flag !== undefined && typeof flag !== 'boolean') return deny('invalid_body', `"${v.bodyFlag}" must be true or false`);
      if (flag === true) applies.push(v.capability);
    }
  }
  if (applies.length === 0) return undefined;
  // A call that is several variants at once (a streamed beta message) needs a grant for each.
  call.route = { ...route, capability: applies[0]! };
  call.alsoRequires = applies.slice(1).map((c) => c.name);
  return undefined;
};

/** Egress: the sidecar holds the agent's key and signs each call itself, then verifies it like any other. */
export const signAsAgent: Stage = async (call, deps) => {
  if (!deps.egress) return deny('internal_error', 'egress mode without an agent key');
  call.token = await deps.egress.signer.sign(capabilityOf(call));
  return undefined;
};

/** Reads each constrained argument from the path, the query or the JSON body. */
export const readArguments: Stage = (call, deps) => {
  // A call that is several capabilities reads the fields any of their grants constrains.
  const constrained = call.alsoGrants ? Object.assign({}, ...grantsOf(call).map((g) => g.constraints)) : call.grant!.constraints;
  const plan = planArguments(constrained, call.route!.method, call.params!);
  call.plan = plan;
  const query = readConstrainedQuery(call.target!.query, plan.query);
  if (isDenial(query)) return query;
  call.query = query;
  // An app may read a body field before the query one: a checked query needs an empty body.
  if (plan.query.size > 0 && call.body && call.body.length > 0) {
    return deny('invalid_body', `${call.route!.method} with constrained query parameters must not carry a body`);
  }
  if (!plan.body) return undefined;
  const inQuery = keyReadAs(call.target!.query, plan.bodyRoots);
  if (inQuery) return deny('invalid_query', `"${inQuery}" is a constrained body field; it must not also be sent in the query`);
  if (!call.body || call.body.length === 0) return undefined; // every rule will report the field absent
  const media = checkJsonRepresentation(call.req);
  if (media) return media;
  try {
    // Keys are collected only for the audit trail's redaction check.
    const keys: string[] | undefined = deps.audit ? [] : undefined;
    call.json = parseStrictJsonBytes(call.body, keys);
    call.jsonKeys = keys;
  } catch (err) {
    const why = err instanceof StrictJsonError ? err.message : String(err);
    return deny('invalid_body', `request body is not acceptable JSON: ${why}`);
  }
  return undefined;
};

/** Step 9b: evaluates every grant constraint (the verdict comes two stages later). */
export const evaluateArguments: Stage = (call) => {
  const lookup = argumentLookup(call.plan!, call.params!, call.query!, call.json);
  call.violations = call.alsoGrants ? grantsOf(call).flatMap((g) => evaluateConstraints(g.constraints, lookup)) : evaluateConstraints(call.grant!.constraints, lookup);
  return undefined;
};

/** Violations whose exact values a human approved with scope=value no longer count. */
export const applyValueApprovals: Stage = async (call, deps) => {
  if (!deps.approvals || !call.violations?.length) return undefined;
  const approval = await deps.approvals.covering(call.verified!.agent.id, capabilityOf(call), call.violations);
  if (approval) call.violations = [];
  return undefined;
};

/** Step 9b verdict: any violation left refuses the call. */
export const enforceConstraints: Stage = (call) => {
  const violations = call.violations ?? [];
  if (violations.length === 0) return undefined;
  return violationDenial(violations);
};

export function violationDenial(violations: ConstraintViolation[]): Denial {
  const fields = [...new Set(violations.map((v) => v.field))].join(', ');
  return deny('constraint_violated', `arguments violate the grant's constraints (${fields})`, violations);
}

/** The call's grant, and for an egress call that is several capabilities, each of theirs. */
function grantsOf(call: Call): Grant[] {
  return call.alsoGrants ? [call.grant!, ...call.alsoGrants] : [call.grant!];
}

function capabilityOf(call: Call): string {
  return (call.route as Extract<Route, { kind: 'capability' }>).capability.name;
}
