import { SignJWT, importJWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bodyHash } from '../../src/auth/binding.js';
import { billingPolicy, startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { call, invoice } from '../support/http.js';

/** The billing policy's issuer: the public origin agents call the service at, what htu names. */
const ORIGIN = 'https://billing.example.com';

/** A getInvoice token for the bot with these extra claims, signed by hand (the client helper would refuse to make some). */
async function mintForGetInvoice(env: TestSidecar, claims: Record<string, unknown>): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'EdDSA', typ: 'agent+jwt' })
    .setSubject(env.bot.id)
    .setIssuer(env.bot.signer.thumbprint)
    .setAudience('getInvoice')
    .setIssuedAt()
    .setExpirationTime('60s')
    .setJti(crypto.randomUUID())
    .sign(await importJWK(env.bot.privateJwk, 'EdDSA'));
}

describe('request binding (htm, htu, ath) on the seed profile', () => {
  let env: TestSidecar;
  beforeAll(async () => {
    env = await startTestSidecar();
  });
  afterAll(async () => {
    await env.close();
  });

  it('a token bound to its call passes; the same binding on another method, URI or body is refused before the app', async () => {
    const body = invoice();
    const bound = (over: Partial<{ method: string; url: string; body: string }> = {}) =>
      env.bot.signer.sign('createInvoice', { bind: { method: 'POST', url: `${ORIGIN}/invoices`, body, ...over } });
    const ok = await call(env, { method: 'POST', path: '/invoices', body, token: await bound() });
    expect(ok.status).toBe(200);
    const seen = env.app.requests.length;
    const cases: [string, Promise<string>, string][] = [
      ['another body', bound(), invoice({ amount: 999 })],
      ['another method', bound({ method: 'PUT' }), body],
      ['another path', bound({ url: `${ORIGIN}/invoices/x` }), body],
      ['another service', bound({ url: 'http://evil.example/invoices' }), body],
    ];
    for (const [label, token, sent] of cases) {
      const r = await call(env, { method: 'POST', path: '/invoices', body: sent, token: await token });
      expect({ label, status: r.status, error: r.json?.error }).toEqual({ label, status: 401, error: 'request_binding_mismatch' });
    }
    expect(env.app.requests.length).toBe(seen);
  });

  it('htm is compared in any case; the client binds htu without the query; an htu that carries one is refused; a GET binds the empty body', async () => {
    const token = await env.bot.signer.sign('getInvoice', { bind: { method: 'get', url: `${ORIGIN}/invoices/inv-1?ignored=1` } });
    expect((await call(env, { path: '/invoices/inv-1', token })).status).toBe(200);
    for (const htu of [`${ORIGIN}/invoices/inv-1?ignored=1`, `${ORIGIN}/invoices/inv-1#x`]) {
      const withQuery = await mintForGetInvoice(env, { htm: 'GET', htu });
      expect((await call(env, { path: '/invoices/inv-1?ignored=1', token: withQuery })).json).toMatchObject({ error: 'request_binding_mismatch' });
    }
    const other = await env.bot.signer.sign('getInvoice', { bind: { method: 'GET', url: `${ORIGIN}/invoices/inv-1` } });
    expect((await call(env, { path: '/invoices/inv-2', token: other })).json).toMatchObject({ error: 'request_binding_mismatch' });
  });

  it("a hand-minted token bound to POST http://evil/x is refused on GET /invoices/inv-1 (the issue's case); a malformed claim is token_invalid", async () => {
    const evil = await mintForGetInvoice(env, { htm: 'POST', htu: 'http://evil/x', ath: bodyHash(Buffer.from('{}')) });
    expect((await call(env, { path: '/invoices/inv-1', token: evil })).json).toMatchObject({ error: 'request_binding_mismatch' });
    expect((await call(env, { path: '/invoices/inv-1', token: await mintForGetInvoice(env, { htm: 7 }) })).json).toMatchObject({ error: 'token_invalid' });
  });
});

describe('requireBinding: a policy that demands bound tokens', () => {
  let env: TestSidecar;
  beforeAll(async () => {
    env = await startTestSidecar({
      policy: (agents) =>
        billingPolicy(agents)
          .replace(
            '  - { name: getInvoice, method: GET, path: "/invoices/{id}" }',
            '  - { name: getInvoice, method: GET, path: "/invoices/{id}", requireBinding: true }',
          )
          .replace('path: /uploads, maxBodyBytes: 64 }', 'path: /uploads, maxBodyBytes: 64, requireBinding: true }')
          .replace('name: other-bot,', 'name: other-bot, requireBinding: true,')
          .concat(`  - { agent: ${agents.other.id}, capability: streamEvents, status: active }\n`),
    });
  });
  afterAll(async () => {
    await env.close();
  });

  it('per capability: an unbound token is refused on it, and still passes on a capability that does not require binding', async () => {
    const seen = env.app.requests.length;
    const unbound = await call(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') });
    expect(unbound).toMatchObject({ status: 401, json: { error: 'request_binding_mismatch' } });
    expect(unbound.json.message).toContain('htm, htu');
    expect(env.app.requests.length).toBe(seen);
    const bound = await env.bot.signer.sign('getInvoice', { bind: { method: 'GET', url: `${ORIGIN}/invoices/inv-1` } });
    expect((await call(env, { path: '/invoices/inv-1', token: bound })).status).toBe(200);
    expect((await call(env, { path: '/events', token: await env.bot.signer.sign('streamEvents') })).status).toBe(200);
  });

  it('a request with a body needs ath too; without one, htm and htu are enough', async () => {
    const key = await importJWK(env.bot.privateJwk, 'EdDSA');
    /** The client's bound token, re-signed without ath: method and URL bound, the body left free. */
    const withoutAth = async (token: string) => {
      const [h, p] = token.split('.') as [string, string];
      const claims = JSON.parse(Buffer.from(p, 'base64url').toString()) as Record<string, unknown>;
      delete claims.ath;
      return new SignJWT(claims).setProtectedHeader(JSON.parse(Buffer.from(h, 'base64url').toString())).sign(key);
    };
    const body = 'abc';
    const put = (token: string) => call(env, { method: 'PUT', path: '/uploads', body, headers: { 'content-type': 'text/plain' }, token });
    const bind = { method: 'PUT', url: `${ORIGIN}/uploads`, body };
    const seen = env.app.requests.length;
    expect((await put(await withoutAth(await env.bot.signer.sign('upload', { bind })))).json).toMatchObject({ error: 'request_binding_mismatch' });
    expect(env.app.requests.length).toBe(seen);
    expect((await put(await env.bot.signer.sign('upload', { bind }))).status).toBe(200);
    const get = await withoutAth(await env.bot.signer.sign('getInvoice', { bind: { method: 'GET', url: `${ORIGIN}/invoices/inv-1` } }));
    expect((await call(env, { path: '/invoices/inv-1', token: get })).status).toBe(200);
  });

  it('per agent: every token of that agent must be bound, for every capability', async () => {
    const r = await call(env, { path: '/events', token: await env.other.signer.sign('streamEvents') });
    expect(r).toMatchObject({ status: 401, json: { error: 'request_binding_mismatch' } });
    const bound = await env.other.signer.sign('streamEvents', { bind: { method: 'GET', url: `${ORIGIN}/events` } });
    expect((await call(env, { path: '/events', token: bound })).status).toBe(200);
  });
});
