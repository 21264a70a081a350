import { randomBytes } from 'node:crypto';
import type { Logger } from '../log.js';
import type { RedisClient } from '../redis/connect.js';
import { ReplayStoreUnavailableError, type ReplayStore } from './replay.js';

/**
 * Every sidecar on one Redis spends token ids under this namespace, whatever
 * its provider name or --redis-prefix: a token spent at one service is spent
 * at all of them. Keys are `agents-chain-replay:{<slot group>}:epoch` (the
 * marker) and `agents-chain-replay:{<slot group>}:<kind>:<thumbprint>:<jti>`.
 */
export const REPLAY_NAMESPACE = 'agents-chain-replay';

/**
 * KEYS: the slot group's epoch marker, the token id. ARGV: the epoch this
 * sidecar knows, ttl ms, the epoch to write if the marker is missing.
 * The marker never expires, so a Redis that lost its data (restarted empty,
 * flushed, failed over to an empty replica) has none: the claim and the
 * check are one step, and no claim can pass against an emptied Redis unseen.
 * Returns 1 (new), 0 (replay) or the marker when it is not the known epoch.
 */
const CLAIM = `
local epoch = redis.call('GET', KEYS[1])
if not epoch then
  redis.call('SET', KEYS[1], ARGV[3])
  epoch = ARGV[3]
end
if epoch ~= ARGV[1] then return epoch end
if redis.call('SET', KEYS[2], '1', 'PX', ARGV[2], 'NX') then return 1 end
return 0
`;

/** KEYS: the marker. ARGV: the epoch this sidecar knows, the new one. Rotates unless another sidecar already did. */
const ROTATE = `
local epoch = redis.call('GET', KEYS[1])
if epoch and epoch ~= ARGV[1] then return epoch end
redis.call('SET', KEYS[1], ARGV[2])
return ARGV[2]
`;

type Scripts = {
  agentsChainReplayClaim(marker: string, key: string, known: string, ttlMs: number, candidate: string): Promise<number | string>;
  agentsChainReplayRotate(marker: string, known: string, next: string): Promise<string>;
};

/** Why the window was found lost (the label of agents_chain_replay_store_resets_total). */
export type ResetCause = 'marker_missing' | 'epoch_changed' | 'server_changed';
export const RESET_CAUSES: readonly ResetCause[] = ['marker_missing', 'epoch_changed', 'server_changed'];

export interface RedisReplayOptions {
  log: Logger;
  /** The replay window: a detected loss refuses older tokens this long. */
  windowMs: number;
  now?: () => number;
  /** Slot groups: 1 on one Redis; more on a Cluster, so the window spreads over its masters [1]. */
  slotGroups?: number;
  /** Compare the server's run_id on every (re)connect; not on a Cluster, whose INFO answers from any node [true]. */
  watchServer?: boolean;
  onReset?: (cause: ResetCause) => void;
}

/**
 * The replay window shared by every sidecar on one Redis: one EVALSHA per
 * call (auto-pipelined), atomic in Redis, so a token id is accepted once
 * across all of them. A Redis that does not answer makes the call fail with
 * ReplayStoreUnavailableError: refused, never skipped.
 *
 * Lost data is found three ways: the epoch marker is missing (this sidecar
 * writes a new one), it differs from the one this sidecar knows (another
 * sidecar wrote it), or the server's run_id changed across a reconnect (a
 * restart from a stale snapshot, a failover to a replica that lagged: the
 * marker survived, the last ids did not; this sidecar rotates the marker so
 * the others learn it). Each is a reset at the marker's time, see lastReset.
 */
export class RedisReplayStore implements ReplayStore {
  private readonly scripts: Scripts;
  private readonly now: () => number;
  private readonly groups: number;
  /** The epoch this sidecar knows, per slot group ('' until the first claim). */
  private readonly epochs: string[];
  private readonly instance = randomBytes(4).toString('hex');
  private resetAt: number | undefined;
  private runId: string | undefined;
  /** A (re)connect whose server is not yet compared: claims wait for it. */
  private serverCheck: Promise<boolean> | undefined;
  private checkError = '';
  private warnedPolicy: string | undefined;
  private readonly watch: boolean;
  private checkedSocket: unknown;

  constructor(private readonly redis: RedisClient, private readonly opts: RedisReplayOptions) {
    redis.defineCommand('agentsChainReplayClaim', { numberOfKeys: 2, lua: CLAIM });
    redis.defineCommand('agentsChainReplayRotate', { numberOfKeys: 1, lua: ROTATE });
    this.scripts = redis as unknown as Scripts;
    this.now = opts.now ?? Date.now;
    this.groups = Math.max(1, opts.slotGroups ?? 1);
    this.epochs = new Array<string>(this.groups).fill('');
    this.watch = opts.watchServer !== false;
    // Checked as soon as a connection is ready, and again by any claim that finds a socket not checked yet:
    // ioredis emits 'ready' a tick after commands may flow, so the event alone could let a claim slip through.
    if (this.watch) redis.on('ready', () => this.watchConnection());
    this.watchConnection();
  }

