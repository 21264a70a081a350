import { importJWK, SignJWT, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bodyHash } from '../../src/auth/binding.js';
import { startReference, type ReferenceServer } from '../support/agent-auth-reference.js';
import { startTestSidecar, testAgent, type TestAgent, type TestSidecar } from '../support/fixture.js';
import { call } from '../support/http.js';

/**
 * The agent-auth-v1 token profile, differentially: the same hand-minted
 * tokens go to the sidecar (in front of a recording app) and to the Agent Auth
 * reference server (@better-auth/agent-auth in this process), which hold the
 * same agent, key and grants; each case must get the same decision and the
 * same protocol error code from both.
 */
const ISSUER = 'https://billing.example.com';
const AGENT_ID = 'agent-1';

function policy(agent: TestAgent): string {
  return `
version: 1
provider: { name: billing-service, issuer: ${ISSUER}, tokenProfile: agent-auth-v1 }
capabilities:
  - { name: getInvoice, method: GET, path: "/invoices/{id}" }
  - { name: createTransfer, method: POST, path: /transfers }
  - { name: deleteInvoice, method: DELETE, path: "/invoices/{id}" }
agents:
  - { id: ${AGENT_ID}, name: billing-bot, publicKey: { kty: OKP, crv: Ed25519, x: "${agent.keys.publicJwk.x}" } }
grants:
  - { agent: ${AGENT_ID}, capability: getInvoice, status: active }
  - agent: ${AGENT_ID}
    capability: createTransfer
    status: active
    constraints:
      amount: { max: 100 }
      currency: { in: [USD, EUR] }
`;
}

/** One side of the comparison: where execute is, and the issuer its tokens name. */
interface Side {
  name: string;
  issuer: string;
  execute: string;
  post(token: string, body: string): Promise<{ status: number; json: any }>;
}

