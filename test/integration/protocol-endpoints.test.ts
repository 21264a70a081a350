import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentProof, createAgentSigner, createHostSigner, type HostSigner } from '../../src/identity/client.js';
import { generateAgentKeyPair, type AgentKeyPair } from '../../src/identity/keys.js';
import { loadPolicyText } from '../../src/policy/load.js';
import { PolicyError } from '../../src/policy/issues.js';
import { startTestSidecar, testAgent, type TestAgent, type TestSidecar } from '../support/fixture.js';
import { call } from '../support/http.js';
import { ISSUER } from '../support/registration.js';
import { REDIS_URL, testPrefix } from '../support/redis.js';
import { signClaims } from '../support/tokens.js';

const ADMIN = 'protocol-endpoints-admin-token-0123456789';

/** A billing policy with a policy agent, one listed host and (given) self-registering hosts. */
function policy(bot: TestAgent, host: AgentKeyPair, dynamic = ''): string {
  return `
version: 1
provider: { name: billing-service, issuer: ${ISSUER} }
capabilities:
  - name: createInvoice
    description: Create an invoice
    method: POST
    path: /invoices
    inputSchema: { type: object, required: [amount], properties: { amount: { type: number } } }
  - { name: getInvoice, method: GET, path: "/invoices/{id}" }
  - { name: deleteInvoice, method: DELETE, path: "/invoices/{id}" }
agents:
  - { id: ${bot.id}, name: billing-bot, publicKey: { kty: OKP, crv: Ed25519, x: "${bot.keys.publicJwk.x}" } }
grants:
  - { agent: ${bot.id}, capability: getInvoice, status: active }
hosts:
  - id: laptop-host
    name: Build laptop
    publicKey: { kty: OKP, crv: Ed25519, x: "${host.publicJwk.x}" }
    defaultCapabilities:
      - getInvoice
      - capability: createInvoice
        constraints: { amount: { max: 1000 } }
${dynamic}`;
}

const DYNAMIC = `dynamicHosts:
  maxAgents: 1
  defaultCapabilities:
    - capability: createInvoice
      constraints: { amount: { max: 50 } }
`;

/** Registers `keys` as an honest host does: the proof is bound to the very token sent. */
async function register(env: TestSidecar, host: HostSigner, keys: AgentKeyPair, body: Record<string, unknown>) {
  const token = await host.sign(ISSUER, { agentPublicKey: keys.publicJwk });
  return call(`${env.url}/agent/register`, {
    method: 'POST',
    token,
    body: { ...body, agent_proof: await createAgentProof(keys.privateJwk, { hostToken: token, audience: ISSUER }) },
  });
}

