import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MemoryReplayStore, type ReplayStore } from '../auth/replay.js';
import { createLogger, type Logger } from '../log.js';
import type { Policy } from '../policy/types.js';
import { Upstream } from './forward.js';
import { handleCall, type PipelineDeps } from './pipeline.js';

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

export interface SidecarOptions {
  policy: Policy;
  /** The app, e.g. http://127.0.0.1:8081 */
  upstream: string;
  /** host:port for agents; port 0 picks a free one. */
  listen?: string;
  /** host:port for operators (/healthz, /readyz). */
  admin?: string;
  tokenHeader?: string;
  maxBodyBytes?: number;
  replay?: ReplayStore;
  log?: Logger;
  now?: () => number;
}

export interface Sidecar {
  url: string;
  adminUrl: string;
  close(): Promise<void>;
}

export function parseHostPort(s: string, flag: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(s);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new Error(`${flag} must be HOST:PORT, got "${s}"`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}

export async function startSidecar(opts: SidecarOptions): Promise<Sidecar> {
  const log = opts.log ?? createLogger();
  const upstream = new Upstream(opts.upstream);
  const deps: PipelineDeps = {
    policy: opts.policy,
    replay: opts.replay ?? new MemoryReplayStore(),
    tokenHeader: opts.tokenHeader ?? 'authorization',
    maxBodyBytes: opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    now: opts.now ?? Date.now,
    upstream,
    log,
  };
  let ready = false;

  const data = createServer({ requireHostHeader: true }, (req, res) => void handleCall(req, res, deps));
  data.keepAliveTimeout = 65_000;
  const admin = createServer((req, res) => adminHandler(req, res, () => ready));

  const dataAddr = await listen(data, parseHostPort(opts.listen ?? '127.0.0.1:8080', '--listen'));
  const adminAddr = await listen(admin, parseHostPort(opts.admin ?? '127.0.0.1:9090', '--admin'));
  ready = true;
  log.info('sidecar listening', {
    listen: urlOf(dataAddr), admin: urlOf(adminAddr), upstream: upstream.origin,
    policy: opts.policy.file, policyHash: opts.policy.hash,
  });

  return {
    url: urlOf(dataAddr),
    adminUrl: urlOf(adminAddr),
    async close() {
      ready = false;
      await Promise.all([closeServer(data), closeServer(admin)]);
      await upstream.close();
    },
  };
}

function adminHandler(req: IncomingMessage, res: ServerResponse, isReady: () => boolean): void {
  const send = (status: number, body: unknown): void => {
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify(body));
  };
  const path = (req.url ?? '').split('?')[0];
  if (req.method !== 'GET' && req.method !== 'HEAD') return send(405, { error: 'method_not_allowed' });
  if (path === '/healthz') return send(200, { status: 'ok' });
  if (path === '/readyz') return isReady() ? send(200, { status: 'ready' }) : send(503, { status: 'not_ready' });
  send(404, { error: 'not_found' });
}

function listen(server: Server, at: { host: string; port: number }): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(at.port, at.host, () => {
      server.off('error', reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

/** Stops accepting, lets in-flight calls finish for up to `graceMs`, then cuts what is left. */
function closeServer(server: Server, graceMs = 5_000): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => server.closeAllConnections(), graceMs);
    timer.unref();
    server.close(() => { clearTimeout(timer); resolve(); });
    server.closeIdleConnections();
  });
}

function urlOf(a: AddressInfo): string {
  const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
  return `http://${host}:${a.port}`;
}
