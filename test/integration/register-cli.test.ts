import { mkdtemp, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateAgentKeyPair, type AgentKeyPair } from '../../src/identity/keys.js';
import { requireBuild, runCli } from '../support/cli.js';
import { startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { ISSUER, registrationPolicy } from '../support/registration.js';

/**
 * `agents-chain register` (and its status and revoke) against the real sidecar, which publishes
 * absolute endpoint URLs on its issuer (https://billing.example.com) while the CLI reaches it at
 * 127.0.0.1; and against a server that publishes paths, as older sidecars do.
 */
describe('agents-chain register, register status, register revoke', () => {
  let dir: string;
  let env: TestSidecar;
  let hostKeys: AgentKeyPair;
  let hostFile: string;

  beforeAll(async () => {
    requireBuild();
    dir = await mkdtemp(join(tmpdir(), 'agents-chain-register-'));
    hostKeys = await generateAgentKeyPair();
    hostFile = join(dir, 'host.private.jwk.json');
    await writeFile(hostFile, JSON.stringify(hostKeys.privateJwk));
    env = await startTestSidecar({
      policy: `${registrationPolicy(hostKeys)}dynamicHosts:\n  defaultCapabilities: [getInvoice]\n`,
      logLevel: 'error',
    });
  });
  afterAll(() => env.close());

  const agentFile = async (name: string) => {
    const keys = await generateAgentKeyPair();
    const file = join(dir, `${name}.private.jwk.json`);
    await writeFile(file, JSON.stringify(keys.privateJwk));
    return { keys, file };
  };

  it('registers with absolute discovery URLs, then prints the status and revokes with the host key file', async () => {
    const { keys, file } = await agentFile('cli-bot');
    const reg = await runCli(['register', '--host-key', hostFile, '--agent-key', file, '--url', env.url, '--name', 'cli-bot', '--capability', 'getInvoice']);
    expect(reg.stderr).toBe('');
    expect(reg.code).toBe(0);
    const agentId = `agt_${keys.thumbprint}`;
    expect(JSON.parse(reg.stdout)).toMatchObject({ agent_id: agentId, host_id: 'laptop-host', status: 'active' });

    const status = await runCli(['register', 'status', '--host-key', hostFile, '--url', env.url, '--agent-id', agentId]);
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ agent_id: agentId, status: 'active', agent_capability_grants: [{ capability: 'getInvoice' }] });

    const revoked = await runCli(['register', 'revoke', '--host-key', hostFile, '--url', `${env.url}/`, '--agent-id', agentId]);
    expect(revoked.code).toBe(0);
    expect(JSON.parse(revoked.stdout)).toMatchObject({ agent_id: agentId, status: 'revoked', revoked_at: expect.any(String) });
    const after = await runCli(['register', 'status', '--host-key', hostFile, '--url', env.url, '--agent-id', agentId]);
    expect(JSON.parse(after.stdout)).toMatchObject({ status: 'revoked' });

    // Another host's (or an unknown) agent: the sidecar's refusal on stderr, exit 1.
    const unknown = await runCli(['register', 'status', '--host-key', hostFile, '--url', env.url, '--agent-id', 'agt_nobody']);
    expect(unknown.code).toBe(1);
    expect(JSON.parse(unknown.stderr)).toMatchObject({ error: 'agent_not_found' });
    // --agent-id is required; usage errors exit 2 before any request.
    const usage = await runCli(['register', 'revoke', '--host-key', hostFile, '--url', env.url]);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/--agent-id is required/);
    expect((await runCli(['register', 'status', '--help'])).stdout).toMatch(/^Usage: agents-chain register/);
  }, 30_000);

  it('--self-registered sends the host key (dynamicHosts); without it an unlisted host is host_not_found', async () => {
    const selfKeys = await generateAgentKeyPair();
    const selfFile = join(dir, 'self-host.private.jwk.json');
    await writeFile(selfFile, JSON.stringify(selfKeys.privateJwk));
    const { file } = await agentFile('self-bot');
    const base = ['register', '--host-key', selfFile, '--agent-key', file, '--url', env.url, '--name', 'self-bot'];
    const unlisted = await runCli(base);
    expect(unlisted.code).toBe(1);
    expect(JSON.parse(unlisted.stderr)).toMatchObject({ error: 'host_not_found' });
    const self = await runCli([...base, '--self-registered', '--host-name', 'Contractor laptop']);
    expect(self.code).toBe(0);
    const agent = JSON.parse(self.stdout);
    expect(agent).toMatchObject({ host_id: `hst_${selfKeys.thumbprint}`, agent_capability_grants: [{ capability: 'getInvoice' }] });
    const status = await runCli(['register', 'status', '--host-key', selfFile, '--url', env.url, '--agent-id', agent.agent_id, '--self-registered']);
    expect(JSON.parse(status.stdout)).toMatchObject({ agent_id: agent.agent_id, status: 'active' });
    expect((await runCli([...base, '--host-name', 'x'])).stderr).toMatch(/--host-name goes with --self-registered/);
  }, 30_000);

  it('follows a discovery document that publishes paths, or absolute URLs on another origin, as published', async () => {
    const seen: string[] = [];
    let published: Record<string, string> = {};
    const fake: Server = createServer((req: IncomingMessage, res) => {
      seen.push(`${req.method} ${req.url}`);
      if (req.url === '/.well-known/agent-configuration') {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer: ISSUER, endpoints: published }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ agent_id: 'agt_x', status: 'active' }));
    });
    await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
    try {
      published = { status: '/agent/status', revoke: '/agent/revoke' };
      expect((await runCli(['register', 'status', '--host-key', hostFile, '--url', url, '--agent-id', 'agt_x'])).code).toBe(0);
      expect(seen.at(-1)).toBe('GET /agent/status?agent_id=agt_x');
      // An absolute URL on another origin (not the issuer's) is called as published: here, this same server under a path.
      published = { revoke: `${url}/elsewhere/revoke` };
      expect((await runCli(['register', 'revoke', '--host-key', hostFile, '--url', url, '--agent-id', 'agt_x'])).code).toBe(0);
      expect(seen.at(-1)).toBe('POST /elsewhere/revoke');
      published = {};
      const none = await runCli(['register', 'status', '--host-key', hostFile, '--url', url, '--agent-id', 'agt_x']);
      expect(none.code).toBe(1);
      expect(none.stderr).toMatch(/no status endpoint/);
    } finally {
      await new Promise((r) => fake.close(r));
    }
  }, 30_000);
});
