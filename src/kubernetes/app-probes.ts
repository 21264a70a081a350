/**
 * The app's own probes, run by the sidecar (iptables capture mode). The kubelet probes the pod IP
 * from outside the namespace, so a probe of a captured app port would land in the sidecar and fail
 * for want of a token. Injection rewrites each such probe to the admin listener,
 * GET /app-health/<container>/<livez|readyz|startupz>, and passes the original in
 * AGENTS_CHAIN_APP_PROBES; here the sidecar runs it against 127.0.0.1 (which is never redirected) the
 * way the kubelet would have: HTTP GET with the probe's path and headers, 200-399 is a pass; or a
 * TCP connect. The answer is 200 or 503 with a small JSON body of our own: the app's body is never
 * passed on (the admin port is open to the pod network).
 */
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import { parseStrictJson } from '../json/strict.js';
import { isPortNumber } from './ports.js';

export const APP_PROBES_ENV = 'AGENTS_CHAIN_APP_PROBES';
export const APP_HEALTH_PREFIX = '/app-health/';
const KINDS = ['livez', 'readyz', 'startupz'];
/** The kubelet's default when a probe gives no timeoutSeconds. */
const DEFAULT_TIMEOUT_SECONDS = 1;

export type AppProbe =
  | { httpGet: { path: string; port: number; scheme: 'HTTP' | 'HTTPS'; httpHeaders: { name: string; value: string }[] }; timeoutSeconds: number }
  | { tcpSocket: { port: number }; timeoutSeconds: number };

/** By key "<container>/<kind>". */
export type AppProbes = ReadonlyMap<string, AppProbe>;

