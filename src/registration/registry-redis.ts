import type { RedisClient } from '../redis/connect.js';
import type { AgentKey, AgentRegistry, RegisteredAgent, RegisterResult } from './registry.js';

/** KEYS: agent hash, the host's set of active agents. ARGV: agent JSON, max agents, agent id. */
const REGISTER = `
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'active' then return {'existing', redis.call('HGET', KEYS[1], 'data')} end
if status then return {'revoked', ''} end
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[2]) then return {'limit', ''} end
redis.call('HSET', KEYS[1], 'data', ARGV[1], 'status', 'active')
redis.call('SADD', KEYS[2], ARGV[3])
redis.call('SADD', KEYS[3], ARGV[3])
return {'created', ARGV[1]}
`;

/** KEYS: agent hash, the host's set. ARGV: revoked agent JSON, agent id. */
const REVOKE = `
if redis.call('HGET', KEYS[1], 'status') ~= 'active' then return 0 end
redis.call('HSET', KEYS[1], 'data', ARGV[1], 'status', 'revoked')
redis.call('SREM', KEYS[2], ARGV[2])
return 1
`;

/** KEYS: agent hash. ARGV: the agent JSON with its new key. Only an active agent's key is replaced. */
const ROTATE = `
if redis.call('HGET', KEYS[1], 'status') ~= 'active' then return 0 end
redis.call('HSET', KEYS[1], 'data', ARGV[1])
return 1
`;

/** Registered agents are agt_<RFC 7638 thumbprint>; nothing else reaches a key. */
const AGENT_ID = /^agt_[A-Za-z0-9_-]{43}$/;

type Scripts = {
  agentsChainRegister(agentKey: string, hostKey: string, allKey: string, json: string, max: number, id: string): Promise<[string, string]>;
  agentsChainRevoke(agentKey: string, hostKey: string, json: string, id: string): Promise<number>;
  agentsChainRotate(agentKey: string, json: string): Promise<number>;
};

/**
 * Registered agents in Redis, read on every call (no cache), so a revocation
 * on one replica refuses the agent's next call on all of them. The limit check
 * and the insert are one script: two replicas cannot both take the last slot.
 */
export class RedisAgentRegistry implements AgentRegistry {
  private readonly scripts: Scripts;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {
    redis.defineCommand('agentsChainRegister', { numberOfKeys: 3, lua: REGISTER });
    redis.defineCommand('agentsChainRevoke', { numberOfKeys: 2, lua: REVOKE });
    redis.defineCommand('agentsChainRotate', { numberOfKeys: 1, lua: ROTATE });
    this.scripts = redis as unknown as Scripts;
  }

  async get(id: string): Promise<RegisteredAgent | undefined> {
    if (!AGENT_ID.test(id)) return undefined;
    const data = await this.redis.hget(this.key(id), 'data');
    return data ? (JSON.parse(data) as RegisteredAgent) : undefined;
  }

  async register(agent: RegisteredAgent, maxAgents: number): Promise<RegisterResult> {
    const [outcome, data] = await this.scripts.agentsChainRegister(
      this.key(agent.id),
      this.hostKey(agent.hostId),
      this.allKey,
      JSON.stringify(agent),
      maxAgents,
      agent.id,
    );
    if (outcome === 'limit' || outcome === 'revoked') return { outcome };
    return { outcome: outcome as 'created' | 'existing', agent: JSON.parse(data) as RegisteredAgent };
  }

  async revoke(id: string, nowMs: number): Promise<RegisteredAgent | undefined> {
    const current = await this.get(id);
    if (!current || current.status !== 'active') return undefined;
    const revoked: RegisteredAgent = { ...current, status: 'revoked', revokedAt: nowMs };
    return (await this.scripts.agentsChainRevoke(this.key(id), this.hostKey(current.hostId), JSON.stringify(revoked), id)) === 1 ? revoked : undefined;
  }

  async rotateKey(id: string, key: AgentKey, nowMs: number): Promise<RegisteredAgent | undefined> {
    const current = await this.get(id);
    if (!current || current.status !== 'active') return undefined;
    const rotated: RegisteredAgent = { ...current, publicKey: { ...key.publicKey }, thumbprint: key.thumbprint, keyRotatedAt: nowMs };
    return (await this.scripts.agentsChainRotate(this.key(id), JSON.stringify(rotated))) === 1 ? rotated : undefined;
  }

  async list(): Promise<RegisteredAgent[]> {
    const ids = await this.redis.smembers(this.allKey);
    const rows = await Promise.all(ids.map((id) => this.get(id)));
    return rows.filter((a): a is RegisteredAgent => a !== undefined);
  }

  private key(id: string): string {
    return `${this.prefix}agent:${id}`;
  }

  private hostKey(hostId: string): string {
    return `${this.prefix}host:${hostId}:agents`;
  }

  private get allKey(): string {
    return `${this.prefix}agents`;
  }
}