describe('protocol endpoints: describe_capability, introspect, rotate_key, registration fields', () => {
  let env: TestSidecar;
  let bot: TestAgent;
  let hostKeys: AgentKeyPair;
  let host: HostSigner;
  let agentKeys: AgentKeyPair;
  let agentId: string;

  beforeAll(async () => {
    bot = await testAgent('agent-billing-bot');
    hostKeys = await generateAgentKeyPair();
    host = await createHostSigner(hostKeys.privateJwk);
    env = await startTestSidecar({ policy: policy(bot, hostKeys), agents: { bot, other: await testAgent('agent-other') }, logLevel: 'error' });
    agentKeys = await generateAgentKeyPair();
    const reg = await register(env, host, agentKeys, { name: 'invoice-bot' });
    expect(reg.status).toBe(201);
    agentId = reg.json.agent_id;
  });
  afterAll(() => env.close());

  it('describes one capability: anonymously (public cache), and with a token the caller grant (private cache)', async () => {
    const anonymous = await call(`${env.url}/capability/describe?name=createInvoice`);
    expect(anonymous.status).toBe(200);
    expect(anonymous.headers['cache-control']).toBe('public, max-age=300');
    expect(anonymous.json).toEqual({
      name: 'createInvoice',
      description: 'Create an invoice',
      method: 'POST',
      path: '/invoices',
      input_schema: { type: 'object', required: ['amount'], properties: { amount: { type: 'number' } } },
      input: { type: 'object', required: ['amount'], properties: { amount: { type: 'number' } } },
      location: `${ISSUER}/invoices`,
    });
    const agent = await createAgentSigner(agentKeys.privateJwk, agentId);
    const mine = await call(`${env.url}/capability/describe?name=createInvoice`, { token: await agent.sign('capability_describe') });
    expect(mine.headers['cache-control']).toBe('private, max-age=300');
    expect(mine.json).toMatchObject({ grant: { status: 'active', constraints: { amount: { max: 1000 } } }, grant_status: 'granted' });
    // A policy agent reads the policy's grants: it holds getInvoice, not createInvoice.
    const policyAgent = await call(`${env.url}/capability/describe?name=createInvoice`, { token: await bot.signer.sign('capability_describe') });
    expect(policyAgent.json).toMatchObject({ grant: { status: 'none' }, grant_status: 'not_granted' });
    // The token is single-use and checked like any other: a token for another audience is refused, not read as anonymous.
    const wrongAud = await call(`${env.url}/capability/describe?name=createInvoice`, { token: await agent.sign('capability_list') });
    expect(wrongAud).toMatchObject({ status: 403, json: { error: 'capability_denied' } });
    expect(await call(`${env.url}/capability/describe?name=nope`)).toMatchObject({ status: 404, json: { error: 'not_found' } });
    expect(await call(`${env.url}/capability/describe`)).toMatchObject({ status: 400, json: { error: 'invalid_query' } });
    expect(await call(`${env.url}/capability/describe?name=getInvoice&name=createInvoice`)).toMatchObject({ status: 400 });
  });

  it('introspects a token without spending it; anything it would not accept is {active: false}', async () => {
    const agent = await createAgentSigner(agentKeys.privateJwk, agentId);
    const token = await agent.sign('createInvoice');
    const r = await call(`${env.url}/agent/introspect`, { method: 'POST', body: { token } });
    expect(r.status).toBe(200);
    expect(r.headers['cache-control']).toBe('no-store');
    expect(r.json).toMatchObject({
      active: true,
      agent_id: agentId,
      host_id: 'laptop-host',
      mode: 'autonomous',
      aud: 'createInvoice',
      // A capability token is good for that capability only.
      agent_capability_grants: [{ capability: 'createInvoice', status: 'active', constraints: { amount: { max: 1000 } } }],
    });
    // Introspected twice, then used: its jti was never spent.
    expect((await call(`${env.url}/agent/introspect`, { method: 'POST', body: { token } })).json.active).toBe(true);
    const used = await call(`${env.url}/invoices`, { method: 'POST', token, body: { amount: 10 } });
    expect(used.status).toBe(200);
    // An endpoint token lists every active grant; a policy agent has no host.
    const ctx = await call(`${env.url}/agent/introspect`, { method: 'POST', body: { token: await bot.signer.sign('constraint_context') } });
    expect(ctx.json).toMatchObject({ active: true, agent_id: bot.id, host_id: null, agent_capability_grants: [{ capability: 'getInvoice' }] });

    const inactive = async (t: string) => (await call(`${env.url}/agent/introspect`, { method: 'POST', body: { token: t } })).json;
    const stranger = await generateAgentKeyPair();
    const now = Math.floor(Date.now() / 1000);
    expect(await inactive('not.a.token')).toEqual({ active: false });
    expect(await inactive(`${token.slice(0, -4)}AAAA`)).toEqual({ active: false });
    expect(await inactive(await (await createAgentSigner(stranger.privateJwk, agentId)).sign('createInvoice'))).toEqual({ active: false });
    expect(await inactive(await agent.sign('noSuchCapability'))).toEqual({ active: false });
    expect(
      await inactive(
        signClaims(
          agentKeys.privateJwk,
          { alg: 'EdDSA', typ: 'agent+jwt' },
          { sub: agentId, iss: agentKeys.thumbprint, aud: 'getInvoice', iat: now - 300, exp: now - 250, jti: 'old' },
        ),
      ),
    ).toEqual({ active: false });
    expect(await call(`${env.url}/agent/introspect`, { method: 'POST', body: {} })).toMatchObject({ status: 400, json: { error: 'invalid_body' } });
  });

  it('registration reads the protocol fields; force_approval is refused, not skipped', async () => {
    const keys = await generateAgentKeyPair();
    const reg = await register(env, host, keys, {
      name: 'protocol-bot',
      host_name: 'Build laptop',
      preferred_method: 'device_authorization',
      login_hint: 'ops@example.com',
      binding_message: 'nightly',
      force_approval: false,
      capabilities: [{ name: 'getInvoice' }],
    });
    expect(reg).toMatchObject({ status: 201, json: { status: 'active', agent_capability_grants: [{ capability: 'getInvoice' }] } });
    const forced = await register(env, host, await generateAgentKeyPair(), { name: 'forced', force_approval: true });
    expect(forced).toMatchObject({ status: 400, json: { error: 'invalid_body', message: expect.stringMatching(/force_approval/) } });
    const typed = await register(env, host, await generateAgentKeyPair(), { name: 'typed', login_hint: 7 });
    expect(typed).toMatchObject({ status: 400, json: { error: 'invalid_body' } });
  });

  it('rotates a registered agent key: the old key stops, the new one works, the id and grants stay', async () => {
    const keys = await generateAgentKeyPair();
    const id = (await register(env, host, keys, { name: 'rotating-bot', capabilities: ['getInvoice'] })).json.agent_id as string;
    const next = await generateAgentKeyPair();
    const rotate = async (body: Record<string, unknown>, signer = host, proofKey: AgentKeyPair | null = next) => {
      const token = await signer.sign(ISSUER);
      const proof = proofKey ? { agent_proof: await createAgentProof(proofKey.privateJwk, { hostToken: token, audience: ISSUER }) } : {};
      return call(`${env.url}/agent/rotate-key`, { method: 'POST', token, body: { ...body, ...proof } });
    };
    // The host must prove it holds the new key.
    expect(await rotate({ agent_id: id, public_key: next.publicJwk }, host, null)).toMatchObject({ status: 401, json: { error: 'proof_invalid' } });
    expect(await rotate({ agent_id: id, public_key: next.publicJwk }, host, keys)).toMatchObject({ status: 401, json: { error: 'proof_invalid' } });
    const rotated = await rotate({ agent_id: id, public_key: next.publicJwk });
    expect(rotated).toMatchObject({
      status: 200,
      json: { agent_id: id, status: 'active', key_rotated_at: expect.any(String), agent_capability_grants: [{ capability: 'getInvoice' }] },
    });
    const before = await createAgentSigner(keys.privateJwk, id);
    const after = await createAgentSigner(next.privateJwk, id);
    expect(await call(`${env.url}/invoices/inv-1`, { token: await before.sign('getInvoice') })).toMatchObject({
      status: 401,
      json: { error: 'token_invalid' },
    });
    expect((await call(`${env.url}/invoices/inv-1`, { token: await after.sign('getInvoice') })).status).toBe(200);
    // The retired key cannot be registered again, not even as the agent it was.
    expect(await register(env, host, keys, { name: 'rotating-bot' })).toMatchObject({
      status: 403,
      json: { error: 'capability_denied', message: expect.stringMatching(/rotation/) },
    });
    // Policy agents' keys live in the policy; another host's agent is unknown to this host.
    expect(await rotate({ agent_id: bot.id, public_key: next.publicJwk })).toMatchObject({ status: 409, json: { error: 'key_managed_by_policy' } });
    const stranger = await createHostSigner((await generateAgentKeyPair()).privateJwk);
    expect(await rotate({ agent_id: id, public_key: next.publicJwk }, stranger)).toMatchObject({ status: 401, json: { error: 'host_not_found' } });
    expect(await rotate({ agent_id: 'agt_unknown', public_key: next.publicJwk })).toMatchObject({ status: 401, json: { error: 'agent_not_found' } });
    // Another registered agent's key is that agent's.
    expect(await rotate({ agent_id: id, public_key: agentKeys.publicJwk }, host, agentKeys)).toMatchObject({
      status: 403,
      json: { error: 'capability_denied', message: expect.stringMatching(/already registered/) },
    });
    expect(await rotate({ agent_id: id, public_key: { kty: 'OKP', crv: 'Ed25519', x: 'AAAA' } })).toMatchObject({
      status: 400,
      json: { error: 'invalid_agent_key' },
    });
    expect(await rotate({ agent_id: id })).toMatchObject({ status: 400, json: { error: 'invalid_body' } });
    // A revoked agent gets no new key.
    await call(`${env.url}/agent/revoke`, { method: 'POST', token: await host.sign(ISSUER), body: { agent_id: id } });
    const third = await generateAgentKeyPair();
    expect(await rotate({ agent_id: id, public_key: third.publicJwk }, host, third)).toMatchObject({ status: 403, json: { error: 'capability_denied' } });
  });
});

