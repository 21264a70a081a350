import { randomBytes } from 'node:crypto';
import type { Logger } from '../log.js';
import type { RedisClient } from '../redis/connect.js';
import { ReplayStoreUnavailableError, type ReplayStore } from './replay.js';
import { CHECK, CLAIM, type Scripts } from './replay-scripts.js';

/**
 * Every sidecar on one Redis spends token ids under this namespace, whatever
 * its provider name or --redis-prefix: a token spent at one service is spent
 * at all of them. Keys are `agents-chain-replay:{<slot group>}:epoch` (the
 * marker), `...:server` (the run_id of the Redis process a sidecar last checked)
 * and `agents-chain-replay:{<slot group>}:<kind>:<thumbprint>:<jti>`.
 */
export const REPLAY_NAMESPACE = 'agents-chain-replay';

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
  /** Check the server (its run_id against the one a sidecar confirmed) on every (re)connect; not on a Cluster, whose INFO answers from any node [true]. */
  watchServer?: boolean;
  onReset?: (cause: ResetCause) => void;
}

/** One server check: the socket it was started for, and whether it passed. */
interface ServerCheck {
  socket: unknown;
  done: Promise<boolean>;
}

/** Two resets this close together are one loss seen from several slot groups (or a rotation and its adoption): logged and counted once. */
const SAME_LOSS_MS = 1_000;

/** The time an epoch marker was written (`<ms>-<id>`), or undefined when it is unreadable. Pure. */
export function markerTime(epoch: string): number | undefined {
  const m = /^(\d+)-/.exec(epoch);
  const t = m ? Number(m[1]) : NaN;
  return Number.isSafeInteger(t) && t > 0 ? t : undefined;
}

/**
 * The replay window shared by every sidecar on one Redis: one EVALSHA per
 * call (auto-pipelined), atomic in Redis, so a token id is accepted once
 * across all of them. A Redis that does not answer makes the call fail with
 * ReplayStoreUnavailableError: refused, never skipped.
 *
 * Lost data is found three ways: the epoch marker is missing (this sidecar
 * writes a new one), it differs from the one this sidecar knows and is younger
 * than the window (another sidecar wrote it), or the Redis process is one no
 * sidecar has checked yet (its run_id is not the one in the server key: a
 * restart from a stale snapshot or empty, a failover to a replica that lagged,
 * whether or not a sidecar survived it; this sidecar rotates the marker so the
 * others learn it). Each is a reset at this sidecar's own clock, see lastReset.
 */
export class RedisReplayStore implements ReplayStore {
  private readonly scripts: Scripts;
  private readonly now: () => number;
  private readonly groups: number;
  /** The epoch this sidecar knows, per slot group ('' until the first claim). */
  private readonly epochs: string[];
  private readonly instance = randomBytes(4).toString('hex');
  private resetAt: number | undefined;
  /** The run_id of the server last checked ('' before that, and on a Cluster). */
  private runId = '';
  /** The check of the current socket while it runs: claims wait for it. */
  private serverCheck: ServerCheck | undefined;
  private checkError = '';
  private warnedPolicy: string | undefined;
  private readonly watch: boolean;
  private checkedSocket: unknown;

