/**
 * The replay store's two Lua scripts (RedisReplayStore, replay-redis.ts): each claim and each server check
 * is one atomic step on the Redis server, timed by Redis's own clock.
 */

/** Redis's own clock in ms, as text: every marker time is on this one clock, so no sidecar's clock can age or rejuvenate a marker. */
const REDIS_MS = `local t = redis.call('TIME')
local now = t[1] .. string.format('%03d', math.floor(tonumber(t[2]) / 1000))`;

/**
 * KEYS: the slot group's epoch marker, the token id, the group's server key.
 * ARGV: the epoch this sidecar knows, ttl ms, this sidecar's instance id (the
 * marker it writes is `<Redis ms>-<instance>`), the run_id this sidecar
 * checked ('' on a Cluster).
 * The marker never expires, so a Redis that lost its data (restarted empty,
 * flushed, failed over to an empty replica) has none: the claim and the
 * check are one step, and no claim can pass against an emptied Redis unseen.
 * A marker written anew also confirms the server (see CHECK), so a flush is
 * not counted again at the next reconnect.
 * Returns 1 (new), 0 (replay), "+<marker>" when the marker was missing (and
 * is now written), or "<Redis ms>|<marker>" when it is not the known epoch.
 */
export const CLAIM = `
local epoch = redis.call('GET', KEYS[1])
if not epoch then
  ${REDIS_MS}
  epoch = now .. '-' .. ARGV[3]
  redis.call('SET', KEYS[1], epoch)
  if ARGV[4] ~= '' then redis.call('SET', KEYS[3], ARGV[4]) end
  return '+' .. epoch
end
if epoch ~= ARGV[1] then
  ${REDIS_MS}
  return now .. '|' .. epoch
end
if redis.call('SET', KEYS[2], '1', 'PX', ARGV[2], 'NX') then return 1 end
return 0
`;

/**
 * The server check of one slot group, on each new connection. KEYS: the
 * marker, the server key (the run_id of the Redis process on which a sidecar
 * last confirmed the marker). ARGV: the server's run_id, this sidecar's
 * instance id.
 * - The server key names this process: a sidecar already checked it since it
 *   started (and rotated the marker if it had to); the marker alone tells.
 *   Returns {0}.
 * - Otherwise the process is new to every sidecar: a restart (from a stale
 *   snapshot or empty), a failover, a first contact. What it holds may be
 *   older than what was spent: the marker is rotated (at Redis's clock) and
 *   the server confirmed, in one step, so exactly one sidecar rotates for one
 *   process. Returns {1, epoch} (the marker was missing) or {2, epoch}.
 */
export const CHECK = `
if redis.call('GET', KEYS[2]) == ARGV[1] then return {0} end
local had = redis.call('GET', KEYS[1])
${REDIS_MS}
local epoch = now .. '-' .. ARGV[2]
redis.call('SET', KEYS[2], ARGV[1])
redis.call('SET', KEYS[1], epoch)
if had then return {2, epoch} end
return {1, epoch}
`;

export type Scripts = {
  agentsChainReplayClaim(marker: string, key: string, server: string, known: string, ttlMs: number, instance: string, runId: string): Promise<number | string>;
  agentsChainReplayCheck(marker: string, server: string, runId: string, instance: string): Promise<[number, string?]>;
};
