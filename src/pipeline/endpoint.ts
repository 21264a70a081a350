import { endpointNamed } from '../endpoints/index.js';
import type { AnyEndpoint, Endpoint, EndpointPhases } from '../endpoints/endpoint.js';
import { isDenial, type Denial } from '../errors.js';
import type { Reply } from '../http/respond.js';
import type { EndpointAuth } from '../policy/types.js';
import { Chain, type Progress } from './chain.js';
import type { Deps } from './deps.js';
import type { Authenticated, Buffered, EndpointRoute, Routed } from './phases.js';
import { readBody } from './stages/body.js';
import { checkAnyGrant, checkBinding, checkHostReplay, checkReplay, ifTokenSent, readToken, verifyHost, verifyToken } from './stages/authenticate.js';

type EndpointCall = Routed<EndpointRoute>;

/** Agent endpoints: a token for the endpoint's audience, from an agent with some active grant, single-use. */
const AGENT = Chain.of<EndpointCall, Deps>().then(readToken).then(verifyToken).then(checkAnyGrant).then(checkReplay);

/** Who may call a sidecar endpoint: an agent token, a host token, anyone, or anyone with an optional agent token. */
const AUTHENTICATION: { [A in EndpointAuth]: Chain<EndpointCall, EndpointPhases[A], Deps> } = {
  agent: AGENT,
  host: Chain.of<EndpointCall, Deps>().then(readToken).then(verifyHost).then(checkHostReplay),
  none: Chain.of<EndpointCall, Deps>(),
  optional_agent: Chain.of<EndpointCall, Deps>().then(ifTokenSent(AGENT)),
};

/** Authenticates the caller as the endpoint requires, then runs its handler. */
export function serveEndpoint(call: EndpointCall, deps: Deps, progress: Progress): Promise<Reply | Denial> {
  const endpoint: AnyEndpoint = endpointNamed(call.route.endpoint);
  switch (endpoint.auth) {
    case 'agent':
      return run(endpoint, AUTHENTICATION.agent, call, deps, progress);
    case 'host':
      return run(endpoint, AUTHENTICATION.host, call, deps, progress);
    case 'none':
      return run(endpoint, AUTHENTICATION.none, call, deps, progress);
    case 'optional_agent':
      return run(endpoint, AUTHENTICATION.optional_agent, call, deps, progress);
  }
}

async function run<A extends EndpointAuth>(
  endpoint: Endpoint<A>,
  chain: Chain<EndpointCall, EndpointPhases[A], Deps>,
  call: EndpointCall,
  deps: Deps,
  progress: Progress,
): Promise<Reply | Denial> {
  const authenticated = await chain.run(call, deps, progress);
  if (isDenial(authenticated)) return authenticated;
  // The body is read once: an MCP tool call to request_permission arrives with its input already buffered.
  if (!endpoint.readsBody || 'body' in authenticated) return bound(authenticated, deps) ?? endpoint.handle(authenticated, deps);
  const buffered = await readBody(authenticated, deps);
  if (isDenial(buffered)) return buffered;
  progress.reached = buffered;
  return bound(buffered, deps) ?? endpoint.handle(buffered, deps);
}

/** An agent token bound to a request (htm, htu, ath) is used on that one only, here too (an endpoint that reads no body binds the empty one). */
function bound(call: EndpointCall & Partial<Authenticated & Buffered>, deps: Deps): Denial | undefined {
  if (!call.verified) return undefined;
  const checked = checkBinding({ ...call, verified: call.verified, body: call.body }, deps);
  return isDenial(checked) ? checked : undefined;
}
