import { afterAll, beforeAll, describe, it } from 'vitest';
import { startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { open } from '../support/http.js';

const log = (...a: unknown[]) => console.log('PROBE', ...a.map((x) => (typeof x === 'string' ? x : JSON.stringify(x))));

describe('probe memory', () => {
  let env: TestSidecar;
  beforeAll(async () => {
    env = await startTestSidecar({ logLevel: 'warn' });
  });
  afterAll(async () => env.close());

  it('a JSON answer that never ends, via execute vs direct', async () => {
    let sent = 0;
    env.app.handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('[');
      const chunk = `"${'x'.repeat(1 << 20)}",`;
      const t = setInterval(() => {
        if (res.destroyed || sent > 400) {
          clearInterval(t);
          res.end('0]');
          return;
        }
        for (let i = 0; i < 8; i++) res.write(chunk);
        sent += 8;
      }, 5);
    };
    for (const mode of ['direct', 'execute']) {
      sent = 0;
      global.gc?.();
      const before = process.memoryUsage().rss;
      let peak = before;
      const m = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
      const t0 = Date.now();
      const res =
        mode === 'direct'
          ? await open(env, { path: '/invoices/inv-1', token: await env.bot.signer.sign('getInvoice') })
          : await open(env, { method: 'POST', path: '/capability/execute', token: await env.bot.signer.sign('getInvoice'), body: JSON.stringify({ capability: 'getInvoice', arguments: { id: 'inv-1' } }) });
      const headersAt = Date.now() - t0;
      let got = 0;
      for await (const c of res.body) got += (c as Buffer).length;
      clearInterval(m);
      log(mode, 'headers after ms', headersAt, 'bytes', got, 'rss grew MiB', Math.round((peak - before) / 2 ** 20));
    }
  }, 120_000);
});
