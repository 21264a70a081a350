import { newEntryId, type AuditEntry } from '../../audit/entry.js';
import { RawJson } from '../../audit/raw-json.js';
import { outcomeOf } from '../../errors.js';
import { parseStrictJsonBytes } from '../../json/strict.js';
import type { Finished, Outcome, Reached } from '../phases.js';

/**
 * success, denied or error: a sidecar failure or an app's 5xx is an error,
 * any other refusal a denial (the catalogue says which). An answer the
 * sidecar wrote itself (its own endpoints: a human's denial) is judged by its status.
 */
export function resultOf(outcome: Outcome): AuditEntry['result'] {
  switch (outcome.kind) {
    case 'refused':
      return outcomeOf(outcome.denial.code) === 'error' ? 'error' : 'denied';
    case 'forwarded':
      return outcome.status >= 500 ? 'error' : 'success';
    case 'answered':
      return outcome.status >= 500 ? 'error' : outcome.status >= 400 ? 'denied' : 'success';
  }
}

/** The capability (or sidecar endpoint) a call was routed to; null before routing. */
export function capabilityName(call: Reached): string | null {
  const route = call.route;
  return route?.kind === 'capability' ? route.capability.name : route?.kind === 'endpoint' ? route.endpoint : null;
}

/** The audit entry for one finished call, from what the pipeline learnt. Pure. */
export function callEntry({ call, outcome }: Finished, nowMs: number): AuditEntry {
  const entry = baseEntry(call, outcome.status, nowMs);
  entry.result = resultOf(outcome);
  if (outcome.kind === 'refused') {
    entry.denialReason = outcome.denial.code;
    // Before step 6 the agent is only claimed (the token's sub); recorded all the same.
    entry.agentId ??= outcome.denial.agentId ?? null;
  }
  if (outcome.kind === 'forwarded') {
    entry.upstreamStatus = outcome.status;
    if (outcome.responseBytes !== undefined) entry.responseBytes = outcome.responseBytes;
    if (call.route?.kind === 'capability') entry.permission = 'not_required';
  }
  return entry;
}

/** Strict durability: the record written before the app sees the call. */
export function forwardingEntry(call: Reached, nowMs: number): AuditEntry {
  const entry = baseEntry(call, 0, nowMs);
  entry.permission = 'not_required';
  entry.event = 'forwarding';
  return entry;
}

function baseEntry(call: Reached, status: number, nowMs: number): AuditEntry {
  const agent = call.verified?.agent;
  // Optional fields are added only when present, without throwaway objects: this runs on every call.
  return {
    id: newEntryId(),
    agentId: agent?.id ?? null,
    agentName: agent?.name ?? null,
    capability: capabilityName(call),
    args: argumentsOf(call),
    result: 'success',
    jti: call.verified?.claims.jti ?? null,
    timestamp: call.startedAt,
    durationMs: nowMs - call.startedAt,
    // An executed call is recorded as the capability's request it became, and says how it came.
    method: call.forwardAs?.method ?? call.req.method ?? '',
    path: call.target?.path ?? String(call.req.url ?? ''),
    status,
    requestId: call.requestId,
    ...(call.received ? { via: call.received.path } : {}),
  };
}

/** What the agent passed: the JSON body when there is one, else path and query parameters. */
function argumentsOf(call: Reached): unknown {
  // An MCP message: the tool's or prompt's arguments, a resource's URI variables; session traffic has none.
  if (call.mcp) return call.mcp.kind === 'resource' ? call.mcp.params : call.mcp.kind === 'session' ? null : call.mcp.arguments;
  const json = call.authorization?.json;
  // Strictly parsed from exactly these bytes: the entry can carry the bytes themselves.
  if (json !== undefined) return call.body ? new RawJson(json, call.body, call.authorization?.jsonKeys) : json;
  // A JSON body the pipeline did not parse (refused before reading it, or a sidecar endpoint): recorded only
  // if it passes the same strict parser, so a body with duplicate keys is never recorded as one reading of it.
  if (call.body && call.body.length > 0 && call.body.length <= 65_536 && /json/i.test(call.req.headers['content-type'] ?? '')) {
    const keys: string[] = [];
    try {
      return new RawJson(parseStrictJsonBytes(call.body, keys), call.body, keys);
    } catch {
      /* not strict JSON: not recorded */
    }
  }
  const args: Record<string, string> = { ...call.params };
  if (call.target?.query) {
    for (const [k, v] of new URLSearchParams(call.target.query)) if (!(k in args)) args[k] = v;
  }
  return Object.keys(args).length ? args : null;
}
