import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { openBatch, parseKeyring, type AuditBatch } from '../../src/audit/crypto.js';
import type { AuditEntry } from '../../src/audit/entry.js';
import { verifyChain } from '../../src/audit/verify.js';
import { createAgentSigner } from '../../src/identity/client.js';
import { ROOT, requireBuild, runCli, startCli, serveArgs } from '../support/cli.js';
import { until } from '../support/until.js';
import { orderedLines, startCollector, type Collector } from '../support/collector.js';
import { startRecorder, type Recorder } from '../support/recorder.js';

/** Real sidecar processes, killed and restarted over the same spool. */
describe('audit spool across restarts', () => {
  let dir: string;
  let keyFile: string;
  let app: Recorder;
  let collector: Collector;
  const keys = parseKeyring(randomBytes(32).toString('base64'));

  beforeAll(async () => {
    requireBuild();
    dir = await mkdtemp(join(tmpdir(), 'agents-chain-restart-'));
    keyFile = join(dir, 'audit.key');
    await writeFile(keyFile, `${keys.current.key.toString('base64')}\n`);
    app = await startRecorder();
    collector = await startCollector();
    await collector.stop();
  });
  afterAll(async () => {
    await app.close();
    await collector.close();
  });

  const serve = (spool: string, extra: string[] = []) =>
    startCli(
      serveArgs(
        app.url,
        '--audit-key-file',
        keyFile,
        '--audit-spool',
        spool,
        '--audit-export',
        collector.url,
        '--audit-flush-ms',
        '20',
        '--audit-drain-ms',
        '300',
        ...extra,
      ),
      /sidecar listening/,
    );

  async function calls(listen: string, n: number): Promise<string[]> {
    const jwk = JSON.parse(await readFile(`${ROOT}config/examples/keys/billing-bot.private.jwk.json`, 'utf8'));
    const signer = await createAgentSigner(jwk, 'agent-billing-bot');
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const r = await request(`${listen}/invoices/inv-${i}`, { headers: { authorization: `Bearer ${await signer.sign('getInvoice')}` } });
      expect(r.statusCode).toBe(200);
      await r.body.text();
      ids.push(String(r.headers['x-request-id']));
      await new Promise((res) => setTimeout(res, 40)); // one batch per call or so
    }
    return ids;
  }

  const delivered = () => orderedLines(collector).flatMap((l) => openBatch<AuditEntry>(JSON.parse(l) as AuditBatch, keys));

  it('SIGTERM during an outage leaves the batches in the spool; the next process delivers them', async () => {
    const spool = join(dir, 'spool-a');
    const first = await serve(spool);
    const ids = await calls(JSON.parse(first.line).listen, 3);
    await new Promise((r) => setTimeout(r, 100));
    first.child.kill('SIGTERM');
    expect((await once(first.child, 'exit'))[0]).toBe(0);
    expect((await readdir(spool)).filter((f) => f.endsWith('.batch')).length).toBeGreaterThan(0);

    await collector.restart();
    const second = await serve(spool);
    try {
      await until(() => ids.every((id) => delivered().some((e) => e.requestId === id)));
      // One chain: the restarted process continues the spool's chain instead of starting another.
      expect(verifyChain(orderedLines(collector), keys)).toMatchObject({ chains: [expect.any(String)], problems: [] });
    } finally {
      second.child.kill('SIGTERM');
      await once(second.child, 'exit');
      await collector.stop();
    }
    // The CLI reads what the collector stored.
    const file = join(dir, 'exported.jsonl');
    await writeFile(file, `${orderedLines(collector).join('\n')}\n`);
    const verify = await runCli(['audit', 'verify', '--audit-key-file', keyFile, file]);
    expect(verify.code).toBe(0);
    const decrypt = await runCli(['audit', 'decrypt', '--audit-key-file', keyFile, file]);
    expect(
      decrypt.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).requestId),
    ).toEqual(expect.arrayContaining(ids));

    // audit verify reports a flipped byte, a dropped batch and a swapped pair.
    const lines = orderedLines(collector);
    expect(lines.length).toBeGreaterThanOrEqual(3);
    const flip = (l: string) => {
      const b = JSON.parse(l);
      const d = Buffer.from(b.data, 'base64');
      d[0]! ^= 1;
      return JSON.stringify({ ...b, data: d.toString('base64') });
    };
    const cases: Record<string, string[]> = {
      flipped: [lines[0]!, flip(lines[1]!), ...lines.slice(2)],
      dropped: [lines[0]!, ...lines.slice(2)],
      swapped: [lines[0]!, lines[2]!, lines[1]!, ...lines.slice(3)],
    };
    for (const [name, tampered] of Object.entries(cases)) {
      const f = join(dir, `${name}.jsonl`);
      await writeFile(f, `${tampered.join('\n')}\n`);
      const r = await runCli(['audit', 'verify', '--audit-key-file', keyFile, f]);
      expect(r.code, name).toBe(1);
      expect(r.stderr, name).toMatch(name === 'flipped' ? /authentication failed/ : name === 'dropped' ? /gap/ : /out of order/);
    }
  }, 40_000);

  it('strict durability: SIGKILL loses nothing that was forwarded to the app', async () => {
    const spool = join(dir, 'spool-b');
    const first = await serve(spool, ['--audit-durability', 'strict']);
    const before = app.requests.length;
    await calls(JSON.parse(first.line).listen, 5);
    const forwarded = app.requests.slice(before).map((r) => String(r.headers['x-request-id']));
    first.child.kill('SIGKILL');
    await once(first.child, 'exit');

    collector.batches.clear(); // a new spool is a new chain: sequence numbers start again
    await collector.restart();
    const second = await serve(spool);
    try {
      await until(() => forwarded.every((id) => delivered().some((e) => e.requestId === id)));
    } finally {
      second.child.kill('SIGTERM');
      await once(second.child, 'exit');
    }
  }, 40_000);
});
