import { deny, type Denial } from '../../errors.js';
import type { Deps } from '../deps.js';
import type { Arrival, Finished, Reached } from '../phases.js';
import { callEntry, capabilityName, forwardingEntry } from './audit-entry.js';
import { callMetrics } from './call-metrics.js';

/**
 * The response path, as Envoy's filter chain and undici's interceptors have
 * one: a filter may refuse a call before it is routed (onRequest) or before
 * the app sees it (onForward), and observes how every call ended (onResponse),
 * refused, answered or forwarded, whatever threw.
 */
export interface CallFilter {
  onRequest?(call: Arrival, deps: Deps): Denial | undefined;
  onForward?(call: Reached, deps: Deps): Promise<Denial | undefined> | undefined;
  onResponse?(done: Finished, deps: Deps): void;
}

/**
 * No call is served without its audit record: a full or broken spool refuses
 * (unless the policy says allow); strict durability writes the decision to
 * disk before forwarding; every finished call is recorded.
 */
export const auditFilter: CallFilter = {
  onRequest(_call, { audit, policy }) {
    if (!audit || audit.available) return undefined;
    if (policy.audit.onAuditFailure === 'allow') return void audit.servedWhileUnavailable();
    return deny('audit_unavailable', 'the audit trail cannot record this call right now; retry later');
  },
  onForward(call, { audit, policy, now }) {
    if (!audit || audit.durability !== 'strict') return undefined;
    return audit.record(forwardingEntry(call, now())).then(
      () => undefined,
      () =>
        policy.audit.onAuditFailure === 'allow' ? undefined : deny('audit_unavailable', 'the audit trail could not record this call; it was not forwarded'),
    );
  },
  onResponse(done, { audit, now, log }) {
    // A refused record is logged; the spool's health gates the next calls (onRequest).
    audit?.record(callEntry(done, now())).catch((err: Error) => log.error('audit record failed', { requestId: done.call.requestId, error: err.message }));
  },
};

export const metricsFilter: CallFilter = {
  onResponse(done, { metrics }) {
    metrics?.callFinished(callMetrics(done, performance.now()));
  },
};

/** One log line per refused call (warn) and per forwarded one (debug). */
export const logFilter: CallFilter = {
  onResponse({ call, outcome }, { log }) {
    if (outcome.kind === 'forwarded') return log.level === 'debug' ? log.debug('call forwarded', { ...describe(call), status: outcome.status }) : undefined;
    if (outcome.kind !== 'refused') return;
    const { denial } = outcome;
    if (denial.code === 'client_closed_request') return log.info('client went away', describe(call));
    // Shed calls are counted (agents_chain_denials_total{reason="overloaded"}); a line each would flood the log when it matters least.
    if (denial.code === 'overloaded') return log.level === 'debug' ? log.debug('call shed', describe(call)) : undefined;
    // Before the signature is checked the agent is only claimed; the log says so.
    const claimedAgent = call.verified ? undefined : denial.agentId;
    log.warn('call denied', { ...describe(call), claimedAgent, code: denial.code, status: outcome.status, reason: denial.message });
  },
};

/** In order: audit first (its onRequest gates everything), then metrics and logs. */
export const FILTERS: readonly CallFilter[] = [auditFilter, metricsFilter, logFilter];

export function describe(call: Reached): Record<string, unknown> {
  return {
    requestId: call.requestId,
    method: call.req.method,
    path: call.target?.path ?? call.req.url,
    capability: capabilityName(call) ?? undefined,
    agent: call.verified?.agent.id,
    durationMs: Date.now() - call.startedAt,
  };
}
