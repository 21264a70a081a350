import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { failStartup, StartupError, startupErrorText } from '../cli/startup.js';
import { createLogger } from '../log.js';
import { loadPolicyFile } from '../policy/load.js';
import { startSidecar } from '../sidecar/start.js';
import { createDemoApp } from './app.js';

/** `make demo`: the demo app behind the sidecar, in-memory stores, example policy. */
const root = fileURLToPath(new URL('../../', import.meta.url));
const policyFile = `${root}config/examples/billing.yaml`;
const listen = process.env.AGENTS_CHAIN_LISTEN ?? '127.0.0.1:8080';
const admin = process.env.AGENTS_CHAIN_ADMIN ?? '127.0.0.1:9090';
// Everything on the admin listener but the probes and /metrics needs a token: the demo makes one up.
const adminToken = process.env.AGENTS_CHAIN_ADMIN_TOKEN || randomBytes(18).toString('base64url');

const app = createDemoApp();
await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
const appUrl = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
// A busy port (a second `make demo`) is one "startup failed" log line naming the variable to change, not a stack.
const sidecar = await startSidecar({ policy: await loadPolicyFile(policyFile), upstream: appUrl, listen, admin, adminToken, log: createLogger('info') }).catch(
  (err: unknown) => {
    const port = (err as { syscall?: string; port?: number }).syscall === 'listen' ? (err as { port?: number }).port : undefined;
    const variable =
      port === undefined ? undefined : listen.endsWith(`:${port}`) ? 'AGENTS_CHAIN_LISTEN' : admin.endsWith(`:${port}`) ? 'AGENTS_CHAIN_ADMIN' : undefined;
    return failStartup('demo', variable ? new StartupError(startupErrorText(err, variable), err) : err);
  },
);

const cli = `node ${root}dist/cli/main.js`;
const key = `${root}config/examples/keys/billing-bot.private.jwk.json`;
const token = (cap: string): string => `$(${cli} token --key ${key} --agent agent-billing-bot --capability ${cap})`;
process.stderr.write(`
agents-chain demo: sidecar ${sidecar.url} -> app ${appUrl} (admin ${sidecar.adminUrl})
policy: ${policyFile}

Allowed (amount 500 USD is within the grant):
  curl -si ${sidecar.url}/invoices -H "Authorization: Bearer ${token('createInvoice')}" -H 'content-type: application/json' -d '{"customerId":"c-100","amount":500,"currency":"USD","customer":{"tier":"gold"},"dryRun":false}'

Denied, constraint_violated (amount 5000 is over max 1000; GBP is not allowed):
  curl -si ${sidecar.url}/invoices -H "Authorization: Bearer ${token('createInvoice')}" -H 'content-type: application/json' -d '{"customerId":"c-100","amount":5000,"currency":"GBP","customer":{"tier":"gold"},"dryRun":false}'

Denied, token_missing:
  curl -si ${sidecar.url}/invoices/inv-1

What the service offers (discovery), and the decisions so far (Prometheus metrics):
  curl -s ${sidecar.url}/.well-known/agent-configuration
  curl -s ${sidecar.adminUrl}/metrics | grep '^agents_chain_requests_total'

The admin API (audit counters, registered agents) takes this run's admin token (set AGENTS_CHAIN_ADMIN_TOKEN to choose it):
  curl -s ${sidecar.adminUrl}/stats -H "Authorization: Bearer ${adminToken}"

Ctrl-C stops the demo.
`);

const stop = async (): Promise<void> => {
  await sidecar.close();
  app.close();
  process.exit(0);
};
process.once('SIGINT', () => void stop());
process.once('SIGTERM', () => void stop());
