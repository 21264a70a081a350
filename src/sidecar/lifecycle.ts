import type { Server } from 'node:http';
import type { ApprovalService } from '../approvals/service.js';
import type { Upstream } from '../app/upstream.js';
import type { AuditTrail } from '../audit/trail.js';
import type { Logger } from '../log.js';
import { knownLabels, type SidecarMetrics } from '../metrics/metrics.js';
import { formatIssue, PolicyError } from '../policy/issues.js';
import { loadPolicyFile, loadPolicyText } from '../policy/load.js';
import type { Policy } from '../policy/types.js';
import type { Limits } from './limits.js';
import { closeServer } from './listeners.js';
import type { ReloadResult } from './options.js';
import type { SidecarState } from './state.js';

export interface ReloadParts {
  state: SidecarState;
  /** The policy file the sidecar started with; every reload reads it again. */
  file: string;
  metrics: SidecarMetrics;
  audit?: AuditTrail;
  log: Logger;
  now: () => number;
}

/** Live policy reload: validated in full, swapped in between requests, refused (the last good one serving) when invalid. */
export class PolicyReloader {
  private reloading: Promise<ReloadResult>;

  constructor(private readonly p: ReloadParts) {
    this.reloading = Promise.resolve({ ok: true, changed: false, hash: p.state.current.policy.hash });
  }

  reload(text?: string): Promise<ReloadResult> {
    // One at a time, in order: the last file read wins.
    this.reloading = this.reloading.catch(() => undefined).then(() => this.reloadOnce(text));
    return this.reloading;
  }

  private async reloadOnce(text?: string): Promise<ReloadResult> {
    const { state, file, metrics, audit, log, now } = this.p;
    let next: Policy;
    try {
      next = text === undefined ? await loadPolicyFile(file) : await loadPolicyText(text, file);
    } catch (err) {
      return this.refuse(err instanceof PolicyError ? err.issues.map(formatIssue) : [(err as Error).message]);
    }
    if (next.hash === state.current.policy.hash) {
      metrics.policyReloadOk.set(1); // back to the active policy (a refused version was reverted)
      return { ok: true, changed: false, hash: next.hash };
    }
    const refused = reloadConflict(state.current.policy, next);
    if (refused) return this.refuse([refused]);
    state.current = { ...state.current, policy: next };
    audit?.setRedactPatterns(next.audit.redact);
    metrics.policyReloaded({ ok: true, hash: next.hash, nowMs: now() });
    metrics.initialise(knownLabels(next));
    log.info('policy reloaded', { policy: file, policyHash: next.hash });
    return { ok: true, changed: true, hash: next.hash };
  }

  private refuse(issues: string[]): ReloadResult {
    this.p.metrics.policyReloaded({ ok: false });
    this.p.log.error('policy reload refused; the last good policy keeps serving', {
      policy: this.p.file,
      activeHash: this.p.state.current.policy.hash,
      issues,
    });
    return { ok: false, issues };
  }
}

/**
 * What a live reload cannot change: the parts other components were built
 * from at start (egress identity, access-request settings). A restart applies those.
 */
export function reloadConflict(active: Policy, next: Policy): string | undefined {
  if (modeOf(active) !== modeOf(next)) return 'mode and preset cannot change on reload; restart the sidecar';
  if (JSON.stringify(active.accessRequests ?? null) !== JSON.stringify(next.accessRequests ?? null))
    return 'accessRequests settings cannot change on reload; restart the sidecar';
  return undefined;
}

/** ingress, egress in front of a preset's provider, or egress in front of an MCP server. */
function modeOf(p: Policy): string {
  return p.egress ? `egress:${p.egress.preset?.name ?? 'mcp'}` : 'ingress';
}

