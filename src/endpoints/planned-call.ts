import { randomUUID } from 'node:crypto';
import { URL_ARGUMENT_METHODS } from '../constraints/arguments.js';
import { deny, isDenial, type Denial } from '../errors.js';
import { jsonMethodOverride } from '../http/method-override.js';
import type { Capability, Policy } from '../policy/types.js';
import { matchRoute } from '../routing/match.js';
import { checkQueryShape, keyReadAs } from '../routing/query.js';
import { parseTarget } from '../routing/target.js';

/** The exact request that runs if a human approves. */
export interface PlannedCall {
  target: string;
  query: string | undefined;
  params: Record<string, string>;
  body?: Buffer;
  /** An MCP tool's or prompt's arguments (the constraints read these, not the JSON-RPC envelope around them). */
  arguments?: Record<string, unknown>;
}

/**
 * An MCP tool or prompt call: the JSON-RPC request that runs if a human
 * approves (POST on the server's path), its arguments what the constraints read.
 */
export function mcpPlannedCall(cap: Capability, args: unknown, limits: { maxBodyBytes: number }): PlannedCall | Denial {
  const target = cap.mcp;
  if (!target || (target.kind !== 'tool' && target.kind !== 'prompt') || target.name === undefined) {
    return deny('invalid_body', `${cap.name} is an MCP ${target?.kind ?? 'capability'}: request_permission asks for tool and prompt calls`);
  }
  const value = args ?? {};
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return deny('invalid_body', '"args" must be the arguments object of the call');
  const method = target.kind === 'tool' ? 'tools/call' : 'prompts/get';
  const message = { jsonrpc: '2.0', id: `approved-${randomUUID()}`, method, params: { name: target.name, arguments: value } };
  const body = Buffer.from(JSON.stringify(message));
  if (body.length > (cap.maxBodyBytes ?? limits.maxBodyBytes)) return deny('body_too_large', `"args" exceed the ${cap.name} body limit`);
  return { target: target.path, query: undefined, params: {}, body, arguments: value as Record<string, unknown> };
}

/**
 * Builds it from request_permission's input: the capability's route, the
 * given path, the args as JSON body. The same request-shape rules as a
 * normal call: what a human approves is what runs.
 */
export function plannedCall(
  policy: Policy,
  cap: Capability,
  args: unknown,
  path: unknown,
  limits: { maxBodyBytes: number; maxQueryParams: number },
): PlannedCall | Denial {
  const hasParams = cap.path.includes('{');
  const raw = path === undefined ? (hasParams ? undefined : cap.path) : path;
  if (typeof raw !== 'string') return deny('invalid_body', `"path" is required: ${cap.name} is ${cap.method} ${cap.path}`);
  const target = parseTarget(raw);
  if (isDenial(target)) return target;
  const match = matchRoute(policy.routes, cap.method, target.segments);
  if (!match || match.route.kind !== 'capability' || match.route.capability.name !== cap.name) {
    return deny('invalid_path', `"${target.path}" is not a path of ${cap.name} (${cap.method} ${cap.path})`);
  }
  const shape = checkQueryShape(target.query, limits.maxQueryParams);
  if (shape) return shape;
  if (URL_ARGUMENT_METHODS.has(cap.method)) {
    const empty = args === undefined || args === null || (typeof args === 'object' && !Array.isArray(args) && Object.keys(args).length === 0);
    if (!empty) return deny('invalid_body', `${cap.method} calls carry their arguments in "path" (e.g. "${cap.path}?name=value"); "args" must be empty`);
    return { target: raw, query: target.query, params: match.params };
  }
  if (typeof args !== 'object' || args === null || Array.isArray(args)) return deny('invalid_body', '"args" must be the JSON object the call would send');
  const body = Buffer.from(JSON.stringify(args));
  if (jsonMethodOverride(body, args)) return deny('invalid_body', 'the "_method" override is not accepted; use the real HTTP method');
  if (body.length > (cap.maxBodyBytes ?? limits.maxBodyBytes)) return deny('body_too_large', `"args" exceed the ${cap.name} body limit`);
  // Under every reading an app gives a query key, as a normal call (keyReadAs): "Amount", "amount%00x".
  const shadow = keyReadAs(target.query, new Set(Object.keys(args)));
  if (shadow) return deny('invalid_query', `"${shadow}" is in both the query and "args"; send it once`);
  return { target: raw, query: target.query, params: match.params, body };
}
