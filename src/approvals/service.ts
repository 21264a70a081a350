import { EventEmitter } from 'node:events';
import { randomUUID } from 'node:crypto';
import { deny, isDenial, type ConstraintViolation, type Denial } from '../errors.js';
import type { Logger } from '../log.js';
import type { AccessRequestSettings } from '../policy/types.js';
import { codeMatches, hashCode, newApprovalCode } from './codes.js';
import type { Notifier } from './notifier.js';
import type { AccessRequestStore } from './store.js';
import { covers } from './covers.js';
import type { AccessRequest, ExecutionOutcome, ValueApproval } from './types.js';

export { covers } from './covers.js';

/** Runs an approved call against the app. */
export type Executor = (request: AccessRequest) => Promise<ExecutionOutcome>;

/** Approval events, for the audit trail. */
export type ApprovalEvent = 'created' | 'approved' | 'denied' | 'expired' | 'wrong_code' | 'executed';

/** Why a human's answer (approve, deny, a new code) was not taken: denial codes of the admin API. */
export type ResolutionError = 'not_found' | 'already_resolved' | 'invalid_code' | 'too_many_attempts' | 'invalid_scope';

const RESOLUTION_MESSAGE: Record<ResolutionError, string> = {
  not_found: 'no such access request',
  already_resolved: 'this request was already approved, denied or expired',
  invalid_code: 'wrong approval code; the request is still pending',
  too_many_attempts: 'too many wrong codes for this request; wait a minute',
  invalid_scope: 'scope must be "once" or "value"',
};

function refused(e: ResolutionError): Denial {
  return deny(e, RESOLUTION_MESSAGE[e]);
}

/** What a waiting caller gets when the sidecar shuts down: the request stays pending at its status URL. */
const RELEASED_DENIAL = (): Denial => deny('shutting_down', 'the sidecar is shutting down; the request is still pending: poll its status URL');

const WRONG_CODE_LIMIT = 5;
const RELEASE = Symbol('release waiters');
const WAIT_RECHECK_MS = 2_000;
const WRONG_CODE_WINDOW_MS = 60_000;

export interface NewAccessRequest {
  agentId: string;
  agentName: string;
  capability: string;
  method: string;
  target: string;
  body?: Buffer;
  args: unknown;
  reason: string;
  violations: ConstraintViolation[];
  absentFields: string[];
  headers: string[];
}

/**
 * The approval flow: create, notify, wait, resolve once, execute on approve,
 * remember value approvals. Waiting callers are woken through an in-process
 * emitter; a store with `onChange` (Redis pub/sub) wakes them when another
 * replica resolves or executes the request, and a periodic re-read covers a
 * lost message.
 */
