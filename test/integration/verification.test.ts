import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSidecar, testAgent, type TestSidecar } from '../support/fixture.js';
import { call, expectDenied, invoice } from '../support/http.js';
import { rawSocketRequest } from '../support/raw-socket.js';
import { nonCanonical, signRaw, tokenWith } from '../support/tokens.js';

/** The seed's nine verification steps, each failing through the real sidecar in front of a real app. */
describe('token verification through the sidecar', () => {
  let env: TestSidecar;
  beforeAll(async () => {
    env = await startTestSidecar();
  });
  afterAll(async () => {
    await env.close();
  });

  const now = () => Math.floor(Date.now() / 1000);
  const claims = (over: Record<string, unknown> = {}) => ({ sub: env.bot.id, iss: env.bot.keys.thumbprint, aud: 'createInvoice', ...over });
  const post = (token: string, body = invoice()) => call(env, { method: 'POST', path: '/invoices', token, body });

  it('lets a valid call through, once', async () => {
    const seen = env.app.requests.length;
    const token = await env.bot.signer.sign('createInvoice');
    expect((await post(token)).status).toBe(200);
    expect(env.app.requests.length).toBe(seen + 1);
  });

  it('401 token_missing with WWW-Authenticate when no token is sent', async () => {
    const seen = env.app.requests.length;
    const r = await call(env, { method: 'POST', path: '/invoices', body: invoice() });
    expectDenied(env, seen, r, 401, 'token_missing');
    expect(r.headers['www-authenticate']).toMatch(/^Bearer realm="https:\/\/billing\.example\.com"/);
  });

  describe('steps 1–2: decode, typ', () => {
    it.each([
      ['not a JWS', 'abc.def'],
      ['four parts', 'a.b.c.d'],
      ['non-base64url characters', 'a+b.c.d'],
    ])('token_invalid: %s', async (_, token) => {
      const seen = env.app.requests.length;
      expectDenied(env, seen, await post(token), 401, 'token_invalid');
    });

    it('token_invalid when typ is not agent+jwt', async () => {
      const seen = env.app.requests.length;
      const t = tokenWith(env.bot.privateJwk, claims(), { alg: 'EdDSA', typ: 'JWT' });
      expectDenied(env, seen, await post(t), 401, 'token_invalid');
    });

    it('token_invalid when alg is not EdDSA', async () => {
      const seen = env.app.requests.length;
      const t = tokenWith(env.bot.privateJwk, claims(), { alg: 'HS256', typ: 'agent+jwt' });
      expectDenied(env, seen, await post(t), 401, 'token_invalid');
    });

    it('token_invalid on duplicate keys in the header or the payload', async () => {
      const seen = env.app.requests.length;
      const dupHeader = signRaw(
        env.bot.privateJwk,
        '{"alg":"EdDSA","typ":"agent+jwt","typ":"agent+jwt"}',
        JSON.stringify({ ...claims(), iat: now(), exp: now() + 60, jti: 'x1' }),
      );
      expectDenied(env, seen, await post(dupHeader), 401, 'token_invalid');
      const body = JSON.stringify({ ...claims(), iat: now(), exp: now() + 60, jti: 'x2' });
      const dupPayload = signRaw(env.bot.privateJwk, '{"alg":"EdDSA","typ":"agent+jwt"}', body.replace('{', '{"aud":"getInvoice",'));
      expectDenied(env, seen, await post(dupPayload), 401, 'token_invalid');
    });

    it('token_invalid when aud is an array, jti is missing or too long, or iat is not an integer', async () => {
      const seen = env.app.requests.length;
      for (const bad of [{ aud: ['createInvoice'] }, { jti: '' }, { jti: 'j'.repeat(129) }, { iat: now() + 0.5 }, { exp: String(now() + 60) }]) {
        expectDenied(env, seen, await post(tokenWith(env.bot.privateJwk, claims(bad))), 401, 'token_invalid');
      }
    });

    it('token_invalid for a token over 4 KiB, and for two Authorization headers', async () => {
      const seen = env.app.requests.length;
      const big = tokenWith(env.bot.privateJwk, claims({ pad: 'p'.repeat(4200) }));
      expectDenied(env, seen, await post(big), 401, 'token_invalid');
      const t1 = await env.bot.signer.sign('createInvoice');
      const t2 = await env.bot.signer.sign('createInvoice');
      const body = invoice();
      const r = await rawSocketRequest(
        env.sidecar.url,
        `POST /invoices HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t1}\r\nauthorization: Bearer ${t2}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      );
      expectDenied(env, seen, { status: r.status, json: r.json() }, 401, 'token_invalid');
    });
  });

  it('step 3: agent_not_found for an unregistered sub', async () => {
    const seen = env.app.requests.length;
    const stranger = await testAgent('agent-stranger');
    expectDenied(env, seen, await post(await stranger.signer.sign('createInvoice')), 401, 'agent_not_found');
  });

  it('step 4: token_invalid when iss is not the thumbprint of the registered key', async () => {
    const seen = env.app.requests.length;
    expectDenied(env, seen, await post(tokenWith(env.bot.privateJwk, claims({ iss: env.other.keys.thumbprint }))), 401, 'token_invalid');
  });

  it('step 5: capability_denied when aud names another capability', async () => {
    const seen = env.app.requests.length;
    expectDenied(env, seen, await post(await env.bot.signer.sign('getInvoice')), 403, 'capability_denied');
  });

  it('step 6: token_invalid for a signature by another key (even one the header points at)', async () => {
    const seen = env.app.requests.length;
    const forged = tokenWith(env.other.privateJwk, claims(), { alg: 'EdDSA', typ: 'agent+jwt', jwk: env.other.keys.publicJwk, kid: 'other' });
    expectDenied(env, seen, await post(forged), 401, 'token_invalid');
    const good = await env.bot.signer.sign('createInvoice');
    const [h, , s] = good.split('.');
    const tampered = `${h}.${Buffer.from(JSON.stringify({ ...claims(), iat: now(), exp: now() + 60, jti: 'tamper' })).toString('base64url')}.${s}`;
    expectDenied(env, seen, await post(tampered), 401, 'token_invalid');
  });

  describe('header members and canonical base64url', () => {
    it('token_invalid for crit (any value) and b64, which node:crypto verification used to ignore; a kid is harmless', async () => {
      const seen = env.app.requests.length;
      for (const extra of [{ crit: ['b64'], b64: false }, { crit: ['exp'] }, { b64: false }, { jku: 'https://attacker.example/keys' }, { zip: 'DEF' }]) {
        const t = tokenWith(env.bot.privateJwk, claims(), { alg: 'EdDSA', typ: 'agent+jwt', ...extra });
        expectDenied(env, seen, await post(t), 401, 'token_invalid');
      }
      const withKid = tokenWith(env.bot.privateJwk, claims(), { alg: 'EdDSA', typ: 'agent+jwt', kid: env.bot.keys.thumbprint });
      expect((await post(withKid)).status).toBe(200);
      expect(env.app.requests.length).toBe(seen + 1);
    });

    it('token_invalid for a second spelling of the same signature (unused low bits set) or padding', async () => {
      const token = await env.bot.signer.sign('createInvoice');
      const [h, p, s] = token.split('.') as [string, string, string];
      const seen = env.app.requests.length;
      // The same 64 signature bytes, spelled differently: one token, two spellings, before this fix.
      expectDenied(env, seen, await post(`${h}.${p}.${nonCanonical(s)}`), 401, 'token_invalid');
      expectDenied(env, seen, await post(`${h}.${p}.${s}==`), 401, 'token_invalid');
      // The canonical spelling still passes (its jti was never spent by the refusals above).
      expect((await post(token)).status).toBe(200);
    });
  });

  describe('step 7: time', () => {
    it('token_expired once exp is more than 30 s past', async () => {
      const seen = env.app.requests.length;
      expectDenied(env, seen, await post(tokenWith(env.bot.privateJwk, claims({ iat: now() - 100, exp: now() - 40 }))), 401, 'token_expired');
    });

    it('accepts a token that expired within the 30 s skew', async () => {
      const seen = env.app.requests.length;
      expect((await post(tokenWith(env.bot.privateJwk, claims({ iat: now() - 50, exp: now() - 10 })))).status).toBe(200);
      expect(env.app.requests.length).toBe(seen + 1);
    });

    it('token_invalid for a lifetime over 60 s, exp before iat, or iat in the future', async () => {
      const seen = env.app.requests.length;
      for (const bad of [
        { iat: now(), exp: now() + 61 },
        { iat: now(), exp: now() - 1 },
        { iat: now() + 45, exp: now() + 60 },
      ]) {
        expectDenied(env, seen, await post(tokenWith(env.bot.privateJwk, claims(bad))), 401, 'token_invalid');
      }
    });
  });

  it('step 8: token_replayed on the second use of a jti', async () => {
    const token = await env.bot.signer.sign('createInvoice');
    expect((await post(token)).status).toBe(200);
    const seen = env.app.requests.length;
    expectDenied(env, seen, await post(token), 401, 'token_replayed');
  });

  it('step 8: concurrent uses of one token: exactly one passes', async () => {
    const token = await env.bot.signer.sign('createInvoice');
    const seen = env.app.requests.length;
    const replies = await Promise.all(Array.from({ length: 8 }, () => post(token)));
    expect(replies.filter((r) => r.status === 200)).toHaveLength(1);
    expect(replies.filter((r) => r.json?.error === 'token_replayed')).toHaveLength(7);
    expect(env.app.requests.length).toBe(seen + 1);
  });

  describe('step 9: grant', () => {
    it('capability_denied without a grant', async () => {
      const seen = env.app.requests.length;
      const r = await call(env, { method: 'POST', path: '/invoices', token: await env.other.signer.sign('createInvoice'), body: invoice() });
      expectDenied(env, seen, r, 403, 'capability_denied');
    });

    it('capability_denied for a revoked grant', async () => {
      const seen = env.app.requests.length;
      const r = await call(env, { path: '/invoices/inv-1', token: await env.other.signer.sign('getInvoice') });
      expectDenied(env, seen, r, 403, 'capability_denied');
      expect(r.json.message).toMatch(/revoked/);
    });

    it('capability_denied for an expired grant', async () => {
      const seen = env.app.requests.length;
      const r = await call(env, { path: '/invoices?customerId=c-100', token: await env.other.signer.sign('listInvoices') });
      expectDenied(env, seen, r, 403, 'capability_denied');
      expect(r.json.message).toMatch(/expired/);
    });
  });

  it('step 9b: constraint_violated with every violation', async () => {
    const seen = env.app.requests.length;
    const r = await post(await env.bot.signer.sign('createInvoice'), invoice({ amount: 5000, currency: 'GBP', customer: { tier: 'internal' }, dryRun: true }));
    expectDenied(env, seen, r, 403, 'constraint_violated');
    expect(r.json.violations.map((v: { field: string; constraint: string }) => `${v.field}:${v.constraint}`)).toEqual([
      'amount:max',
      'currency:in',
      'customer.tier:not_in',
      'dryRun:exact',
    ]);
    expect(r.json.violations[0]).toEqual({ field: 'amount', constraint: 'max', expected: 1000, actual: 5000, message: expect.stringContaining('1000') });
  });

  it('checks in table order: an unknown sub with a bad signature is agent_not_found', async () => {
    const seen = env.app.requests.length;
    const t = tokenWith(env.bot.privateJwk, claims({ sub: 'agent-nobody' }));
    expectDenied(env, seen, await post(`${t.slice(0, -4)}AAAA`), 401, 'agent_not_found');
  });

  it('logs each denial as one JSON line with agent, capability and code', async () => {
    await post(await env.bot.signer.sign('getInvoice'));
    const line = env.logs
      .map((l) => JSON.parse(l))
      .reverse()
      .find((l) => l.msg === 'call denied');
    expect(line).toMatchObject({ level: 'warn', capability: 'createInvoice', claimedAgent: 'agent-billing-bot', code: 'capability_denied', status: 403 });
    expect(typeof line.requestId).toBe('string');
  });
});

describe('a bounded in-memory replay window', () => {
  it('refuses with 503 replay_store_unavailable when full of live ids (--replay-max-entries), never forgetting one', async () => {
    const env = await startTestSidecar({ replayMaxEntries: 2 });
    try {
      const get = async () => (await call(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') })).status;
      expect([await get(), await get(), await get()]).toEqual([200, 200, 503]);
      expect(env.logs.some((l) => l.includes('replay window in memory') && l.includes('"maxEntries":2'))).toBe(true);
    } finally {
      await env.close();
    }
  });
});
