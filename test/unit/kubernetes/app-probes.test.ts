import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAppProbes, PROBE_REUSE_MS, runAppProbe, type AppProbe } from '../../../src/kubernetes/app-probes.js';
import type { Sidecar } from '../../../src/sidecar/start.js';
import { startTestSidecar } from '../../support/fixture.js';
import { call } from '../../support/http.js';
import { selfSignedCert } from '../../support/kubernetes.js';
import { until } from '../../support/until.js';

/** The app: answers each path with a status, remembers what the probes sent. */
interface App {
  port: number;
  seen: { url: string; headers: IncomingHttpHeaders }[];
  server: Server;
}

function listen(server: Server | ReturnType<typeof createNetServer>): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

const SECRET_BODY = 'app-internal-state: db=primary-7, build=secret';

async function startApp(): Promise<App> {
  const seen: App['seen'] = [];
  let ready = 200;
  const server = createHttpServer((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    if (req.url === '/toggle') {
      ready = ready === 200 ? 500 : 200;
      return void res.end();
    }
    if (req.url === '/hang') return; // never answers
    // Same-host redirects (followed, as the kubelet does): to a failing path, and a loop.
    if (req.url === '/to-missing') return void res.writeHead(302, { location: '/missing' }).end();
    if (req.url === '/loop') return void res.writeHead(302, { location: '/loop' }).end();
    const status = req.url?.startsWith('/ready') ? ready : req.url === '/moved' ? 302 : req.url === '/missing' ? 404 : 200;
    res.writeHead(status, { 'content-type': 'text/plain', ...(status === 302 ? { location: 'http://elsewhere.example/' } : {}) });
    res.end(SECRET_BODY);
  });
  return { port: await listen(server), seen, server };
}

/** A port nothing listens on: bound, read, closed. */
async function closedPort(): Promise<number> {
  const s = createNetServer();
  const port = await listen(s);
  await new Promise((r) => s.close(r));
  return port;
}

const http = (port: number, path: string, extra: Partial<Extract<AppProbe, { httpGet: unknown }>['httpGet']> = {}, timeoutSeconds = 1): AppProbe => ({
  httpGet: { path, port, scheme: 'HTTP', httpHeaders: [], ...extra },
  timeoutSeconds,
});

describe('parseAppProbes (AGENTS_CHAIN_APP_PROBES)', () => {
  it("reads the injector's JSON, with the kubelet's defaults for what it leaves out", () => {
    const probes = parseAppProbes(
      JSON.stringify({
        'app/readyz': { httpGet: { path: '/ready', port: 8080, scheme: 'HTTP', httpHeaders: [{ name: 'X-Probe', value: 'kubelet' }] }, timeoutSeconds: 3 },
        'app/livez': { tcpSocket: { port: 8080 } },
        'worker-2/startupz': { httpGet: { port: 9000 } },
      }),
    );
    expect([...probes.keys()]).toEqual(['app/readyz', 'app/livez', 'worker-2/startupz']);
    expect(probes.get('app/readyz')).toEqual({
      httpGet: { path: '/ready', port: 8080, scheme: 'HTTP', httpHeaders: [{ name: 'X-Probe', value: 'kubelet' }] },
      timeoutSeconds: 3,
    });
    expect(probes.get('app/livez')).toEqual({ tcpSocket: { port: 8080 }, timeoutSeconds: 1 });
    expect(probes.get('worker-2/startupz')).toEqual({ httpGet: { path: '/', port: 9000, scheme: 'HTTP', httpHeaders: [] }, timeoutSeconds: 1 });
    expect(parseAppProbes(undefined).size).toBe(0);
    expect(parseAppProbes('').size).toBe(0);
  });

  it('refuses what it could not run, naming the probe and the field', () => {
    const bad: [unknown, string][] = [
      ['{"app/readyz": {"tcpSocket": {"port": 1}}, "app/readyz": {"tcpSocket": {"port": 2}}}', 'AGENTS_CHAIN_APP_PROBES is not valid JSON: duplicate'],
      [[], 'must be a JSON object'],
      [{ 'app/ready': { tcpSocket: { port: 1 } } }, 'AGENTS_CHAIN_APP_PROBES["app/ready"]: the key must be "<container name>/<livez|readyz|startupz>"'],
      [{ 'App/readyz': { tcpSocket: { port: 1 } } }, '["App/readyz"]: the key must be'],
      [{ 'app/readyz': {} }, '["app/readyz"] must have exactly one of httpGet and tcpSocket'],
      [{ 'app/readyz': { httpGet: { port: 80 }, tcpSocket: { port: 80 } } }, 'exactly one of httpGet and tcpSocket'],
      [{ 'app/readyz': { tcpSocket: { port: 'http' } } }, '["app/readyz"].tcpSocket.port must be a port number (1-65535)'],
      [{ 'app/readyz': { httpGet: { port: 70000 } } }, '.httpGet.port must be a port number'],
      [{ 'app/readyz': { httpGet: { port: 80, path: 'ready' } } }, '.httpGet.path must be a path starting with "/"'],
      [{ 'app/readyz': { httpGet: { port: 80, path: '/a b' } } }, '.httpGet.path must be a path'],
      [{ 'app/readyz': { httpGet: { port: 80, scheme: 'GRPC' } } }, '.httpGet.scheme must be HTTP or HTTPS, got "GRPC"'],
      [
        { 'app/readyz': { httpGet: { port: 80, httpHeaders: [{ name: 'X', value: 'a\r\nInjected: 1' }] } } },
        '.httpGet.httpHeaders[0] must be {name: <header name>, value: <text on one line>}',
      ],
      [{ 'app/readyz': { httpGet: { port: 80, httpHeaders: [{ name: 'Bad Name', value: 'x' }] } } }, '.httpGet.httpHeaders[0]'],
      [{ 'app/readyz': { tcpSocket: { port: 80 }, timeoutSeconds: 0 } }, '.timeoutSeconds must be a whole number of seconds, at least 1'],
    ];
    for (const [doc, message] of bad) {
      expect(() => parseAppProbes(typeof doc === 'string' ? doc : JSON.stringify(doc)), JSON.stringify(doc)).toThrow(message);
    }
  });
});

