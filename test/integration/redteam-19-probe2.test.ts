import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { importJWK, SignJWT, type JWK } from 'jose';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { openBatch, parseKeyring, type AuditBatch } from '../../src/audit/crypto.js';
import type { AuditEntry } from '../../src/audit/entry.js';
import { HttpAuditExporter } from '../../src/audit/exporters.js';
import { bodyHash } from '../../src/auth/binding.js';
import { orderedLines, startCollector, type Collector } from '../support/collector.js';
import { startReference, type ReferenceServer } from '../support/agent-auth-reference.js';
import { startTestSidecar, testAgent, type TestAgent, type TestSidecar } from '../support/fixture.js';
import { call } from '../support/http.js';
import { until } from '../support/until.js';

const keys = parseKeyring(randomBytes(32).toString('base64'));
const ex = (capability: string, args: Record<string, unknown>) => JSON.stringify({ capability, arguments: args });
const log = (...a: unknown[]) => console.log('PROBE', ...a.map((x) => (typeof x === 'string' ? x : JSON.stringify(x))));
const ISSUER = 'https://billing.example.com';

function policy(agent: TestAgent): string {
  return `
version: 1
provider: { name: billing-service, issuer: ${ISSUER}, tokenProfile: agent-auth-v1 }
capabilities:
  - { name: getInvoice, method: GET, path: "/invoices/{id}" }
  - { name: createTransfer, method: POST, path: /transfers }
  - { name: deleteInvoice, method: DELETE, path: "/invoices/{id}" }
agents:
  - { id: agent-1, name: billing-bot, publicKey: { kty: OKP, crv: Ed25519, x: "${agent.keys.publicJwk.x}" } }
grants:
  - { agent: agent-1, capability: getInvoice, status: active }
  - { agent: agent-1, capability: deleteInvoice, status: active }
  - agent: agent-1
    capability: createTransfer
    status: active
    constraints:
      amount: { max: 100 }
      apiKey: { optional: true, in: [k1, k2] }
`;
}

