import { randomUUID } from 'node:crypto';
import type { AuditEntry } from '../audit/entry.js';
import { RawJson } from '../audit/raw-json.js';
import type { Denial } from '../errors.js';
import type { Call } from './stages.js';

const ERROR_CODES = new Set(['upstream_unavailable', 'internal_error', 'replay_store_unavailable', 'audit_unavailable', 'client_closed_request']);

/** The audit entry for one call, from what the pipeline learnt. Pure. */
export function callEntry(call: Call, outcome: { status: number; upstreamStatus?: number; denial?: Denial; permission?: AuditEntry['permission'] }, nowMs: number): AuditEntry {
  const route = call.route;
  const agent = call.verified?.agent;
  const result: AuditEntry['result'] = outcome.denial
    ? (ERROR_CODES.has(outcome.denial.code) ? 'error' : 'denied')
    : (outcome.upstreamStatus ?? 0) >= 500 ? 'error' : 'success';
  return {
    id: randomUUID(),
    agentId: agent?.id ?? outcome.denial?.agentId ?? null,
    agentName: agent?.name ?? null,
    capability: route?.kind === 'capability' ? route.capability.name : route?.kind === 'endpoint' ? route.endpoint : null,
    args: argumentsOf(call),
    result,
    ...(outcome.denial ? { denialReason: outcome.denial.code } : {}),
    jti: call.verified?.claims.jti ?? null,
    timestamp: call.startedAt,
    durationMs: nowMs - call.startedAt,
    method: call.req.method ?? '',
    path: call.target?.path ?? String(call.req.url ?? ''),
    status: outcome.status,
    ...(outcome.upstreamStatus !== undefined ? { upstreamStatus: outcome.upstreamStatus } : {}),
    requestId: call.requestId,
    ...(outcome.permission ? { permission: outcome.permission } : {}),
  };
}

/** What the agent passed: the JSON body when there is one, else path and query parameters. */
function argumentsOf(call: Call): unknown {
  // Strictly parsed from exactly these bytes: the entry can carry the bytes themselves.
  if (call.json !== undefined) return call.body ? new RawJson(call.json, call.body) : call.json;
  if (call.body && call.body.length > 0 && call.body.length <= 65_536 && /json/i.test(call.req.headers['content-type'] ?? '')) {
    try { return JSON.parse(call.body.toString('utf8')); } catch { /* not JSON: not recorded */ }
  }
  const args: Record<string, string> = { ...call.params };
  if (call.target?.query) {
    for (const [k, v] of new URLSearchParams(call.target.query)) if (!(k in args)) args[k] = v;
  }
  return Object.keys(args).length ? args : null;
}