  /** A new socket (a reconnect, a failover) gets its server compared before any claim of ours runs on it. */
  private watchConnection(): void {
    if (!this.watch || this.redis.status !== 'ready') return;
    const socket = (this.redis as { stream?: unknown }).stream;
    if (socket === this.checkedSocket) return;
    this.checkedSocket = socket;
    this.serverCheck = this.checkServer();
  }

  lastReset(): number | undefined {
    return this.resetAt;
  }

  async claim(key: string, ttlMs: number): Promise<boolean> {
    this.watchConnection();
    if (this.serverCheck) await this.serverChecked();
    const group = this.groups === 1 ? 0 : slotGroup(key, this.groups);
    const tag = `${REPLAY_NAMESPACE}:{${group}}:`;
    // A changed epoch is adopted and the claim retried under it (one more round trip, once per change).
    for (let attempt = 0; attempt < 3; attempt++) {
      const known = this.epochs[group]!;
      const candidate = `${this.now()}-${this.instance}`;
      let reply: number | string;
      try {
        reply = await this.scripts.agentsChainReplayClaim(`${tag}epoch`, `${tag}${key}`, known, ttlMs, candidate);
      } catch (err) {
        throw new ReplayStoreUnavailableError(`replay store (Redis) did not answer: ${(err as Error).message}`);
      }
      if (reply === 1) return true;
      if (reply === 0) return false;
      this.adopt(group, String(reply), reply === candidate ? 'marker_missing' : 'epoch_changed');
    }
    throw new ReplayStoreUnavailableError('the replay window marker in Redis keeps changing');
  }

  /** A marker this sidecar did not know: its time says whether ids may have been lost within the window. */
  private adopt(group: number, epoch: string, cause: ResetCause): void {
    const first = this.epochs[group] === '';
    this.epochs[group] = epoch;
    const created = Number(epoch.slice(0, epoch.indexOf('-')));
    // An unreadable marker is treated as written now: fail closed.
    const at = Number.isSafeInteger(created) && created > 0 ? Math.min(created, this.now()) : this.now();
    if (this.now() - at >= this.opts.windowMs) {
      this.opts.log.debug('replay window marker adopted', { epoch, first });
      return;
    }
    this.reset(at, cause, { epoch, slotGroup: group, firstContact: first });
  }

  private reset(at: number, cause: ResetCause, detail: Record<string, unknown>): void {
    if (this.resetAt !== undefined && at <= this.resetAt) return; // the same loss, seen from another slot group or sidecar
    this.resetAt = at;
    this.opts.onReset?.(cause);
    this.opts.log.warn('replay window reset: Redis lost (or may have lost) the token ids it held; tokens issued before the reset are refused for one window', {
      cause, resetAt: new Date(at).toISOString(), refusedUntil: new Date(at + this.opts.windowMs).toISOString(), ...detail,
    });
  }

  /** Waits for the server check of the current connection; a failed one refuses this call and is retried by the next. */
  private async serverChecked(): Promise<void> {
    while (this.serverCheck) {
      const check = this.serverCheck;
      const ok = await check;
      if (this.serverCheck !== check) continue; // reconnected meanwhile: wait for the newer check
      if (ok) {
        this.serverCheck = undefined;
        return;
      }
      this.serverCheck = this.checkServer();
      throw new ReplayStoreUnavailableError(`replay store (Redis) connected, but its server could not be identified (INFO): ${this.checkError}`);
    }
  }

  /** Another run_id than before: the server restarted or failed over; what it holds may be older than what we spent. */
  private async checkServer(): Promise<boolean> {
    try {
      const info = await this.redis.info();
      const runId = /^run_id:(\S+)/m.exec(info)?.[1];
      const policy = /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
      // An evicting Redis drops replay ids (they carry a TTL: volatile-* policies pick them first) without a trace.
      if (policy && policy !== 'noeviction' && policy !== this.warnedPolicy) {
        this.opts.log.warn('Redis may evict replay ids when full, and a token would then pass twice: set maxmemory-policy noeviction', { maxmemoryPolicy: policy });
      }
      this.warnedPolicy = policy;
      if (this.runId !== undefined && runId !== this.runId) {
        const at = this.now();
        this.reset(at, 'server_changed', { previousRunId: this.runId, runId });
        for (let g = 0; g < this.groups; g++) {
          const tag = `${REPLAY_NAMESPACE}:{${g}}:`;
          this.epochs[g] = await this.scripts.agentsChainReplayRotate(`${tag}epoch`, this.epochs[g]!, `${at}-${this.instance}`);
        }
      }
      this.runId = runId;
      return true;
    } catch (err) {
      const message = (err as Error).message;
      // Refused for good (an ACL without +info, a renamed command): fail closed, and say how to fix it.
      const refused = /^(NOPERM|ERR unknown command)/.test(message);
      if (refused && this.checkError !== message) this.opts.log.error('the replay store needs INFO on Redis to notice a restart or failover; calls are refused until the sidecar\'s Redis user may run it', { error: message });
      else this.opts.log.debug('replay store server check failed', { error: message });
      this.checkError = message;
      return false;
    }
  }
}

/** FNV-1a of the key, modulo the slot groups: a Cluster spreads the window over `groups` hash tags. Pure. */
export function slotGroup(key: string, groups: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return (h >>> 0) % groups;
}