describe('probe v1', () => {
  let agent: TestAgent;
  let env: TestSidecar;
  let ref: ReferenceServer;
  let key: CryptoKey | Uint8Array;
  let collector: Collector;
  const entries = (): AuditEntry[] => orderedLines(collector).flatMap((l) => openBatch<AuditEntry>(JSON.parse(l) as AuditBatch, keys));
  beforeAll(async () => {
    agent = await testAgent('agent-1');
    collector = await startCollector();
    env = await startTestSidecar({ logLevel: 'warn', policy: policy(agent), audit: { keyring: keys, exporters: [new HttpAuditExporter(collector.url)], flushIntervalMs: 10 } });
    ref = await startReference({
      capabilities: [
        { name: 'getInvoice', description: 'Read' },
        { name: 'createTransfer', description: 'Move' },
        { name: 'deleteInvoice', description: 'Delete' },
      ],
      agents: [{ id: 'agent-1', name: 'billing-bot', publicJwk: agent.keys.publicJwk as JWK, grants: [{ capability: 'getInvoice' }, { capability: 'deleteInvoice' }, { capability: 'createTransfer', constraints: { amount: { max: 100 } } }] }],
    });
    key = await importJWK(agent.privateJwk, 'EdDSA');
  });
  afterAll(async () => {
    await env?.close();
    await ref?.close();
    await collector?.close();
  });
  const mint = (issuer: string, claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}) => {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ sub: 'agent-1', aud: issuer, iat: now, exp: now + 60, jti: crypto.randomUUID(), ...claims })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'agent+jwt', ...header })
      .sign(key);
  };
  const both = async (label: string, claims: (iss: string) => Record<string, unknown>, body: string, header: Record<string, unknown> = {}) => {
    const s = await call(`${env.url}/capability/execute`, { method: 'POST', token: await mint(ISSUER, claims(ISSUER), header), body });
    const r = await call(`${ref.issuer}/capability/execute`, { method: 'POST', token: await mint(ref.issuer, claims(ref.issuer), header), body });
    log('V1', label, 'sidecar', s.status, s.json?.error, 'ref', r.status, r.json?.error ?? r.json?.code, r.json?.message);
  };

  it('differentials', async () => {
    const get = ex('getInvoice', { id: 'inv-1' });
    await both('htu with query', (i) => ({ htu: `${i}/capability/execute?x=1` }), get);
    await both('htu with fragment', (i) => ({ htu: `${i}/capability/execute#f` }), get);
    await both('htu trailing slash', (i) => ({ htu: `${i}/capability/execute/` }), get);
    await both('location aud, no capabilities claim', (i) => ({ aud: `${new URL(i).origin}/invoices/{id}` }), get);
    await both('location aud of getInvoice used for deleteInvoice', (i) => ({ aud: `${new URL(i).origin}/invoices/{id}`, capabilities: ['deleteInvoice'] }), ex('deleteInvoice', { id: 'inv-1' }));
    await both('capabilities two names', (i) => ({ capabilities: ['getInvoice', 'deleteInvoice'] }), get);
    await both('kid = random', () => ({}), get, { kid: 'key-1' });
    await both('aud array', (i) => ({ aud: [i] }), get);
    await both('iss = agent id', () => ({ iss: 'agent-1' }), get);
    await both('iss = random', () => ({ iss: 'host-x' }), get);
    await both('ath on get (execute body)', () => ({ ath: bodyHash(Buffer.from(get)) }), get);
    await both('htm lowercase', () => ({ htm: 'post' }), get);
    await both('no exp', () => ({ exp: undefined }), get);
    await both('exp 3600', () => ({ exp: Math.floor(Date.now() / 1000) + 3600 }), get);
    await both('capabilities empty array', () => ({ capabilities: [] }), get);
    await both('arguments missing', () => ({}), '{"capability":"getInvoice"}');
    await both('arguments null', () => ({}), '{"capability":"getInvoice","arguments":null}');
    await both('extra member', () => ({}), '{"capability":"getInvoice","arguments":{"id":"x"},"meta":1}');
  });

  it('error shapes', async () => {
    // Node-level parse error on the v1 sidecar
    const u = new URL(env.url);
    const sock = connect(Number(u.port), u.hostname);
    await new Promise((r) => sock.once('connect', r));
    const out: Buffer[] = [];
    sock.on('data', (c) => out.push(c));
    sock.write('POST /capability/execute HTTP/1.1\r\nHost: s\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab');
    await new Promise((r) => sock.once('close', r));
    log('socket', Buffer.concat(out).toString().split('\r\n\r\n')[1]);
    const big = await call(env, { method: 'POST', path: '/capability/execute', token: await mint(ISSUER), body: ex('createTransfer', { amount: 1, pad: 'x'.repeat(2_000_000) }) });
    log('too large', big.status, big.json);
    const many = await call(env, { path: '/invoices/inv-1', token: await mint(ISSUER), headers: Object.fromEntries(Array.from({ length: 95 }, (_, i) => [`x-h${i}`, 'v'])) });
    log('too many headers', many.status, many.json);
    const hdr = await call(env, { path: '/invoices/inv-1', token: await mint(ISSUER), headers: { 'x-big': 'v'.repeat(20000) } });
    log('header overflow', hdr.status, hdr.json ?? hdr.text);
  });

  it('audit of execute calls', async () => {
    await call(env, { method: 'POST', path: '/capability/execute', token: await mint(ISSUER), body: ex('deleteInvoice', { id: 'inv-9' }) });
    await call(env, { method: 'POST', path: '/capability/execute', token: await mint(ISSUER), body: ex('createTransfer', { amount: 5, apiKey: 'k1', password: 'hunter2' }) });
    await call(env, { method: 'POST', path: '/capability/execute', token: await mint(ISSUER, { aud: 'nope' }), body: ex('createTransfer', { amount: 5, apiKey: 'k1', password: 'hunter2' }) });
    await call(env, { method: 'POST', path: '/capability/execute', token: await mint(ISSUER), body: ex('nope', { password: 'hunter2' }) });
    await until(() => entries().some((e) => e.capability === 'nope' || (e.capability === 'execute' && JSON.stringify(e.args).includes('nope'))));
    for (const e of entries().slice(-6)) log('audit', { c: e.capability, m: e.method, p: e.path, args: e.args, r: e.result, d: e.denialReason });
  });
});