describe('self-registering hosts (dynamicHosts)', () => {
  let bot: TestAgent;
  let hostKeys: AgentKeyPair;

  beforeAll(async () => {
    bot = await testAgent('agent-billing-bot');
    hostKeys = await generateAgentKeyPair();
  });

  it('off by default: a host that sends its own key is still host_not_found', async () => {
    const env = await startTestSidecar({ policy: policy(bot, hostKeys), agents: { bot, other: await testAgent('agent-other') }, logLevel: 'error' });
    try {
      const self = await createHostSigner((await generateAgentKeyPair()).privateJwk, { selfRegistering: true });
      const r = await register(env, self, await generateAgentKeyPair(), { name: 'nobody' });
      expect(r).toMatchObject({ status: 401, json: { error: 'host_not_found' } });
    } finally {
      await env.close();
    }
  });

  it('on: an unlisted host registers itself as hst_<thumbprint>, within the dynamicHosts defaults and limit', async () => {
    const env = await startTestSidecar({ policy: policy(bot, hostKeys, DYNAMIC), agents: { bot, other: await testAgent('agent-other') }, logLevel: 'error' });
    try {
      const selfKeys = await generateAgentKeyPair();
      const self = await createHostSigner(selfKeys.privateJwk, { selfRegistering: true, name: 'Contractor laptop' });
      const keys = await generateAgentKeyPair();
      const reg = await register(env, self, keys, { name: 'contractor-bot' });
      expect(reg).toMatchObject({
        status: 201,
        json: {
          host_id: `hst_${selfKeys.thumbprint}`,
          agent_capability_grants: [{ capability: 'createInvoice', constraints: { amount: { max: 50 } } }],
        },
      });
      const agent = await createAgentSigner(keys.privateJwk, reg.json.agent_id);
      expect((await call(`${env.url}/invoices`, { method: 'POST', token: await agent.sign('createInvoice'), body: { amount: 40 } })).status).toBe(200);
      expect(await call(`${env.url}/invoices`, { method: 'POST', token: await agent.sign('createInvoice'), body: { amount: 60 } })).toMatchObject({
        status: 403,
        json: { error: 'constraint_violated' },
      });
      // A capability outside the dynamicHosts defaults, and a second agent past maxAgents, are refused.
      expect(await register(env, self, await generateAgentKeyPair(), { name: 'b', capabilities: ['getInvoice'] })).toMatchObject({
        status: 403,
        json: { error: 'capability_denied' },
      });
      expect(await register(env, self, await generateAgentKeyPair(), { name: 'c' })).toMatchObject({ status: 403, json: { error: 'agent_limit_reached' } });
      // The same key is the same host for status and revoke; another self-registered host does not see its agents.
      const status = await call(`${env.url}/agent/status?agent_id=${reg.json.agent_id}`, { token: await self.sign(ISSUER) });
      expect(status).toMatchObject({ status: 200, json: { host_id: `hst_${selfKeys.thumbprint}`, status: 'active' } });
      const otherSelf = await createHostSigner((await generateAgentKeyPair()).privateJwk, { selfRegistering: true });
      expect(await call(`${env.url}/agent/status?agent_id=${reg.json.agent_id}`, { token: await otherSelf.sign(ISSUER) })).toMatchObject({
        status: 401,
        json: { error: 'agent_not_found' },
      });
      // The listed host is still the listed host (its token carries no key), and its defaults are its own.
      const listed = await register(env, await createHostSigner(hostKeys.privateJwk), await generateAgentKeyPair(), { name: 'listed' });
      expect(listed).toMatchObject({ status: 201, json: { host_id: 'laptop-host' } });

      // A host_public_key that did not sign the token, or an iss that is not its thumbprint, is token_invalid.
      const forged = await generateAgentKeyPair();
      const now = Math.floor(Date.now() / 1000);
      const claims = { aud: ISSUER, iat: now, exp: now + 30, jti: `j-${now}` };
      const HOST = { alg: 'EdDSA', typ: 'host+jwt' };
      const notSigner = signClaims(forged.privateJwk, HOST, { ...claims, iss: selfKeys.thumbprint, host_public_key: selfKeys.publicJwk });
      expect(await call(`${env.url}/agent/status?agent_id=x`, { token: notSigner })).toMatchObject({ status: 401, json: { error: 'token_invalid' } });
      const wrongIss = signClaims(forged.privateJwk, HOST, { ...claims, jti: `k-${now}`, iss: 'someone', host_public_key: forged.publicJwk });
      expect(await call(`${env.url}/agent/status?agent_id=x`, { token: wrongIss })).toMatchObject({ status: 401, json: { error: 'token_invalid' } });

      // Revoked by its own host, the agent is refused at once.
      expect((await call(`${env.url}/agent/revoke`, { method: 'POST', token: await self.sign(ISSUER), body: { agent_id: reg.json.agent_id } })).status).toBe(
        200,
      );
      expect(await call(`${env.url}/invoices`, { method: 'POST', token: await agent.sign('createInvoice'), body: { amount: 1 } })).toMatchObject({
        status: 401,
        json: { error: 'agent_not_found' },
      });
    } finally {
      await env.close();
    }
  });

  it('serves the host endpoints with dynamicHosts alone, and keeps hst_ ids for self-registered hosts', async () => {
    const only = `
version: 1
provider: { name: billing-service, issuer: ${ISSUER} }
capabilities:
  - { name: getInvoice, method: GET, path: "/invoices/{id}" }
dynamicHosts:
  defaultCapabilities: [getInvoice]
`;
    const loaded = await loadPolicyText(only, 'dynamic.yaml');
    expect(loaded.dynamicHosts).toMatchObject({ maxAgents: 10 });
    expect(loaded.routes.filter((r) => r.kind === 'endpoint').map((r) => (r.kind === 'endpoint' ? r.endpoint : ''))).toEqual(
      expect.arrayContaining(['register', 'agent_status', 'revoke', 'rotate_key']),
    );
    // Operators list (and revoke) self-registered hosts' agents on the admin listener, hosts listed or not.
    const env = await startTestSidecar({ policy: loaded, adminToken: ADMIN, logLevel: 'error' });
    try {
      expect(await call(`${env.adminUrl}/agents`, { token: ADMIN })).toMatchObject({ status: 200, json: { agents: [] } });
    } finally {
      await env.close();
    }
    const clash = policy(bot, hostKeys, DYNAMIC).replace('id: laptop-host', 'id: hst_laptop');
    const err = await loadPolicyText(clash, 'clash.yaml').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PolicyError);
    expect((err as PolicyError).message).toMatch(/hst_/);
    const unknown = await loadPolicyText(only.replace('[getInvoice]', '[nope]'), 'unknown.yaml').catch((e: unknown) => e);
    expect((unknown as PolicyError).message).toMatch(/unknown capability "nope"/);
  });
});

