import type { RegisteredAgent } from '../registration/registry.js';

/** A registered agent on the wire (snake_case, as the Agent Auth draft names things): host endpoints and the admin API. */
export function agentView(a: RegisteredAgent) {
  return {
    agent_id: a.id,
    host_id: a.hostId,
    name: a.name,
    status: a.status,
    mode: a.mode,
    registered_at: new Date(a.registeredAt).toISOString(),
    ...(a.revokedAt ? { revoked_at: new Date(a.revokedAt).toISOString() } : {}),
    ...(a.keyRotatedAt ? { key_rotated_at: new Date(a.keyRotatedAt).toISOString() } : {}),
    agent_capability_grants: a.grants.map((g) => ({
      capability: g.capability,
      status: a.status === 'active' ? 'active' : 'revoked',
      constraints: g.constraints,
    })),
  };
}
