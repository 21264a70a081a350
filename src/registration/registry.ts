import type { DerivedGrant } from './grants.js';

/** An agent a host registered: stored as data (JSON), so it can live in Redis. */
export interface RegisteredAgent {
  id: string;
  name: string;
  hostId: string;
  /** The agent's Ed25519 public key (public part only) and its RFC 7638 thumbprint. */
  publicKey: { kty: 'OKP'; crv: 'Ed25519'; x: string };
  thumbprint: string;
  mode: 'delegated' | 'autonomous';
  reason?: string;
  status: 'active' | 'revoked';
  grants: DerivedGrant[];
  registeredAt: number;
  revokedAt?: number;
  /** When its host last replaced its key (POST /agent/rotate-key); the id stays the first key's. */
  keyRotatedAt?: number;
}

/** A replacement key for an agent: the public part and its thumbprint. */
export interface AgentKey {
  publicKey: RegisteredAgent['publicKey'];
  thumbprint: string;
}

export type RegisterResult = { outcome: 'created' | 'existing'; agent: RegisteredAgent } | { outcome: 'limit' | 'revoked' };

/**
 * Registered agents. `register` is atomic: an active agent with the same id
 * is returned as it is (a second registration of one key is idempotent), a
 * revoked one stays revoked (`revoked`: a revocation cannot be undone by
 * registering again), and a host at its limit gets `limit`. Memory by
 * default, Redis for replicas.
 */
export interface AgentRegistry {
  get(id: string): Promise<RegisteredAgent | undefined>;
  register(agent: RegisteredAgent, maxAgents: number): Promise<RegisterResult>;
  /** Marks an active agent revoked; undefined when it is unknown or already revoked. */
  revoke(id: string, nowMs: number): Promise<RegisteredAgent | undefined>;
  /** Replaces an active agent's key (its old key's tokens stop at once); undefined when it is unknown or revoked. */
  rotateKey(id: string, key: AgentKey, nowMs: number): Promise<RegisteredAgent | undefined>;
  list(): Promise<RegisteredAgent[]>;
}

export class MemoryAgentRegistry implements AgentRegistry {
  private readonly agents = new Map<string, RegisteredAgent>();

  async get(id: string): Promise<RegisteredAgent | undefined> {
    const a = this.agents.get(id);
    return a && structuredClone(a);
  }

  async register(agent: RegisteredAgent, maxAgents: number): Promise<RegisterResult> {
    const existing = this.agents.get(agent.id);
    if (existing?.status === 'active') return { outcome: 'existing', agent: structuredClone(existing) };
    if (existing) return { outcome: 'revoked' };
    const active = [...this.agents.values()].filter((a) => a.hostId === agent.hostId && a.status === 'active').length;
    if (active >= maxAgents) return { outcome: 'limit' };
    this.agents.set(agent.id, structuredClone(agent));
    return { outcome: 'created', agent: structuredClone(agent) };
  }

  async revoke(id: string, nowMs: number): Promise<RegisteredAgent | undefined> {
    const a = this.agents.get(id);
    if (!a || a.status !== 'active') return undefined;
    a.status = 'revoked';
    a.revokedAt = nowMs;
    return structuredClone(a);
  }

  async rotateKey(id: string, key: AgentKey, nowMs: number): Promise<RegisteredAgent | undefined> {
    const a = this.agents.get(id);
    if (!a || a.status !== 'active') return undefined;
    a.publicKey = { ...key.publicKey };
    a.thumbprint = key.thumbprint;
    a.keyRotatedAt = nowMs;
    return structuredClone(a);
  }

  async list(): Promise<RegisteredAgent[]> {
    return [...this.agents.values()].map((a) => structuredClone(a));
  }
}
