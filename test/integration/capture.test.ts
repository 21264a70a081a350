/**
 * iptables capture mode for real: two network namespaces joined by a veth pair, a "pod" and a
 * "client". In the pod: an app bound to 0.0.0.0:8080 (and [::]:8080), the real sidecar process
 * (`serve`, listen [::]:17480, admin [::]:17490, as injected, upstream 127.0.0.1:8080) and the rules
 * `agents-chain capture` installs there with the real iptables. From the client, every call to the
 * pod's IP goes where a pod on the cluster network would send it.
 *
 * Needs root (network namespaces, iptables). Skipped with a message where namespaces cannot be
 * created, unless AGENTS_CHAIN_REQUIRE_NETNS=1 (CI), which turns that into a failure.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentSigner, type AgentSigner } from '../../src/identity/client.js';
import { generateAgentKeyPair } from '../../src/identity/keys.js';
import { CLI, requireBuild, runCli } from '../support/cli.js';
import { until } from '../support/until.js';
import { PROBE_REUSE_MS } from '../../src/kubernetes/app-probes.js';

const RUN = `${process.pid.toString(36)}${randomBytes(2).toString('hex')}`;
const POD = `ac-pod-${RUN}`;
const CLIENT = `ac-cli-${RUN}`;
// Interface names: at most 15 characters.
const VETH_POD = `acp${RUN}`.slice(0, 15);
const VETH_CLIENT = `acc${RUN}`.slice(0, 15);
const POD_IP = '10.233.7.2';
const CLIENT_IP = '10.233.7.1';
const POD_IP6 = 'fd00:ac:7::2';
const CLIENT_IP6 = 'fd00:ac:7::1';
const APP_PORT = 8080;
const EXCLUDED_PORT = 9100;
const SIDECAR_PORT = 17480;
const ADMIN_PORT = 17490;
const CAPTURE_ARGS = ['capture', '--redirect-to', String(SIDECAR_PORT), '--exclude-ports', `${SIDECAR_PORT},${ADMIN_PORT},${EXCLUDED_PORT}`];

/** Whether this machine lets us create a network namespace (root, a kernel with netns, iproute2). */
function netnsProblem(): string | undefined {
  const probe = `ac-probe-${RUN}`;
  try {
    execFileSync('ip', ['netns', 'add', probe], { stdio: 'pipe' });
    execFileSync('ip', ['netns', 'del', probe], { stdio: 'pipe' });
    return undefined;
  } catch (err) {
    const why = (err as { stderr?: Buffer }).stderr?.toString().trim() || (err as Error).message.split('\n')[0];
    return `cannot create a network namespace ("ip netns add" said: ${why}): needs root and iproute2`;
  }
}
const problem = netnsProblem();
if (problem && process.env.AGENTS_CHAIN_REQUIRE_NETNS === '1') throw new Error(`AGENTS_CHAIN_REQUIRE_NETNS=1 but ${problem}`);
if (problem) process.stderr.write(`capture test skipped: ${problem} (set AGENTS_CHAIN_REQUIRE_NETNS=1 to make this a failure)\n`);

