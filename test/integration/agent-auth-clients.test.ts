import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { agentAuthClient } from '@better-auth/agent-auth/client';
import { createAuthClient } from 'better-auth/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentSigner, createHostSigner, generateAgentKeyPair } from '../../src/index.js';
import type { AgentKeyPair } from '../../src/identity/keys.js';
import { startReference, type ReferenceServer } from '../support/agent-auth-reference.js';
import { requireBuild, runCli } from '../support/cli.js';
import { startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { registration, registrationPolicy, ISSUER } from '../support/registration.js';

/**
 * The Agent Auth reference's own client plugin (better-auth's client with
 * agentAuthClient()) pointed at the sidecar: it discovers, lists, registers
 * an agent through a host and executes a capability as that agent.
 */
describe('the reference client plugin against the sidecar (agent-auth-v1)', () => {
  let env: TestSidecar;
  let hostKeys: AgentKeyPair;
  beforeAll(async () => {
    hostKeys = await generateAgentKeyPair();
    env = await startTestSidecar({
      policy: registrationPolicy(hostKeys).replace('description: Billing API }', 'description: Billing API, tokenProfile: agent-auth-v1 }'),
    });
  });
  afterAll(async () => {
    await env.close();
  });

  it('lists, registers and executes', async () => {
    const client = createAuthClient({ baseURL: env.url, basePath: '/', plugins: [agentAuthClient()] });
    const c = client as unknown as Record<string, any>;

    // The plugin's own path for discovery is its server's /agent-configuration; the protocol's is the well-known one.
    const config = await (await fetch(`${env.url}/.well-known/agent-configuration`)).json();
    expect(config).toMatchObject({ issuer: ISSUER, default_location: `${ISSUER}/capability/execute` });

    const listed = await c.capability.list();
    expect(listed.error).toBeNull();
    expect(listed.data.capabilities.map((x: { name: string }) => x.name)).toEqual(expect.arrayContaining(['createInvoice', 'getInvoice']));

    const host = await createHostSigner(hostKeys.privateJwk);
    const agentKeys = await generateAgentKeyPair();
    const reg = await registration(host, agentKeys, { name: 'protocol-agent', capabilities: ['getInvoice'] });
    const registered = await c.agent.register(reg.body, { headers: { authorization: `Bearer ${reg.token}` } });
    expect(registered.error).toBeNull();
    const agentId = registered.data.agent_id as string;
    expect(agentId).toMatch(/^agt_/);

    const signer = await createAgentSigner(agentKeys.privateJwk, agentId, { profile: 'agent-auth-v1', issuer: ISSUER });
    const executed = await c.capability.execute(
      { capability: 'getInvoice', arguments: { id: 'inv-1' } },
      { headers: { authorization: `Bearer ${await signer.sign('getInvoice')}` } },
    );
    expect(executed.error).toBeNull();
    expect(executed.data).toMatchObject({ data: { method: 'GET', url: '/invoices/inv-1' } });

    const refused = await c.capability.execute(
      { capability: 'createInvoice', arguments: { amount: 5 } },
      { headers: { authorization: `Bearer ${await signer.sign('createInvoice')}` } },
    );
    expect(refused.error).toMatchObject({ status: 403, error: 'capability_not_granted' });

    // Revoked by its host: its own key hears agent_revoked; a token with its id and another key, agent_not_found.
    const revoked = await c.agent.revoke({ agent_id: agentId }, { headers: { authorization: `Bearer ${await host.sign(ISSUER)}` } });
    expect(revoked.error).toBeNull();
    const again = await c.capability.execute(
      { capability: 'getInvoice', arguments: { id: 'inv-1' } },
      { headers: { authorization: `Bearer ${await signer.sign('getInvoice')}` } },
    );
    expect(again.error).toMatchObject({ status: 403, error: 'agent_revoked' });
    const impostor = await createAgentSigner((await generateAgentKeyPair()).privateJwk, agentId, { profile: 'agent-auth-v1', issuer: ISSUER });
    const guessed = await c.capability.execute(
      { capability: 'getInvoice', arguments: { id: 'inv-1' } },
      { headers: { authorization: `Bearer ${await impostor.sign('getInvoice')}` } },
    );
    expect(guessed.error).toMatchObject({ status: 401, error: 'agent_not_found' });
  });
});

describe('agents-chain register against the reference server', () => {
  let ref: ReferenceServer;
  let dir: string;
  beforeAll(async () => {
    requireBuild();
    dir = await mkdtemp(join(tmpdir(), 'agents-chain-register-ref-'));
    ref = await startReference({ capabilities: [{ name: 'getInvoice', description: 'Read one invoice' }], agents: [], allowDynamicHostRegistration: true });
  });
  afterAll(async () => {
    await ref?.close();
  });

  it('a self-registering host registers an agent there; the agent’s agent-auth-v1 token passes its JWT checks', async () => {
    const hostKeys = await generateAgentKeyPair();
    const agentKeys = await generateAgentKeyPair();
    const hostFile = join(dir, 'host.jwk.json');
    const agentFile = join(dir, 'agent.jwk.json');
    await writeFile(hostFile, JSON.stringify(hostKeys.privateJwk));
    await writeFile(agentFile, JSON.stringify(agentKeys.privateJwk));
    const reg = await runCli([
      'register',
      '--self-registered',
      '--host-key',
      hostFile,
      '--agent-key',
      agentFile,
      '--url',
      ref.origin,
      '--name',
      'cli-bot',
      '--capability',
      'getInvoice',
    ]);
    expect(reg.stderr).toBe('');
    expect(reg.code).toBe(0);
    const answer = JSON.parse(reg.stdout) as { agent_id: string; status: string };
    expect(answer.agent_id).toEqual(expect.any(String));
    const stored = ref.db.agent!.find((a) => a.id === answer.agent_id);
    expect(JSON.parse(String(stored?.publicKey))).toMatchObject({ x: agentKeys.publicJwk.x });
    const signer = await createAgentSigner(agentKeys.privateJwk, answer.agent_id, { profile: 'agent-auth-v1', issuer: ref.issuer });
    const r = await fetch(`${ref.issuer}/capability/execute`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await signer.sign('getInvoice')}`, 'content-type': 'application/json' },
      body: JSON.stringify({ capability: 'getInvoice', arguments: { id: 'inv-1' } }),
    });
    // The reference verified the token (sub, aud, kid, capabilities, signature) and stops at its own rule that an
    // autonomous agent needs an owning user, which only its server-side options can resolve.
    expect({ status: r.status, json: await r.json() }).toMatchObject({ status: 401, json: { error: 'autonomous_owner_required' } });
  });
});

describe('an unknown constraint operator, on both sides', () => {
  it('the reference refuses the call that meets it; the sidecar refuses the grant before it exists: both 400 unknown_constraint_operator', async () => {
    const agentKeys = await generateAgentKeyPair();
    const ref = await startReference({
      capabilities: [{ name: 'createInvoice', description: 'Create an invoice' }],
      agents: [{ id: 'agent-1', name: 'bot', publicJwk: agentKeys.publicJwk, grants: [{ capability: 'createInvoice', constraints: { amount: { lte: 5 } } }] }],
    });
    const hostKeys = await generateAgentKeyPair();
    const env = await startTestSidecar({
      policy: registrationPolicy(hostKeys).replace('description: Billing API }', 'description: Billing API, tokenProfile: agent-auth-v1 }'),
    });
    try {
      const signer = await createAgentSigner(agentKeys.privateJwk, 'agent-1', { profile: 'agent-auth-v1', issuer: ref.issuer });
      const atReference = await fetch(`${ref.issuer}/capability/execute`, {
        method: 'POST',
        headers: { authorization: `Bearer ${await signer.sign('createInvoice')}`, 'content-type': 'application/json' },
        body: JSON.stringify({ capability: 'createInvoice', arguments: { amount: 1 } }),
      });
      expect({ status: atReference.status, json: await atReference.json() }).toMatchObject({
        status: 400,
        json: { error: 'unknown_constraint_operator', operators: ['lte'] },
      });
      expect(ref.executed).toEqual([]);

      const host = await createHostSigner(hostKeys.privateJwk);
      const reg = await registration(host, agentKeys, { name: 'bot', capabilities: [{ name: 'createInvoice', constraints: { amount: { lte: 5 } } }] });
      const atSidecar = await fetch(`${env.url}/agent/register`, {
        method: 'POST',
        headers: { authorization: `Bearer ${reg.token}`, 'content-type': 'application/json' },
        body: JSON.stringify(reg.body),
      });
      expect({ status: atSidecar.status, json: await atSidecar.json() }).toMatchObject({
        status: 400,
        json: { error: 'unknown_constraint_operator', operators: ['lte'] },
      });
    } finally {
      await env.close();
      await ref.close();
    }
  });
});
