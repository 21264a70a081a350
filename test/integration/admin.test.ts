import { once } from 'node:events';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, requireBuild, runCli, startCli, startupFailure } from '../support/cli.js';
import { call } from '../support/http.js';
import { startRecorder, type Recorder } from '../support/recorder.js';

// The admin listener as `serve` runs it: probes and /metrics open, the rest only with the admin token,
// and no approvals API that nobody (or everybody) can use without saying so.
const BILLING = `${ROOT}config/examples/billing.yaml`;
const SMS = `${ROOT}config/examples/sms.yaml`;
const TOKEN = 'admin-test-token-5f1c0e9d8b11';
const env = { SMS_APPROVAL_WEBHOOK_URL: 'http://127.0.0.1:9/hook', AGENTS_CHAIN_ADMIN_TOKEN: '', AGENTS_CHAIN_ADMIN_INSECURE_NO_TOKEN: '' };

const get = (url: string, token?: string) => call(url, { token });

describe('admin listener access (serve)', () => {
  let app: Recorder;
  let dir: string;
  const children: ChildProcess[] = [];
  beforeAll(async () => {
    requireBuild();
    app = await startRecorder();
    dir = await mkdtemp(join(tmpdir(), 'agents-chain-admin-'));
  });
  afterAll(async () => {
    // All at once: each drains for serve's default 5 s before it exits (one after the other they took 20 s).
    const running = children.filter((c) => c.exitCode === null);
    await Promise.all(running.map((c) => (c.kill('SIGTERM'), once(c, 'exit'))));
    await app.close();
  });
  const args = (policy: string, ...more: string[]) => [
    'serve',
    '--policy',
    policy,
    '--upstream',
    app.url,
    '--listen',
    '127.0.0.1:0',
    '--admin',
    '127.0.0.1:0',
    '--no-watch',
    ...more,
  ];
  const serve = async (policy: string, extraEnv: Record<string, string> = {}, ...more: string[]) => {
    const sc = await startCli(args(policy, ...more), /sidecar listening/, { ...env, ...extraEnv });
    children.push(sc.child);
    return { admin: JSON.parse(sc.line).admin as string, output: sc.output };
  };

  it('refuses to start an approvals API without a token, naming the flag', async () => {
    const r = await runCli(args(SMS), env);
    expect(r.code).toBe(2);
    // The one "startup failed" log line on stdout (src/cli/startup.ts).
    const { error } = startupFailure(r);
    expect(error).toContain('refusing to start');
    expect(error).toContain('accessRequests');
    expect(error).toContain('--admin-insecure-no-token');
    expect(error).toContain('AGENTS_CHAIN_ADMIN_TOKEN');
    const both = await runCli(args(SMS, '--admin-insecure-no-token'), { ...env, AGENTS_CHAIN_ADMIN_TOKEN: TOKEN });
    expect(both.code).toBe(2);
    expect(startupFailure(both).error).toMatch(/not both/);
  });

  it('with a token: /stats, agents and approvals need it; /metrics, /healthz and /readyz stay open', async () => {
    const file = join(dir, 'admin-token');
    await writeFile(file, `${TOKEN}\n`);
    const { admin } = await serve(SMS, {}, '--admin-token-file', file);
    expect((await get(`${admin}/stats`)).status).toBe(401);
    expect((await get(`${admin}/stats`, 'wrong')).status).toBe(401);
    expect(await get(`${admin}/stats`, TOKEN)).toMatchObject({ status: 200, json: { audit: null } });
    expect((await get(`${admin}/stats/entries`)).status).toBe(401);
    expect((await get(`${admin}/approvals`)).status).toBe(401);
    expect(await get(`${admin}/approvals`, TOKEN)).toMatchObject({ status: 200, json: { requests: [] } });
    expect((await get(`${admin}/agents`)).status).toBe(401);
    expect((await get(`${admin}/healthz`)).status).toBe(200);
    expect((await get(`${admin}/readyz`)).status).toBe(200);
    const metrics = await get(`${admin}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.text).toContain('agents_chain_');
  });

  it('without a token (no approvals in the policy): everything but the probes and /metrics is closed', async () => {
    const { admin } = await serve(BILLING);
    expect(await get(`${admin}/stats`)).toMatchObject({ status: 403, json: { error: 'admin_disabled' } });
    expect(await get(`${admin}/agents`)).toMatchObject({ status: 403, json: { error: 'admin_disabled' } });
    expect((await get(`${admin}/healthz`)).status).toBe(200);
    expect((await get(`${admin}/metrics`)).status).toBe(200);
  });

  it('--admin-insecure-no-token serves the approvals API without a token, and says so at startup', async () => {
    const { admin, output } = await serve(SMS, {}, '--admin-insecure-no-token');
    expect(output()).toMatch(/admin API open without a token/);
    expect(await get(`${admin}/approvals`)).toMatchObject({ status: 200, json: { requests: [] } });
    expect((await get(`${admin}/stats`)).status).toBe(200);
    const viaEnv = await serve(SMS, { AGENTS_CHAIN_ADMIN_INSECURE_NO_TOKEN: 'true' });
    expect((await get(`${viaEnv.admin}/approvals`)).status).toBe(200);
  });
});
