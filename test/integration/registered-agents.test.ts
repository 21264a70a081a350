import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentProof, createAgentSigner, createHostSigner, type AgentSigner } from '../../src/identity/client.js';
import { generateAgentKeyPair, type AgentKeyPair } from '../../src/identity/keys.js';
import { ADMIN_TOKEN, startInbox, type Inbox } from '../support/approvals.js';
import { startTestSidecar, testAgent, type TestSidecar } from '../support/fixture.js';
import { call } from '../support/http.js';
import { startRecorder, type Recorder } from '../support/recorder.js';

const ISSUER = 'https://sms.example.com';

/** request_permission on, one policy agent with a looser grant, one host whose agents may send to one number. */
function policy(webhookUrl: string, botX: string, host: AgentKeyPair): string {
  return `
version: 1
provider: { name: sms-service, issuer: ${ISSUER} }
constraintAware: true
accessRequests:
  ttl: 1m
  notifier: { webhook: { url: "${webhookUrl}", format: json, retries: 0 } }
capabilities:
  - { name: send_sms, description: Send an SMS message, method: POST, path: /sms }
  - { name: get_message, method: GET, path: "/messages/{id}" }
agents:
  - { id: policy-bot, name: policy-bot, publicKey: { kty: OKP, crv: Ed25519, x: "${botX}" } }
grants:
  - { agent: policy-bot, capability: send_sms, status: active, constraints: { to: { in: ["+1", "+2", "+3"] } } }
hosts:
  - id: sms-host
    name: SMS host
    publicKey: { kty: OKP, crv: Ed25519, x: "${host.publicJwk.x}" }
    defaultCapabilities:
      - capability: send_sms
        constraints: { to: { in: ["+1", "+2"] } }
`;
}

/**
 * A registered agent is first-class: its constraint context, request_permission, the refusals'
 * envelope and the approved call all read its own grants (the host's defaults as narrowed at
 * registration), never the policy's, and the approved call runs as it.
 */
describe('registered agents: constraint context and request_permission of their own', () => {
  let env: TestSidecar<Recorder>;
  let inbox: Inbox;
  let agent: AgentSigner;
  let agentId: string;

  beforeAll(async () => {
    inbox = await startInbox();
    const app = await startRecorder();
    app.handler = (r, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ sent: true, by: r.headers['x-agent-id'] }));
    };
    const policyBot = await testAgent('policy-bot');
    const hostKeys = await generateAgentKeyPair();
    env = await startTestSidecar({
      policy: policy(inbox.url, String(policyBot.keys.publicJwk.x), hostKeys),
      agents: { bot: policyBot, other: await testAgent('agent-other') },
      app,
      adminToken: ADMIN_TOKEN,
      logLevel: 'error',
    });
    const host = await createHostSigner(hostKeys.privateJwk);
    const keys = await generateAgentKeyPair();
    const token = await host.sign(ISSUER, { agentPublicKey: keys.publicJwk });
    const reg = await call(`${env.url}/agent/register`, {
      method: 'POST',
      token,
      body: {
        name: 'sms-agent',
        capabilities: [{ name: 'send_sms', constraints: { to: { in: ['+1'] } } }],
        agent_proof: await createAgentProof(keys.privateJwk, { hostToken: token, audience: ISSUER }),
      },
    });
    expect(reg.status).toBe(201);
    agentId = reg.json.agent_id;
    agent = await createAgentSigner(keys.privateJwk, agentId);
  });
  afterAll(async () => {
    await env.close();
    await env.app.close();
    await inbox.close();
  });

  it('its constraint context lists its own grant, narrowed at registration', async () => {
    const ctx = await call(`${env.url}/agent/constraints`, { token: await agent.sign('constraint_context'), headers: { accept: 'application/json' } });
    expect(ctx.status).toBe(200);
    expect(ctx.json).toMatchObject({ agentId, requestPermission: true, capabilities: [{ capability: 'send_sms', constraints: { to: { in: ['+1'] } } }] });
    const text = await call(`${env.url}/agent/constraints`, { token: await agent.sign('constraint_context') });
    expect(text.text).toContain('to: must be one of ["+1"]');
    expect(text.text).not.toContain('+3');
  });

  it('its violation shows its own limits; within them request_permission says approval_not_needed', async () => {
    const refused = await call(`${env.url}/sms`, { method: 'POST', token: await agent.sign('send_sms'), body: { to: '+2' } });
    expect(refused).toMatchObject({ status: 403, json: { permission: 'constraint_violated', activeConstraints: { to: { in: ['+1'] } } } });
    const within = await call(`${env.url}/agent/request-permission`, {
      method: 'POST',
      token: await agent.sign('request_permission'),
      body: { capability: 'send_sms', args: { to: '+1' }, reason: 'the user asked' },
    });
    expect(within).toMatchObject({ status: 409, json: { error: 'approval_not_needed' } });
    // A capability it holds no grant for: refused before any path or argument is looked at.
    const ungranted = await call(`${env.url}/agent/request-permission`, {
      method: 'POST',
      token: await agent.sign('request_permission'),
      body: { capability: 'get_message', path: '/messages/m-1', reason: 'the user asked' },
    });
    expect(ungranted).toMatchObject({ status: 403, json: { error: 'capability_denied' } });
  });

  it('asks a human for a call outside its own limits (+3 is within the policy agent grant, not its own); the approved call runs as it', async () => {
    const asked = await call(`${env.url}/agent/request-permission`, {
      method: 'POST',
      token: await agent.sign('request_permission'),
      headers: { prefer: 'respond-async' },
      body: { capability: 'send_sms', args: { to: '+3' }, reason: 'the user asked for this number' },
    });
    expect(asked).toMatchObject({ status: 202, json: { status: 'pending', requestId: expect.any(String) } });
    const note = await inbox.nextRequest();
    expect(note).toMatchObject({ requestId: asked.json.requestId, agentId, capability: 'send_sms' });
    const approve = await call(env.adminUrl, {
      method: 'POST',
      path: `/approvals/${note.requestId}/approve`,
      token: ADMIN_TOKEN,
      body: { code: note.code },
    });
    expect(approve.status).toBe(200);
    const status = await call(`${env.url}${asked.json.statusUrl}`, { token: await agent.sign('request_permission') });
    expect(status).toMatchObject({ status: 200, json: { permission: 'approved', result: { sent: true, by: agentId } } });
    expect(env.app.requests.at(-1)!.headers['x-agent-id']).toBe(agentId);
  });
});
