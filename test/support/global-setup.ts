import { Redis } from 'ioredis';
import { REPLAY_NAMESPACE } from '../../src/auth/replay-redis.js';
import { REPLAY_WINDOW_SECONDS } from '../../src/auth/verify.js';
import { REDIS_URL } from './redis.js';

/**
 * Marks the replay window of the Redis at `url` as intact, the way a sidecar
 * that checked it long ago would have left it: an epoch marker older than the
 * window and the server key naming this Redis process. A sidecar's first
 * contact then finds nothing lost and refuses no token (a Redis new to every
 * sidecar is otherwise a loss: fail closed, fresh tokens refused for ~30 s).
 * Only slot group {0}: the other 15 are used on a Cluster only. A marker
 * younger than the window (a test Redis restarted between runs) is replaced:
 * this is for test Redis servers, never for one in service.
 */
export async function seedReplayWindow(url: string): Promise<void> {
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 1_000, retryStrategy: () => null });
  try {
    await redis.connect();
    const runId = /^run_id:(\S+)/m.exec(await redis.info('server'))?.[1];
    if (!runId) throw new Error('INFO server named no run_id');
    const tag = `${REPLAY_NAMESPACE}:{0}:`;
    const marker = await redis.get(`${tag}epoch`);
    const written = marker ? Number(marker.split('-')[0]) : NaN;
    const old = Date.now() - 10 * REPLAY_WINDOW_SECONDS * 1000;
    if (!(written <= Date.now() - REPLAY_WINDOW_SECONDS * 1000)) await redis.set(`${tag}epoch`, `${old}-00000000`);
    await redis.set(`${tag}server`, runId);
  } finally {
    redis.disconnect();
  }
}

/** vitest globalSetup: the shared test Redis, before any test file, so that no test depends on which file ran first. */
export default async function setup(): Promise<void> {
  try {
    await seedReplayWindow(REDIS_URL);
  } catch (err) {
    // Tests that need this Redis fail on their own, with their own message; the rest of the suite runs.
    process.stderr.write(`global-setup: could not prepare the test Redis at ${REDIS_URL}: ${(err as Error).message}\n`);
  }
}
