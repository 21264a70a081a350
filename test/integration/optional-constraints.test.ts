/**
 * Optional fields and aliases through the real sidecar, with the shipped egress examples and the official
 * SDKs: a call that leaves an optional field out passes, one that sends it over the limit is refused, and
 * every spelling of an aliased field is checked. Then the registration endpoint's answer to an operator it
 * does not know (the Agent Auth Protocol's 400 unknown_constraint_operator).
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentProof, createAgentSigner, createHostSigner, type HostSigner } from '../../src/identity/client.js';
import { generateAgentKeyPair, type AgentKeyPair } from '../../src/identity/keys.js';
import { startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { startFakeProvider, type FakeProvider } from '../support/fake-provider.js';
import { call } from '../support/http.js';
import { ISSUER } from '../support/registration.js';

const EXAMPLES = fileURLToPath(new URL('../../config/examples/', import.meta.url));
const PROVIDER_KEY = 'sk-sidecar-held-provider-key-0123456789';
const key = (name: string): Record<string, string> => JSON.parse(readFileSync(`${EXAMPLES}keys/${name}.private.jwk.json`, 'utf8')) as Record<string, string>;

/** The shipped example policy in egress mode, the agent's example key, the fake provider behind it. */
async function egress(policy: string, agentId: string, keyName: string): Promise<{ env: TestSidecar<FakeProvider>; provider: FakeProvider }> {
  const provider = await startFakeProvider();
  const env = await startTestSidecar({
    policyFile: `${EXAMPLES}${policy}`,
    app: provider,
    logLevel: 'error',
    metrics: { processMetrics: false },
    egress: { agentId, agentKey: key(keyName), providerKey: PROVIDER_KEY },
  });
  return { env, provider };
}

/** The HTTP status an SDK call was refused with (the body's shape is the SDK's to unwrap; raw calls read it below). */
async function refusedStatus(p: Promise<unknown>): Promise<number | undefined> {
  const err = (await p.then(
    () => undefined,
    (e: unknown) => e,
  )) as { status?: number } | undefined;
  expect(err, 'the call was expected to be refused').toBeDefined();
  return err!.status;
}

describe('the Anthropic example: temperature is optional', () => {
  let env: TestSidecar<FakeProvider>;
  let provider: FakeProvider;
  let client: Anthropic;
  beforeAll(async () => {
    ({ env, provider } = await egress('egress-anthropic.yaml', 'agent-sms-bot', 'sms-bot'));
    client = new Anthropic({ apiKey: 'unused', baseURL: env.url, maxRetries: 0 });
  });
  afterAll(async () => {
    await env.close();
    await provider.close();
  });

  it('passes messages.create without a temperature, and with one within the limit', async () => {
    const plain = await client.messages.create({ model: 'claude-haiku-4-5', max_tokens: 256, messages: [{ role: 'user', content: 'hi' }] });
    expect(plain.type).toBe('message');
    expect(JSON.parse(provider.requests.at(-1)!.body.toString())).not.toHaveProperty('temperature');
    // This SDK release no longer types temperature; older ones and other clients still send it.
    const withTemperature = { model: 'claude-haiku-4-5', max_tokens: 256, temperature: 0.3, messages: [{ role: 'user' as const, content: 'hi' }] };
    await client.messages.create(withTemperature);
    expect(JSON.parse(provider.requests.at(-1)!.body.toString())).toMatchObject({ temperature: 0.3 });
  });

  it('refuses a temperature over the limit before the provider sees it', async () => {
    const seen = provider.requests.length;
    const body = { model: 'claude-haiku-4-5', max_tokens: 256, temperature: 1.5, messages: [{ role: 'user' as const, content: 'hi' }] };
    expect(await refusedStatus(client.messages.create(body))).toBe(403);
    const raw = await call(env, { method: 'POST', path: '/v1/messages', body });
    expect(raw.status).toBe(403);
    expect(JSON.stringify(raw.json)).toContain('temperature must be <= 1, got 1.5');
    expect(provider.requests.length).toBe(seen);
  });

  it('still requires max_tokens (no modifier: absent is a violation)', async () => {
    const r = await call(env, { method: 'POST', path: '/v1/messages', body: { model: 'claude-haiku-4-5', messages: [] } });
    expect(r).toMatchObject({ status: 403, json: { error: expect.anything() } });
    expect(JSON.stringify(r.json)).toContain('max_tokens is required by the \\"max\\" constraint but is absent');
  });
});

