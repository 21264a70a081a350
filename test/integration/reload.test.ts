import { once } from 'node:events';
import { mkdtemp, readFile, rename, symlink, writeFile, mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createAgentSigner } from '../../src/identity/client.js';
import { ROOT, requireBuild, startCli } from '../support/cli.js';
import { startTestSidecar } from '../support/fixture.js';
import { call } from '../support/http.js';
import { startRecorder } from '../support/recorder.js';
import { sample, scrape } from '../support/prom.js';
import { until } from '../support/until.js';

const EXAMPLE = `${ROOT}config/examples/billing.yaml`;

/** A writable copy of the example policy, and its text. */
async function examplePolicyFile(): Promise<{ file: string; base: string }> {
  const file = join(await mkdtemp(join(tmpdir(), 'agents-chain-reload-')), 'policy.yaml');
  const base = await readFile(EXAMPLE, 'utf8');
  await writeFile(file, base);
  return { file, base };
}

async function signer() {
  const jwk = JSON.parse(await readFile(`${ROOT}config/examples/keys/billing-bot.private.jwk.json`, 'utf8'));
  return createAgentSigner(jwk, 'agent-billing-bot');
}

const policyHashes = async (adminUrl: string) =>
  [...(await scrape(adminUrl)).samples.keys()].filter((k) => k.startsWith('agents_chain_policy_info{')).map((k) => /hash="([0-9a-f]+)"/.exec(k)![1]);

describe('live policy reload', () => {
  it('200 reloads, valid and invalid interleaved, under load: no failed call, invalid versions never serve', async () => {
    const { file, base } = await examplePolicyFile();
    const env = await startTestSidecar({ policyFile: file, logLevel: 'error', metrics: { processMetrics: false } });
    const { sidecar } = env;
    const bot = await signer();
    let stop = false;
    const statuses: number[] = [];
    const load = Array.from({ length: 4 }, async () => {
      while (!stop) {
        statuses.push((await call(sidecar, { path: '/invoices/inv-1', token: await bot.sign('getInvoice') })).status);
      }
    });
    try {
      const validHashes = new Set([sidecar.policyHash]);
      let invalid = 0;
      for (let i = 0; i < 200; i++) {
        const valid = i % 2 === 0;
        // Valid versions differ (so each one is a real change); invalid ones break the schema or a reference.
        const text = valid
          ? base.replace('description: Billing API', `description: Billing API v${i}`)
          : i % 4 === 1
            ? base.replace('capability: getInvoice', 'capability: noSuchCapability')
            : `${base}\nbogus_key: true\n`;
        await writeFile(file, text);
        const before = sidecar.policyHash;
        const r = await sidecar.reloadPolicy();
        if (valid) {
          expect(r).toMatchObject({ ok: true, changed: true });
          validHashes.add(sidecar.policyHash);
        } else {
          invalid++;
          expect(r.ok).toBe(false);
          expect(sidecar.policyHash).toBe(before);
        }
        expect(validHashes.has(sidecar.policyHash)).toBe(true);
      }
      stop = true;
      await Promise.all(load);
      expect(statuses.length).toBeGreaterThan(50);
      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      expect(validHashes.size).toBe(101);
      const { samples } = await scrape(sidecar.adminUrl);
      expect(sample(samples, 'agents_chain_policy_reloads_total', { result: 'success' })).toBe(100);
      expect(sample(samples, 'agents_chain_policy_reloads_total', { result: 'failure' })).toBe(invalid);
      expect(sample(samples, 'agents_chain_policy_last_reload_successful')).toBe(0); // the last one was invalid
      expect(await policyHashes(sidecar.adminUrl)).toEqual([sidecar.policyHash]);
      // Reverting the file to the active version clears the failure.
      expect(await sidecar.reloadPolicy(base.replace('description: Billing API', 'description: Billing API v198'))).toMatchObject({ ok: true, changed: false });
      expect(sample((await scrape(sidecar.adminUrl)).samples, 'agents_chain_policy_last_reload_successful')).toBe(1);
    } finally {
      stop = true;
      await Promise.all(load);
      await env.close();
    }
  }, 60_000);

  it('a call in flight finishes under the policy it started with', async () => {
    const { file, base } = await examplePolicyFile();
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const env = await startTestSidecar({ policyFile: file, logLevel: 'error', metrics: { processMetrics: false } });
    const { sidecar, app } = env;
    app.handler = (_r, res) =>
      void held.then(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"ok":true}');
      });
    try {
      const bot = await signer();
      const inFlight = call(sidecar, { path: '/invoices/inv-1', token: await bot.sign('getInvoice') });
      await until(() => app.requests.length === 1);
      // The new policy revokes getInvoice; the call already forwarded is unaffected, the next one is refused.
      await writeFile(file, base.replace(/(capability: getInvoice\n\s+status: )active/, '$1revoked'));
      expect((await sidecar.reloadPolicy()).ok).toBe(true);
      release();
      expect((await inFlight).status).toBe(200);
      const next = await call(sidecar, { path: '/invoices/inv-1', token: await bot.sign('getInvoice') });
      expect(next.status).toBe(403);
    } finally {
      release();
      await env.close();
    }
  });

  it('the CLI picks up a ConfigMap-style symlink swap by itself, and SIGHUP', async () => {
    requireBuild();
    // A ConfigMap volume: policy.yaml -> ..data/policy.yaml, ..data -> ..2026_v1; an update swaps ..data.
    const dir = await mkdtemp(join(tmpdir(), 'agents-chain-cm-'));
    const base = await readFile(EXAMPLE, 'utf8');
    await mkdir(join(dir, '..v1'));
    await writeFile(join(dir, '..v1', 'policy.yaml'), base);
    await symlink('..v1', join(dir, '..data'));
    await symlink('..data/policy.yaml', join(dir, 'policy.yaml'));
    const app = await startRecorder();
    const sc = await startCli(
      ['serve', '--policy', join(dir, 'policy.yaml'), '--upstream', app.url, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0'],
      /sidecar listening/,
    );
    const admin = JSON.parse(sc.line).admin as string;
    try {
      const first = (await policyHashes(admin))[0];
      await mkdir(join(dir, '..v2'));
      await writeFile(join(dir, '..v2', 'policy.yaml'), base.replace('description: Billing API', 'description: Billing API v2'));
      await symlink('..v2', join(dir, '..data_tmp'));
      await rename(join(dir, '..data_tmp'), join(dir, '..data')); // atomic, as the kubelet does it
      await until(async () => (await policyHashes(admin))[0] !== first, 5_000);
      expect(sc.output()).toContain('"msg":"policy reloaded"');
      // An invalid edit through the same path is refused; SIGHUP re-reads on demand.
      await rm(join(dir, '..v1'), { recursive: true });
      await mkdir(join(dir, '..v3'));
      await writeFile(join(dir, '..v3', 'policy.yaml'), `${base}\nbogus_key: true\n`);
      await symlink('..v3', join(dir, '..data_tmp'));
      await rename(join(dir, '..data_tmp'), join(dir, '..data'));
      await until(() => sc.output().includes('policy reload refused'), 5_000);
      const active = (await policyHashes(admin))[0];
      sc.child.kill('SIGHUP');
      await until(() => sc.output().split('policy reload refused').length > 2, 5_000);
      expect((await policyHashes(admin))[0]).toBe(active);
    } finally {
      sc.child.kill('SIGTERM');
      await once(sc.child, 'exit');
      await app.close();
    }
  });
});
