import { describe, expect, it } from 'vitest';
import { isDenial } from '../../../src/errors.js';
import type { Arrival, CapabilityCall, Routed, Shaped } from '../../../src/pipeline/phases.js';
import { checkArguments, checkGrant, enforceConstraints } from '../../../src/pipeline/stages/authorize.js';
import { readToken } from '../../../src/pipeline/stages/authenticate.js';
import { checkRequestShape, findRoute, parseRequest } from '../../../src/pipeline/stages/request.js';
import type { Deps } from '../../../src/pipeline/deps.js';
import type { Denial } from '../../../src/errors.js';
import { selectVariant } from '../../../src/pipeline/stages/egress.js';
import { loadPolicyFile } from '../../../src/policy/load.js';
import { arrival, billingPolicy, fakeRequest, unitDeps } from '../../support/pipeline.js';

const policy = await billingPolicy();
const deps = unitDeps(policy);

/** The two request stages, as the routing chain runs them. */
function shape(a: Arrival, d: Deps): Shaped | Denial {
  const parsed = parseRequest(a, d);
  return isDenial(parsed) ? parsed : checkRequestShape(parsed, d);
}

async function routed(method: string, url: string, headers: Record<string, string> = {}, d = deps): Promise<Routed> {
  const shaped = shape(arrival(fakeRequest(method, url, headers)), d);
  if (isDenial(shaped)) throw new Error(shaped.message);
  const r = findRoute(shaped, d);
  if (isDenial(r)) throw new Error(r.message);
  return r;
}

describe('request stages', () => {
  it('checkRequestShape: refuses too many headers, a repeated singleton header and a bad target; keeps the parsed target', () => {
    const many = Object.fromEntries(Array.from({ length: deps.limits.maxHeaders + 1 }, (_, i) => [`x-h${i}`, 'v']));
    expect(shape(arrival(fakeRequest('GET', '/invoices', many)), deps)).toMatchObject({ code: 'too_many_headers' });
    const twice = fakeRequest('GET', '/invoices');
    twice.rawHeaders.push('Content-Type', 'a/b', 'content-type', 'c/d');
    expect(shape(arrival(twice), deps)).toMatchObject({ code: 'invalid_header' });
    expect(shape(arrival(fakeRequest('GET', '/a/../b')), deps)).toMatchObject({ denied: true });
    expect(shape(arrival(fakeRequest('GET', '/invoices?limit=1')), deps)).toMatchObject({ target: { path: '/invoices', query: 'limit=1' } });
    // A refusal after the target was parsed keeps it (the audit entry records the path, and the query as args).
    const parsed = parseRequest(arrival(twice), deps);
    expect(isDenial(parsed) ? parsed : parsed.target).toMatchObject({ path: '/invoices' });
  });

  it('findRoute: a capability with its path parameters, a public route, a sidecar endpoint, or unknown_route', async () => {
    expect(await routed('GET', '/invoices/inv-7')).toMatchObject({
      route: { kind: 'capability', capability: { name: 'getInvoice' } },
      params: { id: 'inv-7' },
    });
    expect(await routed('GET', '/healthz')).toMatchObject({ route: { kind: 'public' } });
    expect(await routed('GET', '/agent/constraints')).toMatchObject({ route: { kind: 'endpoint', endpoint: 'constraint_context', auth: 'agent' } });
    const shaped = shape(arrival(fakeRequest('DELETE', '/invoices')), deps);
    expect(isDenial(shaped) ? shaped : findRoute(shaped, deps)).toMatchObject({ code: 'unknown_route' });
  });
});

describe('authentication and authorization stages', () => {
  it('readToken: token_missing without one, the bearer token otherwise', async () => {
    const r = await routed('GET', '/invoices/inv-1');
    expect(readToken(r, deps)).toMatchObject({ code: 'token_missing' });
    const withToken = await routed('GET', '/invoices/inv-1', { authorization: 'Bearer a.b.c' });
    expect(readToken(withToken, deps)).toMatchObject({ token: 'a.b.c' });
  });

  it('checkGrant: the grant of the verified agent, or capability_denied', async () => {
    const call = (await routed('POST', '/invoices')) as CapabilityCall;
    const asBot = { ...call, verified: { agent: policy.agents.get('agent-billing-bot')!, claims: {} as never } };
    expect(checkGrant(asBot, deps)).toMatchObject({ grants: [{ capability: 'createInvoice' }] });
    const asReporter = { ...call, verified: { agent: policy.agents.get('agent-report-bot')!, claims: {} as never } };
    expect(checkGrant(asReporter, deps)).toMatchObject({ code: 'capability_denied' });
  });

  it('checkArguments judges under the grants step 9 found: a grant that expires while the body arrives does not refuse a call whose jti is spent', async () => {
    const call = (await routed('POST', '/invoices', { 'content-type': 'application/json' })) as CapabilityCall;
    const bot = policy.agents.get('agent-billing-bot')!;
    const granted = checkGrant({ ...call, verified: { agent: bot, claims: {} as never } }, deps);
    if (isDenial(granted)) throw new Error(granted.message);
    const later = unitDeps(policy, { now: () => Date.parse('2031-01-01T00:00:00Z') }); // after the grant's expiresAt
    const body = Buffer.from(JSON.stringify({ amount: 5000, currency: 'USD', dryRun: false, customer: { tier: 'gold' } }));
    const checked = await checkArguments({ ...granted, body }, later);
    expect(isDenial(checked) ? checked.code : checked.authorization.violations.map((v) => v.field)).toEqual(['amount']);
  });

  it('enforceConstraints: passes a call without violations, refuses one with them, listing them', () => {
    const base = { authorization: { violations: [] } } as never;
    expect(enforceConstraints(base)).toBe(base);
    const v = { field: 'amount', constraint: 'max' as const, expected: 1, actual: 2, message: 'amount must be at most 1' };
    expect(enforceConstraints({ authorization: { violations: [v] } } as never)).toMatchObject({ code: 'constraint_violated', violations: [v] });
  });
});

describe('egress: selectVariant', () => {
  it('names the call by the variants that apply; a streamed beta message is both variants (each needs its grant)', async () => {
    const anthropic = await loadPolicyFile(new URL('../../../config/examples/egress-anthropic.yaml', import.meta.url).pathname);
    const d = unitDeps(anthropic);
    const call = async (body: unknown, headers: Record<string, string> = {}) => {
      const r = (await routed('POST', '/v1/messages', { 'content-type': 'application/json', ...headers }, d)) as CapabilityCall;
      return selectVariant({ ...r, body: Buffer.from(JSON.stringify(body)) });
    };
    const plain = await call({ model: 'm' });
    expect(isDenial(plain) ? plain.code : [plain.route.capability.name, plain.alsoRequires]).toEqual(['message', []]);
    const streamed = await call({ stream: true }, { 'anthropic-beta': 'x' });
    expect(isDenial(streamed) ? streamed.code : [streamed.route.capability.name, ...streamed.alsoRequires].sort()).toEqual(['message.beta', 'message.stream']);
    expect(await call({ stream: 'true' })).toMatchObject({ code: 'invalid_body' });
  });
});
