import { mkdtemp, readFile, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { ROOT, requireBuild, runCli, startCli, startupFailure } from '../support/cli.js';
import { startRecorder, type Recorder } from '../support/recorder.js';
import { ADMIN_TOKEN, startApprovalEnv } from '../support/approvals.js';
import { selfSignedCert } from '../support/kubernetes.js';

describe('agents-chain CLI', () => {
  let dir: string;
  beforeAll(async () => {
    requireBuild();
    dir = await mkdtemp(join(tmpdir(), 'agents-chain-cli-'));
  });

  const COMMANDS = ['serve', 'keygen', 'register', 'inject', 'webhook', 'capture', 'token', 'policy', 'context', 'approvals', 'audit'];

  it('prints help for every command', async () => {
    const all = [
      ['--help'],
      ['-h'],
      ['help'],
      ['policy', 'check', '--help'],
      ...COMMANDS.flatMap((c) => [
        [c, '--help'],
        [c, '-h'],
        ['help', c],
      ]),
    ];
    for (const [args, r] of await Promise.all(all.map(async (args) => [args, await runCli(args)] as const))) {
      expect(r.code, args.join(' ')).toBe(0);
      expect(r.stdout, args.join(' ')).toMatch(/^Usage: agents-chain/m);
      expect(r.stderr, args.join(' ')).toBe('');
    }
    // Each command's own usage, not the list of commands.
    expect((await runCli(['serve', '-h'])).stdout).toMatch(/^Usage: agents-chain serve --policy FILE --upstream URL/);
    expect((await runCli(['help', 'keygen'])).stdout).toMatch(/^Usage: agents-chain keygen --out DIR/);
    const top = await runCli(['--help']);
    for (const c of COMMANDS) expect(top.stdout).toMatch(new RegExp(`^  ${c} `, 'm'));
    expect(top.stdout).toMatch(/agents-chain --version/);
    // No command: the same list on stderr, exit 2.
    const none = await runCli([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/^Usage: agents-chain <command>/m);
    const unknown = await runCli(['help', 'serv']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^agents-chain: unknown command "serv"/);
  }, 60_000); // 37 runs of the CLI

  it('--version (and -v, version) prints the package.json version', async () => {
    const { version } = JSON.parse(await readFile(`${ROOT}package.json`, 'utf8')) as { version: string };
    for (const flag of ['--version', '-v', 'version']) {
      const r = await runCli([flag]);
      expect({ code: r.code, stdout: r.stdout, stderr: r.stderr }, flag).toEqual({ code: 0, stdout: `agents-chain ${version}\n`, stderr: '' });
    }
  });

  it('policy check: ok for the example, exit 1 with file:line:column and key for errors', async () => {
    const ok = await runCli(['policy', 'check', `${ROOT}config/examples/billing.yaml`]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/ok \(4 capabilities, 2 agents, 4 grants, 1 host\)/);

    const bad = join(dir, 'bad.yaml');
    await writeFile(
      bad,
      [
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
      ].join('\n'),
    );
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

  it('keygen prints a policy entry that, pasted under agents: (or hosts: for --host), passes policy check', async () => {
    const keys = join(dir, 'pasted');
    const policy = await readFile(`${ROOT}config/examples/billing.yaml`, 'utf8');
    const entry = (stderr: string, list: string): string => {
      const lines = stderr.split('\n');
      const at = lines.indexOf(`policy entry (paste under ${list}:):`);
      expect(at, stderr).toBeGreaterThan(-1);
      return `${lines
        .slice(at + 1)
        .filter((l) => l.startsWith('  '))
        .join('\n')}\n`;
    };
    const paste = (text: string, list: string, block: string): string => {
      expect(text).toContain(`\n${list}:\n`);
      return text.replace(`\n${list}:\n`, `\n${list}:\n${block}`);
    };

    const agent = await runCli(['keygen', '--out', keys, '--name', 'new-bot']);
    expect(agent.code).toBe(0);
    expect(agent.stderr).toContain(`wrote ${join(keys, 'new-bot.private.jwk.json')} and ${join(keys, 'new-bot.public.jwk.json')}\n`);
    expect(agent.stderr).not.toMatch(/hosts:|defaultCapabilities|maxAgents/);
    const pub = JSON.parse(await readFile(join(keys, 'new-bot.public.jwk.json'), 'utf8')) as { x: string };
    const agentEntry = entry(agent.stderr, 'agents');
    expect(agentEntry).toBe(`  - id: new-bot\n    name: new-bot\n    publicKey: { kty: OKP, crv: Ed25519, x: "${pub.x}" }\n`);
    const withAgent = join(dir, 'with-agent.yaml');
    await writeFile(withAgent, paste(policy, 'agents', agentEntry));
    const checked = await runCli(['policy', 'check', withAgent]);
    expect({ code: checked.code, stderr: checked.stderr }).toEqual({ code: 0, stderr: '' });
    expect(checked.stdout).toMatch(/ok \(4 capabilities, 3 agents, 4 grants, 1 host\)/);

    const host = await runCli(['keygen', '--host', '--out', keys, '--name', 'ci-host']);
    expect(host.code).toBe(0);
    expect(host.stderr).toContain('wrote ');
    const hostEntry = entry(host.stderr, 'hosts');
    expect(hostEntry).toMatch(/^ {4}defaultCapabilities: \[\]$/m);
    const withHost = join(dir, 'with-host.yaml');
    await writeFile(withHost, paste(policy, 'hosts', hostEntry));
    const hostChecked = await runCli(['policy', 'check', withHost]);
    expect({ code: hostChecked.code, stderr: hostChecked.stderr }).toEqual({ code: 0, stderr: '' });
    expect(hostChecked.stdout).toMatch(/ok \(4 capabilities, 2 agents, 4 grants, 2 hosts\)/);
  });

  it('usage errors exit 2 and name the flag', async () => {
    const r = await runCli(['token', '--agent', 'x']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--key is required/);
  });

  describe('serve', () => {
    let app: Recorder;
    beforeAll(async () => {
      app = await startRecorder();
    });
    afterAll(async () => {
      await app.close();
    });

    it('refuses to start on an invalid policy, naming the problem', async () => {
      const bad = join(dir, 'invalid.yaml');
      await writeFile(
        bad,
        'version: 1\nprovider: { name: x, issuer: https://x.example.com }\ncapabilities: []\nagents:\n  - { id: a, name: a, publicKey: { kty: OKP, crv: Ed25519, x: short } }\n',
      );
      const r = await runCli(['serve', '--policy', bad, '--upstream', app.url, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0']);
      expect(r.code).toBe(1);
      const f = startupFailure(r);
      expect(f.error).toContain(`${bad}:5:63: agents[0].publicKey.x: must match pattern`);
      expect(f.error).toMatch(/refusing to start/);
      expect(f.issues).toEqual([expect.objectContaining({ file: bad, line: 5, column: 63, key: 'agents[0].publicKey.x' })]);
    });

    describe('every startup failure is one JSON log line on stdout, no stack, exit non-zero', () => {
      let held: Server;
      let busy: string;
      beforeAll(async () => {
        held = createServer();
        await new Promise<void>((r) => held.listen(0, '127.0.0.1', r));
        busy = `127.0.0.1:${(held.address() as AddressInfo).port}`;
      });
      afterAll(async () => {
        await new Promise((r) => held.close(r));
      });
      const serve = (...more: string[]) => ['serve', '--policy', `${ROOT}config/examples/billing.yaml`, '--upstream', app.url, '--no-watch', ...more];

      it.each([
        [
          'a busy --listen port',
          () => serve('--listen', busy, '--admin', '127.0.0.1:0'),
          1,
          () => `listen ${busy} (--listen): address already in use (EADDRINUSE)`,
          'EADDRINUSE',
        ],
        // --listen is already bound when --admin fails: the process must still exit.
        [
          'a busy --admin port',
          () => serve('--listen', '127.0.0.1:0', '--admin', busy),
          1,
          () => `listen ${busy} (--admin): address already in use (EADDRINUSE)`,
          'EADDRINUSE',
        ],
        [
          'an unknown flag',
          () => serve('--listn', '127.0.0.1:0'),
          2,
          () => "Unknown option '--listn' (agents-chain serve --help lists the options)",
          undefined,
        ],
        [
          'a bad flag value',
          () => serve('--max-headers', 'many'),
          2,
          () => '--max-headers must be a positive whole number (agents-chain serve --help lists the options)',
          undefined,
        ],
        ['no --policy', () => ['serve'], 2, () => '--policy is required (agents-chain serve --help lists the options)', undefined],
        [
          'an --upstream that is no origin',
          () => serve('--upstream', 'notaurl'),
          2,
          () =>
            '--upstream must be the app\'s http:// or https:// origin, e.g. http://127.0.0.1:8081, got "notaurl" (agents-chain serve --help lists the options)',
          undefined,
        ],
        [
          'a --listen that is no HOST:PORT',
          () => serve('--listen', '28080x'),
          2,
          () =>
            '--listen must be HOST:PORT (e.g. 127.0.0.1:8080, [::]:8080, or :8080 for every address), got "28080x" (agents-chain serve --help lists the options)',
          undefined,
        ],
        [
          'a missing key file',
          () => serve('--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', '--audit-key-file', '/nonexistent/audit.key', '--audit-export', 'stdout'),
          1,
          () => 'open /nonexistent/audit.key (--audit-key-file): no such file or directory (ENOENT)',
          'ENOENT',
        ],
      ])('%s', async (_what, args, exitCode, error, code) => {
        const r = await runCli(args(), { AGENTS_CHAIN_POLICY: '', AGENTS_CHAIN_ADMIN_TOKEN: '' });
        expect(r.code).toBe(exitCode);
        const f = startupFailure(r);
        expect(f).toMatchObject({ level: 'error', msg: 'startup failed', command: 'serve', error: error(), exitCode });
        expect(f.code).toBe(code);
        expect(Number.isNaN(Date.parse(f.time))).toBe(false);
      });

      it('webhook: a busy port, a missing certificate', async () => {
        const r = await runCli(['webhook', '--tls-cert', '/nonexistent/tls.crt', '--tls-key', '/nonexistent/tls.key', '--listen', busy]);
        expect(r.code).toBe(1);
        expect(startupFailure(r)).toMatchObject({
          command: 'webhook',
          error: 'open /nonexistent/tls.crt (--tls-cert): no such file or directory (ENOENT)',
          code: 'ENOENT',
        });
        const cert = join(dir, 'tls.crt');
        const key = join(dir, 'tls.key');
        selfSignedCert(cert, key);
        const b = await runCli(['webhook', '--tls-cert', cert, '--tls-key', key, '--listen', busy]);
        expect(b.code).toBe(1);
        expect(startupFailure(b)).toMatchObject({
          command: 'webhook',
          error: `listen ${busy} (--listen): address already in use (EADDRINUSE)`,
          code: 'EADDRINUSE',
        });
      });
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
        const t = await runCli([
          'token',
          '--key',
          `${ROOT}config/examples/keys/billing-bot.private.jwk.json`,
          '--agent',
          'agent-billing-bot',
          '--capability',
          'getInvoice',
        ]);
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
      // grants prints its times in RFC 3339, as list and approve do.
      const grants = await runCli(['approvals', 'grants'], cliEnv);
      expect(grants.code).toBe(0);
      const [grant] = (JSON.parse(grants.stdout) as { grants: Record<string, unknown>[] }).grants;
      const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
      expect(grant).toMatchObject({ requestId, createdAt: expect.stringMatching(RFC3339), expiresAt: expect.stringMatching(RFC3339) });
      expect(Date.parse(grant!.expiresAt as string)).toBeGreaterThan(Date.parse(grant!.createdAt as string));
      expect(JSON.parse(list.stdout).requests[0].createdAt).toMatch(RFC3339);
      const noToken = await runCli(['approvals', 'list'], { AGENTS_CHAIN_ADMIN_URL: env.sidecar.adminUrl, AGENTS_CHAIN_ADMIN_TOKEN: '' });
      expect(noToken.code).toBe(2);
    } finally {
      await env.close();
    }
  });
});
