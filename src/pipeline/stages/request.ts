import { deny, isDenial, type Denial } from '../../errors.js';
import { repeatedSingleton, tooManyHeaders } from '../../http/headers.js';
import type { Route } from '../../policy/types.js';
import { matchRoute } from '../../routing/match.js';
import { checkQueryShape } from '../../routing/query.js';
import { parseTarget } from '../../routing/target.js';
import type { Deps } from '../deps.js';
import { advance, type Arrival, type Routed, type Shaped } from '../phases.js';

/** Few enough headers, and a target the sidecar reads exactly as the app will. */
export function parseRequest(call: Arrival, deps: Deps): Shaped | Denial {
  // First: past the limit, an app that reads only its first N headers would miss what the sidecar adds or checked.
  const { maxHeaders } = deps.limits;
  if (tooManyHeaders(call.req.rawHeaders, maxHeaders)) return deny('too_many_headers', `the request has more than ${maxHeaders} headers`);
  const target = parseTarget(call.req.url);
  return isDenial(target) ? target : advance(call, { target });
}

/** No repeated singleton header, a query every parser reads alike (a refusal here is recorded with the parsed path and query). */
export function checkRequestShape(call: Shaped, deps: Deps): Shaped | Denial {
  const repeated = repeatedSingleton(call.req.rawHeaders);
  if (repeated) return deny('invalid_header', `header "${repeated}" appears more than once`);
  return checkQueryShape(call.target.query, deps.limits.maxQueryParams) ?? call;
}

/** Egress paths that are in no preset table, with `unmapped: pass`: forwarded (with the provider key) unchecked, but audited. */
const UNMAPPED: Route = { kind: 'public', method: '*', template: { source: '(unmapped)', segments: [] } };

/** A capability, one of the sidecar's endpoints, or a public route; anything else is unknown_route. */
export function findRoute(call: Shaped, deps: Deps): Routed | Denial {
  const match = matchRoute(deps.policy.routes, call.req.method ?? '', call.target.segments);
  if (match) return advance(call, { route: match.route, params: match.params });
  if (deps.policy.egress?.unmapped === 'pass') return advance(call, { route: UNMAPPED, params: {} });
  return deny('unknown_route', `no capability is mapped to ${call.req.method} ${call.target.path}`);
}
