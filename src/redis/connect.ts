import type { Cluster, ClusterNode, Redis, RedisOptions } from 'ioredis';
import type { Logger } from '../log.js';

/** How to reach Redis: one URL, Sentinels, or Cluster seed nodes. */
export interface RedisSettings {
  /** redis://[user:pass@]host:port[/db] or rediss:// (TLS). */
  url?: string;
  /** host:port of Sentinels, with the master's name. */
  sentinels?: { host: string; port: number }[];
  sentinelName?: string;
  /** host:port seeds of a Redis Cluster. */
  cluster?: ClusterNode[];
  password?: string;
  /** Every key starts with this; it carries a {hash tag} so a Cluster keeps one service's keys in one slot. */
  prefix: string;
  /** A command that takes longer fails (and the call that needed it is refused) [250 ms]. */
  commandTimeoutMs?: number;
}

export type RedisClient = Redis | Cluster;

/**
 * A client that fails fast instead of queueing: with no connection a command
 * is rejected at once (calls are refused with 503, never held), and ioredis
 * keeps reconnecting in the background, at most 500 ms apart, so service
 * resumes within a second of Redis returning. Auto-pipelining batches the
 * commands of concurrent calls into one round trip. ioredis is loaded on the first connection: a sidecar
 * without Redis does not carry it (~10 MB resident).
 */
export async function connectRedis(s: RedisSettings, log: Logger, role: 'commands' | 'subscriber' = 'commands'): Promise<RedisClient> {
  const { Cluster, Redis } = await import('ioredis');
  // The subscriber only listens: it may queue its SUBSCRIBE until connected (ioredis re-subscribes after reconnects).
  const subscriber = role === 'subscriber';
  const common: RedisOptions = {
    enableAutoPipelining: !subscriber,
    enableOfflineQueue: subscriber,
    maxRetriesPerRequest: subscriber ? null : 0,
    ...(subscriber ? {} : { commandTimeout: s.commandTimeoutMs ?? 250 }),
    connectTimeout: 2_000,
    retryStrategy: (times) => Math.min(50 * times, 500),
    ...(s.password ? { password: s.password } : {}),
  };
  let client: RedisClient;
  if (s.cluster?.length) {
    client = new Cluster(s.cluster, {
      enableAutoPipelining: !subscriber,
      enableOfflineQueue: subscriber,
      clusterRetryStrategy: (t) => Math.min(50 * t, 500),
      redisOptions: common,
    });
  } else if (s.sentinels?.length) {
    client = new Redis({ ...common, sentinels: s.sentinels, name: s.sentinelName ?? 'mymaster' });
  } else {
    client = new Redis(s.url ?? 'redis://127.0.0.1:6379', common);
  }
  // One line per change of state, not one per failed reconnect attempt.
  let up: boolean | undefined;
  client.on('ready', () => {
    if (up !== true) log.info('redis connected', { role });
    up = true;
  });
  client.on('error', (err: Error) => {
    if (up !== false) log.warn('redis unavailable; calls that need it are refused until it answers', { role, error: err.message });
    up = false;
  });
  client.on('end', () => {
    up = false;
  });
  return client;
}

/** True when the client can take commands now. */
export function redisReady(client: RedisClient): boolean {
  return client.status === 'ready';
}
