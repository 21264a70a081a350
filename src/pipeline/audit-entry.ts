import { newEntryId, type AuditEntry } from '../audit/entry.js';
import { RawJson } from '../audit/raw-json.js';
import { parseStrictJsonBytes } from '../json/strict.js';
import type { Denial } from '../errors.js';
import type { Call } from './stages.js';

const ERROR_CODES = new Set(['upstream_unavailable', 'internal_error', 'replay_store_unavailable', 'audit_unavailable', 'client_closed_request']);

/**
 * success, denied or error: a sidecar failure or an app's 5xx is an error,
 * any other refusal a denial. An answer the sidecar wrote itself (its own
 * endpoints: a human's denial, a shutdown 503) is judged by its status.
 */
export function resultOf(outcome: { status?: number; upstreamStatus?: number; denial?: Denial }): AuditEntry['result'] {
  if (outcome.denial) return ERROR_CODES.has(outcome.denial.code) ? 'error' : 'denied';
  if (outcome.upstreamStatus !== undefined) return outcome.upstreamStatus >= 500 ? 'error' : 'success';
  const status = outcome.status ?? 0;
  return status >= 500 ? 'error' : status >= 400 ? 'denied' : 'success';
}

/** The capability (or sidecar endpoint) a call was routed to; null before routing. */
export function capabilityName(call: Call): string | null {
  const route = call.route;
  return route?.kind === 'capability' ? route.capability.name : route?.kind === 'endpoint' ? route.endpoint : null;
}

/** The audit entry for one call, from what the pipeline learnt. Pure. */
export function callEntry(call: Call, outcome: { status: number; upstreamStatus?: number; responseBytes?: number; denial?: Denial; permission?: AuditEntry['permission'] }, nowMs: number): AuditEntry {
  const agent = call.verified?.agent;
  // Optional fields are added only when present, without throwaway objects: this runs on every call.
  const entry: AuditEntry = {
    id: newEntryId(),
    agentId: agent?.id ?? outcome.denial?.agentId ?? null,
    agentName: agent?.name ?? null,
    capability: capabilityName(call),
    args: argumentsOf(call),
    result: resultOf(outcome),
    jti: call.verified?.claims.jti ?? null,
    timestamp: call.startedAt,
    durationMs: nowMs - call.startedAt,
    method: call.req.method ?? '',
    path: call.target?.path ?? String(call.req.url ?? ''),
    status: outcome.status,
    requestId: call.requestId,
  };
  if (outcome.denial) entry.denialReason = outcome.denial.code;
  if (outcome.upstreamStatus !== undefined) entry.upstreamStatus = outcome.upstreamStatus;
  if (outcome.responseBytes !== undefined) entry.responseBytes = outcome.responseBytes;
  if (outcome.permission) entry.permission = outcome.permission;
  return entry;
}

/** What the agent passed: the JSON body when there is one, else path and query parameters. */
function argumentsOf(call: Call): unknown {
  // Strictly parsed from exactly these bytes: the entry can carry the bytes themselves.
  if (call.json !== undefined) return call.body ? new RawJson(call.json, call.body, call.jsonKeys) : call.json;
  // A JSON body the pipeline did not parse (refused before reading it, or a sidecar endpoint): recorded only
  // if it passes the same strict parser, so a body with duplicate keys is never recorded as one reading of it.
  if (call.body && call.body.length > 0 && call.body.length <= 65_536 && /json/i.test(call.req.headers['content-type'] ?? '')) {
    const keys: string[] = [];
    try { return new RawJson(parseStrictJsonBytes(call.body, keys), call.body, keys); } catch { /* not strict JSON: not recorded */ }
  }
  const args: Record<string, string> = { ...call.params };
  if (call.target?.query) {
    for (const [k, v] of new URLSearchParams(call.target.query)) if (!(k in args)) args[k] = v;
  }
  return Object.keys(args).length ? args : null;
}
