import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { call, expectDenied } from '../support/http.js';

/**
 * Issue 15 item 10: the grant (step 9) is checked before the jti is spent
 * (step 8), and the sidecar's agent endpoints spend one only for an agent
 * holding an active grant, so an agent without grants cannot fill a bounded
 * replay window and lock every other agent out with 503.
 */
describe('an agent without grants cannot fill the replay window', () => {
  const BOUND = 4;
  let env: TestSidecar;
  beforeAll(async () => {
    env = await startTestSidecar({ replayMaxEntries: BOUND });
  });
  afterAll(async () => {
    await env.close();
  });

  it('many calls from an agent with no active grant spend no room; a granted agent still passes', async () => {
    const seen = env.app.requests.length;
    // "other" holds a revoked getInvoice, an expired listInvoices and nothing else.
    for (let i = 0; i < BOUND * 5; i++) {
      const [path, aud] = (
        [
          ['/invoices/inv-1', 'getInvoice'],
          ['/invoices?customerId=c-100', 'listInvoices'],
          ['/invoices/inv-1/refund', 'refundInvoice'],
        ] as const
      )[i % 3]!;
      const r = await call(env, {
        method: aud === 'refundInvoice' ? 'POST' : 'GET',
        path,
        token: await env.other.signer.sign(aud),
        ...(aud === 'refundInvoice' ? { body: '{}' } : {}),
      });
      expectDenied(env, seen, r, 403, 'capability_denied');
    }
    // The sidecar's own agent endpoints: refused before a jti is spent too.
    for (let i = 0; i < BOUND * 2; i++) {
      expectDenied(env, seen, await call(env, { path: '/capability/list', token: await env.other.signer.sign('capability_list') }), 403, 'capability_denied');
      expectDenied(
        env,
        seen,
        await call(env, { path: '/agent/constraints', token: await env.other.signer.sign('constraint_context') }),
        403,
        'capability_denied',
      );
    }
    // Without a token the list still answers anyone.
    expect((await call(env, { path: '/capability/list' })).status).toBe(200);
    // The window is still empty: the granted agent gets every one of its BOUND slots.
    for (let i = 0; i < BOUND; i++) expect((await call(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') })).status).toBe(200);
    expect(env.app.requests.length).toBe(seen + BOUND);
    // ...and only then is it full (the bound still holds, fail closed).
    expect((await call(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') })).json.error).toBe('replay_store_unavailable');
  });

  it('a replayed token of an agent without the grant is capability_denied, not token_replayed (step 9 now comes first)', async () => {
    const token = await env.other.signer.sign('getInvoice');
    const seen = env.app.requests.length;
    expectDenied(env, seen, await call(env, { path: '/invoices/inv-1', token }), 403, 'capability_denied');
    expectDenied(env, seen, await call(env, { path: '/invoices/inv-1', token }), 403, 'capability_denied');
  });
});

describe('agent endpoints for an agent holding a grant', () => {
  let env: TestSidecar;
  beforeAll(async () => {
    env = await startTestSidecar();
  });
  afterAll(async () => {
    await env.close();
  });

  it('still answer, spend the jti, and refuse its replay', async () => {
    const token = await env.bot.signer.sign('capability_list');
    const first = await call(env, { path: '/capability/list', token });
    expect(first.status).toBe(200);
    expect(first.json.capabilities.find((c: { name: string }) => c.name === 'getInvoice').grant.status).toBe('active');
    expect((await call(env, { path: '/capability/list', token })).json.error).toBe('token_replayed');
  });
});
