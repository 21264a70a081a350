import { readFile } from 'node:fs/promises';
import { createServer } from 'node:https';
import type { Server } from 'node:https';
import { createSecureContext } from 'node:tls';
import { webhookHandler } from '../kubernetes/webhook.js';
import { createLogger } from '../log.js';
import type { Logger } from '../log.js';
import { parseHostPort } from '../sidecar/start.js';
import { parseCommand, required, UsageError } from './args.js';
import { DEFAULT_IMAGE, injectDefaultsFrom } from './inject.js';
import { readFlagFile, StartupError, startupErrorText } from './startup.js';

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
  --tls-reload-ms N  how often the certificate files are read again (cert-manager renews the
                     Secret in place; a renewed pair is served without a restart) [10000]
  --image IMAGE      the sidecar image [${DEFAULT_IMAGE}]   AGENTS_CHAIN_IMAGE
  --native-sidecar   inject as a native sidecar unless a pod says otherwise
`;

export async function webhookCommand(argv: string[]): Promise<number> {
  const args = parseCommand(
    argv,
    {
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      listen: { type: 'string' },
      defaults: { type: 'string' },
      'tls-reload-ms': { type: 'string' },
      image: { type: 'string' },
      'native-sidecar': { type: 'boolean' },
    },
    USAGE,
  );
  if (!args) return 0;
  const v = args.values;
  const env = process.env;
  const certFile = required(v['tls-cert'] ?? env.AGENTS_CHAIN_TLS_CERT, '--tls-cert', USAGE);
  const keyFile = required(v['tls-key'] ?? env.AGENTS_CHAIN_TLS_KEY, '--tls-key', USAGE);
  const reloadMs = Number(v['tls-reload-ms'] ?? 10_000);
  if (!Number.isInteger(reloadMs) || reloadMs < 100)
    throw new UsageError(`--tls-reload-ms must be a whole number of ms, at least 100, got "${v['tls-reload-ms']}"`);
  // A start that fails (a missing file, a busy port) is one "startup failed" log line (main.ts).
  const cert = Buffer.from(await readFlagFile('--tls-cert', certFile));
  const key = Buffer.from(await readFlagFile('--tls-key', keyFile));
  const log = createLogger();
  const defaults = injectDefaultsFrom(v, env);
  try {
    createSecureContext({ cert, key }); // refuses a PEM that is not one, or a key that does not match the certificate
  } catch (err) {
    throw new StartupError(`--tls-cert ${certFile} / --tls-key ${keyFile}: ${(err as Error).message}`, err);
  }
  const server = createServer(
    { cert, key, minVersion: 'TLSv1.2' },
    webhookHandler(defaults, { info: (msg, fields) => log.info(msg, fields), warn: (msg, fields) => log.warn(msg, fields) }),
  );
  const at = parseHostPort(v.listen ?? '0.0.0.0:8443', '--listen');
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(at.port, at.host, resolve);
  }).catch((err: unknown) => {
    throw new StartupError(startupErrorText(err, '--listen'), err);
  });
  const addr = server.address() as { address: string; port: number };
  const reload = followRenewals(server, { cert: certFile, key: keyFile }, { cert, key }, reloadMs, log);
  const stop = (): void => {
    clearInterval(reload);
    server.close(() => process.exit(0));
    server.closeIdleConnections();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  log.info('webhook listening', {
    listen: `https://${addr.address.includes(':') ? `[${addr.address}]` : addr.address}:${addr.port}`,
    image: defaults.image,
    capture: defaults.captureMode,
    port: defaults.port,
    adminPort: defaults.adminPort,
  });
  return 0;
}

/**
 * The API server refuses an expired certificate, and with failurePolicy Fail that stops every annotated
 * rollout: follow the Secret's renewals (an atomic swap of both files) without a restart.
 */
function followRenewals(
  server: Server,
  files: { cert: string; key: string },
  served: { cert: Buffer; key: Buffer },
  reloadMs: number,
  log: Logger,
): NodeJS.Timeout {
  const certFile = files.cert;
  let { cert, key } = served;
  const reload = setInterval(() => {
    void Promise.all([readFile(certFile), readFile(files.key)]).then(
      ([c, k]) => {
        if (c.equals(cert) && k.equals(key)) return;
        try {
          createSecureContext({ cert: c, key: k }); // refuses a key that does not match the certificate
          server.setSecureContext({ cert: c, key: k, minVersion: 'TLSv1.2' });
          cert = c;
          key = k;
          log.info('webhook certificate reloaded', { cert: certFile });
        } catch (err) {
          log.warn('webhook certificate not reloaded: still serving the previous one', { cert: certFile, error: (err as Error).message });
        }
      },
      (err: Error) => log.warn('webhook certificate files unreadable: still serving the previous one', { error: err.message }),
    );
  }, reloadMs);
  reload.unref();
  return reload;
}
