import { MemoryReplayStore, replayCapacity } from '../auth/replay.js';
import { RedisReplayStore } from '../auth/replay-redis.js';
import { REPLAY_WINDOW_SECONDS } from '../auth/verify.js';
import { RedisAccessRequestStore } from '../approvals/store-redis.js';
import type { Logger } from '../log.js';
import type { SidecarMetrics } from '../metrics/metrics.js';
import { connectRedis, type RedisClient, type RedisSettings } from '../redis/connect.js';
import { MemoryAgentRegistry, type AgentRegistry } from '../registration/registry.js';
import { RedisAgentRegistry } from '../registration/registry-redis.js';
import type { SidecarOptions } from './options.js';

/**
 * On a Redis Cluster, token ids are spread over this many hash tags, so the replay window spreads over its
 * masters instead of filling one slot; a single Redis (or Sentinel) keeps them under one.
 */
const CLUSTER_REPLAY_SLOT_GROUPS = 16;
/** The verifier states the replay window in seconds (a token's `exp` is); the store counts milliseconds. */
const MS_PER_SECOND = 1000;

/** The Redis-backed stores replicas share, over one command connection (auto-pipelined) and one subscriber. */
export interface SharedStores {
  client: RedisClient;
  prefix: string;
  replay: RedisReplayStore;
  accessRequests: RedisAccessRequestStore;
  close(): Promise<void>;
}

export async function sharedStores(settings: RedisSettings, log: Logger, metrics: SidecarMetrics, now: () => number): Promise<SharedStores> {
  const client = await connectRedis(settings, log);
  const subscriber = await connectRedis(settings, log, 'subscriber');
  const cluster = (settings.cluster?.length ?? 0) > 0;
  return {
    client,
    prefix: settings.prefix,
    // One namespace for token ids on this Redis, whatever the prefix.
    replay: new RedisReplayStore(client, {
      log,
      now,
      windowMs: REPLAY_WINDOW_SECONDS * MS_PER_SECOND,
      slotGroups: cluster ? CLUSTER_REPLAY_SLOT_GROUPS : 1,
      // The server's run_id is checked on every (re)connect; a Cluster's INFO answers from any node, so not there.
      watchServer: !cluster,
      onReset: (cause) => metrics.replayStoreResets.inc({ cause }),
    }),
    accessRequests: new RedisAccessRequestStore(client, subscriber, settings.prefix),
    async close() {
      client.disconnect();
      subscriber.disconnect();
    },
  };
}

/** At or above this, a reported memory limit means none (what replayCapacity treats as unlimited too). */
const NO_MEMORY_LIMIT = 2 ** 50;

/** The in-process replay window, bounded so that it refuses calls before the process runs out of memory. */
export function memoryReplayStore(maxEntries: number | undefined, log: Logger, now: () => number): MemoryReplayStore {
  const reported = process.constrainedMemory?.();
  // Without a cgroup limit Node reports 0 or 2^64 - 1 ("unlimited"): no limit, logged as null.
  const limit = reported && reported < NO_MEMORY_LIMIT ? reported : undefined;
  const capacity = maxEntries ?? replayCapacity(limit);
  const source = maxEntries ? '--replay-max-entries' : limit ? 'memory limit' : 'default (no memory limit)';
  log.info('replay window in memory', { maxEntries: capacity, memoryLimitBytes: limit ?? null, source });
  return new MemoryReplayStore(capacity, now);
}

/** Where registered agents are kept: the embedder's registry, else Redis when replicas share state, else memory. */
export function agentRegistry(opts: SidecarOptions, shared: SharedStores | undefined): AgentRegistry {
  return opts.agentRegistry ?? (shared ? new RedisAgentRegistry(shared.client, shared.prefix) : new MemoryAgentRegistry());
}