export class ApprovalService {
  private readonly events = new EventEmitter();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly wrongCodes = new Map<string, number[]>();
  private readonly unsubscribe?: () => void;
  private released = false;
  /** Approved calls being executed: shutdown waits for them (their outcome must be stored). */
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly store: AccessRequestStore,
    private readonly settings: AccessRequestSettings,
    private readonly notifier: Notifier,
    private readonly execute: Executor,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
    private readonly onEvent: (event: ApprovalEvent, request: AccessRequest) => void = () => {},
  ) {
    this.events.setMaxListeners(0);
    // Another replica resolved or executed a request: wake whoever waits for it here.
    this.unsubscribe = store.onChange?.((id) => this.events.emit(id));
  }

  async create(input: NewAccessRequest): Promise<AccessRequest | Denial> {
    if ((await this.pending()).length >= this.settings.maxPending)
      return deny('access_request_limit', 'too many access requests are waiting for a human; retry later');
    const code = newApprovalCode();
    const createdAt = this.now();
    const request: AccessRequest = {
      id: randomUUID(),
      ...input,
      body: input.body?.toString('base64'),
      createdAt,
      expiresAt: createdAt + this.settings.ttlMs,
      codeHash: hashCode(code),
      state: 'pending',
      notified: false,
    };
    await this.store.create(request);
    this.scheduleExpiry(request);
    this.log.info('access request created', { requestId: request.id, agent: request.agentId, capability: request.capability });
    this.onEvent('created', request);
    void this.notifier
      .notify(request, code)
      .then(
        () => this.store.update(request.id, { notified: true }),
        () => undefined, // already logged; the request stays pending and approvable through the admin API
      )
      .catch((err: Error) => this.log.warn('could not mark an access request notified', { requestId: request.id, error: err.message }));
    return request;
  }

  get(id: string): Promise<AccessRequest | undefined> {
    return this.store.get(id);
  }

  /** Pending requests. One whose creator died before its expiry timer fired is expired here instead. */
  async pending(): Promise<AccessRequest[]> {
    const now = this.now();
    const all = await this.store.pending();
    for (const r of all) if (r.expiresAt <= now) await this.expire(r);
    return all.filter((r) => r.expiresAt > now);
  }

  /**
   * Shutdown: every caller still waiting is released with shutting_down (told to
   * poll the request's status URL, on another replica if state is shared).
   */
  releaseWaiters(): void {
    this.released = true;
    this.events.emit(RELEASE);
  }

  /** Resolves when the request is final: denied, expired, or approved and executed; a shutting_down denial on shutdown. */
  async waitForFinal(id: string): Promise<AccessRequest | undefined | Denial> {
    if (this.released) return RELEASED_DENIAL();
    const isFinal = (r: AccessRequest | undefined) => !r || (r.state !== 'pending' && (r.state !== 'approved' || r.outcome !== undefined));
    // Subscribe before reading, so a change between the two is not missed.
    return new Promise((resolve) => {
      let done = false;
      // A pub/sub message can be lost while the subscriber reconnects: re-read now and then as well.
      const poll = setInterval(() => void check(), WAIT_RECHECK_MS);
      poll.unref();
      const finish = (r: AccessRequest | undefined | Denial): void => {
        done = true;
        clearInterval(poll);
        this.events.off(id, onChange);
        this.events.off(RELEASE, release);
        resolve(r);
      };
      const check = async (): Promise<void> => {
        let r: AccessRequest | undefined;
        try {
          r = await this.store.get(id);
        } catch {
          return; // the store is unreachable for now: the next wake-up or re-check reads again
        }
        if (done || !isFinal(r)) return;
        finish(r);
      };
      const onChange = (): void => void check();
      const release = (): void => {
        if (!done) finish(RELEASED_DENIAL());
      };
      this.events.on(id, onChange);
      this.events.once(RELEASE, release);
      void check();
    });
  }

  async approve(id: string, code: unknown, scope: unknown = 'once'): Promise<AccessRequest | Denial> {
    if (scope !== 'once' && scope !== 'value') return refused('invalid_scope');
    const checked = await this.checkCode(id, code);
    if (isDenial(checked)) return checked;
    const resolved = await this.store.resolve(id, 'approved', { scope, resolvedAt: this.now() });
    if (!resolved) return refused('already_resolved');
    this.clearTimer(id);
    this.wrongCodes.delete(id);
    if (scope === 'value') await this.rememberValues(resolved);
    this.log.info('access request approved', { requestId: id, agent: resolved.agentId, capability: resolved.capability, scope });
    this.onEvent('approved', resolved);
    const running = this.runApproved(resolved);
    this.running.add(running);
    void running.finally(() => this.running.delete(running));
    void this.notifier.onResolved(resolved).catch(() => undefined);
    return resolved;
  }

  async deny(id: string, code: unknown, reason: unknown): Promise<AccessRequest | Denial> {
    const checked = await this.checkCode(id, code);
    if (isDenial(checked)) return checked;
    const text = typeof reason === 'string' && reason.trim() ? reason.trim().slice(0, 1000) : 'denied by a human reviewer';
    const resolved = await this.store.resolve(id, 'denied', { resolvedAt: this.now(), denyReason: text });
    if (!resolved) return refused('already_resolved');
    this.clearTimer(id);
    this.wrongCodes.delete(id);
    this.log.info('access request denied', { requestId: id, agent: resolved.agentId, capability: resolved.capability });
    this.onEvent('denied', resolved);
    this.events.emit(id);
    void this.notifier.onResolved(resolved).catch(() => undefined);
    return resolved;
  }

  /** A new code for a pending request (the old one stops working): for when the notification was lost. */
  async reissueCode(id: string): Promise<{ request: AccessRequest; code: string } | Denial> {
    const r = await this.store.get(id);
    if (!r) return refused('not_found');
    if (r.state !== 'pending') return refused('already_resolved');
    const code = newApprovalCode();
    await this.store.update(id, { codeHash: hashCode(code) });
    this.log.warn('approval code reissued', { requestId: id });
    return { request: r, code };
  }

  /** Value approvals for this agent and capability that cover every violation. */
  async covering(agentId: string, capability: string, violations: ConstraintViolation[]): Promise<ValueApproval | undefined> {
    if (violations.length === 0) return undefined;
    const all = await this.store.valueApprovals(this.now());
    return all.find((a) => a.agentId === agentId && a.capability === capability && covers(a, violations));
  }

  valueApprovals(): Promise<ValueApproval[]> {
    return this.store.valueApprovals(this.now());
  }

  revokeValueApproval(id: string): Promise<boolean> {
    return this.store.deleteValueApproval(id);
  }

  /** Resolves when every approved call being executed has finished, or at the deadline. */
  async settle(deadlineMs: number): Promise<void> {
    if (this.running.size === 0) return;
    await Promise.race([Promise.allSettled([...this.running]), new Promise((r) => setTimeout(r, deadlineMs).unref())]);
  }

  close(): void {
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    this.unsubscribe?.();
  }

  private async checkCode(id: string, code: unknown): Promise<AccessRequest | Denial> {
    const r = await this.store.get(id);
    if (!r) return refused('not_found');
    if (r.state !== 'pending') return refused('already_resolved');
    const now = this.now();
    if (r.expiresAt <= now) {
      await this.expire(r);
      return refused('already_resolved');
    }
    const recent = (this.wrongCodes.get(id) ?? []).filter((t) => t > now - WRONG_CODE_WINDOW_MS);
    if (recent.length >= WRONG_CODE_LIMIT) return refused('too_many_attempts');
    if (!codeMatches(code, r.codeHash)) {
      recent.push(now);
      this.wrongCodes.set(id, recent);
      this.log.warn('wrong approval code', { requestId: id, attempts: recent.length });
      this.onEvent('wrong_code', r);
      return refused('invalid_code');
    }
    this.wrongCodes.delete(id);
    return r;
  }

  private async rememberValues(r: AccessRequest): Promise<void> {
    const values: Record<string, unknown> = {};
    for (const v of r.violations) if (!v.absent && !r.absentFields.includes(v.field)) values[v.field] = v.actual;
    if (Object.keys(values).length === 0) return;
    const now = this.now();
    await this.store.addValueApproval({
      id: randomUUID(),
      agentId: r.agentId,
      capability: r.capability,
      values,
      requestId: r.id,
      createdAt: now,
      expiresAt: now + this.settings.valueApprovalTtlMs,
    });
  }

  private async runApproved(r: AccessRequest): Promise<void> {
    let outcome: ExecutionOutcome;
    try {
      outcome = await this.execute(r);
    } catch (err) {
      const timeout = (err as Error).name === 'TimeoutError';
      outcome = timeout
        ? { status: 504, body: { error: 'upstream_timeout', message: 'the app did not finish answering within 30 s' } }
        : { status: 502, body: { error: 'upstream_unavailable', message: (err as Error).message } };
    }
    try {
      const done = await this.store.update(r.id, { outcome });
      if (done) this.onEvent('executed', done);
    } catch (err) {
      this.log.error('could not store the outcome of an approved call', { requestId: r.id, error: (err as Error).message });
    }
    this.events.emit(r.id);
  }

  private scheduleExpiry(r: AccessRequest): void {
    const timer = setTimeout(
      () => {
        this.timers.delete(r.id);
        void this.expire(r);
      },
      Math.max(0, r.expiresAt - this.now()),
    );
    timer.unref();
    this.timers.set(r.id, timer);
  }

  private async expire(r: AccessRequest): Promise<void> {
    this.clearTimer(r.id);
    this.wrongCodes.delete(r.id);
    const expired = await this.store.resolve(r.id, 'expired', { resolvedAt: this.now() });
    if (!expired) return void this.events.emit(r.id); // resolved elsewhere: whoever waits here re-reads it
    this.log.info('access request expired', { requestId: r.id, agent: r.agentId, capability: r.capability });
    this.onEvent('expired', expired);
    this.events.emit(r.id);
    void this.notifier.onResolved(expired).catch(() => undefined);
  }

  private clearTimer(id: string): void {
    const t = this.timers.get(id);
    if (t) clearTimeout(t);
    this.timers.delete(id);
  }
}
