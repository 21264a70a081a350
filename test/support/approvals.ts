import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Sidecar, SidecarOptions } from '../../src/sidecar/start.js';
import { startTestSidecar, testAgent, type TestAgent } from './fixture.js';
import { call } from './http.js';
import { startRecorder, type Recorder } from './recorder.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

/** A real webhook receiver: what the notifier posted. */
export interface Inbox {
  url: string;
  messages: any[];
  /** Resolves with the next notification for a request (the one carrying the code). */
  nextRequest(): Promise<{ requestId: string; code: string } & Record<string, any>>;
  close(): Promise<void>;
}

export async function startInbox(): Promise<Inbox> {
  const messages: any[] = [];
  const waiters: ((m: any) => void)[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const m = JSON.parse(Buffer.concat(chunks).toString());
      messages.push(m);
      if (m.event === 'access_request') waiters.shift()?.(m);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const seen = new Set<string>();
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    messages,
    nextRequest: () => {
      const pending = messages.find((m) => m.event === 'access_request' && !seen.has(m.requestId));
      if (pending) {
        seen.add(pending.requestId);
        return Promise.resolve(pending);
      }
      return new Promise((resolve) =>
        waiters.push((m) => {
          seen.add(m.requestId);
          resolve(m);
        }),
      );
    },
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export interface ApprovalEnv {
  sidecar: Sidecar;
  url: string;
  adminUrl: string;
  app: Recorder;
  inbox: Inbox;
  bots: TestAgent[];
  bot: TestAgent;
  admin(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown, token?: string): Promise<{ status: number; json: any }>;
  close(): Promise<void>;
}

export function smsPolicy(
  bots: TestAgent[],
  opts: { ttl?: string; webhookUrl: string; envelope?: string; violationStatus?: number; format?: 'json' | 'slack' },
): string {
  return `
version: 1
provider: { name: sms-service, issuer: https://sms.example.com }
constraintAware: true
${opts.envelope ? `envelope: ${opts.envelope}` : ''}
${opts.violationStatus ? `violationStatus: ${opts.violationStatus}` : ''}
accessRequests:
  ttl: ${opts.ttl ?? '1m'}
  notifier: { webhook: { url: "${opts.webhookUrl}", format: ${opts.format ?? 'json'}, retries: 0 } }
capabilities:
  - { name: send_sms, description: Send an SMS message, method: POST, path: /sms }
  - { name: get_message, method: GET, path: "/messages/{id}" }
  - { name: list_messages, method: GET, path: /messages }
agents:
${bots.map((b) => `  - { id: ${b.id}, name: ${b.id}-name, publicKey: { kty: OKP, crv: Ed25519, x: "${b.keys.publicJwk.x}" } }`).join('\n')}
grants:
${bots
  .map(
    (b) => `  - { agent: ${b.id}, capability: send_sms, status: active, constraints: { to: { in: ["+254700000001", "+254700000002"] } } }
  - { agent: ${b.id}, capability: get_message, status: active }
  - { agent: ${b.id}, capability: list_messages, status: active, constraints: { limit: { max: 10 } } }`,
  )
  .join('\n')}
`;
}

export async function startApprovalEnv(
  opts: {
    ttl?: string;
    agents?: number;
    webhookUrl?: string;
    envelope?: string;
    violationStatus?: number;
    audit?: SidecarOptions['audit'];
    shutdownGraceMs?: number;
    format?: 'json' | 'slack';
    /** Access requests and value approvals in this Redis instead of memory. */
    redis?: SidecarOptions['redis'];
  } = {},
): Promise<ApprovalEnv> {
  const bots = await Promise.all(Array.from({ length: opts.agents ?? 1 }, (_, i) => testAgent(`sms-bot-${i}`)));
  const app = await startRecorder();
  app.handler = (r, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ sent: r.method === 'POST', path: r.url, by: r.headers['x-agent-id'], permission: r.headers['agent-permission'] ?? null }));
  };
  const inbox = await startInbox();
  const env = await startTestSidecar({
    policy: smsPolicy(bots, { ...opts, webhookUrl: opts.webhookUrl ?? inbox.url }),
    policyName: 'sms.yaml',
    app,
    adminToken: ADMIN_TOKEN,
    logLevel: 'error',
    audit: opts.audit,
    shutdownGraceMs: opts.shutdownGraceMs,
    redis: opts.redis,
    ...(opts.redis ? { metrics: { processMetrics: false } } : {}),
    // A Redis-backed sidecar refuses calls until its connection is up.
    waitReady: Boolean(opts.redis),
  });
  const { sidecar } = env;
  return {
    sidecar,
    url: env.url,
    adminUrl: env.adminUrl,
    app,
    inbox,
    bots,
    bot: bots[0]!,
    async admin(method, path, body, token = ADMIN_TOKEN) {
      const r = await call(sidecar.adminUrl, { method, path, token, body });
      return { status: r.status, json: r.json };
    },
    async close() {
      await env.close();
      await app.close();
      await inbox.close();
    },
  };
}