describe('runAppProbe against a real app on 127.0.0.1', () => {
  let app: App;
  beforeAll(async () => {
    app = await startApp();
  });
  afterAll(async () => {
    app.server.closeAllConnections();
    await new Promise((r) => app.server.close(r));
  });

  it("httpGet: 200-399 pass (a redirect is not followed), 4xx/5xx fail, with the app's status", async () => {
    expect(await runAppProbe(http(app.port, '/ready'))).toEqual({ ok: true, status: 200 });
    expect(await runAppProbe(http(app.port, '/moved'))).toEqual({ ok: true, status: 302 });
    expect(await runAppProbe(http(app.port, '/missing'))).toEqual({ ok: false, status: 404 });
    // A redirect to the same host is followed (a wedged app that redirects to a failing page fails); after 10, the last 3xx counts.
    expect(await runAppProbe(http(app.port, '/to-missing'))).toEqual({ ok: false, status: 404 });
    const loops = app.seen.length;
    expect(await runAppProbe(http(app.port, '/loop'))).toEqual({ ok: true, status: 302 });
    expect(app.seen.length - loops).toBe(11);
    await runAppProbe(http(app.port, '/toggle'));
    expect(await runAppProbe(http(app.port, '/ready'))).toEqual({ ok: false, status: 500 });
    await runAppProbe(http(app.port, '/toggle'));
    expect(app.seen.some((s) => s.url.includes('elsewhere'))).toBe(false);
  });

  it("sends the probe's path (query included) and headers, Host among them, like the kubelet", async () => {
    await runAppProbe(
      http(app.port, '/ready?deep=1', {
        httpHeaders: [
          { name: 'X-Probe', value: 'kubelet' },
          { name: 'Host', value: 'app.internal' },
        ],
      }),
    );
    const last = app.seen.at(-1)!;
    expect(last.url).toBe('/ready?deep=1');
    expect(last.headers).toMatchObject({ 'x-probe': 'kubelet', host: 'app.internal', accept: '*/*' });
    expect(last.headers['user-agent']).toMatch(/^kube-probe\//);
  });

  it('fails on a refused connection and on an app that does not answer within timeoutSeconds', async () => {
    expect(await runAppProbe(http(await closedPort(), '/ready'))).toEqual({ ok: false, error: 'ECONNREFUSED' });
    expect(await runAppProbe(http(app.port, '/hang', {}, 1))).toEqual({ ok: false, error: 'no answer within 1s' });
  });

  it('an app whose body never ends: the status decides at once, and the connection is closed by the deadline', async () => {
    let closed!: Promise<void>;
    const server = createHttpServer((req, res) => {
      closed = new Promise((r) => req.socket.once('close', () => r()));
      res.writeHead(200);
      res.write('streaming forever');
    });
    const port = await listen(server);
    try {
      expect(await runAppProbe(http(port, '/stream'))).toEqual({ ok: true, status: 200 });
      await closed; // without the deadline this would never resolve (the test would time out)
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('tcpSocket: passes when the port accepts a connection, fails when refused', async () => {
    const server = createNetServer((s) => s.end());
    const port = await listen(server);
    try {
      expect(await runAppProbe({ tcpSocket: { port }, timeoutSeconds: 1 })).toEqual({ ok: true });
    } finally {
      await new Promise((r) => server.close(r));
    }
    expect(await runAppProbe({ tcpSocket: { port: await closedPort() }, timeoutSeconds: 1 })).toEqual({ ok: false, error: 'ECONNREFUSED' });
  });

  it("HTTPS: the app's self-signed certificate is accepted, as the kubelet accepts it", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'agents-chain-probe-'));
    try {
      selfSignedCert(join(dir, 'c'), join(dir, 'k'), 'app');
      const server = createHttpsServer({ key: readFileSync(join(dir, 'k')), cert: readFileSync(join(dir, 'c')) }, (_req, res) => res.end('ok'));
      const port = await listen(server);
      try {
        expect(await runAppProbe(http(port, '/', { scheme: 'HTTPS' }))).toEqual({ ok: true, status: 200 });
        // Plain HTTP to a TLS port is a failed probe, not a hang or a crash.
        expect((await runAppProbe(http(port, '/'))).ok).toBe(false);
      } finally {
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/**
 * Waits out the reuse window of the last probe answer. A time-to-live is the subject here and the admin listener's
 * probe cache reads the wall clock (no clock to move), so this one wait is timed; where a changed answer is
 * expected, the tests poll for it instead.
 */
const reused = () => new Promise((r) => setTimeout(r, PROBE_REUSE_MS + 50));

describe('the admin listener answers /app-health/<container>/<kind>', () => {
  let app: App;
  let sidecar: Sidecar;
  beforeAll(async () => {
    app = await startApp();
    ({ sidecar } = await startTestSidecar({
      policy: 'version: 1\nprovider: { name: probe-test, issuer: https://probe.example.com }\ncapabilities:\n  - { name: read, method: GET, path: /items }\n',
      policyName: 'probe.yaml',
      app: { url: `http://127.0.0.1:${app.port}` },
      logLevel: 'error',
      // An admin token is set: the probes must still be open, as /readyz is.
      adminToken: 'admin-secret',
      appProbes: parseAppProbes(
        JSON.stringify({
          'app/readyz': {
            httpGet: { path: '/ready', port: app.port, scheme: 'HTTP', httpHeaders: [{ name: 'X-Probe', value: 'kubelet' }] },
            timeoutSeconds: 1,
          },
          'app/livez': { tcpSocket: { port: app.port } },
          'app/startupz': { tcpSocket: { port: await closedPort() } },
        }),
      ),
    }));
  });
  afterAll(async () => {
    await sidecar.close();
    app.server.closeAllConnections();
    await new Promise((r) => app.server.close(r));
  });
  const get = (path: string, method: 'GET' | 'HEAD' = 'GET') => call(sidecar.adminUrl, { method, path });

  it("200 while the app's probe passes, 503 once it fails, without a token; the app's body is never passed on", async () => {
    const ok = await get('/app-health/app/readyz');
    expect(ok.status).toBe(200);
    expect(ok.json).toEqual({ probe: 'app/readyz', status: 'ok', appStatus: 200 });
    expect(app.seen.at(-1)).toMatchObject({ url: '/ready', headers: { 'x-probe': 'kubelet' } });
    await call(`http://127.0.0.1:${app.port}`, { path: '/toggle' });
    await until(async () => (await get('/app-health/app/readyz')).status !== 200); // the reused 200 ends
    const failing = await get('/app-health/app/readyz');
    expect(failing.status).toBe(503);
    expect(failing.json).toEqual({ probe: 'app/readyz', status: 'failing', appStatus: 500 });
    expect(ok.text + failing.text).not.toContain('secret');
    expect((await get('/app-health/app/readyz', 'HEAD')).status).toBe(503);
    await call(`http://127.0.0.1:${app.port}`, { path: '/toggle' });
    await until(async () => (await get('/app-health/app/readyz', 'HEAD')).status !== 503); // the reused 503 ends
    expect((await get('/app-health/app/readyz', 'HEAD')).status).toBe(200);
  });

  it("many callers at once cost the app one probe (the endpoint needs no token: it must not multiply the app's load)", async () => {
    await reused();
    const before = app.seen.filter((r) => r.url === '/ready').length;
    const answers = await Promise.all(Array.from({ length: 50 }, () => get('/app-health/app/readyz')));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    expect(app.seen.filter((r) => r.url === '/ready').length - before).toBe(1);
  });

  it('tcpSocket probes: connected is 200, refused is 503 with the reason', async () => {
    expect(await get('/app-health/app/livez')).toMatchObject({ status: 200, json: { probe: 'app/livez', status: 'ok' } });
    expect(await get('/app-health/app/startupz')).toMatchObject({ status: 503, json: { probe: 'app/startupz', status: 'failing', error: 'ECONNREFUSED' } });
  });

  it('404 for a probe it was not given; the other admin endpoints still need the token', async () => {
    const unknown = await get('/app-health/other/readyz');
    expect(unknown.status).toBe(404);
    expect(unknown.json).toMatchObject({ error: 'not_found' });
    expect(String(unknown.json!.message)).toContain('no app probe "other/readyz"');
    expect((await get('/stats')).status).toBe(401);
  });
});