export interface ShutdownParts {
  state: SidecarState;
  data: Server;
  admin: Server;
  approvals?: ApprovalService;
  audit?: AuditTrail;
  upstream: Upstream;
  shared?: { close(): Promise<void> };
  limits: Limits;
  log: Logger;
  /** The drain delay of a close() that names none. */
  drainDelayMs: number;
}

/**
 * Readiness first, so the endpoints controller stops sending. Clients and proxies learn of that only after a
 * while, so the listener keeps accepting (and serving) for the drain delay: a connection refused in that window
 * would be a failed call. Then stop accepting, let calls finish within the grace, and deliver the audit trail.
 */
export class Shutdown {
  private closing: Promise<void> | undefined;
  private endDrainDelay: (() => void) | undefined;

  constructor(private readonly p: ShutdownParts) {}

  close(options?: { drainDelayMs?: number }): Promise<void> {
    const delay = options?.drainDelayMs ?? this.p.drainDelayMs;
    // One shutdown, however many signals arrive; a second one asking for no delay ends the delay now.
    if (this.closing) {
      if (delay === 0) this.endDrainDelay?.();
      return this.closing;
    }
    this.closing = this.run(delay);
    return this.closing;
  }

  private async run(delay: number): Promise<void> {
    this.p.state.draining = true;
    if (delay > 0) await this.drainDelay(delay);
    // Wall-clock, not the sidecar's `now`: timers run on it.
    const deadline = Date.now() + this.p.limits.shutdownGraceMs;
    await this.stopAccepting();
    await this.finishCalls(deadline);
    await this.release();
    this.p.log.info('stopped', { phase: 'stopped' });
  }

  private drainDelay(delay: number): Promise<void> {
    this.p.log.info('draining: /readyz fails, new connections are still accepted', {
      phase: 'drain_delay',
      drainDelayMs: delay,
      shutdownGraceMs: this.p.limits.shutdownGraceMs,
    });
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, delay);
      this.endDrainDelay = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /** Closes the data listener within the grace; callers waiting for a human are released just before it ends. */
  private async stopAccepting(): Promise<void> {
    const { state, data, approvals, limits, log } = this.p;
    const grace = limits.shutdownGraceMs;
    state.ready = false; // the data listener stops accepting now
    log.info('draining: stopped accepting; waiting for calls in flight', { phase: 'stop_accepting', inFlight: state.inFlight.size, shutdownGraceMs: grace });
    // Released with a status URL to poll, while their connections are still open.
    const release = setTimeout(() => approvals?.releaseWaiters(), Math.max(0, grace - limits.waiterReleaseLeadMs));
    // The admin listener stays up meanwhile: probes see not-ready, Prometheus can still scrape.
    const cut = await closeServer(data, grace);
    if (cut) log.warn('draining: shutdown grace over; connections still open were closed', { phase: 'grace_expired', shutdownGraceMs: grace });
    clearTimeout(release);
    approvals?.releaseWaiters(); // whoever still waits (a client that hung up) stops waiting
  }

  /** Waits, until `deadline`, for the handlers still running (their audit records), then for approved calls. */
  private async finishCalls(deadline: number): Promise<void> {
    const { state, approvals, limits } = this.p;
    const left = () => Math.max(0, deadline - Date.now());
    await Promise.race([Promise.allSettled([...state.inFlight]), new Promise((r) => setTimeout(r, left()).unref())]);
    await approvals?.settle(Math.max(limits.approvalSettleMinMs, left()));
  }

  /** Calls are done and recorded: the admin listener closes, the audit trail delivers what it can (the rest stays in the spool). */
  private async release(): Promise<void> {
    const { admin, approvals, audit, upstream, shared, limits, log } = this.p;
    await closeServer(admin, limits.adminCloseGraceMs);
    approvals?.close();
    if (audit) log.info('draining: calls finished; delivering the audit trail', { phase: 'audit_drain', auditDrainMs: limits.auditDrainMs });
    await audit?.drain(limits.auditDrainMs);
    await upstream.close();
    await shared?.close();
  }
}