describe('key rotation across replicas (Redis)', () => {
  it('a key rotated on one replica is refused on the other at its next call', async () => {
    const bot = await testAgent('agent-billing-bot');
    const other = await testAgent('agent-other');
    const hostKeys = await generateAgentKeyPair();
    const host = await createHostSigner(hostKeys.privateJwk);
    const shared = { redis: { url: REDIS_URL, prefix: testPrefix('rotate') }, metrics: { processMetrics: false }, logLevel: 'error' as const, waitReady: true };
    const a = await startTestSidecar({ ...shared, policy: policy(bot, hostKeys), agents: { bot, other } });
    const b = await startTestSidecar({ ...shared, policy: policy(bot, hostKeys), agents: { bot, other } });
    try {
      const keys = await generateAgentKeyPair();
      const id = (await register(a, host, keys, { name: 'replica-bot', capabilities: ['getInvoice'] })).json.agent_id as string;
      const old = await createAgentSigner(keys.privateJwk, id);
      expect((await call(`${b.url}/invoices/inv-1`, { token: await old.sign('getInvoice') })).status).toBe(200);
      const next = await generateAgentKeyPair();
      const token = await host.sign(ISSUER);
      const rotated = await call(`${a.url}/agent/rotate-key`, {
        method: 'POST',
        token,
        body: { agent_id: id, public_key: next.publicJwk, agent_proof: await createAgentProof(next.privateJwk, { hostToken: token, audience: ISSUER }) },
      });
      expect(rotated.status).toBe(200);
      expect(await call(`${b.url}/invoices/inv-1`, { token: await old.sign('getInvoice') })).toMatchObject({ status: 401, json: { error: 'token_invalid' } });
      const fresh = await createAgentSigner(next.privateJwk, id);
      expect((await call(`${b.url}/invoices/inv-1`, { token: await fresh.sign('getInvoice') })).status).toBe(200);
      expect((await call(`${b.url}/agent/status?agent_id=${id}`, { token: await host.sign(ISSUER) })).json).toMatchObject({
        key_rotated_at: expect.any(String),
      });
    } finally {
      await a.close();
      await b.close();
    }
  });
});
