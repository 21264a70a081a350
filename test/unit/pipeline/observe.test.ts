import { describe, expect, it } from 'vitest';
import type { AuditTrail } from '../../../src/audit/trail.js';
import { deny } from '../../../src/errors.js';
import { callEntry, forwardingEntry, resultOf } from '../../../src/pipeline/observe/audit-entry.js';
import { callMetrics } from '../../../src/pipeline/observe/call-metrics.js';
import { auditFilter } from '../../../src/pipeline/observe/filters.js';
import type { Reached } from '../../../src/pipeline/phases.js';
import { arrival, billingPolicy, fakeRequest, unitDeps } from '../../support/pipeline.js';

const policy = await billingPolicy();
const bot = policy.agents.get('agent-billing-bot')!;
const capability = policy.capabilities.get('createInvoice')!;
const route = policy.routes.find((r) => r.kind === 'capability' && r.capability.name === 'createInvoice')!;
const claims = { jti: 'jti-1', iss: 'x', sub: bot.id, aud: 'createInvoice', iat: 1, exp: 2 } as never;

function reached(over: Partial<Reached> = {}): Reached {
  const a = arrival(fakeRequest('POST', '/invoices?x=1', { 'content-type': 'application/json' }));
  return { ...a, target: { path: '/invoices', query: 'x=1', segments: ['invoices'] } as never, route, params: {}, ...over };
}

describe('resultOf', () => {
  it('is error for a sidecar or dependency failure and an app 5xx, denied for other refusals and 4xx answers', () => {
    expect(resultOf({ kind: 'refused', status: 503, denial: deny('replay_store_unavailable', 'x') })).toBe('error');
    expect(resultOf({ kind: 'refused', status: 499, denial: deny('client_closed_request', 'x') })).toBe('error');
    expect(resultOf({ kind: 'refused', status: 403, denial: deny('constraint_violated', 'x') })).toBe('denied');
    expect(resultOf({ kind: 'forwarded', status: 502 })).toBe('error');
    expect(resultOf({ kind: 'forwarded', status: 404 })).toBe('success');
    expect(resultOf({ kind: 'answered', status: 403 })).toBe('denied');
    expect(resultOf({ kind: 'answered', status: 202 })).toBe('success');
  });
});

describe('callEntry', () => {
  it('a forwarded capability call: agent, jti, capability, upstream status, permission not_required, query args', () => {
    const e = callEntry({ call: reached({ verified: { agent: bot, claims } }), outcome: { kind: 'forwarded', status: 201, responseBytes: 12 } }, 1_250);
    expect(e).toMatchObject({
      agentId: bot.id,
      agentName: bot.name,
      capability: capability.name,
      jti: 'jti-1',
      result: 'success',
      status: 201,
      upstreamStatus: 201,
      responseBytes: 12,
      permission: 'not_required',
      durationMs: 250,
      path: '/invoices',
      args: { x: '1' },
    });
    expect(e).not.toHaveProperty('denialReason');
  });

  it('a call refused before the signature was checked records the claimed agent and the code', () => {
    const denial = { ...deny('token_invalid', 'bad signature'), agentId: 'agent-billing-bot' };
    const e = callEntry({ call: reached(), outcome: { kind: 'refused', status: 401, denial } }, 1_000);
    expect(e).toMatchObject({ agentId: 'agent-billing-bot', agentName: null, jti: null, result: 'denied', denialReason: 'token_invalid', status: 401 });
    expect(e).not.toHaveProperty('permission');
  });

  it('records a JSON body only when it passes the strict parser', () => {
    const ok = callEntry(
      { call: reached({ body: Buffer.from('{"amount":5}') }), outcome: { kind: 'refused', status: 401, denial: deny('token_missing', 'x') } },
      1_000,
    );
    expect(JSON.parse(JSON.stringify(ok.args))).toEqual({ amount: 5 });
    const dup = callEntry(
      { call: reached({ body: Buffer.from('{"amount":5,"amount":9}') }), outcome: { kind: 'refused', status: 401, denial: deny('token_missing', 'x') } },
      1_000,
    );
    expect(dup.args).toEqual({ x: '1' });
  });

  it('the strict-durability record written before forwarding', () => {
    expect(forwardingEntry(reached({ verified: { agent: bot, claims } }), 1_000)).toMatchObject({
      event: 'forwarding',
      status: 0,
      permission: 'not_required',
      jti: 'jti-1',
    });
  });
});

describe('callMetrics', () => {
  it('labels by capability, decision and code; violated fields only for constraint_violated; endpoints untimed', () => {
    const v = { field: 'amount', constraint: 'max' as const, expected: 1, actual: 2, message: 'm' };
    const m = callMetrics(
      { call: reached({ verified: { agent: bot, claims } }), outcome: { kind: 'refused', status: 403, denial: deny('constraint_violated', 'x', [v]) } },
      2,
    );
    expect(m).toMatchObject({
      capability: 'createInvoice',
      decision: 'denied',
      reason: 'constraint_violated',
      violatedFields: ['amount'],
      agentId: bot.id,
      totalSeconds: 0.002,
    });
    expect(
      callMetrics({ call: { ...arrival(fakeRequest('GET', '/')) }, outcome: { kind: 'refused', status: 404, denial: deny('unknown_route', 'x') } }, 1),
    ).toMatchObject({ capability: '(none)', decision: 'denied' });
    const endpoint = policy.routes.find((r) => r.kind === 'endpoint')!;
    expect(callMetrics({ call: reached({ route: endpoint }), outcome: { kind: 'answered', status: 200 } }, 1).totalSeconds).toBeUndefined();
  });
});

describe('auditFilter.onRequest', () => {
  it('refuses while the spool cannot take entries, unless the policy says allow (then counts the call)', () => {
    let served = 0;
    const audit = {
      available: false,
      servedWhileUnavailable: () => {
        served++;
      },
    } as unknown as AuditTrail;
    const a = arrival(fakeRequest('GET', '/'));
    expect(auditFilter.onRequest?.(a, unitDeps(policy, { audit }))).toMatchObject({ code: 'audit_unavailable' });
    const lenient = { ...policy, audit: { ...policy.audit, onAuditFailure: 'allow' as const } };
    expect(auditFilter.onRequest?.(a, unitDeps(lenient, { audit }))).toBeUndefined();
    expect(served).toBe(1);
    expect(auditFilter.onRequest?.(a, unitDeps(policy))).toBeUndefined();
  });
});
