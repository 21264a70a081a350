import type { Denial } from '../errors.js';
import type { Reply } from '../http/respond.js';
import type { EndpointAuth, EndpointName } from '../policy/types.js';
import type { Deps } from '../pipeline/deps.js';
import type { Authenticated, Buffered, EndpointRoute, HostAuthenticated, Routed, WithToken } from '../pipeline/phases.js';

/** What each kind of endpoint authentication establishes before the handler runs. */
export interface EndpointPhases {
  agent: Routed<EndpointRoute> & WithToken & Authenticated;
  host: Routed<EndpointRoute> & WithToken & HostAuthenticated;
  none: Routed<EndpointRoute>;
  optional_agent: Routed<EndpointRoute> & Partial<WithToken & Authenticated>;
}

/**
 * One of the sidecar's own endpoints on the agent port: where it is, who may
 * call it, and its handler. The policy loader (which routes a policy may not
 * overlap), discovery (which names it publishes) and the pipeline (what to
 * authenticate, what to run) all read these definitions.
 */
export interface Endpoint<A extends EndpointAuth = EndpointAuth, N extends EndpointName = EndpointName> {
  readonly name: N;
  readonly method: string;
  readonly path: string;
  /** The `aud` an agent token for it carries ('' for host-token and public endpoints). */
  readonly audience: string;
  readonly auth: A;
  /** Served only when the policy turns this on. */
  readonly needs?: 'accessRequests' | 'hosts' | 'ingress';
  /** Its name in the Agent Auth discovery document, if published there. */
  readonly discoveryName?: string;
  /** The body is buffered (bounded, method overrides refused) before the handler, and audited; otherwise the handler reads it. */
  readonly readsBody?: true;
  handle(call: EndpointPhases[A] & Partial<Buffered>, deps: Deps): Reply | Denial | Promise<Reply | Denial>;
}

export type AnyEndpoint = { [A in EndpointAuth]: Endpoint<A> }[EndpointAuth];

/** Checks a definition against its auth kind (the handler's phase type follows `auth`). */
export function defineEndpoint<A extends EndpointAuth, N extends EndpointName>(e: Endpoint<A, N>): Endpoint<A, N> {
  return e;
}
