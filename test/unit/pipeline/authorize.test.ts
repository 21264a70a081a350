import { describe, expect, it } from 'vitest';
import { isDenial, type ConstraintViolation } from '../../../src/errors.js';
import { activeGrants, authorize, grantsFor, type CallArguments } from '../../../src/pipeline/authorize.js';
import { grantKey, type Grant } from '../../../src/policy/types.js';
import { billingPolicy } from '../../support/pipeline.js';

const policy = await billingPolicy();
const now = () => Date.parse('2026-06-01T00:00:00Z');
const bot = policy.agents.get('agent-billing-bot')!;
const reporter = policy.agents.get('agent-report-bot')!;
const json = { 'content-type': 'application/json' };

function post(body: unknown, query?: string): CallArguments {
  return { method: 'POST', params: {}, query, body: Buffer.from(JSON.stringify(body)), headers: json };
}

describe('grantsFor', () => {
  it("is the policy's grants for a policy agent and the agent's own for a registered one", () => {
    expect(grantsFor(bot, policy)).toBe(policy.grants);
    const own = new Map<string, Grant>([[grantKey('agt_x', 'getInvoice'), { agent: 'agt_x', capability: 'getInvoice', status: 'active', constraints: {} }]]);
    expect(grantsFor({ grants: own }, policy)).toBe(own);
  });
});

describe('activeGrants (step 9)', () => {
  it("finds the grant, the call's own first, and one for every capability the call also is", () => {
    const g = activeGrants(bot, ['createInvoice', 'getInvoice'], policy, now());
    expect(isDenial(g) ? g.code : g.map((x) => x.capability)).toEqual(['createInvoice', 'getInvoice']);
  });

  it('refuses a capability without a grant, and an also-required one by name', () => {
    expect(activeGrants(reporter, ['createInvoice'], policy, now())).toMatchObject({ code: 'capability_denied' });
    expect(activeGrants(bot, ['createInvoice', 'listInvoices'], policy, now())).toMatchObject({
      code: 'capability_denied',
      message: expect.stringContaining('listInvoices'),
    });
  });

  it('refuses an expired grant', () => {
    expect(activeGrants(bot, ['createInvoice'], policy, Date.parse('2031-01-01T00:00:00Z'))).toMatchObject({
      code: 'capability_denied',
      message: expect.stringContaining('expired'),
    });
  });
});

describe('authorize', () => {
  it('reads a constrained body field strictly and reports each violation, without refusing', async () => {
    const a = await authorize(bot, ['createInvoice'], post({ amount: 5000, currency: 'USD', dryRun: false, customer: { tier: 'gold' } }), { policy, now });
    if (isDenial(a)) throw new Error(a.message);
    expect(a.violations.map((v) => `${v.field}:${v.constraint}`)).toEqual(['amount:max']);
    expect(a.json).toEqual({ amount: 5000, currency: 'USD', dryRun: false, customer: { tier: 'gold' } });
    expect(a.absentFields).toEqual([]);
  });

  it('names the fields a violation found absent (never an approved value)', async () => {
    const a = await authorize(bot, ['createInvoice'], post({ amount: 10, currency: 'USD', customer: { tier: 'gold' } }), { policy, now });
    if (isDenial(a)) throw new Error(a.message);
    expect(a.violations.map((v) => v.field)).toEqual(['dryRun']);
    expect(a.absentFields).toEqual(['dryRun']);
  });

  it('reads query constraints on URL methods and refuses a repeated constrained key', async () => {
    const get = (query: string): CallArguments => ({ method: 'GET', params: {}, query, body: undefined, headers: {} });
    const ok = await authorize(reporter, ['listInvoices'], get('customerId=c-100&limit=10'), { policy, now });
    expect(isDenial(ok) ? ok.code : ok.violations).toEqual([]);
    const over = await authorize(reporter, ['listInvoices'], get('customerId=c-999&limit=10'), { policy, now });
    expect(isDenial(over) ? over.code : over.violations.map((v) => v.field)).toEqual(['customerId']);
    expect(await authorize(reporter, ['listInvoices'], get('limit=1&limit=99'), { policy, now })).toMatchObject({ code: 'invalid_query' });
  });

  it('refuses what an app could read differently: a body field also in the query, a body that is not JSON, duplicate keys', async () => {
    expect(await authorize(bot, ['createInvoice'], post({ amount: 1 }, 'amount=1'), { policy, now })).toMatchObject({ code: 'invalid_query' });
    expect(await authorize(bot, ['createInvoice'], { ...post({ amount: 1 }), headers: { 'content-type': 'text/plain' } }, { policy, now })).toMatchObject({
      code: 'unsupported_media_type',
    });
    const dup: CallArguments = { ...post({}), body: Buffer.from('{"amount": 1, "amount": 9999}') };
    expect(await authorize(bot, ['createInvoice'], dup, { policy, now })).toMatchObject({ code: 'invalid_body' });
  });

  it('a scope=value approval that covers every violation clears them', async () => {
    const asked: ConstraintViolation[][] = [];
    const approvals = { covering: async (_a: string, _c: string, v: ConstraintViolation[]) => (asked.push(v), { id: 'va-1' } as never) };
    const a = await authorize(bot, ['createInvoice'], post({ amount: 5000, currency: 'USD', dryRun: false, customer: { tier: 'gold' } }), {
      policy,
      now,
      approvals,
    });
    expect(isDenial(a) ? a.code : [a.violations, a.approvedByValue]).toEqual([[], true]);
    expect(asked).toHaveLength(1);
  });

  it('collects the body keys only when asked (for the audit trail)', async () => {
    const args = post({ amount: 1, currency: 'USD', dryRun: false, customer: { tier: 'gold' } });
    const without = await authorize(bot, ['createInvoice'], args, { policy, now });
    const withKeys = await authorize(bot, ['createInvoice'], args, { policy, now, collectKeys: true });
    expect(isDenial(without) ? 'denied' : without.jsonKeys).toBeUndefined();
    expect(isDenial(withKeys) ? 'denied' : withKeys.jsonKeys).toEqual(expect.arrayContaining(['amount', 'customer', 'tier']));
  });
});
