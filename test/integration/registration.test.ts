import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentProof, createAgentSigner, createHostSigner, hostTokenHash, type HostSigner } from '../../src/identity/client.js';
import { generateAgentKeyPair, thumbprintOf, type AgentKeyPair } from '../../src/identity/keys.js';
import type { Sidecar } from '../../src/sidecar/start.js';
import type { Recorder } from '../support/recorder.js';
import { ISSUER, registration, registrationPolicy } from '../support/registration.js';
import { signClaims } from '../support/tokens.js';
import { call } from '../support/http.js';
import { startTestSidecar } from '../support/fixture.js';

const ADMIN = 'registration-admin-token-0123456789';

describe('discovery, registration and host identity', () => {
  let sidecar: Sidecar;
  let app: Recorder;
  let hostKeys: AgentKeyPair;
  let host: HostSigner;

  beforeAll(async () => {
    hostKeys = await generateAgentKeyPair();
    host = await createHostSigner(hostKeys.privateJwk);
    ({ sidecar, app } = await startTestSidecar({
      policy: registrationPolicy(hostKeys),
      adminToken: ADMIN,
      logLevel: 'error',
      metrics: { processMetrics: false },
    }));
  });
  afterAll(async () => {
    await sidecar.close();
    await app.close();
  });

  /** Registers as an honest host does: the agent's proof of possession is bound to the token sent. */
  const registerAgent = async (keys: AgentKeyPair, body: Record<string, unknown>, token?: string) => {
    const t = token ?? (await host.sign(ISSUER, { agentPublicKey: keys.publicJwk }));
    return call(`${sidecar.url}/agent/register`, {
      method: 'POST',
      token: t,
      body: { ...body, agent_proof: await createAgentProof(keys.privateJwk, { hostToken: t, audience: ISSUER }) },
    });
  };

  it('serves the discovery document, cacheable, with the Agent Auth fields', async () => {
    const r = await call(`${sidecar.url}/.well-known/agent-configuration`);
    expect(r.status).toBe(200);
    expect(r.headers['cache-control']).toMatch(/max-age=3600/);
    expect(r.json).toEqual({
      version: '1.0-draft',
      provider_name: 'billing-service',
      description: 'Billing API',
      issuer: ISSUER,
      default_location: `${ISSUER}/capability/execute`,
      algorithms: ['Ed25519'],
      modes: ['delegated', 'autonomous'],
      approval_methods: [],
      // Absolute URLs on the issuer's origin, as the protocol's reference server publishes them.
      endpoints: {
        capabilities: `${ISSUER}/capability/list`,
        describe_capability: `${ISSUER}/capability/describe`,
        execute: `${ISSUER}/capability/execute`,
        introspect: `${ISSUER}/agent/introspect`,
        register: `${ISSUER}/agent/register`,
        status: `${ISSUER}/agent/status`,
        revoke: `${ISSUER}/agent/revoke`,
        rotate_key: `${ISSUER}/agent/rotate-key`,
        constraints: `${ISSUER}/agent/constraints`,
      },
      default_capabilities: ['createInvoice', 'getInvoice'],
    });
    // 401s point at it.
    const denied = await call(`${sidecar.url}/invoices/inv-1`);
    expect(denied.headers['www-authenticate']).toContain(`AgentAuth discovery="${ISSUER}/.well-known/agent-configuration"`);
  });

  it('registers an agent through a host token; the agent calls within the host defaults and is denied outside them', async () => {
    const keys = await generateAgentKeyPair();
    const reg = await registerAgent(keys, {
      name: 'invoice-bot',
      mode: 'autonomous',
      reason: 'nightly billing',
      capabilities: ['getInvoice', { name: 'createInvoice', constraints: { amount: { max: 500 } } }],
    });
    expect(reg.status).toBe(201);
    expect(reg.json).toMatchObject({ agent_id: `agt_${keys.thumbprint}`, host_id: 'laptop-host', status: 'active', mode: 'autonomous' });
    expect(reg.json.agent_capability_grants).toEqual([
      { capability: 'getInvoice', status: 'active', constraints: {} },
      { capability: 'createInvoice', status: 'active', constraints: { amount: { max: 500 }, currency: { in: ['USD', 'EUR'] } } },
    ]);
    const agent = await createAgentSigner(keys.privateJwk, reg.json.agent_id);
    const ok = await call(`${sidecar.url}/invoices`, { method: 'POST', token: await agent.sign('createInvoice'), body: { amount: 400, currency: 'USD' } });
    expect(ok.status).toBe(200);
    expect(app.requests.at(-1)!.headers['x-agent-id']).toBe(reg.json.agent_id);
    const tooMuch = await call(`${sidecar.url}/invoices`, { method: 'POST', token: await agent.sign('createInvoice'), body: { amount: 800, currency: 'USD' } });
    expect(tooMuch).toMatchObject({ status: 403, json: { error: 'constraint_violated' } });
    const notGranted = await call(`${sidecar.url}/invoices/inv-1`, { method: 'DELETE', token: await agent.sign('deleteInvoice') });
    expect(notGranted).toMatchObject({ status: 403, json: { error: 'capability_denied' } });

    // Its constraint context lists its own grants (the host's defaults as narrowed), not the policy's (none).
    const ctx = await call(`${sidecar.url}/agent/constraints`, { token: await agent.sign('constraint_context'), headers: { accept: 'application/json' } });
    expect(ctx.status).toBe(200);
    expect(ctx.json.capabilities.map((c: { capability: string; constraints: unknown }) => [c.capability, c.constraints])).toEqual([
      ['createInvoice', { amount: { max: 500 }, currency: { in: ['USD', 'EUR'] } }],
      ['getInvoice', {}],
    ]);

    // The capability list shows the caller's grants when it authenticates, and pages with a cursor.
    const page1 = await call(`${sidecar.url}/capability/list?limit=2`, { token: await agent.sign('capability_list') });
    expect(page1.json.capabilities.map((c: { name: string }) => c.name)).toEqual(['createInvoice', 'deleteInvoice']);
    expect(page1.json.capabilities[0]).toMatchObject({ description: 'Create an invoice', grant: { status: 'active', constraints: { amount: { max: 500 } } } });
    expect(page1.json.capabilities[1].grant).toEqual({ status: 'none' });
    const page2 = await call(`${sidecar.url}/capability/list?limit=2&cursor=${page1.json.next_cursor}`);
    expect(page2.json).toEqual({ capabilities: [{ name: 'getInvoice', method: 'GET', path: '/invoices/{id}' }] });
    // A Bearer token that is malformed or invalid, or two token headers, are refused, never read as an
    // anonymous caller; another scheme (Basic) carries no agent token and is anonymous (Envoy's allow_missing).
    const listWith = async (headers: string[]) => {
      const r = await call(sidecar, { path: '/capability/list', headers: { [headers[0]!]: headers.filter((_, i) => i % 2 === 1) } });
      return { status: r.status, json: r.json };
    };
    const token = await agent.sign('capability_list');
    expect(await listWith(['authorization', `Bearer ${token}`, 'authorization', `Bearer ${await agent.sign('capability_list')}`])).toMatchObject({
      status: 401,
      json: { error: 'token_invalid' },
    });
    expect(await listWith(['authorization', `Bearer ${token}, Bearer ${token}`])).toMatchObject({ status: 401 });
    expect(await listWith(['authorization', `Bearer ${token.slice(0, -4)}AAAA`])).toMatchObject({ status: 401, json: { error: 'token_invalid' } });
    expect(await listWith(['authorization', 'Basic dXNlcjpwYXNz'])).toMatchObject({ status: 200, json: { capabilities: expect.any(Array) } });

    // Registering the same key again is idempotent.
    const again = await registerAgent(keys, { name: 'invoice-bot' });
    expect(again).toMatchObject({ status: 200, json: { agent_id: reg.json.agent_id, agent_capability_grants: reg.json.agent_capability_grants } });

    // Status, then revoke: the next call is refused.
    const status = await call(`${sidecar.url}/agent/status?agent_id=${reg.json.agent_id}`, { token: await host.sign(ISSUER) });
    expect(status).toMatchObject({ status: 200, json: { agent_id: reg.json.agent_id, status: 'active' } });
    const revoked = await call(`${sidecar.url}/agent/revoke`, { method: 'POST', token: await host.sign(ISSUER), body: { agent_id: reg.json.agent_id } });
    expect(revoked).toMatchObject({ status: 200, json: { status: 'revoked' } });
    const after = await call(`${sidecar.url}/invoices/inv-1`, { token: await agent.sign('getInvoice') });
    expect(after).toMatchObject({ status: 401, json: { error: 'agent_not_found' } });
    // A revocation cannot be undone by registering the key again.
    expect(await registerAgent(keys, { name: 'invoice-bot' })).toMatchObject({
      status: 403,
      json: { error: 'capability_denied', message: expect.stringMatching(/revoked/) },
    });
  });

  it('refuses registration tokens that are replayed, expired, from an unknown host, or asking for more than the host may grant', async () => {
    const keys = await generateAgentKeyPair();
    const token = await host.sign(ISSUER, { agentPublicKey: keys.publicJwk });
    expect((await registerAgent(keys, { name: 'a' }, token)).status).toBe(201);
    expect((await registerAgent(keys, { name: 'a' }, token)).json.error).toBe('token_replayed');
    const old = await host.sign(ISSUER, { agentPublicKey: keys.publicJwk, now: Math.floor(Date.now() / 1000) - 600 });
    expect(await registerAgent(keys, { name: 'a' }, old)).toMatchObject({ status: 401, json: { error: 'token_expired' } });
    const stranger = await createHostSigner((await generateAgentKeyPair()).privateJwk);
    expect(await registerAgent(keys, { name: 'a' }, await stranger.sign(ISSUER, { agentPublicKey: keys.publicJwk }))).toMatchObject({
      status: 401,
      json: { error: 'host_not_found' },
    });
    const wrongAudience = await host.sign('https://other.example.com', { agentPublicKey: keys.publicJwk });
    expect(await registerAgent(keys, { name: 'a' }, wrongAudience)).toMatchObject({ status: 401, json: { error: 'token_invalid' } });
    const other = await generateAgentKeyPair();
    const more = await registerAgent(other, { name: 'b', capabilities: [{ name: 'createInvoice', constraints: { amount: { max: 5000 } } }] });
    expect(more).toMatchObject({ status: 403, json: { error: 'capability_denied' } });
    expect(more.json.message).toMatch(/max 5000 is looser than the host's 1000/);
    const notAllowed = await registerAgent(other, { name: 'b', capabilities: ['deleteInvoice'] });
    expect(notAllowed).toMatchObject({ status: 403, json: { error: 'capability_denied', message: 'host "laptop-host" may not grant "deleteInvoice"' } });
    // An agent token is not a host token.
    const agentToken = await (await createAgentSigner(other.privateJwk, 'x')).sign('register');
    expect(await registerAgent(other, { name: 'b' }, agentToken)).toMatchObject({ status: 401, json: { error: 'token_invalid' } });
  });

  it("refuses registration past the host's maxAgents; an operator can list and revoke on the admin listener", async () => {
    const list = async () => (await call(`${sidecar.adminUrl}/agents`, { token: ADMIN })).json.agents as { agent_id: string; status: string }[];
    // Earlier tests left one active agent (the other was revoked); maxAgents is 2.
    const active = (await list()).filter((a) => a.status === 'active');
    expect(active).toHaveLength(1);
    expect((await registerAgent(await generateAgentKeyPair(), { name: 'c' })).status).toBe(201);
    const full = await registerAgent(await generateAgentKeyPair(), { name: 'd' });
    expect(full).toMatchObject({ status: 403, json: { error: 'agent_limit_reached' } });
    const byAdmin = await call(`${sidecar.adminUrl}/agents/${active[0]!.agent_id}/revoke`, { method: 'POST', token: ADMIN });
    expect(byAdmin).toMatchObject({ status: 200, json: { status: 'revoked' } });
    expect((await registerAgent(await generateAgentKeyPair(), { name: 'e' })).status).toBe(201);
  });
});

describe('the register → call → revoke flow with the CLI', () => {
  it('keygen --host, keygen, register, token, call', async () => {
    const { mkdtemp, readFile } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { requireBuild, runCli } = await import('../support/cli.js');
    requireBuild();
    const dir = await mkdtemp(join(tmpdir(), 'agents-chain-register-'));
    expect((await runCli(['keygen', '--host', '--out', dir])).code).toBe(0);
    const agentKeygen = await runCli(['keygen', '--out', dir, '--name', 'report-bot']);
    expect(agentKeygen.code).toBe(0);
    const hostPublic = await runCli(['keygen', '--public-of', join(dir, 'host.private.jwk.json')]);
    expect(hostPublic.code).toBe(0);
    const hostJwk = JSON.parse(hostPublic.stdout) as { x: string };
    expect(JSON.parse(await readFile(join(dir, 'host.public.jwk.json'), 'utf8')).x).toBe(hostJwk.x);

    const env = await startTestSidecar({
      policy: registrationPolicy({ publicJwk: hostJwk } as unknown as AgentKeyPair),
      logLevel: 'error',
      metrics: { processMetrics: false },
    });
    const { sidecar } = env;
    try {
      // The public key alone cannot register: the proof of possession needs the agent's private key.
      const publicOnly = await runCli([
        'register',
        '--host-key',
        join(dir, 'host.private.jwk.json'),
        '--agent-key',
        join(dir, 'report-bot.public.jwk.json'),
        '--url',
        sidecar.url,
        '--name',
        'report-bot',
      ]);
      expect(publicOnly.code).toBe(2);
      expect(publicOnly.stderr).toMatch(/needs the agent's private JWK/);
      const reg = await runCli([
        'register',
        '--host-key',
        join(dir, 'host.private.jwk.json'),
        '--agent-key',
        join(dir, 'report-bot.private.jwk.json'),
        '--url',
        sidecar.url,
        '--name',
        'report-bot',
        '--capability',
        'getInvoice',
        '--reason',
        'monthly reports',
      ]);
      expect(reg.stderr).toBe('');
      expect(reg.code).toBe(0);
      const agent = JSON.parse(reg.stdout) as { agent_id: string; agent_capability_grants: unknown[] };
      expect(agent.agent_id).toBe(`agt_${agentKeygen.stdout.trim()}`);
      expect(agent.agent_capability_grants).toEqual([{ capability: 'getInvoice', status: 'active', constraints: {} }]);
      const token = await runCli(['token', '--key', join(dir, 'report-bot.private.jwk.json'), '--agent', agent.agent_id, '--capability', 'getInvoice']);
      expect((await call(`${sidecar.url}/invoices/inv-7`, { token: token.stdout.trim() })).status).toBe(200);
      const refused = await runCli([
        'register',
        '--host-key',
        join(dir, 'host.private.jwk.json'),
        '--agent-key',
        join(dir, 'report-bot.private.jwk.json'),
        '--url',
        sidecar.url,
        '--name',
        'report-bot',
        '--capability',
        'deleteInvoice',
      ]);
      expect(refused.code).toBe(1);
      expect(JSON.parse(refused.stderr)).toMatchObject({ error: 'capability_denied' });
    } finally {
      await env.close();
    }
  });
});

describe('registered agents follow the active policy', () => {
  it('a reload that tightens the host drops looser grants; one that removes the host makes its agents unknown', async () => {
    const hostKeys = await generateAgentKeyPair();
    const host = await createHostSigner(hostKeys.privateJwk);
    const text = registrationPolicy(hostKeys);
    const env = await startTestSidecar({ policy: text, logLevel: 'error', metrics: { processMetrics: false } });
    const { sidecar } = env;
    try {
      const keys = await generateAgentKeyPair();
      const { token, body } = await registration(host, keys, { name: 'bot' });
      const reg = await call(`${sidecar.url}/agent/register`, { method: 'POST', token, body });
      expect(reg.status).toBe(201);
      const agent = await createAgentSigner(keys.privateJwk, reg.json.agent_id);
      const create = async () =>
        call(`${sidecar.url}/invoices`, { method: 'POST', token: await agent.sign('createInvoice'), body: { amount: 150, currency: 'USD' } });
      expect((await create()).status).toBe(200);
      // The host may now grant at most 100: the agent's recorded max 1000 is looser, so the grant is gone.
      expect((await sidecar.reloadPolicy(text.replace('amount: { max: 1000 }', 'amount: { max: 100 }'))).ok).toBe(true);
      expect(await create()).toMatchObject({ status: 403, json: { error: 'capability_denied' } });
      expect((await call(`${sidecar.url}/invoices/inv-1`, { token: await agent.sign('getInvoice') })).status).toBe(200);
      // Without the host, its agents are unknown.
      const withoutHosts = text.slice(0, text.indexOf('hosts:'));
      expect((await sidecar.reloadPolicy(withoutHosts)).ok).toBe(true);
      expect(await call(`${sidecar.url}/invoices/inv-1`, { token: await agent.sign('getInvoice') })).toMatchObject({
        status: 401,
        json: { error: 'agent_not_found' },
      });
    } finally {
      await env.close();
    }
  });
});

describe('registration proves possession of a safe agent key', () => {
  let sidecar: Sidecar;
  let app: Recorder;
  let hostA: HostSigner;
  let hostB: HostSigner;
  const adminAgents = async () => (await call(`${sidecar.adminUrl}/agents`, { token: ADMIN })).json.agents as { agent_id: string; host_id: string }[];

  beforeAll(async () => {
    const [a, b] = [await generateAgentKeyPair(), await generateAgentKeyPair()];
    hostA = await createHostSigner(a.privateJwk);
    hostB = await createHostSigner(b.privateJwk);
    ({ sidecar, app } = await startTestSidecar({ policy: registrationPolicy(a, b), adminToken: ADMIN, logLevel: 'error', metrics: { processMetrics: false } }));
  });
  afterAll(async () => {
    await sidecar.close();
    await app.close();
  });

  const post = (token: string, body: Record<string, unknown>) => call(`${sidecar.url}/agent/register`, { method: 'POST', token, body });

  it("host B cannot register host A's agent key: no proof, a proof by another key, or A's proof for A's token", async () => {
    const agentOfA = await generateAgentKeyPair();
    // B knows only the public key (it is public). Today's code registered it for B, locking A out.
    const noProof = await post(await hostB.sign(ISSUER, { agentPublicKey: agentOfA.publicJwk }), { name: 'squatter' });
    expect(noProof).toMatchObject({ status: 401, json: { error: 'proof_invalid', message: expect.stringMatching(/missing/) } });
    // A proof B signs with a key of its own names the wrong thumbprint, or (claiming A's) fails the signature.
    const tokenB = await hostB.sign(ISSUER, { agentPublicKey: agentOfA.publicJwk });
    const ownKey = await createAgentProof((await generateAgentKeyPair()).privateJwk, { hostToken: tokenB, audience: ISSUER });
    expect(await post(tokenB, { name: 'squatter', agent_proof: ownKey })).toMatchObject({
      status: 401,
      json: { error: 'proof_invalid', message: expect.stringMatching(/iss is not the thumbprint/) },
    });
    const tokenB2 = await hostB.sign(ISSUER, { agentPublicKey: agentOfA.publicJwk });
    const now = Math.floor(Date.now() / 1000);
    const claimed = signClaims(
      (await generateAgentKeyPair()).privateJwk,
      { alg: 'EdDSA', typ: 'agent-proof+jwt' },
      { iss: agentOfA.thumbprint, aud: ISSUER, iat: now, exp: now + 60, ath: hostTokenHash(tokenB2) },
    );
    expect(await post(tokenB2, { name: 'squatter', agent_proof: claimed })).toMatchObject({
      status: 401,
      json: { error: 'proof_invalid', message: expect.stringMatching(/signature/) },
    });
    // A genuine proof by A's agent, seen on the wire, is bound to A's host token: attached to B's, it is refused.
    const fromA = await registration(hostA, agentOfA, { name: 'invoice-bot' });
    const stolen = await post(await hostB.sign(ISSUER, { agentPublicKey: agentOfA.publicJwk }), { name: 'squatter', agent_proof: fromA.body.agent_proof });
    expect(stolen).toMatchObject({ status: 401, json: { error: 'proof_invalid', message: expect.stringMatching(/another token/) } });
    expect((await adminAgents()).some((a) => a.agent_id === `agt_${agentOfA.thumbprint}`)).toBe(false);
    // A itself registers with its own token and proof.
    expect(await post(fromA.token, fromA.body)).toMatchObject({ status: 201, json: { agent_id: `agt_${agentOfA.thumbprint}`, host_id: 'laptop-host' } });
  });

  it('refuses an expired proof or one for another service; a replayed host token stays replayed with its proof', async () => {
    const keys = await generateAgentKeyPair();
    const token = await hostA.sign(ISSUER, { agentPublicKey: keys.publicJwk });
    const old = await createAgentProof(keys.privateJwk, { hostToken: token, audience: ISSUER, now: Math.floor(Date.now() / 1000) - 600 });
    expect(await post(token, { name: 'a', agent_proof: old })).toMatchObject({
      status: 401,
      json: { error: 'proof_invalid', message: expect.stringMatching(/expired/) },
    });
    const t2 = await hostA.sign(ISSUER, { agentPublicKey: keys.publicJwk });
    const elsewhere = await createAgentProof(keys.privateJwk, { hostToken: t2, audience: 'https://ledger.example.com' });
    expect(await post(t2, { name: 'a', agent_proof: elsewhere })).toMatchObject({ status: 401, json: { error: 'proof_invalid' } });
    const good = await registration(hostA, keys, { name: 'a' });
    expect((await post(good.token, good.body)).status).toBe(201);
    expect(await post(good.token, good.body)).toMatchObject({ status: 401, json: { error: 'token_replayed' } });
  });

  it('answers 400 invalid_agent_key for the small-order and non-canonical keys, and registers none of them', async () => {
    const { identitySignature, smallOrderPoints, nonCanonicalEncodings } = await import('../support/ed25519.js');
    const before = (await adminAgents()).length;
    const unsafe = [
      ...smallOrderPoints().map((s) => s.encoding),
      ...nonCanonicalEncodings()
        .slice(0, 4)
        .map((n) => n.encoding),
    ];
    for (const bytes of unsafe) {
      const jwk = { kty: 'OKP', crv: 'Ed25519', x: bytes.toString('base64url') };
      // No proof can be made without a private key, but the key is refused first, and as what it is.
      const r = await post(await hostB.sign(ISSUER, { agentPublicKey: jwk }), { name: 'torsion' });
      expect(r, bytes.toString('hex')).toMatchObject({
        status: 400,
        json: { error: 'invalid_agent_key', message: expect.stringMatching(/small order|non-canonical/) },
      });
      // The forged token (R = identity, S = 0) that node:crypto would accept for this key names an agent that does not exist.
      const thumbprint = await thumbprintOf(jwk);
      const now = Math.floor(Date.now() / 1000);
      const h = Buffer.from(JSON.stringify({ alg: 'EdDSA', typ: 'agent+jwt' })).toString('base64url');
      const p = Buffer.from(
        JSON.stringify({ sub: `agt_${thumbprint}`, iss: thumbprint, aud: 'getInvoice', iat: now, exp: now + 60, jti: `forged-${thumbprint}` }),
      ).toString('base64url');
      const forged = await call(`${sidecar.url}/invoices/inv-1`, { token: `${h}.${p}.${identitySignature()}` });
      expect(forged).toMatchObject({ status: 401, json: { error: 'agent_not_found' } });
    }
    expect((await adminAgents()).length).toBe(before);
    expect(app.requests).toHaveLength(0);
  });

  it('parses the register and revoke bodies strictly: duplicate keys are refused, not resolved', async () => {
    const keys = await generateAgentKeyPair();
    const { token, body } = await registration(hostB, keys, { name: 'first' });
    const raw = async (path: string, t: string, text: string) => {
      const r = await call(sidecar, { method: 'POST', path, token: t, body: text });
      return { status: r.status, json: r.json };
    };
    const dup = JSON.stringify(body).replace('{', '{"name":"second",');
    expect(await raw('/agent/register', token, dup)).toMatchObject({
      status: 400,
      json: { error: 'invalid_body', message: expect.stringMatching(/duplicate/i) },
    });
    const ok = await registration(hostB, keys, { name: 'first' });
    const reg = await post(ok.token, ok.body);
    expect(reg.status).toBe(201);
    // JSON.parse keeps the last agent_id: a revoke that names another id first would have revoked this one.
    const revokeDup = `{"agent_id":"agt_nobody","agent_id":"${reg.json.agent_id}"}`;
    expect(await raw('/agent/revoke', await hostB.sign(ISSUER), revokeDup)).toMatchObject({ status: 400, json: { error: 'invalid_body' } });
    expect(await raw('/agent/revoke', await hostB.sign(ISSUER), '{"agent_id":"\\ud800"}')).toMatchObject({ status: 400, json: { error: 'invalid_body' } });
    const status = await call(`${sidecar.url}/agent/status?agent_id=${reg.json.agent_id}`, { token: await hostB.sign(ISSUER) });
    expect(status.json.status).toBe('active');
  });
});

describe('unsafe keys at the CLI', () => {
  it('policy check names the key with FILE:LINE:COL; keygen --public-of refuses it', async () => {
    const { mkdtemp, writeFile } = await import('node:fs/promises');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { requireBuild, runCli } = await import('../support/cli.js');
    const { encode, smallOrderPoints } = await import('../support/ed25519.js');
    requireBuild();
    const dir = await mkdtemp(join(tmpdir(), 'agents-chain-unsafe-'));
    const identity = encode(1n, 0).toString('base64url');
    const file = join(dir, 'billing.yaml');
    await writeFile(file, registrationPolicy({ publicJwk: { x: identity } } as unknown as AgentKeyPair));
    const check = await runCli(['policy', 'check', file]);
    expect(check.code).toBe(1);
    expect(check.stderr).toContain(
      `${file}:11:45: hosts[0].publicKey.x: Ed25519 public key refused: "x" is not a safe Ed25519 public key: the identity point (small order)`,
    );

    const torsion = join(dir, 'torsion.jwk.json');
    await writeFile(
      torsion,
      JSON.stringify({
        kty: 'OKP',
        crv: 'Ed25519',
        x: smallOrderPoints()
          .find((s) => s.order === 8)!
          .encoding.toString('base64url'),
      }),
    );
    const pub = await runCli(['keygen', '--public-of', torsion]);
    expect(pub.code).toBe(1);
    expect(pub.stderr).toMatch(/small order/);
    // A private JWK whose x is not the key d makes is refused too (x is never trusted).
    const real = await generateAgentKeyPair();
    const lying = join(dir, 'lying.private.jwk.json');
    await writeFile(lying, JSON.stringify({ ...real.privateJwk, x: identity }));
    const fromD = await runCli(['keygen', '--public-of', lying]);
    expect(fromD.code).toBe(1);
    expect(fromD.stderr).toMatch(/"x" is not the public key of "d"/);
  });
});
