import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { WebhookNotifier } from '../../../src/approvals/notifier.js';
import type { AccessRequest } from '../../../src/approvals/types.js';
import { createLogger } from '../../../src/log.js';

const request: AccessRequest = {
  id: 'req-1',
  agentId: 'agent-a',
  agentName: 'a',
  capability: 'send_sms',
  method: 'POST',
  target: '/sms',
  args: { to: '+1', apiKey: 'sk-live-123', nested: [{ password: 'p' }] },
  reason: 'asked',
  violations: [],
  absentFields: [],
  headers: [],
  createdAt: 0,
  expiresAt: 60_000,
  codeHash: 'x',
  state: 'pending',
  notified: false,
};

/** A real receiver that fails the first `failures` posts. */
async function receiver(failures: number) {
  const bodies: any[] = [];
  let seen = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen++;
      if (seen <= failures) return void res.writeHead(503).end();
      bodies.push({ headers: req.headers, body: JSON.parse(Buffer.concat(chunks).toString()) });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/h`,
    bodies,
    attempts: () => seen,
    close: () => new Promise((r) => server.close(r)),
  };
}

describe('WebhookNotifier', () => {
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
  });
  const log = createLogger('error', () => {});

  it('posts JSON with the code and redacted args, with the configured headers', async () => {
    const r = await receiver(0);
    closers.push(r.close);
    await new WebhookNotifier({
      url: r.url,
      format: 'json',
      headers: { authorization: 'Bearer hook-secret' },
      retries: 0,
      log,
      adminUrl: 'https://admin.example',
    }).notify(request, 'CODE234567');
    const { headers, body } = r.bodies[0];
    expect(headers.authorization).toBe('Bearer hook-secret');
    expect(body).toMatchObject({
      event: 'access_request',
      requestId: 'req-1',
      code: 'CODE234567',
      agentId: 'agent-a',
      capability: 'send_sms',
      args: { to: '+1', apiKey: '[REDACTED]', nested: [{ password: '[REDACTED]' }] },
      redacted: ['apiKey', 'nested[0].password'],
      reason: 'asked',
      expiresAt: '1970-01-01T00:01:00.000Z',
      approve: { method: 'POST', url: 'https://admin.example/approvals/req-1/approve' },
    });
  });

  it('posts Slack text', async () => {
    const r = await receiver(0);
    closers.push(r.close);
    await new WebhookNotifier({ url: r.url, format: 'slack', headers: {}, retries: 0, log }).notify(request, 'CODE234567');
    expect(r.bodies[0].body.text).toContain('CODE234567');
    expect(r.bodies[0].body.text).toContain('send_sms');
  });

  it('retries until the receiver accepts, and gives up after the configured retries', async () => {
    const flaky = await receiver(2);
    closers.push(flaky.close);
    await new WebhookNotifier({ url: flaky.url, format: 'json', headers: {}, retries: 2, log, backoffMs: () => 5 }).onResolved({
      ...request,
      state: 'approved',
    });
    expect(flaky.attempts()).toBe(3);
    expect(flaky.bodies[0].body).toMatchObject({ event: 'access_request_resolved', outcome: 'approved' });

    const down = await receiver(10);
    closers.push(down.close);
    await expect(new WebhookNotifier({ url: down.url, format: 'json', headers: {}, retries: 1, log, backoffMs: () => 5 }).notify(request, 'C')).rejects.toThrow(
      /after 2 attempts/,
    );
  });
});
