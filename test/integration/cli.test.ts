import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { ROOT, requireBuild, runCli, startCli } from '../support/cli.js';
import { startRecorder, type Recorder } from '../support/recorder.js';
import { ADMIN_TOKEN, startApprovalEnv } from '../support/approvals.js';

describe('agents-chain CLI', () => {
  let dir: string;
  beforeAll(async () => {
    requireBuild();
    dir = await mkdtemp(join(tmpdir(), 'agents-chain-cli-'));
  });

  it('prints help for every command', async () => {
    for (const args of [['--help'], ['serve', '--help'], ['keygen', '--help'], ['token', '--help'], ['policy', '--help'], ['policy', 'check', '--help']]) {
      const r = await runCli(args);
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout).toMatch(/Usage: agents-chain/);
    }
  });

  it('policy check: ok for the example, exit 1 with file:line:column and key for errors', async () => {
    const ok = await runCli(['policy', 'check', `${ROOT}config/examples/billing.yaml`]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/ok \(4 capabilities, 2 agents, 4 grants, 1 host\)/);

    const bad = join(dir, 'bad.yaml');
    await writeFile(bad, [
      'version: 1',
      'provider: { name: x, issuer: https://x.example.com }',
      'capabilities:',
      '  - { name: a, method: GET, path: "/items/{id}" }',
      '  - { name: b, method: GET, path: /items/export }',
      'grants:',
      '  - agent: ghost',
      '    capability: a',
      '    status: active',
      '',
    ].join('\n'));
    const r = await runCli(['policy', 'check', bad]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${bad}:5:35: capabilities[1].path: route GET /items/export overlaps capabilities[0] (GET /items/{id})`);
    expect(r.stderr).toContain(`${bad}:7:12: grants[0].agent: unknown agent "ghost"`);
  });

  it('keygen writes a key pair and prints its thumbprint; token mints a token for it', async () => {
    const keys = join(dir, 'keys');
    const k = await runCli(['keygen', '--out', keys, '--name', 'bot']);
    expect(k.code).toBe(0);
    const thumbprint = k.stdout.trim();
    expect(thumbprint).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const priv = JSON.parse(await readFile(join(keys, 'bot.private.jwk.json'), 'utf8'));
    const pub = JSON.parse(await readFile(join(keys, 'bot.public.jwk.json'), 'utf8'));
    expect(priv).toMatchObject({ kty: 'OKP', crv: 'Ed25519', x: pub.x });
    expect(pub.d).toBeUndefined();
    expect((await stat(join(keys, 'bot.private.jwk.json'))).mode & 0o777).toBe(0o600);

    const t = await runCli(['token', '--key', join(keys, 'bot.private.jwk.json'), '--agent', 'bot', '--capability', 'getInvoice', '--ttl', '30']);
    expect(t.code).toBe(0);
    const [h, p] = t.stdout.trim().split('.');
    expect(JSON.parse(Buffer.from(h!, 'base64url').toString())).toEqual({ alg: 'EdDSA', typ: 'agent+jwt' });
    const claims = JSON.parse(Buffer.from(p!, 'base64url').toString());
    expect(claims).toMatchObject({ sub: 'bot', iss: thumbprint, aud: 'getInvoice' });
    expect(claims.exp - claims.iat).toBe(30);
  });

  it('usage errors exit 2 and name the flag', async () => {
    const r = await runCli(['token', '--agent', 'x']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--key is required/);
  });

  describe('serve', () => {
    let app: Recorder;
    beforeAll(async () => { app = await startRecorder(); });
    afterAll(async () => { await app.close(); });

    it('refuses to start on an invalid policy, naming the problem', async () => {
      const bad = join(dir, 'invalid.yaml');
      await writeFile(bad, 'version: 1\nprovider: { name: x, issuer: https://x.example.com }\ncapabilities: []\nagents:\n  - { id: a, name: a, publicKey: { kty: OKP, crv: Ed25519, x: short } }\n');
      const r = await runCli(['serve', '--policy', bad, '--upstream', app.url, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0']);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`${bad}:5:63: agents[0].publicKey.x: must match pattern`);
      expect(r.stderr).toMatch(/refusing to start/);
    });

    it('serves the example policy from env settings, forwards a signed call, stops on SIGTERM', async () => {
      const { child, line } = await startCli(['serve'], /sidecar listening/, {
        AGENTS_CHAIN_POLICY: `${ROOT}config/examples/billing.yaml`,
        AGENTS_CHAIN_UPSTREAM: app.url,
        AGENTS_CHAIN_LISTEN: '127.0.0.1:0',
        AGENTS_CHAIN_ADMIN: '127.0.0.1:0',
      });
      try {
        const { listen, admin } = JSON.parse(line);
        const t = await runCli(['token', '--key', `${ROOT}config/examples/keys/billing-bot.private.jwk.json`, '--agent', 'agent-billing-bot', '--capability', 'getInvoice']);
        const r = await request(`${listen}/invoices/inv-9`, { headers: { authorization: `Bearer ${t.stdout.trim()}` } });
        expect(r.statusCode).toBe(200);
        await r.body.text();
        expect(app.requests.at(-1)).toMatchObject({ url: '/invoices/inv-9', headers: { 'x-agent-id': 'agent-billing-bot' } });
        const ready = await request(`${admin}/readyz`);
        expect(ready.statusCode).toBe(200);
        await ready.body.text();
      } finally {
        child.kill('SIGTERM');
        const [code] = await once(child, 'exit');
        expect(code).toBe(0);
      }
    });
  });

  it('context prints the golden constraint context for an agent', async () => {
    const r = await runCli(['context', '--policy', `${ROOT}config/examples/sms.yaml`, '--agent', 'agent-sms-bot']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(await readFile(`${ROOT}test/golden/constraint-context.sms-bot.txt`, 'utf8'));
    const j = await runCli(['context', '--policy', `${ROOT}config/examples/sms.yaml`, '--agent', 'agent-sms-bot', '--json']);
    expect(JSON.parse(j.stdout).capabilities.map((c: { capability: string }) => c.capability)).toEqual(['get_message', 'send_sms']);
  });

  it('approvals list / approve talk to the admin listener with the admin token', async () => {
    const env = await startApprovalEnv();
    try {
      const asked = await request(`${env.sidecar.url}/agent/request-permission`, {
        method: 'POST',
        headers: { authorization: `Bearer ${await env.bot.signer.sign('request_permission')}`, 'content-type': 'application/json', prefer: 'respond-async' },
        body: JSON.stringify({ capability: 'send_sms', args: { to: '+1', body: 'x' }, reason: 'cli test' }),
      });
      const { requestId } = (await asked.body.json()) as { requestId: string };
      const note = await env.inbox.nextRequest();
      const cliEnv = { AGENTS_CHAIN_ADMIN_URL: env.sidecar.adminUrl, AGENTS_CHAIN_ADMIN_TOKEN: ADMIN_TOKEN };
      const list = await runCli(['approvals', 'list'], cliEnv);
      expect(list.code).toBe(0);
      expect(JSON.parse(list.stdout).requests[0]).toMatchObject({ id: requestId, state: 'pending' });
      const wrong = await runCli(['approvals', 'approve', requestId, '--code', 'NOPE'], cliEnv);
      expect(wrong.code).toBe(1);
      const ok = await runCli(['approvals', 'approve', requestId, '--code', note.code, '--scope', 'value'], cliEnv);
      expect(ok.code).toBe(0);
      expect(JSON.parse(ok.stdout)).toMatchObject({ id: requestId, state: 'approved', scope: 'value' });
      const noToken = await runCli(['approvals', 'list'], { AGENTS_CHAIN_ADMIN_URL: env.sidecar.adminUrl, AGENTS_CHAIN_ADMIN_TOKEN: '' });
      expect(noToken.code).toBe(2);
    } finally {
      await env.close();
    }
  });
});
