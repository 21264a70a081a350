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
