import { deny, type Denial } from '../errors.js';
import { grantKey, type Grant } from '../policy/types.js';

/** Step 9: the agent holds an active, unexpired grant for the capability. */
export function findActiveGrant(grants: ReadonlyMap<string, Grant>, agentId: string, capability: string, nowMs: number): Grant | Denial {
  const grant = grants.get(grantKey(agentId, capability));
  if (!grant) return deny('capability_denied', `agent "${agentId}" has no grant for "${capability}"`);
  if (grant.status !== 'active') return deny('capability_denied', `the grant of "${capability}" to "${agentId}" is ${grant.status}`);
  if (grant.expiresAt !== undefined && grant.expiresAt <= nowMs) {
    return deny('capability_denied', `the grant of "${capability}" to "${agentId}" expired at ${new Date(grant.expiresAt).toISOString()}`);
  }
  return grant;
}
