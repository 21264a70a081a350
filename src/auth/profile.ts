/**
 * The Agent Auth Protocol token profile (`provider.tokenProfile: agent-auth-v1`):
 * which URLs name this service in a token's `aud`, and who may be its `iss`.
 * Pure; the policy is the only input.
 */
import type { Agent, Capability, Policy } from '../policy/types.js';
import { SELF_REGISTERED_HOST_PREFIX } from '../registration/host-token.js';
import { publicOrigin } from './binding.js';
import type { AgentAuthExpected, Expected } from './verify.js';

/** The execute endpoint's path (the protocol's default location). */
export const EXECUTE_PATH = '/capability/execute';

const byPolicy = new WeakMap<Policy, ReadonlySet<string>>();

/**
 * The audiences that name this service, as the reference server accepts them:
 * its issuer (with and without a trailing slash), the issuer's origin, and the
 * execute endpoint (on the origin, as discovery publishes it, or under the issuer). Not the Host header's origin: the sidecar's public name is
 * the policy's issuer, never what a caller says it is.
 */
export function serviceAudiences(policy: Policy): ReadonlySet<string> {
  let urls = byPolicy.get(policy);
  if (!urls) {
    const issuer = policy.provider.issuer.replace(/\/+$/, '');
    // The execute URL as discovery publishes it (origin + path) and as the reference builds it (issuer + path).
    urls = new Set([issuer, `${issuer}/`, publicOrigin(issuer), serviceUrl(policy, EXECUTE_PATH), `${issuer}${EXECUTE_PATH}`]);
    byPolicy.set(policy, urls);
  }
  return urls;
}

/**
 * A URL of this service as agents reach it: the issuer's origin and a path as
 * the sidecar sees it (what discovery publishes, what htu and a location name).
 */
export function serviceUrl(policy: Policy, path: string): string {
  return `${publicOrigin(policy.provider.issuer)}${path}`;
}

/** A capability's location, as discovery publishes it: the service's origin and the capability's path template. */
export function capabilityLocation(policy: Policy, capability: Capability): string {
  return serviceUrl(policy, capability.path);
}

/** Who may issue an agent's tokens: its host (by id or key thumbprint), or the agent itself (its key's thumbprint). */
export function agentIssuers(policy: Policy, agent: Agent): string[] {
  const out = [agent.thumbprint];
  if (agent.hostId !== undefined) {
    out.push(agent.hostId);
    for (const h of policy.hosts.values()) if (h.id === agent.hostId) out.push(h.thumbprint);
    // A self-registered host is named after its key's thumbprint.
    if (agent.hostId.startsWith(SELF_REGISTERED_HOST_PREFIX)) out.push(agent.hostId.slice(SELF_REGISTERED_HOST_PREFIX.length));
  }
  return out;
}

/** agent-auth-v1 expectations, built once per capability (each belongs to one compiled policy), and once per policy for its endpoints. */
const built = new WeakMap<Capability | Policy, AgentAuthExpected>();

/** What a token for this capability (or endpoint audience) must be, in the policy's profile: the seed's is the aud itself. */
export function expectedToken(policy: Policy, capability: Capability | undefined, audience: string): Expected {
  if (policy.provider.tokenProfile !== 'agent-auth-v1') return capability?.name ?? audience;
  const owner = capability ?? policy;
  let expected = built.get(owner);
  if (!expected) {
    expected = {
      ...(capability ? { capability: capability.name, location: capabilityLocation(policy, capability) } : {}),
      urls: serviceAudiences(policy),
      issuers: (agent) => agentIssuers(policy, agent),
    };
    built.set(owner, expected);
  }
  return expected;
}
