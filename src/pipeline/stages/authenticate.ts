import { checkRequestBinding, missingBinding, publicOrigin } from '../../auth/binding.js';
import { extractToken, tokenSent } from '../../auth/extract.js';
import { decodeJws } from '../../auth/jws.js';
import { expectedToken } from '../../auth/profile.js';
import { AGENT_TOKEN_TYPE } from '../../identity/token-types.js';
import { refusedByReset, replayKey, ReplayStoreUnavailableError } from '../../auth/replay.js';
import { REPLAY_TTL_MS, REPLAY_WINDOW_SECONDS, verifyAgentToken, type AgentDirectory, type Expected } from '../../auth/verify.js';
import { deny, isDenial, type Denial } from '../../errors.js';
import { agentLookup } from '../../registration/directory.js';
import { verifyAnyHostToken } from '../../registration/host-token.js';
import type { Chain, Progress } from '../chain.js';
import type { Deps } from '../deps.js';
import { advance, type Authenticated, type Buffered, type Executed, type HostAuthenticated, type Routed, type WithToken } from '../phases.js';
import { activeGrants } from '../authorize.js';

/** Authorization: Bearer <agent+jwt> (or the configured header). */
export function readToken<P extends Routed>(call: P, deps: Deps): (P & WithToken) | Denial {
  const token = extractToken(call.req.rawHeaders, deps.tokenHeader);
  return isDenial(token) ? token : advance(call, { token });
}

/** Steps 1–7 of the verification table; `aud` is the capability (or the sidecar endpoint's audience). */
export async function verifyToken<P extends Routed & WithToken>(call: P, deps: Deps): Promise<(P & Authenticated) | Denial> {
  const { route } = call;
  const expected =
    route.kind === 'capability'
      ? expectedToken(deps.policy, route.capability, route.capability.name)
      : expectedToken(deps.policy, undefined, route.kind === 'endpoint' ? route.audience : '');
  const t0 = performance.now();
  const now = Math.floor(deps.now() / 1000);
  const verified = await verifyAgentToken(call.token, expected, directoryOf(deps), now);
  deps.metrics?.tokenVerification.observe((performance.now() - t0) / 1000);
  if (isDenial(verified))
    return verified.code === 'agent_not_found' && typeof expected !== 'string' ? revokedOr(verified, call.token, expected, deps, now) : verified;
  return advance(call, { verified });
}

/** One lookup per deps (per policy version), not one per call. */
const directories = new WeakMap<Deps, AgentDirectory>();

function directoryOf(deps: Deps): AgentDirectory {
  let directory = directories.get(deps);
  if (!directory) directories.set(deps, (directory = agentLookup(deps)));
  return directory;
}

/**
 * The protocol answers a revoked agent agent_revoked. Said only to whoever
 * holds its key: the token must verify, steps 1–7, with the revoked agent's
 * key (anyone else still hears agent_not_found).
 */
async function revokedOr(notFound: Denial, token: string, expected: Expected, deps: Deps, now: number): Promise<Denial> {
  const registered = deps.registered;
  const jws = registered && decodeJws(token, AGENT_TOKEN_TYPE);
  const sub = jws && typeof jws !== 'string' ? jws.payload.sub : undefined;
  if (!registered || typeof sub !== 'string') return notFound;
  const agent = await registered.revoked(sub, deps.policy);
  if (!agent) return notFound;
  const proven = await verifyAgentToken(token, expected, { get: () => agent }, now);
  return isDenial(proven) ? notFound : { ...deny('agent_revoked', `agent "${agent.id}" has been revoked`), agentId: agent.id };
}

/**
 * Step 8: the token id is unseen in the replay window (and is now spent).
 * Keyed by the agent key's thumbprint (the seed profile's iss), not the policy-local agent id:
 * one id is spent once for every sidecar sharing the store. Runs after
 * step 9, so an agent without a grant never takes room in the window.
 */
export function checkReplay<P extends Authenticated>(call: P, deps: Deps): P | Denial | Promise<P | Denial> {
  const { claims } = call.verified;
  return spentOr(spend(deps, replayKey('agent', call.verified.agent.thumbprint, claims.jti), claims.jti, claims.iat), call);
}

/** A host's token (registration, status, revoke): a trusted host, this service's issuer, a live signature. */
export async function verifyHost<P extends Routed & WithToken>(call: P, deps: Deps): Promise<(P & HostAuthenticated) | Denial> {
  // A listed host, or (dynamicHosts) one that sends its own key as host_public_key.
  const host = await verifyAnyHostToken(call.token, deps.policy, Math.floor(deps.now() / 1000));
  return isDenial(host) ? host : advance(call, { host });
}

