import { deny, isDenial, type Denial } from '../../errors.js';
import { repeatedSingleton, tooManyHeaders } from '../../http/headers.js';
import type { Route } from '../../policy/types.js';
import { matchRoute } from '../../routing/match.js';
import { checkQueryShape } from '../../routing/query.js';
import { parseTarget } from '../../routing/target.js';
import type { Deps } from '../deps.js';
import type { Arrival, Routed, Shaped } from '../phases.js';

/** Well formed: few enough headers, a parseable target, no repeated singleton header, a query every parser reads alike. */
export function checkRequestShape(call: Arrival, deps: Deps): Shaped | Denial {
  // First: past the limit, an app that reads only its first N headers would miss what the sidecar adds or checked.
  const { maxHeaders, maxQueryParams } = deps.limits;
  if (tooManyHeaders(call.req.rawHeaders, maxHeaders)) return deny('too_many_headers', `the request has more than ${maxHeaders} headers`);
  const target = parseTarget(call.req.url);
  if (isDenial(target)) return target;
  const repeated = repeatedSingleton(call.req.rawHeaders);
  if (repeated) return deny('invalid_header', `header "${repeated}" appears more than once`);
  return checkQueryShape(target.query, maxQueryParams) ?? { ...call, target };
}

/** Egress paths that are in no preset table, with `unmapped: pass`: forwarded (with the provider key) unchecked, but audited. */
const UNMAPPED: Route = { kind: 'public', method: '*', template: { source: '(unmapped)', segments: [] } };

/** A capability, one of the sidecar's endpoints, or a public route; anything else is unknown_route. */
export function findRoute(call: Shaped, deps: Deps): Routed | Denial {
  const match = matchRoute(deps.policy.routes, call.req.method ?? '', call.target.segments);
  if (match) return { ...call, route: match.route, params: match.params };
  if (deps.policy.egress?.unmapped === 'pass') return { ...call, route: UNMAPPED, params: {} };
  return deny('unknown_route', `no capability is mapped to ${call.req.method} ${call.target.path}`);
}
