import { readFile } from 'node:fs/promises';
import { createServer } from 'node:https';
import { webhookHandler } from '../kubernetes/webhook.js';
import { createLogger } from '../log.js';
import { parseHostPort } from '../proxy/server.js';
import { parseCommand, required } from './args.js';
import { DEFAULT_IMAGE, injectDefaultsFrom } from './inject.js';

const USAGE = `Usage: agents-chain webhook --tls-cert FILE --tls-key FILE [--listen HOST:PORT] [--defaults FILE] [--image IMAGE] [--native-sidecar]

A mutating admission webhook (AdmissionReview v1 over HTTPS, POST /mutate):
pods annotated agents-chain.io/inject: "true" get the sidecar as a JSONPatch,
exactly as "agents-chain inject" adds it. A pod that asks for the sidecar and
cannot get it is denied (allowed: false) with the reasons, unless it says
agents-chain.io/allow-unprotected: "true" (then admitted with a warning). The
MutatingWebhookConfiguration's failurePolicy decides what a webhook outage means.

Options:
  --tls-cert FILE    PEM certificate (e.g. from cert-manager)   AGENTS_CHAIN_TLS_CERT
  --tls-key FILE     PEM private key                            AGENTS_CHAIN_TLS_KEY
  --listen HOST:PORT [0.0.0.0:8443]
  --defaults FILE    injection defaults (YAML; the chart mounts its <release>-injection ConfigMap)
                                                           AGENTS_CHAIN_INJECT_DEFAULTS
  --image IMAGE      the sidecar image [${DEFAULT_IMAGE}]   AGENTS_CHAIN_IMAGE
  --native-sidecar   inject as a native sidecar unless a pod says otherwise
`;

export async function webhookCommand(argv: string[]): Promise<number> {
  const args = parseCommand(argv, {
    'tls-cert': { type: 'string' }, 'tls-key': { type: 'string' }, listen: { type: 'string' }, defaults: { type: 'string' }, image: { type: 'string' }, 'native-sidecar': { type: 'boolean' },
  }, USAGE);
  if (!args) return 0;
  const v = args.values;
  const env = process.env;
  const cert = await readFile(required(v['tls-cert'] ?? env.AGENTS_CHAIN_TLS_CERT, '--tls-cert', USAGE));
  const key = await readFile(required(v['tls-key'] ?? env.AGENTS_CHAIN_TLS_KEY, '--tls-key', USAGE));
  const log = createLogger();
  const defaults = injectDefaultsFrom(v, env);
  const server = createServer({ cert, key, minVersion: 'TLSv1.2' }, webhookHandler(defaults, { info: (msg, fields) => log.info(msg, fields), warn: (msg, fields) => log.warn(msg, fields) }));
  const at = parseHostPort(v.listen ?? '0.0.0.0:8443', '--listen');
  await new Promise<void>((resolve, reject) => { server.once('error', reject); server.listen(at.port, at.host, resolve); });
  const addr = server.address() as { address: string; port: number };
  log.info('webhook listening', { listen: `https://${addr.address.includes(':') ? `[${addr.address}]` : addr.address}:${addr.port}`, image: defaults.image, capture: defaults.captureMode, port: defaults.port, adminPort: defaults.adminPort });
  const stop = (): void => { server.close(() => process.exit(0)); server.closeIdleConnections(); };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  return 0;
}