describe('agent-auth-v1: the sidecar and the reference server decide alike', () => {
  let agent: TestAgent;
  let env: TestSidecar;
  let ref: ReferenceServer;
  let sides: Side[];
  let key: Awaited<ReturnType<typeof importJWK>>;

  beforeAll(async () => {
    agent = await testAgent(AGENT_ID);
    env = await startTestSidecar({ policy: policy(agent) });
    ref = await startReference({
      capabilities: [
        { name: 'getInvoice', description: 'Read one invoice' },
        { name: 'createTransfer', description: 'Move money' },
        { name: 'deleteInvoice', description: 'Delete an invoice' },
      ],
      agents: [
        {
          id: AGENT_ID,
          name: 'billing-bot',
          publicJwk: agent.keys.publicJwk as JWK,
          grants: [{ capability: 'getInvoice' }, { capability: 'createTransfer', constraints: { amount: { max: 100 }, currency: { in: ['USD', 'EUR'] } } }],
        },
      ],
    });
    key = await importJWK(agent.privateJwk, 'EdDSA');
    const post = (url: string) => async (token: string, body: string) => {
      const r = await call(url, { method: 'POST', token, body });
      return { status: r.status, json: r.json };
    };
    sides = [
      { name: 'sidecar', issuer: ISSUER, execute: `${ISSUER}/capability/execute`, post: post(`${env.url}/capability/execute`) },
      { name: 'reference', issuer: ref.issuer, execute: `${ref.issuer}/capability/execute`, post: post(`${ref.issuer}/capability/execute`) },
    ];
  });
  afterAll(async () => {
    await env?.close();
    await ref?.close();
  });

  /** A token as an Agent Auth client mints it: sub, aud (the service), iat, exp, jti; no iss. */
  function mint(side: Side, claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ sub: AGENT_ID, aud: side.issuer, iat: now, exp: now + 60, jti: crypto.randomUUID(), ...claims })
      .setProtectedHeader({ alg: 'EdDSA', typ: 'agent+jwt', ...header })
      .sign(key);
  }

  const execute = (capability: string, args: Record<string, unknown>) => JSON.stringify({ capability, arguments: args });
  const transfer = execute('createTransfer', { amount: 50, currency: 'USD' });

  type Case = [label: string, token: (s: Side) => Promise<string>, body: string, expected: { status: number; error?: string }];
  const cases: Case[] = [
    ['valid', (s) => mint(s), transfer, { status: 200 }],
    ['valid, GET capability', (s) => mint(s), execute('getInvoice', { id: 'inv-1' }), { status: 200 }],
    ['aud is the execute URL', (s) => mint(s, { aud: s.execute }), transfer, { status: 200 }],
    ['wrong aud (another service)', (s) => mint(s, { aud: 'https://other.example.com' }), transfer, { status: 401, error: 'invalid_jwt' }],
    ['aud a capability name (the seed profile)', (s) => mint(s, { aud: 'createTransfer' }), transfer, { status: 401, error: 'invalid_jwt' }],
    [
      'expired',
      (s) => {
        const now = Math.floor(Date.now() / 1000);
        return mint(s, { iat: now - 300, exp: now - 240 });
      },
      transfer,
      { status: 401, error: 'invalid_jwt' },
    ],
    ['unknown agent', (s) => mint(s, { sub: 'agent-nobody' }), transfer, { status: 401, error: 'agent_not_found' }],
    ['no jti', (s) => mint(s, { jti: undefined }), transfer, { status: 401, error: 'invalid_jwt' }],
    ['bound to its request', (s) => mint(s, { htm: 'POST', htu: s.execute, ath: bodyHash(Buffer.from(transfer)) }), transfer, { status: 200 }],
    ['bound to another method', (s) => mint(s, { htm: 'GET' }), transfer, { status: 401, error: 'request_binding_mismatch' }],
    ['bound to another URI', (s) => mint(s, { htu: 'http://evil.example/x' }), transfer, { status: 401, error: 'request_binding_mismatch' }],
    [
      'bound to another body',
      (s) => mint(s, { ath: bodyHash(Buffer.from(execute('createTransfer', { amount: 1, currency: 'USD' }))) }),
      transfer,
      { status: 401, error: 'request_binding_mismatch' },
    ],
    ['constraint violated', (s) => mint(s), execute('createTransfer', { amount: 5000, currency: 'USD' }), { status: 403, error: 'constraint_violated' }],
    ['capability not granted', (s) => mint(s), execute('deleteInvoice', { id: 'inv-1' }), { status: 403, error: 'capability_not_granted' }],
    ['capabilities claim leaves it out', (s) => mint(s, { capabilities: ['getInvoice'] }), transfer, { status: 403, error: 'capability_not_granted' }],
    ['capabilities claim names it', (s) => mint(s, { capabilities: ['createTransfer'] }), transfer, { status: 200 }],
    ['unknown capability', (s) => mint(s), execute('launchRocket', {}), { status: 404, error: 'capability_not_found' }],
  ];

  it.each(cases)('%s', async (label, token, body, expected) => {
    const results: Record<string, { status: number; error?: string }> = {};
    for (const side of sides) {
      const r = await side.post(await token(side), body);
      results[side.name] = r.status < 300 ? { status: r.status } : { status: r.status, error: r.json?.error };
    }
    expect(results, label).toEqual({ sidecar: expected, reference: expected });
  });

  it('a replayed token is jti_replay on both; the violation shape is the protocol’s', async () => {
    for (const side of sides) {
      const token = await mint(side);
      expect((await side.post(token, transfer)).status).toBe(200);
      expect(await side.post(token, transfer)).toMatchObject({ status: 401, json: { error: 'jti_replay' } });
      const refused = await side.post(await mint(side), execute('createTransfer', { amount: 5000, currency: 'GBP' }));
      expect(refused.json.violations, side.name).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ field: 'amount', constraint: { max: 100 }, actual: 5000 }),
          expect.objectContaining({ field: 'currency', constraint: { in: ['USD', 'EUR'] }, actual: 'GBP' }),
        ]),
      );
    }
  });

  it('a token minted for one service is refused by the other: no cross-service reuse', async () => {
    const [sidecar, reference] = sides as [Side, Side];
    expect((await sidecar.post(await mint(reference), transfer)).json).toMatchObject({ error: 'invalid_jwt' });
    expect((await reference.post(await mint(sidecar), transfer)).json).toMatchObject({ error: 'invalid_jwt' });
  });

  it('execute runs the capability’s own request at the app and answers {data}; a direct call takes the same token form', async () => {
    const [sidecar] = sides as [Side];
    const seen = env.app.requests.length;
    const r = await sidecar.post(await mint(sidecar), execute('getInvoice', { id: 'inv 7', expand: 'lines' }));
    expect(r).toMatchObject({ status: 200, json: { data: { ok: true, method: 'GET', url: '/invoices/inv%207?expand=lines' } } });
    const sent = env.app.requests[seen]!;
    expect(sent.headers['content-type']).toBeUndefined();
    expect(sent.body.length).toBe(0);
    expect(sent.headers['x-agent-id']).toBe(AGENT_ID);

    const moved = await sidecar.post(await mint(sidecar), execute('createTransfer', { amount: 7, currency: 'EUR' }));
    expect(moved.json.data).toMatchObject({ method: 'POST', url: '/transfers' });
    expect(JSON.parse(env.app.requests.at(-1)!.body.toString())).toEqual({ amount: 7, currency: 'EUR' });

    const direct = await call(env, { path: '/invoices/inv-1', token: await mint(sidecar, { aud: `${ISSUER}/invoices/{id}`, capabilities: ['getInvoice'] }) });
    expect(direct.status).toBe(200);
    expect((await call(env, { path: '/invoices/inv-1', token: await mint(sidecar) })).status).toBe(200);
  });

  it('refusals carry the sidecar’s own code too, and nothing refused reached the app', async () => {
    const [sidecar] = sides as [Side];
    const seen = env.app.requests.length;
    const r = await sidecar.post(await mint(sidecar, { aud: 'createTransfer' }), transfer);
    expect(r.json).toMatchObject({ error: 'invalid_jwt', agents_chain_code: 'token_invalid' });
    const missing = await call(env, { method: 'POST', path: '/capability/execute', body: transfer });
    expect(missing).toMatchObject({ status: 401, json: { error: 'unauthorized', agents_chain_code: 'token_missing' } });
    expect(String(missing.headers['www-authenticate'])).toContain('AgentAuth discovery=');
    expect(env.app.requests.length).toBe(seen);
  });
});
