import type { JWK } from 'jose';
import { createAgentSigner, type AgentSigner } from '../../src/identity/client.js';
import { generateAgentKeyPair, type AgentKeyPair } from '../../src/identity/keys.js';
import { createLogger, type Logger, type LogLevel } from '../../src/log.js';
import { loadPolicyFile, loadPolicyText } from '../../src/policy/load.js';
import type { Policy } from '../../src/policy/types.js';
import { startSidecar, type Sidecar, type SidecarOptions } from '../../src/sidecar/start.js';
import { call } from './http.js';
import { startRecorder, type Recorder } from './recorder.js';
import { until } from './until.js';

export interface TestAgent {
  id: string;
  keys: AgentKeyPair;
  signer: AgentSigner;
  privateJwk: JWK;
}

export async function testAgent(id: string): Promise<TestAgent> {
  const keys = await generateAgentKeyPair();
  return { id, keys, privateJwk: keys.privateJwk, signer: await createAgentSigner(keys.privateJwk, id) };
}

/** The billing policy used across integration tests. */
export function billingPolicy(agents: { bot: TestAgent; other: TestAgent }): string {
  return `
version: 1
provider: { name: billing-service, issuer: https://billing.example.com, description: Billing API }
capabilities:
  - name: createInvoice
    method: POST
    path: /invoices
  - { name: getInvoice, method: GET, path: "/invoices/{id}" }
  - { name: listInvoices, method: GET, path: /invoices }
  - { name: deleteInvoice, method: DELETE, path: "/invoices/{id}" }
  - { name: refundInvoice, method: POST, path: "/invoices/{id}/refund" }
  - { name: streamEvents, method: GET, path: /events }
  - { name: upload, method: PUT, path: /uploads, maxBodyBytes: 64 }
public:
  - { method: GET, path: /healthz }
agents:
  - { id: ${agents.bot.id}, name: billing-bot, publicKey: { kty: OKP, crv: Ed25519, x: "${agents.bot.keys.publicJwk.x}" } }
  - { id: ${agents.other.id}, name: other-bot, publicKey: { kty: OKP, crv: Ed25519, x: "${agents.other.keys.publicJwk.x}" } }
grants:
  - agent: ${agents.bot.id}
    capability: createInvoice
    status: active
    expiresAt: "2999-01-01T00:00:00Z"
    constraints:
      amount: { max: 1000, min: 1 }
      currency: { in: [USD, EUR] }
      customer.tier: { not_in: [internal] }
      dryRun: { exact: false }
  - { agent: ${agents.bot.id}, capability: getInvoice, status: active }
  - agent: ${agents.bot.id}
    capability: listInvoices
    status: active
    constraints:
      customerId: { in: [c-100, c-200] }
      limit: { max: 50 }
  - agent: ${agents.bot.id}
    capability: deleteInvoice
    status: active
    constraints:
      id: { in: [inv-1] }
  - agent: ${agents.bot.id}
    capability: refundInvoice
    status: active
    constraints:
      id: { not_in: [inv-locked] }
      amount: { max: 100 }
  - { agent: ${agents.bot.id}, capability: streamEvents, status: active }
  - { agent: ${agents.bot.id}, capability: upload, status: active }
  - { agent: ${agents.other.id}, capability: getInvoice, status: revoked }
  - { agent: ${agents.other.id}, capability: listInvoices, status: active, expiresAt: "2001-01-01T00:00:00Z" }
`;
}

/** A policy for `startTestSidecar`: YAML text, a loaded policy, or YAML built from the two test agents. */
export type TestPolicy = string | Policy | ((agents: { bot: TestAgent; other: TestAgent }) => string);

export interface TestSidecarOptions<A extends { url: string } = Recorder> extends Omit<Partial<SidecarOptions>, 'policy' | 'upstream'> {
  /** Default: `billingPolicy` for `bot` and `other`. */
  policy?: TestPolicy;
  /** Loads the policy from this file instead (reload tests edit it and call `sidecar.reloadPolicy()`). */
  policyFile?: string;
  /** The name a YAML text is loaded under (errors name it) [billing.yaml]. */
  policyName?: string;
  /**
   * The app behind the sidecar (a recorder, a backend, a fake provider), owned and closed by the caller.
   * Default: a fresh recorder, closed with the sidecar.
   */
  app?: A;
  /** The agents the policy function sees; default two fresh ones (`agent-billing-bot`, `agent-other`). */
  agents?: { bot: TestAgent; other: TestAgent };
  /** Level of the logs collected in `logs` [debug]. DEBUG_SIDECAR=1 also copies them to stderr. */
  logLevel?: LogLevel;
  /** The array the log lines are collected in [a new one]. */
  logs?: string[];
  /** Resolve only once the admin listener's /readyz answers 200 (a Redis-backed sidecar connects first). */
  waitReady?: boolean;
}

/** One sidecar in this process (the real `startSidecar`, real listeners) in front of a real app. */
export interface TestSidecar<A extends { url: string } = Recorder> {
  sidecar: Sidecar;
  /** The agent listener, e.g. http://127.0.0.1:41234 (so `call(env, ...)` reaches it). */
  url: string;
  adminUrl: string;
  app: A;
  bot: TestAgent;
  other: TestAgent;
  /** The sidecar's JSON log lines. */
  logs: string[];
  /** Closes the sidecar, then the app when the fixture started it. */
  close(): Promise<void>;
}

export async function startTestSidecar<A extends { url: string } = Recorder>(opts: TestSidecarOptions<A> = {}): Promise<TestSidecar<A>> {
  const { policy: given, policyFile, policyName, app: givenApp, agents, logLevel, logs = [], waitReady, ...sidecarOptions } = opts;
  const bot = agents?.bot ?? (await testAgent('agent-billing-bot'));
  const other = agents?.other ?? (await testAgent('agent-other'));
  const app = givenApp ?? ((await startRecorder()) as unknown as A);
  const log: Logger = createLogger(logLevel ?? 'debug', (l) => {
    logs.push(l);
    if (process.env.DEBUG_SIDECAR) process.stderr.write(l);
  });
  const policy = policyFile ? await loadPolicyFile(policyFile) : await asPolicy(given ?? billingPolicy, { bot, other }, policyName ?? 'billing.yaml');
  const sidecar = await startSidecar({ listen: '127.0.0.1:0', admin: '127.0.0.1:0', log, ...sidecarOptions, policy, upstream: app.url }).catch(
    async (err: unknown) => {
      if (!givenApp) await (app as unknown as Recorder).close();
      throw err;
    },
  );
  const env: TestSidecar<A> = {
    sidecar,
    url: sidecar.url,
    adminUrl: sidecar.adminUrl,
    app,
    bot,
    other,
    logs,
    async close() {
      await sidecar.close();
      if (!givenApp) await (app as unknown as Recorder).close();
    },
  };
  if (waitReady) await untilReady(env.adminUrl);
  return env;
}

/** Until the admin listener's /readyz answers 200. */
export async function untilReady(adminUrl: string, ms?: number): Promise<void> {
  await until(async () => (await call(adminUrl, { path: '/readyz' })).status === 200, ms);
}

async function asPolicy(p: TestPolicy, agents: { bot: TestAgent; other: TestAgent }, name: string): Promise<Policy> {
  if (typeof p === 'function') return loadPolicyText(p(agents), name);
  if (typeof p === 'string') return loadPolicyText(p, name);
  return p;
}