  constructor(
    private readonly redis: RedisClient,
    private readonly opts: RedisReplayOptions,
  ) {
    redis.defineCommand('agentsChainReplayClaim', { numberOfKeys: 3, lua: CLAIM });
    redis.defineCommand('agentsChainReplayCheck', { numberOfKeys: 2, lua: CHECK });
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

  /** A new socket (a reconnect, a failover) gets its server checked before any claim of ours runs on it. */
  private watchConnection(): void {
    if (!this.watch || this.redis.status !== 'ready') return;
    const socket = (this.redis as { stream?: unknown }).stream;
    if (socket === this.checkedSocket) return;
    this.checkedSocket = socket;
    const check: ServerCheck = { socket, done: Promise.resolve(false) };
    check.done = this.checkServer().then((ok) => {
      if (this.serverCheck === check) {
        this.serverCheck = undefined;
        // Failed: the next claim starts one new check of this socket (the waiters of this one have all failed).
        if (!ok && this.checkedSocket === socket) this.checkedSocket = undefined;
      }
      return ok;
    });
    this.serverCheck = check;
  }

  lastReset(): number | undefined {
    return this.resetAt;
  }

  async claim(key: string, ttlMs: number): Promise<boolean> {
    await this.serverChecked();
    const group = this.groups === 1 ? 0 : slotGroup(key, this.groups);
    const tag = `${REPLAY_NAMESPACE}:{${group}}:`;
    // A changed epoch is adopted and the claim retried under it (one more round trip, once per change).
    for (let attempt = 0; attempt < 3; attempt++) {
      const known = this.epochs[group]!;
      let reply: number | string;
      try {
        reply = await this.scripts.agentsChainReplayClaim(`${tag}epoch`, `${tag}${key}`, `${tag}server`, known, ttlMs, this.instance, this.runId);
      } catch (err) {
        throw new ReplayStoreUnavailableError(`replay store (Redis) did not answer: ${(err as Error).message}`);
      }
      if (reply === 1) return true;
      if (reply === 0) return false;
      const text = String(reply);
      if (text.startsWith('+')) this.lost(group, text.slice(1), 'marker_missing');
      else {
        const bar = text.indexOf('|');
        const epoch = text.slice(bar + 1);
        // Claims sent together on first contact all carry the epoch '': one of them takes the marker in (adopted,
        // or counted as a loss), and the others, answered with that same marker, only retry under it.
        if (epoch !== this.epochs[group]) this.adopt(group, epoch, Number(text.slice(0, bar)));
      }
    }
    throw new ReplayStoreUnavailableError('the replay window marker in Redis keeps changing');
  }

  /**
   * A marker this sidecar did not know, read when Redis's clock said
   * `redisNow`. A sidecar that knew another epoch has seen the marker change:
   * a rotation, a flush, or a marker that went back in time (a failover to a
   * replica that lagged behind a rotation): always a reset. On a first contact
   * the marker's age (on Redis's one clock) says whether a loss may lie within
   * the window. An unreadable marker counts as written now. The reset itself
   * is at this sidecar's own clock: the loss has certainly happened by now.
   */
  private adopt(group: number, epoch: string, redisNow: number): void {
    const first = this.epochs[group] === '';
    const written = markerTime(epoch);
    if (first && written !== undefined && Number.isFinite(redisNow) && redisNow - written >= this.opts.windowMs) {
      this.epochs[group] = epoch;
      this.opts.log.debug('replay window marker adopted', { epoch, first });
      return;
    }
    this.lost(group, epoch, 'epoch_changed', { markerWrittenAt: written === undefined ? null : new Date(written).toISOString(), firstContact: first });
  }

  private lost(group: number, epoch: string, cause: ResetCause, detail: Record<string, unknown> = {}): void {
    this.epochs[group] = epoch;
    this.reset(this.now(), cause, { epoch, slotGroup: group, ...detail });
  }

  private reset(at: number, cause: ResetCause, detail: Record<string, unknown>): void {
    const previous = this.resetAt;
    if (previous !== undefined && at <= previous) return;
    this.resetAt = at;
    if (previous !== undefined && at - previous < SAME_LOSS_MS) return; // the same loss, seen again: refused from the later time, logged once
    this.opts.onReset?.(cause);
    this.opts.log.warn('replay window reset: Redis lost (or may have lost) the token ids it held; tokens issued before the reset are refused for one window', {
      cause,
      resetAt: new Date(at).toISOString(),
      refusedUntil: new Date(at + this.opts.windowMs).toISOString(),
      ...detail,
    });
  }

  /**
   * Waits until the current socket's server is checked. A failed check fails
   * every claim that waited on it at once (the next claim starts one new check);
   * only a newer socket, reconnected meanwhile, is waited for again.
   */
  private async serverChecked(): Promise<void> {
    // Not connected yet (or reconnecting): a claim queued now could reach the new server before its check does.
    if (this.watch && this.redis.status !== 'ready') throw new ReplayStoreUnavailableError(`replay store (Redis) is not connected (${this.redis.status})`);
    this.watchConnection();
    let check = this.serverCheck;
    while (check) {
      const ok = await check.done;
      // A socket that appeared meanwhile is checked before the claim goes out on it; after a failure only the next claim starts a check.
      if (ok) this.watchConnection();
      const next = this.serverCheck;
      if (next && next !== check && next.socket !== check.socket) {
        check = next; // reconnected while we waited: the claim goes to the newer socket
        continue;
      }
      if (!ok) throw new ReplayStoreUnavailableError(`replay store (Redis) connected, but its server could not be checked (INFO): ${this.checkError}`);
      return;
    }
  }

  /** The server this socket reached, against the one a sidecar last confirmed: a process no sidecar has checked may hold less than was spent. */
  private async checkServer(): Promise<boolean> {
    try {
      const [server, memory] = await Promise.all([this.redis.info('server'), this.redis.info('memory')]);
      const runId = /^run_id:(\S+)/m.exec(server)?.[1];
      if (!runId) throw new Error('INFO server did not name a run_id');
      const uptime = Number(/^uptime_in_seconds:(\d+)/m.exec(server)?.[1]);
      const policy = /^maxmemory_policy:(\S+)/m.exec(memory)?.[1];
      // An evicting Redis drops replay ids (they carry a TTL: volatile-* policies pick them first) without a trace.
      if (policy && policy !== 'noeviction' && policy !== this.warnedPolicy) {
        this.opts.log.warn('Redis may evict replay ids when full, and a token would then pass twice: set maxmemory-policy noeviction', {
          maxmemoryPolicy: policy,
        });
      }
      this.warnedPolicy = policy;
      // The uptime is only reported: a process no sidecar has checked is a reset however long it has been up (a
      // replica promoted by a failover), and one a sidecar has checked is none however young (else every pod
      // started in the two minutes after a Redis restart would rotate the marker again, and every sidecar would
      // refuse fresh tokens again for 30 s).
      const detectedAt = this.now();
      const detail = { previousRunId: this.runId || null, runId, uptimeSeconds: Number.isFinite(uptime) ? uptime : null, firstContact: this.runId === '' };
      for (let g = 0; g < this.groups; g++) {
        const tag = `${REPLAY_NAMESPACE}:{${g}}:`;
        const [status, epoch] = await this.scripts.agentsChainReplayCheck(`${tag}epoch`, `${tag}server`, runId, this.instance);
        if (status === 0) continue; // already checked by a sidecar since this process started; the marker tells
        this.epochs[g] = String(epoch);
        this.reset(detectedAt, status === 1 ? 'marker_missing' : 'server_changed', { ...detail, epoch, slotGroup: g });
      }
      this.runId = runId;
      return true;
    } catch (err) {
      const message = (err as Error).message;
      // Refused for good (an ACL without +info, a renamed command): fail closed, and say how to fix it.
      const refused = /^(NOPERM|ERR unknown command)/.test(message);
      if (refused && this.checkError !== message)
        this.opts.log.error(
          "the replay store needs INFO on Redis to notice a restart or failover; calls are refused until the sidecar's Redis user may run it",
          { error: message },
        );
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
