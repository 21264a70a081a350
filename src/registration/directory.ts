import type { KeyObject } from 'node:crypto';
import type { AgentDirectory } from '../auth/verify.js';
import { importAgentKey } from '../identity/keys.js';
import { grantKey, type Agent, type Grant, type Policy } from '../policy/types.js';
import { currentGrants } from './grants.js';
import { hostNamed } from './host-token.js';
import type { AgentRegistry, RegisteredAgent } from './registry.js';

/** Where a token's `sub` is looked up: the policy's agents first, then the agents hosts registered (both read at each lookup). */
export function agentLookup(source: { readonly policy: Policy; readonly registered?: RegisteredAgents | undefined }): AgentDirectory {
  return { get: (id) => source.policy.agents.get(id) ?? source.registered?.get(id, source.policy) };
}

/**
 * Registered agents as the pipeline sees them: an Agent with its own grants.
 * The record is read on every call (a revocation anywhere counts at once);
 * only the imported key is cached, by thumbprint. The active policy has the
 * last word: an agent whose host left the policy (or a self-registered host's
 * agent once dynamicHosts is off) is unknown, and its grants never exceed its
 * host's current defaults.
 */
export class RegisteredAgents {
  private readonly keys = new Map<string, KeyObject>();

  constructor(readonly registry: AgentRegistry) {}

  async get(id: string, policy: Policy): Promise<Agent | undefined> {
    if (policy.hosts.size === 0 && !policy.dynamicHosts) return undefined;
    const r = await this.registry.get(id);
    if (!r || r.status !== 'active') return undefined;
    const host = hostNamed(policy, r.hostId);
    return host ? this.toAgent({ ...r, grants: currentGrants(host, r.grants) }) : undefined;
  }

  /**
   * A revoked agent as it was (its key, no grants), for one purpose: to tell
   * the holder of its key, once a token verifies with it, that it was revoked
   * (the Agent Auth profile's agent_revoked) rather than unknown.
   */
  async revoked(id: string, policy: Policy): Promise<Agent | undefined> {
    if (policy.hosts.size === 0 && !policy.dynamicHosts) return undefined;
    const r = await this.registry.get(id);
    return r?.status === 'revoked' ? this.toAgent({ ...r, grants: [] }) : undefined;
  }

  private async toAgent(r: RegisteredAgent): Promise<Agent | undefined> {
    let key = this.keys.get(r.thumbprint);
    if (!key) {
      try {
        key = await importAgentKey(r.publicKey);
      } catch {
        // Recorded before keys were vetted (small order, non-canonical): such an agent is unknown, never forgeable.
        return undefined;
      }
      if (this.keys.size >= 10_000) this.keys.clear();
      this.keys.set(r.thumbprint, key);
    }
    const grants = new Map<string, Grant>(
      r.grants.map((g) => [grantKey(r.id, g.capability), { agent: r.id, capability: g.capability, status: 'active', constraints: g.constraints }]),
    );
    return { id: r.id, name: r.name, key, thumbprint: r.thumbprint, hostId: r.hostId, grants };
  }
}