describe('the OpenAI example: max_tokens and its alias max_completion_tokens, n optional', () => {
  let env: TestSidecar<FakeProvider>;
  let provider: FakeProvider;
  let client: OpenAI;
  beforeAll(async () => {
    ({ env, provider } = await egress('egress-openai.yaml', 'agent-report-bot', 'report-bot'));
    client = new OpenAI({ apiKey: 'unused', baseURL: `${env.url}/v1`, maxRetries: 0 });
  });
  afterAll(async () => {
    await env.close();
    await provider.close();
  });

  const ask = { model: 'gpt-4o-mini', messages: [{ role: 'user' as const, content: 'hi' }] };

  it('passes either spelling within the limit, without n', async () => {
    const a = await client.chat.completions.create({ ...ask, max_tokens: 200 });
    expect(a.choices).toHaveLength(1);
    const b = await client.chat.completions.create({ ...ask, max_completion_tokens: 200 });
    expect(b.choices).toHaveLength(1);
    expect(JSON.parse(provider.requests.at(-1)!.body.toString())).toMatchObject({ max_completion_tokens: 200 });
  });

  it('checks the alias like the field: over the limit is refused', async () => {
    expect(await refusedStatus(client.chat.completions.create({ ...ask, max_completion_tokens: 99999 }))).toBe(403);
  });

  it('checks every spelling sent: max_tokens 10 beside max_completion_tokens 99999 is refused', async () => {
    const seen = provider.requests.length;
    const r = await call(env, { method: 'POST', path: '/v1/chat/completions', body: { ...ask, max_tokens: 10, max_completion_tokens: 99999 } });
    expect(r.status).toBe(403);
    expect(JSON.stringify(r.json)).toContain('max_completion_tokens (an alias of max_tokens) must be <= 1024, got 99999');
    expect(provider.requests.length).toBe(seen);
  });

  it('refuses a call with neither spelling (the field is required), and n other than 1', async () => {
    expect(await refusedStatus(client.chat.completions.create(ask))).toBe(403);
    expect(await refusedStatus(client.chat.completions.create({ ...ask, max_tokens: 10, n: 3 }))).toBe(403);
    const raw = await call(env, { method: 'POST', path: '/v1/chat/completions', body: ask });
    expect(JSON.stringify(raw.json)).toContain('max_tokens (or max_completion_tokens) is required by the \\"max\\" constraint but is absent');
  });
});

describe('registration: eq and unknown operators', () => {
  let env: TestSidecar;
  let hostKeys: AgentKeyPair;
  let host: HostSigner;
  beforeAll(async () => {
    hostKeys = await generateAgentKeyPair();
    host = await createHostSigner(hostKeys.privateJwk);
    env = await startTestSidecar({
      logLevel: 'error',
      metrics: { processMetrics: false },
      policy: `
version: 1
provider: { name: billing-service, issuer: ${ISSUER} }
capabilities:
  - { name: createInvoice, method: POST, path: /invoices }
hosts:
  - id: laptop-host
    name: Build laptop
    publicKey: { kty: OKP, crv: Ed25519, x: "${hostKeys.publicJwk.x}" }
    defaultCapabilities:
      - capability: createInvoice
        constraints:
          amount: { max: 1000 }
          note: { not_in: [internal], optional: true }
`,
    });
  });
  afterAll(() => env.close());

  let keys: AgentKeyPair;
  const register = async (capabilities: unknown) => {
    keys = await generateAgentKeyPair();
    const token = await host.sign(ISSUER, { agentPublicKey: keys.publicJwk });
    const agentProof = await createAgentProof(keys.privateJwk, { hostToken: token, audience: ISSUER });
    return call(`${env.url}/agent/register`, { method: 'POST', token, body: { name: 'bot', capabilities, agent_proof: agentProof } });
  };

  it('answers 400 unknown_constraint_operator with the operators, as the Agent Auth Protocol does', async () => {
    const r = await register([{ name: 'createInvoice', constraints: { amount: { lte: 5 }, currency: { like: 'U%' } } }]);
    expect(r.status).toBe(400);
    expect(r.json).toMatchObject({ error: 'unknown_constraint_operator', operators: ['lte', 'like'] });
  });

  it('reads the protocol spelling eq as exact, and refuses to make a required field optional', async () => {
    const ok = await register([{ name: 'createInvoice', constraints: { currency: { eq: 'USD' } } }]);
    expect(ok.status).toBe(201);
    expect(ok.json.agent_capability_grants[0].constraints).toEqual({
      amount: { max: 1000 },
      note: { not_in: ['internal'], optional: true },
      currency: { exact: 'USD' },
    });
    // The agent's constraint context says what it may leave out; its calls follow the same rules.
    const agent = await createAgentSigner(keys.privateJwk, ok.json.agent_id);
    const ctx = await call(`${env.url}/agent/constraints`, { token: await agent.sign('constraint_context') });
    expect(ctx.text).toContain('note: must not be any of ["internal"]; may be left out');
    const invoice = async (body: Record<string, unknown>) => call(`${env.url}/invoices`, { method: 'POST', token: await agent.sign('createInvoice'), body });
    expect((await invoice({ amount: 5, currency: 'USD' })).status).toBe(200);
    expect((await invoice({ amount: 5, currency: 'USD', note: 'Internal' })).status).toBe(403);

    const looser = await register([{ name: 'createInvoice', constraints: { amount: { max: 10, optional: true } } }]);
    expect(looser).toMatchObject({ status: 403, json: { error: 'capability_denied' } });
  });
});
