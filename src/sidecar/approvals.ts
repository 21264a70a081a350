import { silentNotifier, WebhookNotifier, type Notifier } from '../approvals/notifier.js';
import { ApprovalService, type ApprovalEvent } from '../approvals/service.js';
import { MemoryAccessRequestStore, type AccessRequestStore } from '../approvals/store.js';
import type { AccessRequest } from '../approvals/types.js';
import { approvalExecutor, type ExecutorDeps } from '../app/executor.js';
import { newEntryId, type AuditEntry } from '../audit/entry.js';
import type { AuditTrail } from '../audit/trail.js';
import type { Logger } from '../log.js';
import type { SidecarMetrics } from '../metrics/metrics.js';
import type { SidecarOptions } from './options.js';

/** An approved call whose app answered with this status or above failed: its audit result is `error`. */
const FIRST_SERVER_ERROR_STATUS = 500;
/** The resolution-time histogram is in seconds, like every duration Prometheus exposes. */
const MS_PER_SECOND = 1000;

export interface ApprovalWiring {
  opts: SidecarOptions;
  log: Logger;
  now: () => number;
  metrics: SidecarMetrics;
  audit?: AuditTrail;
  /** Redis-backed requests, when replicas share state: a human's answer reaches whichever replica holds the caller. */
  sharedStore?: AccessRequestStore;
  /** What the executor of approved calls needs (the upstream, the active policy, header rules). */
  executor: ExecutorDeps;
}

/**
 * request_permission: the service that holds access requests until a human answers, notifies them, and runs
 * approved calls. Undefined when the policy configures no access requests. Every event is counted and audited.
 */
export function approvalService(w: ApprovalWiring): ApprovalService | undefined {
  const settings = w.opts.policy.accessRequests;
  if (!settings) return undefined;
  const { log, now, metrics, audit } = w;
  return new ApprovalService(
    w.opts.accessRequestStore ?? w.sharedStore ?? new MemoryAccessRequestStore(),
    settings,
    w.opts.notifier ?? webhookFrom(w.opts, log),
    approvalExecutor(w.executor),
    log,
    now,
    (event, r) => {
      countApprovalEvent(metrics, event, r, now());
      // Recorded in the background: a failed audit write is logged, and never fails the human's answer.
      void audit
        ?.record(approvalEntry(event, r, now()))
        .catch((err: Error) => log.error('audit record failed', { requestId: r.id, event, error: err.message }));
    },
  );
}

/** The policy's webhook, with its secrets read from the environment (they stay out of the policy file). */
export function webhookFrom(opts: SidecarOptions, log: Logger): Notifier {
  const hook = opts.policy.accessRequests?.webhook;
  if (!hook) return silentNotifier;
  const env = opts.env ?? process.env;
  const url = hook.url ?? (hook.urlEnv === undefined ? undefined : env[hook.urlEnv]);
  if (!url) throw new Error(`accessRequests.notifier.webhook.urlEnv names ${hook.urlEnv}, which is not set`);
  const headers: Record<string, string> = { ...hook.headers };
  for (const [name, variable] of Object.entries(hook.headersEnv)) {
    const value = env[variable];
    if (value === undefined) throw new Error(`accessRequests.notifier.webhook.headersEnv.${name} names ${variable}, which is not set`);
    headers[name] = value;
  }
  return new WebhookNotifier({ url, format: hook.format, headers, retries: hook.retries, log, adminUrl: opts.adminPublicUrl });
}

export function countApprovalEvent(m: SidecarMetrics, event: ApprovalEvent, r: AccessRequest, nowMs: number): void {
  if (event === 'created') m.accessRequestsCreated.inc({ capability: r.capability });
  else if (event === 'approved' || event === 'denied' || event === 'expired')
    m.accessRequestResolved(r.capability, event, (nowMs - r.createdAt) / MS_PER_SECOND);
}

/** The audit entry of an approval event. */
export function approvalEntry(event: ApprovalEvent, r: AccessRequest, nowMs: number): AuditEntry {
  const result: AuditEntry['result'] =
    event === 'approved' || event === 'created' || (event === 'executed' && (r.outcome?.status ?? FIRST_SERVER_ERROR_STATUS) < FIRST_SERVER_ERROR_STATUS)
      ? 'success'
      : event === 'executed'
        ? 'error'
        : 'denied';
  return {
    id: newEntryId(),
    agentId: r.agentId,
    agentName: r.agentName,
    capability: r.capability,
    args: r.args,
    result,
    ...(result === 'denied' ? { denialReason: event } : {}),
    jti: null,
    timestamp: nowMs,
    durationMs: nowMs - r.createdAt,
    method: r.method,
    path: r.target,
    status: r.outcome?.status ?? 0, // 0: no answer yet (the call has not run)
    ...(r.outcome ? { upstreamStatus: r.outcome.status } : {}),
    requestId: r.id,
    event: `approval.${event}`,
    ...permissionOf(event),
  };
}

/** What a human's answer made of the call, for the entries that follow one. */
function permissionOf(event: ApprovalEvent): Pick<AuditEntry, 'permission'> {
  if (event === 'approved' || event === 'executed') return { permission: 'approved' };
  if (event === 'expired') return { permission: 'expired' };
  if (event === 'denied') return { permission: 'denied' };
  return {};
}
