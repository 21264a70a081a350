/**
 * POST /capability/execute {capability, arguments} (the Agent Auth
 * Protocol's execute endpoint) becomes the capability's own request: path
 * parameters from the arguments of the same name, the rest as the query (GET,
 * DELETE, ...) or as the JSON body (POST, PUT, PATCH). From then on it is a
 * direct call of that capability: the same token, grant, replay, constraint
 * and audit stages, and the app gets the capability's request line.
 */
import { URL_ARGUMENT_METHODS } from '../constraints/arguments.js';
import { deny, isDenial, type Denial } from '../errors.js';
import { checkJsonRepresentation } from '../http/body.js';
import { jsonMethodOverride } from '../http/method-override.js';
import { parseStrictJsonBytes, StrictJsonError } from '../json/strict.js';
import type { Capability, Policy } from '../policy/types.js';
import { matchRoute } from '../routing/match.js';
import { checkQueryShape } from '../routing/query.js';
import { parseTarget, type RequestTarget } from '../routing/target.js';
import type { Deps } from './deps.js';
import { advance, type Buffered, type CapabilityCall, type CapabilityRoute, type EndpointRoute, type Executed, type Routed } from './phases.js';

/** The capability's request, built from the execute body. */
export interface ExecutedRequest {
  route: CapabilityRoute;
  params: Record<string, string>;
  target: RequestTarget;
  /** Raw path and query, as the app gets it. */
  raw: string;
  body: Buffer | undefined;
}

/** The stage: reads the execute body and turns the call into the capability's (or refuses). */
export function readExecute(call: Routed<EndpointRoute> & Buffered, deps: Deps): (CapabilityCall & Buffered & Executed) | Denial {
  const body = call.body;
  if (!body || body.length === 0) return deny('invalid_body', 'execute needs a JSON body {"capability": "<name>", "arguments": {...}}');
  const media = checkJsonRepresentation(call.req.headers);
  if (media) return media;
  let input: unknown;
  try {
    input = parseStrictJsonBytes(body);
  } catch (err) {
    return deny('invalid_body', `execute body is not acceptable JSON: ${err instanceof StrictJsonError ? err.message : String(err)}`);
  }
  const built = executedRequest(deps.policy, input, deps.limits);
  if (isDenial(built)) return built;
  const received = { method: call.req.method ?? 'POST', path: call.target.path, body };
  // The one place a call changes route kind (the endpoint's becomes the capability's): the types cannot follow an overwrite.
  return advance(call as unknown as CapabilityCall & Buffered, {
    route: built.route,
    params: built.params,
    target: built.target,
    body: built.body,
    received,
    forwardAs: { method: built.route.capability.method, target: built.raw },
  });
}

/** Pure: the execute body → the capability's request, under the same request-shape rules as a direct call. */
export function executedRequest(policy: Policy, input: unknown, limits: { maxBodyBytes: number; maxQueryParams: number }): ExecutedRequest | Denial {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return deny('invalid_body', 'execute body must be a JSON object');
  const { capability: name, arguments: args = {}, ...other } = input as Record<string, unknown>;
  const unknown = Object.keys(other);
  if (unknown.length) return deny('invalid_body', `execute body has unknown member "${unknown[0]}" (only capability and arguments)`);
  if (typeof name !== 'string' || name === '') return deny('invalid_body', '"capability" must be the name of a capability');
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return deny('invalid_body', '"arguments" must be a JSON object');
  const cap = policy.capabilities.get(name);
  const route = cap && ownRoute(policy, cap);
  if (!cap || !route) return deny('unknown_route', `no capability "${name}" is served here`);
  if (cap.mcp) return deny('invalid_body', `${name} is an MCP ${cap.mcp.kind}: call it through its MCP server (${cap.mcp.path})`);

  const rest: Record<string, unknown> = { ...(args as Record<string, unknown>) };
  const segments: string[] = [];
  for (const seg of route.template.segments) {
    if ('literal' in seg) {
      segments.push(seg.literal);
      continue;
    }
    const v = rest[seg.param];
    delete rest[seg.param];
    if (!(typeof v === 'string' && v !== '') && !(typeof v === 'number' && Number.isFinite(v)))
      return deny('invalid_body', `arguments.${seg.param} (a string or number) is required: it is part of the path ${cap.path}`);
    segments.push(encodeURIComponent(String(v)));
  }
  const path = `/${segments.join('/')}`;
  let query: string | undefined;
  let body: Buffer | undefined;
  if (URL_ARGUMENT_METHODS.has(cap.method)) {
    const pairs: string[] = [];
    for (const [k, v] of Object.entries(rest)) {
      if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean')
        return deny('invalid_body', `arguments.${k}: a ${cap.method} call carries its arguments in the query, as strings, numbers or booleans`);
      pairs.push(`${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
    }
    if (pairs.length) query = pairs.join('&');
  } else {
    body = Buffer.from(JSON.stringify(rest));
    if (jsonMethodOverride(body, rest)) return deny('invalid_body', 'the "_method" override is not accepted; use the real HTTP method');
    if (body.length > (cap.maxBodyBytes ?? limits.maxBodyBytes)) return deny('body_too_large', `the arguments exceed the ${cap.name} body limit`);
  }
  const raw = query === undefined ? path : `${path}?${query}`;
  const target = parseTarget(raw);
  if (isDenial(target)) return target;
  const shape = checkQueryShape(target.query, limits.maxQueryParams);
  if (shape) return shape;
  // The app routes the bytes, not the intent: arguments that make another capability's path are refused.
  const match = matchRoute(policy.routes, cap.method, target.segments);
  if (!match || match.route !== route)
    return deny('invalid_body', `these arguments make ${path}, which is not a path of ${cap.name} (${cap.method} ${cap.path})`);
  return { route, params: match.params, target, raw, body };
}

function ownRoute(policy: Policy, cap: Capability): CapabilityRoute | undefined {
  for (const r of policy.routes) if (r.kind === 'capability' && r.capability === cap) return r;
  return undefined;
}