/** A host token is single-use too: its jti is spent in the same replay window. */
export function checkHostReplay<P extends HostAuthenticated>(call: P, deps: Deps): P | Denial | Promise<P | Denial> {
  const { claims } = call.host;
  return spentOr(spend(deps, replayKey('host', claims.iss, claims.jti), claims.jti, claims.iat), call);
}

/**
 * The sidecar's own agent endpoints (capability list with a token, constraint
 * context, request_permission) need no grant for a capability, yet spend a
 * jti: only an agent holding at least one active grant may spend one there,
 * so an agent without grants cannot fill the replay window (step 9's rule,
 * widened to "any capability"). It can still list capabilities without a token.
 */
export function checkAnyGrant<P extends Authenticated>(call: P, deps: Deps): P | Denial {
  const { agent } = call.verified;
  const now = deps.now();
  for (const name of deps.policy.capabilities.keys()) {
    if (!isDenial(activeGrants(agent, [name], deps.policy, now))) return call;
  }
  return deny(
    'capability_denied',
    `agent "${agent.id}" holds no active grant; the sidecar's agent endpoints answer only agents with one (GET /capability/list answers without a token)`,
  );
}

/**
 * Runs `chain` only when the caller sent a token (endpoints that answer
 * anyone, and say more to a known agent). Like Envoy's allow_missing: no
 * token is an anonymous caller; a bad one is refused, never read as anonymous.
 */
export function ifTokenSent<P extends Routed, Q extends P>(chain: Chain<P, Q, Deps>): (call: P, deps: Deps, progress: Progress) => P | Promise<Q | Denial> {
  return (call, deps, progress) => (tokenSent(call.req.rawHeaders, deps.tokenHeader) ? chain.run(call, deps, progress) : call);
}

/** The call, or why its id could not be spent; a promise only when the store answered with one. */
function spentOr<P>(denied: Denial | undefined | Promise<Denial | undefined>, call: P): P | Denial | Promise<P | Denial> {
  return denied instanceof Promise ? denied.then((d) => d ?? call) : (denied ?? call);
}

/** The in-process store answers at once (a boolean): no promise, no microtask; Redis's answer is awaited. */
function spend(deps: Deps, key: string, jti: string, iat: number): Denial | undefined | Promise<Denial | undefined> {
  try {
    // A store that lost its ids: a token from before the loss may have been used already (asked again after the claim, which may find the loss).
    const before = resetDenial(deps, jti, iat);
    if (before) return before;
    const fresh = deps.replay.claim(key, REPLAY_TTL_MS);
    if (typeof fresh === 'boolean') return spent(deps, fresh, jti, iat);
    return fresh.then((f) => spent(deps, f, jti, iat)).catch(storeFailed);
  } catch (err) {
    return storeFailed(err);
  }
}

function spent(deps: Deps, fresh: boolean, jti: string, iat: number): Denial | undefined {
  return fresh ? resetDenial(deps, jti, iat) : deny('token_replayed', `token ${jti} was already used`);
}

function storeFailed(err: unknown): Denial {
  if (err instanceof ReplayStoreUnavailableError) return deny('replay_store_unavailable', err.message);
  return deny('replay_store_unavailable', `replay store failed: ${(err as Error).message}`);
}

function resetDenial(deps: Deps, jti: string, iat: number): Denial | undefined {
  if (!refusedByReset(deps.replay.lastReset?.(), iat, deps.now(), REPLAY_WINDOW_SECONDS * 1000)) return undefined;
  return deny(
    'replay_window_reset',
    `token ${jti} was issued before (or within the clock skew after) the moment the replay store was found to have lost its data; retry with a fresh token in a few seconds`,
  );
}

/** A token bound to a request (htm, htu, ath) is used on that request only: the method, path and body bytes as they will be forwarded. */
export function checkBinding<P extends Routed & Authenticated & Buffered & Partial<Executed>>(call: P, deps: Deps): P | Denial {
  const { claims, agent } = call.verified;
  const bound = claims.htm !== undefined || claims.htu !== undefined || claims.ath !== undefined;
  const required = deps.policy.provider.requireBinding || (call.route.kind === 'capability' && call.route.capability.requireBinding) || agent.requireBinding;
  // Most calls: neither bound nor required, nothing to build.
  if (!bound && !required) return call;
  // An execute call is bound to the request the agent sent (POST /capability/execute and its body), not the one it becomes.
  const request = call.received ?? { method: call.req.method ?? '', path: call.target.path, body: call.body };
  const missing = required ? missingBinding(claims, request.body) : undefined;
  if (missing) return deny('request_binding_mismatch', `${missing}: the policy requires tokens bound to their request`);
  return checkRequestBinding(claims, request, publicOrigin(deps.policy.provider.issuer)) ?? call;
}