export interface ProbeResult {
  ok: boolean;
  /** The app's HTTP status (httpGet probes that got an answer). */
  status?: number;
  /** Why the probe failed without a status: refused, timed out, ... */
  error?: string;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * AGENTS_CHAIN_APP_PROBES → probes by key. Undefined or empty text: none. Anything malformed throws
 * naming the key and the field: a sidecar that cannot run a probe would fail it forever, so it
 * refuses to start instead and the reason is in its log.
 */
export function parseAppProbes(text: string | undefined): AppProbes {
  const out = new Map<string, AppProbe>();
  if (text === undefined || text.trim() === '') return out;
  let doc: unknown;
  try {
    doc = parseStrictJson(text);
  } catch (err) {
    throw new Error(`${APP_PROBES_ENV} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  if (!isObj(doc)) throw new Error(`${APP_PROBES_ENV} must be a JSON object of "<container>/<kind>": probe`);
  for (const [key, value] of Object.entries(doc)) {
    const at = `${APP_PROBES_ENV}["${key}"]`;
    const [container, kind, ...more] = key.split('/');
    if (!container || !/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(container) || !KINDS.includes(kind ?? '') || more.length) {
      throw new Error(`${at}: the key must be "<container name>/<${KINDS.join('|')}>"`);
    }
    if (!isObj(value)) throw new Error(`${at} must be an object with httpGet or tcpSocket`);
    const timeout = value.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS;
    if (!Number.isInteger(timeout) || (timeout as number) < 1) throw new Error(`${at}.timeoutSeconds must be a whole number of seconds, at least 1`);
    const timeoutSeconds = timeout as number;
    if ((value.httpGet === undefined) === (value.tcpSocket === undefined)) throw new Error(`${at} must have exactly one of httpGet and tcpSocket`);
    if (value.tcpSocket !== undefined) {
      const t = value.tcpSocket;
      if (!isObj(t) || !isPortNumber(t.port)) throw new Error(`${at}.tcpSocket.port must be a port number (1-65535)`);
      out.set(key, { tcpSocket: { port: t.port }, timeoutSeconds });
      continue;
    }
    const h = value.httpGet;
    if (!isObj(h) || !isPortNumber(h.port)) throw new Error(`${at}.httpGet.port must be a port number (1-65535)`);
    const path = h.path ?? '/';
    if (typeof path !== 'string' || !path.startsWith('/') || /[\s\u0000-\u001f\u007f]/.test(path))
      throw new Error(`${at}.httpGet.path must be a path starting with "/" without spaces or control characters`);
    const scheme = h.scheme == null ? 'HTTP' : typeof h.scheme === 'string' ? h.scheme.toUpperCase() : undefined;
    if (scheme !== 'HTTP' && scheme !== 'HTTPS') throw new Error(`${at}.httpGet.scheme must be HTTP or HTTPS, got ${JSON.stringify(h.scheme)}`);
    const headers = h.httpHeaders ?? [];
    if (!Array.isArray(headers)) throw new Error(`${at}.httpGet.httpHeaders must be a list of {name, value}`);
    const httpHeaders = headers.map((x: unknown, i) => {
      if (
        !isObj(x) ||
        typeof x.name !== 'string' ||
        !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(x.name) ||
        typeof x.value !== 'string' ||
        /[\r\n\u0000]/.test(x.value)
      ) {
        throw new Error(`${at}.httpGet.httpHeaders[${i}] must be {name: <header name>, value: <text on one line>}`);
      }
      return { name: x.name, value: x.value };
    });
    out.set(key, { httpGet: { path, port: h.port, scheme, httpHeaders }, timeoutSeconds });
  }
  return out;
}

/** The kubelet follows this many redirects to the same host. */
const MAX_REDIRECTS = 10;
/** A probe's answer is reused this long: /app-health needs no token, so its callers must not multiply the app's load. */
export const PROBE_REUSE_MS = 1_000;
const shared = new WeakMap<AppProbe, { at: number; result: Promise<ProbeResult> }>();

/**
 * The probe's answer, shared: callers while one runs get its answer, and so do callers within
 * PROBE_REUSE_MS after it ended. Anyone reaching the admin port can ask; the app sees at most one
 * probe per second per probe, whatever the number of callers.
 */
export function sharedAppProbe(probe: AppProbe, now: () => number = Date.now): Promise<ProbeResult> {
  const last = shared.get(probe);
  if (last && (last.at === Infinity || now() - last.at < PROBE_REUSE_MS)) return last.result;
  const entry = { at: Infinity, result: runAppProbe(probe) };
  shared.set(probe, entry);
  void entry.result.then(() => {
    entry.at = now();
  });
  return entry.result;
}

/** Runs one probe against the app on 127.0.0.1, as the kubelet would against the pod IP. */
export function runAppProbe(probe: AppProbe): Promise<ProbeResult> {
  // The whole probe, redirects included, within timeoutSeconds (capped: a huge value overflows the timer).
  const ms = Math.min(probe.timeoutSeconds * 1000, 2 ** 31 - 1);
  if ('tcpSocket' in probe) {
    return new Promise((resolve) => {
      const socket = connect({ host: '127.0.0.1', port: probe.tcpSocket.port });
      const done = (r: ProbeResult): void => {
        clearTimeout(timer);
        socket.destroy();
        resolve(r);
      };
      const timer = setTimeout(() => done({ ok: false, error: `no connection within ${probe.timeoutSeconds}s` }), ms);
      socket.once('connect', () => done({ ok: true }));
      socket.once('error', (err: NodeJS.ErrnoException) => done({ ok: false, error: err.code ?? err.message }));
    });
  }
  return httpProbe(probe.httpGet, Date.now() + ms, probe.timeoutSeconds, 0);
}

function httpProbe(g: Extract<AppProbe, { httpGet: unknown }>['httpGet'], deadline: number, timeoutSeconds: number, hops: number): Promise<ProbeResult> {
  const ms = Math.max(0, deadline - Date.now());
  const headers: Record<string, string> = { 'user-agent': 'kube-probe/agents-chain', accept: '*/*' };
  // The probe's own headers win, Host included, as with the kubelet.
  for (const { name, value } of g.httpHeaders) headers[name.toLowerCase()] = value;
  const request = g.scheme === 'HTTPS' ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    let settled = false;
    const done = (r: ProbeResult): void => {
      if (settled) return;
      settled = true;
      resolve(r);
    };
    // agent: false — one connection per probe, closed after it, like the kubelet's prober.
    // rejectUnauthorized: false — the kubelet does not verify the app's certificate either.
    const req = request(
      { host: '127.0.0.1', port: g.port, path: g.path, method: 'GET', headers, agent: false, rejectUnauthorized: false, maxHeaderSize: 1 << 20 },
      (res) => {
        const status = res.statusCode ?? 0;
        const location = res.headers.location;
        // As the kubelet: a redirect to the same host is followed (up to 10), one to another host counts as success.
        if (status >= 300 && status < 400 && location && hops < MAX_REDIRECTS) {
          let next: URL | undefined;
          try {
            next = new URL(location, `${g.scheme.toLowerCase()}://127.0.0.1:${g.port}${g.path}`);
          } catch {
            next = undefined;
          }
          if (next && (next.hostname === '127.0.0.1' || next.hostname === 'localhost')) {
            res.resume();
            clearTimeout(timer);
            const port = next.port ? Number(next.port) : next.protocol === 'https:' ? 443 : 80;
            void httpProbe(
              { ...g, scheme: next.protocol === 'https:' ? 'HTTPS' : 'HTTP', port, path: `${next.pathname}${next.search}` },
              deadline,
              timeoutSeconds,
              hops + 1,
            ).then(done);
            return;
          }
        }
        done({ ok: status >= 200 && status < 400, status });
        // The body is read and dropped, never passed on.
        res.resume();
      },
    );
    // Answered or not, the connection ends by the deadline (a body that never ends would keep it open).
    const timer = setTimeout(() => {
      done({ ok: false, error: `no answer within ${timeoutSeconds}s` });
      req.destroy();
    }, ms);
    req.once('error', (err: NodeJS.ErrnoException) => done({ ok: false, error: err.code ?? err.message }));
    req.once('close', () => clearTimeout(timer));
    req.end();
  });
}

/**
 * The admin listener's answer to GET/HEAD /app-health/<container>/<kind>: 200 when the app's probe
 * passes, 503 when it fails, 404 for a probe the sidecar was not given.
 */
export async function appHealthAnswer(path: string, probes: AppProbes | undefined): Promise<{ status: number; body: Record<string, unknown> }> {
  const key = path.slice(APP_HEALTH_PREFIX.length);
  const probe = probes?.get(key);
  // The names are not listed: the endpoint answers without a token, and they would tell the pod's containers.
  if (!probe) return { status: 404, body: { error: 'not_found', message: `no app probe "${key}" in ${APP_PROBES_ENV}` } };
  const r = await sharedAppProbe(probe);
  const body = {
    probe: key,
    status: r.ok ? 'ok' : 'failing',
    ...(r.status !== undefined ? { appStatus: r.status } : {}),
    ...(r.error ? { error: r.error } : {}),
  };
  return { status: r.ok ? 200 : 503, body };
}
