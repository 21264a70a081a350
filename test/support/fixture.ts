import type { JWK } from 'jose';
import { createAgentSigner, type AgentSigner } from '../../src/identity/client.js';
import { generateAgentKeyPair, type AgentKeyPair } from '../../src/identity/keys.js';
import { createLogger, type Logger } from '../../src/log.js';
import { loadPolicyText } from '../../src/policy/load.js';
import { startSidecar, type Sidecar, type SidecarOptions } from '../../src/sidecar/start.js';
import { startRecorder, type Recorder } from './recorder.js';

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

export interface Env {
  sidecar: Sidecar;
  app: Recorder;
  bot: TestAgent;
  other: TestAgent;
  logs: string[];
  close(): Promise<void>;
}

export async function startEnv(extra: Partial<SidecarOptions> = {}): Promise<Env> {
  const bot = await testAgent('agent-billing-bot');
  const other = await testAgent('agent-other');
  const app = await startRecorder();
  const logs: string[] = [];
  const log: Logger = createLogger('debug', (l) => logs.push(l));
  const policy = await loadPolicyText(billingPolicy({ bot, other }), 'billing.yaml');
  const sidecar = await startSidecar({ policy, upstream: app.url, listen: '127.0.0.1:0', admin: '127.0.0.1:0', log, ...extra });
  return {
    sidecar, app, bot, other, logs,
    async close() {
      await sidecar.close();
      await app.close();
    },
  };
}