const ip = (...args: string[]): string => execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const inNs = (ns: string, cmd: string, ...args: string[]): string =>
  execFileSync('ip', ['netns', 'exec', ns, cmd, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/**
 * The app: records every request (which server, path, the peer it saw, the probe header) and
 * answers GET /seen on the excluded port with that record, asked from inside the pod over loopback.
 * /toggle-ready flips /ready between 200 and 500.
 */
const APP = `
import { createServer } from 'node:http';
let ready = 200;
const seen = [];
const serve = (name, host, port, ipv6Only) => createServer((req, res) => {
  if (name === 'excluded' && req.url === '/seen') {
    res.writeHead(200, { 'content-type': 'application/json' });
    return res.end(JSON.stringify(seen));
  }
  seen.push({ server: name, method: req.method, url: req.url, remote: req.socket.remoteAddress, probe: req.headers['x-probe'] ?? null });
  if (req.url === '/toggle-ready') ready = ready === 200 ? 500 : 200;
  res.writeHead(req.url === '/ready' ? ready : 200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ from: name, url: req.url }));
}).listen({ host, port, ipv6Only }, () => console.log(JSON.stringify({ listening: name, host, port })));
serve('app', '0.0.0.0', ${APP_PORT}, false);
serve('app6', '::', ${APP_PORT}, true);
serve('excluded', '0.0.0.0', ${EXCLUDED_PORT}, false);
`;

/** One HTTP call from the client namespace: prints {status, body} or {error}. */
const CLIENT_SCRIPT = `
import { request } from 'node:http';
const { host, port, path, headers } = JSON.parse(process.argv[2]);
const req = request({ host, port, path, headers, timeout: 5000 }, (res) => {
  let body = '';
  res.on('data', (d) => (body += d));
  res.on('end', () => console.log(JSON.stringify({ status: res.statusCode, body })));
});
req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
req.on('error', (err) => console.log(JSON.stringify({ error: err.code ?? err.message })));
req.end();
`;

interface Answer {
  status?: number;
  body?: string;
  error?: string;
}

describe.skipIf(problem !== undefined)('iptables capture in a real network namespace', () => {
  let dir: string;
  let app: ChildProcess;
  let sidecar: ChildProcess | undefined;
  let sidecarOut = '';
  let signer: AgentSigner;
  const children: ChildProcess[] = [];

  const call = (host: string, port: number, path: string, headers: Record<string, string> = {}): Answer => {
    const out = inNs(CLIENT, process.execPath, join(dir, 'client.mjs'), JSON.stringify({ host, port, path, headers }));
    return JSON.parse(out.trim()) as Answer;
  };
  const withToken = async (): Promise<Record<string, string>> => ({ authorization: `Bearer ${await signer.sign('getInvoice')}` });
  /** Requests the app saw for a path (its own record; asked after the call was answered, so it is complete). */
  const seen = (url: string): Record<string, unknown>[] => {
    const out = inNs(POD, process.execPath, join(dir, 'client.mjs'), JSON.stringify({ host: '127.0.0.1', port: EXCLUDED_PORT, path: '/seen', headers: {} }));
    return (JSON.parse((JSON.parse(out.trim()) as Answer).body!) as Record<string, unknown>[]).filter((l) => l.url === url);
  };
  const natSave = (ns: string, tool = 'iptables-save') =>
    inNs(ns, tool, '-t', 'nat')
      .split('\n')
      .filter((l) => l.startsWith('-') || l.startsWith(':AGENTS'));

  function startInPod(args: string[], ready: RegExp, env: NodeJS.ProcessEnv, onLine: (line: string) => void): Promise<ChildProcess> {
    return new Promise((resolve, reject) => {
      const child = spawn('ip', ['netns', 'exec', POD, process.execPath, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
      children.push(child);
      let out = '';
      let buffered = '';
      const timer = setTimeout(() => reject(new Error(`${args.join(' ')} did not become ready:\n${out}`)), 15_000);
      child.stdout!.on('data', (d: Buffer) => {
        out += d;
        buffered += d;
        const lines = buffered.split('\n');
        buffered = lines.pop()!;
        for (const l of lines) {
          onLine(l);
          if (ready.test(l)) {
            clearTimeout(timer);
            resolve(child);
          }
        }
      });
      child.stderr!.on('data', (d) => (out += d));
      child.on('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`${args.join(' ')} exited (${code}) before ready:\n${out}`));
      });
    });
  }

  beforeAll(async () => {
    requireBuild();
    dir = mkdtempSync(join(tmpdir(), 'agents-chain-capture-'));
    chmodSync(dir, 0o755);
    writeFileSync(join(dir, 'app.mjs'), APP);
    writeFileSync(join(dir, 'client.mjs'), CLIENT_SCRIPT);
    const keys = await generateAgentKeyPair();
    signer = await createAgentSigner(keys.privateJwk, 'agent-bot');
    writeFileSync(
      join(dir, 'policy.yaml'),
      [
        'version: 1',
        'provider: { name: capture-test, issuer: https://capture.example.com }',
        'capabilities:',
        '  - { name: getInvoice, method: GET, path: "/invoices/{id}" }',
        'agents:',
        `  - { id: agent-bot, name: bot, publicKey: { kty: OKP, crv: Ed25519, x: "${keys.publicJwk.x}" } }`,
        'grants:',
        '  - { agent: agent-bot, capability: getInvoice, status: active }',
        '',
      ].join('\n'),
    );

    ip('netns', 'add', POD);
    ip('netns', 'add', CLIENT);
    ip('link', 'add', VETH_POD, 'netns', POD, 'type', 'veth', 'peer', 'name', VETH_CLIENT, 'netns', CLIENT);
    for (const [ns, dev, v4, v6] of [
      [POD, VETH_POD, POD_IP, POD_IP6],
      [CLIENT, VETH_CLIENT, CLIENT_IP, CLIENT_IP6],
    ] as const) {
      ip('-n', ns, 'link', 'set', 'lo', 'up');
      ip('-n', ns, 'addr', 'add', `${v4}/24`, 'dev', dev);
      ip('-n', ns, 'addr', 'add', `${v6}/64`, 'dev', dev, 'nodad');
      ip('-n', ns, 'link', 'set', dev, 'up');
    }
    app = await startInPod([join(dir, 'app.mjs')], /"listening":"excluded"/, {}, () => {});
  }, 60_000);

  afterAll(() => {
    // Our processes by id, then whatever still runs in our two namespaces (only we started anything there).
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    for (const ns of [POD, CLIENT]) {
      try {
        for (const pid of ip('netns', 'pids', ns).split('\n').filter(Boolean)) process.kill(Number(pid), 'SIGKILL');
      } catch {
        /* namespace never made or already empty */
      }
      try {
        ip('netns', 'del', ns);
      } catch {
        /* never made */
      }
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('before capture, the client reaches the app on the pod IP directly, over IPv4 and IPv6 (what capture must prevent)', () => {
    expect(call(POD_IP, APP_PORT, '/invoices/direct4')).toMatchObject({ status: 200 });
    expect(call(POD_IP6, APP_PORT, '/invoices/direct6')).toMatchObject({ status: 200 });
    expect(seen('/invoices/direct4')).toEqual([expect.objectContaining({ server: 'app', remote: CLIENT_IP })]);
    expect(seen('/invoices/direct6')).toEqual([expect.objectContaining({ server: 'app6', remote: CLIENT_IP6 })]);
  });

  it('capture fails, naming the reason, without NET_ADMIN, and when the namespace has IPv6 addresses that cannot be captured', () => {
    // In the client namespace, which also has IPv4 and IPv6 addresses; nothing of it may be left behind.
    const capture = (prefix: string[], env: NodeJS.ProcessEnv = {}) => {
      const r = spawnSync('ip', ['netns', 'exec', CLIENT, ...prefix, process.execPath, CLI, ...CAPTURE_ARGS], {
        encoding: 'utf8',
        env: { ...process.env, ...env },
      });
      return { code: r.status, stdout: r.stdout, stderr: r.stderr };
    };
    const ours = () => natSave(CLIENT).filter((l) => l.includes('AGENTS_CHAIN_INBOUND'));

    // As the sidecar container runs (uid 10001, no capabilities): iptables itself refuses.
    const user = capture(['setpriv', '--reuid=10001', '--regid=10001', '--clear-groups']);
    expect(user.code).toBe(1);
    expect(user.stderr).toMatch(/^agents-chain capture: IPv4: iptables-save -t nat failed \(exit \d+\): .*Permission denied.*NET_ADMIN and NET_RAW/m);
    expect(JSON.parse(user.stdout.trim())).toMatchObject({ level: 'error', msg: 'inbound capture failed: the pod must not start' });
    expect(ours()).toEqual([]);

    // A node whose ip6tables does not work (no ip6 nat support): stand-ins that fail as iptables does, first on PATH.
    const shims = join(dir, 'shims');
    mkdirSync(shims, { recursive: true });
    const fail = (name: string, message: string) => {
      writeFileSync(join(shims, name), `#!/bin/sh\necho "${message}" >&2\nexit 3\n`);
      chmodSync(join(shims, name), 0o755);
    };
    fail('ip6tables-save', "ip6tables-save v1.8.9 (nf_tables): table 'nat' does not exist");
    const save6 = capture([], { PATH: `${shims}:${process.env.PATH}` });
    expect(save6.code).toBe(1);
    // Its addresses are named (with the link-local one once the kernel has added it).
    expect(save6.stderr).toMatch(new RegExp(`the namespace has IPv6 addresses \\(([^)]*, )?${CLIENT_IP6} on ${VETH_CLIENT}(, [^)]*)?\\)`));
    expect(save6.stderr).toContain(
      "but ip6tables does not work, so IPv6 traffic would bypass the sidecar: IPv6: ip6tables-save -t nat failed (exit 3): ip6tables-save v1.8.9 (nf_tables): table 'nat' does not exist",
    );
    expect(ours()).toEqual([]); // judged before the IPv4 rules were touched

    rmSync(join(shims, 'ip6tables-save'));
    fail('ip6tables-restore', 'ip6tables-restore v1.8.9 (nf_tables): RULE_INSERT failed (No such file or directory): rule in chain PREROUTING');
    const restore6 = capture([], { PATH: `${shims}:${process.env.PATH}` });
    expect(restore6.code).toBe(1);
    expect(restore6.stderr).toContain(
      'but the IPv6 rules could not be installed, so IPv6 traffic would bypass the sidecar: IPv6: ip6tables-restore --noflush failed (exit 3): ip6tables-restore v1.8.9 (nf_tables): RULE_INSERT failed',
    );
    // The IPv4 rules went in first; the pod does not start anyway. Remove them: the client is no pod.
    inNs(CLIENT, 'iptables', '-t', 'nat', '-D', 'PREROUTING', '-p', 'tcp', '-j', 'AGENTS_CHAIN_INBOUND');
    inNs(CLIENT, 'iptables', '-t', 'nat', '-F', 'AGENTS_CHAIN_INBOUND');
    inNs(CLIENT, 'iptables', '-t', 'nat', '-X', 'AGENTS_CHAIN_INBOUND');
    expect(ours()).toEqual([]);
  }, 30_000);

  it('installs the rules in the pod namespace with only NET_ADMIN and NET_RAW; run again, it leaves one set', async () => {
    // As the init container runs: uid 0, every capability dropped but NET_ADMIN and NET_RAW, no privilege escalation.
    const asInitContainer = () =>
      inNs(POD, 'setpriv', '--bounding-set=-all,+net_admin,+net_raw', '--inh-caps=-all', '--no-new-privs', process.execPath, CLI, ...CAPTURE_ARGS);
    const first = asInitContainer();
    const log = JSON.parse(first.trim()) as Record<string, any>;
    expect(log).toMatchObject({
      level: 'info',
      msg: 'inbound capture installed',
      chain: 'AGENTS_CHAIN_INBOUND',
      redirectTo: SIDECAR_PORT,
      excludePorts: [EXCLUDED_PORT, SIDECAR_PORT, ADMIN_PORT],
    });
    expect(log.ipv4).toMatchObject({ installed: true, action: 'installed' });
    // The pod has an IPv6 address, so IPv6 is captured too.
    expect(log.ipv6).toMatchObject({ installed: true, action: 'installed' });
    const rules = [
      ':AGENTS_CHAIN_INBOUND - [0:0]',
      '-A PREROUTING -p tcp -j AGENTS_CHAIN_INBOUND',
      `-A AGENTS_CHAIN_INBOUND -p tcp -m tcp --dport ${EXCLUDED_PORT} -j RETURN`,
      `-A AGENTS_CHAIN_INBOUND -p tcp -m tcp --dport ${SIDECAR_PORT} -j RETURN`,
      `-A AGENTS_CHAIN_INBOUND -p tcp -m tcp --dport ${ADMIN_PORT} -j RETURN`,
      `-A AGENTS_CHAIN_INBOUND -p tcp -j REDIRECT --to-ports ${SIDECAR_PORT}`,
    ];
    expect(natSave(POD)).toEqual(rules);
    expect(natSave(POD, 'ip6tables-save')).toEqual(rules);

    // A restarted init container.
    const again = JSON.parse(asInitContainer().trim()) as Record<string, any>;
    expect(again.ipv4).toMatchObject({ installed: true, action: 'already in place' });
    expect(again.ipv6).toMatchObject({ installed: true, action: 'already in place' });
    expect(natSave(POD)).toEqual(rules);
    expect(natSave(POD, 'ip6tables-save')).toEqual(rules);
    // Nothing in OUTPUT: the sidecar's own connections are never redirected.
    expect(natSave(POD).some((l) => l.includes('OUTPUT'))).toBe(false);
  }, 30_000);

  it("starts the real sidecar in the pod, with the app's probes", async () => {
    sidecar = await startInPod(
      [
        CLI,
        'serve',
        '--policy',
        join(dir, 'policy.yaml'),
        '--upstream',
        `http://127.0.0.1:${APP_PORT}`,
        // As injected: [::] takes IPv4 and IPv6 (it falls back to 0.0.0.0 where the kernel has no IPv6).
        '--listen',
        `[::]:${SIDECAR_PORT}`,
        '--admin',
        `[::]:${ADMIN_PORT}`,
        '--no-watch',
      ],
      /sidecar listening/,
      {
        AGENTS_CHAIN_DRAIN_DELAY_MS: '0',
        AGENTS_CHAIN_APP_PROBES: JSON.stringify({
          'app/readyz': {
            httpGet: { path: '/ready', port: APP_PORT, scheme: 'HTTP', httpHeaders: [{ name: 'X-Probe', value: 'kubelet' }] },
            timeoutSeconds: 1,
          },
          'app/livez': { tcpSocket: { port: APP_PORT } },
        }),
      },
      (l) => (sidecarOut += `${l}\n`),
    );
    expect(sidecar.pid).toBeGreaterThan(0);
  }, 30_000);

  it('a call to <pod IP>:<app port> without a token is refused by the sidecar and never reaches the app', () => {
    const r = call(POD_IP, APP_PORT, '/invoices/inv-1');
    expect(r.status).toBe(401);
    expect(JSON.parse(r.body!)).toMatchObject({ error: 'token_missing' });
    expect(seen('/invoices/inv-1')).toEqual([]);
  });

  it("a call with a valid token is forwarded; the app sees it from 127.0.0.1 (the sidecar's upstream connection is not looped back)", async () => {
    const r = call(POD_IP, APP_PORT, '/invoices/inv-2', await withToken());
    expect(r.status, `sidecar output:\n${sidecarOut}`).toBe(200);
    expect(JSON.parse(r.body!)).toEqual({ from: 'app', url: '/invoices/inv-2' });
    expect(seen('/invoices/inv-2')).toEqual([expect.objectContaining({ server: 'app', remote: '127.0.0.1' })]);
  });

  it("a direct connection to the sidecar's port works", async () => {
    const r = call(POD_IP, SIDECAR_PORT, '/invoices/inv-3', await withToken());
    expect(r.status).toBe(200);
    expect(seen('/invoices/inv-3')).toEqual([expect.objectContaining({ remote: '127.0.0.1' })]);
    expect(call(POD_IP, SIDECAR_PORT, '/invoices/inv-4').status).toBe(401);
    expect(seen('/invoices/inv-4')).toEqual([]);
  });

  it('an excluded port is not redirected: the app answers there itself and sees the client', () => {
    const r = call(POD_IP, EXCLUDED_PORT, '/metrics');
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body!)).toEqual({ from: 'excluded', url: '/metrics' });
    expect(seen('/metrics')).toEqual([expect.objectContaining({ server: 'excluded', remote: CLIENT_IP })]);
  });

  it('IPv6 to the app port lands in the sidecar too: refused without a token, forwarded with one', async () => {
    const refused = call(POD_IP6, APP_PORT, '/invoices/inv-6');
    expect(refused.status).toBe(401);
    expect(JSON.parse(refused.body!)).toMatchObject({ error: 'token_missing' });
    expect(seen('/invoices/inv-6')).toEqual([]);
    const r = call(POD_IP6, APP_PORT, '/invoices/inv-6', await withToken());
    expect(r.status).toBe(200);
    expect(seen('/invoices/inv-6')).toEqual([expect.objectContaining({ remote: '127.0.0.1' })]);
  });

  it("the app-health probe on the admin port reports the app's own probe, as the kubelet would call it", async () => {
    const ok = call(POD_IP, ADMIN_PORT, '/app-health/app/readyz');
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body!)).toEqual({ probe: 'app/readyz', status: 'ok', appStatus: 200 });
    expect(seen('/ready').at(-1)).toMatchObject({ remote: '127.0.0.1', probe: 'kubelet' });
    // The app turns unready (through the excluded port): the probe follows.
    expect(call(POD_IP, EXCLUDED_PORT, '/toggle-ready').status).toBe(200);
    // An answer is reused for a second (PROBE_REUSE_MS): the probe follows once that ends.
    let failing = call(POD_IP, ADMIN_PORT, '/app-health/app/readyz');
    await until(() => (failing = call(POD_IP, ADMIN_PORT, '/app-health/app/readyz')).status !== 200, PROBE_REUSE_MS + 5_000);
    expect(failing.status).toBe(503);
    expect(JSON.parse(failing.body!)).toEqual({ probe: 'app/readyz', status: 'failing', appStatus: 500 });
    expect(call(POD_IP, ADMIN_PORT, '/app-health/app/livez').status).toBe(200);
    expect(call(POD_IP, ADMIN_PORT, '/app-health/app/startupz').status).toBe(404);
  });
});

describe('agents-chain capture without a namespace', () => {
  it('--dry-run prints the iptables-restore input and changes nothing (no root needed)', async () => {
    requireBuild();
    const r = await runCli(['capture', '--dry-run', '--exclude-ports', `17480,17490,${EXCLUDED_PORT}`]);
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')).toEqual([
      '# iptables-restore --noflush (IPv4; the same for ip6tables-restore when the namespace has IPv6 addresses)',
      '*nat',
      ':AGENTS_CHAIN_INBOUND - [0:0]',
      '-I PREROUTING 1 -p tcp -j AGENTS_CHAIN_INBOUND',
      `-A AGENTS_CHAIN_INBOUND -p tcp -m tcp --dport ${EXCLUDED_PORT} -j RETURN`,
      '-A AGENTS_CHAIN_INBOUND -p tcp -m tcp --dport 17480 -j RETURN',
      '-A AGENTS_CHAIN_INBOUND -p tcp -m tcp --dport 17490 -j RETURN',
      '-A AGENTS_CHAIN_INBOUND -p tcp -j REDIRECT --to-ports 17480',
      'COMMIT',
      '',
    ]);
  });

  it('bad options exit 2 and name the flag; --help documents the command', async () => {
    const port = await runCli(['capture', '--redirect-to', '17480,17481', '--dry-run']);
    expect(port.code).toBe(2);
    expect(port.stderr).toContain('agents-chain capture: --redirect-to must be one port number (1-65535), got "17480,17481"');
    const list = await runCli(['capture', '--exclude-ports', '17490,http', '--dry-run']);
    expect(list.code).toBe(2);
    expect(list.stderr).toContain('--exclude-ports takes port numbers (1-65535) separated by commas, got "http"');
    const help = await runCli(['capture', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: agents-chain capture /);
    expect((await runCli(['--help'])).stdout).toMatch(/\n {2}capture {7}install the iptables rules/);
  });
});

describe.skipIf(problem !== undefined)('agents-chain capture beside legacy iptables rules', () => {
  const NS = `ac-legacy-${RUN}`;
  afterAll(() => {
    try {
      ip('netns', 'del', NS);
    } catch {
      // already gone
    }
  });

  it('fails while legacy nat PREROUTING rules exist (the kernel runs both, in an order capture cannot know); passes once they are gone', () => {
    ip('netns', 'add', NS);
    inNs(NS, 'iptables-legacy', '-t', 'nat', '-A', 'PREROUTING', '-p', 'tcp', '--dport', '8080', '-j', 'RETURN');
    const run = () => spawnSync('ip', ['netns', 'exec', NS, process.execPath, CLI, ...CAPTURE_ARGS], { encoding: 'utf8' });
    const refused = run();
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain(
      'IPv4: legacy iptables nat rules in PREROUTING (-A PREROUTING -p tcp -m tcp --dport 8080 -j RETURN) run beside the capture rules',
    );
    inNs(NS, 'iptables-legacy', '-t', 'nat', '-F', 'PREROUTING');
    const ok = run();
    expect(ok.status, ok.stderr).toBe(0);
  });
});
