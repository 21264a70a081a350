import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBackend, type Backend } from '../support/backends.js';
import { requireBuild, ROOT, startCli } from '../support/cli.js';
import { rawSocketRequest as rawRequest } from '../support/raw-socket.js';

/** The request-size limits as the built CLI takes them: flags and environment, in front of a real node:http app. */
describe('serve --max-headers / --max-query-params', () => {
  let backend: Backend;
  beforeAll(async () => {
    requireBuild();
    backend = await startBackend('node');
  });
  afterAll(async () => {
    await backend?.close();
  });

  const get = (listen: string, query: string, headers: number) =>
    rawRequest(
      listen,
      [`GET /healthz?${query} HTTP/1.1`, 'Host: s', 'Connection: close', ...Array.from({ length: headers }, (_, i) => `x-h${i}: 1`), '', ''].join('\r\n'),
    );

  it.each([
    ['flags', ['--max-headers', '6', '--max-query-params', '3'], {}],
    ['environment', [], { AGENTS_CHAIN_MAX_HEADERS: '6', AGENTS_CHAIN_MAX_QUERY_PARAMS: '3' }],
  ])('reads the limits from %s', async (_how, flags, env) => {
    const sc = await startCli(
      ['serve', '--policy', `${ROOT}config/examples/billing.yaml`, '--upstream', backend.url, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', ...flags],
      /sidecar listening/,
      env,
    );
    const { listen } = JSON.parse(sc.line) as { listen: string };
    try {
      const before = backend.seen().length;
      // Host + Connection + 4 = 6 headers, 3 pairs: at the limits, forwarded.
      expect((await get(listen, 'a=1&b=2&c=3', 4)).status).toBe(200);
      expect(backend.seen().length).toBe(before + 1);
      const headers = await get(listen, 'a=1', 5);
      expect({ status: headers.status, error: headers.json().error }).toEqual({ status: 431, error: 'too_many_headers' });
      const pairs = await get(listen, 'a=1&b=2&c=3&d=4', 0);
      expect({ status: pairs.status, error: pairs.json().error }).toEqual({ status: 400, error: 'too_many_query_parameters' });
      expect(backend.seen().length).toBe(before + 1);
    } finally {
      sc.child.kill('SIGTERM');
      await new Promise((r) => sc.child.once('exit', r));
    }
  });

  it('refuses a limit that is not a positive whole number', async () => {
    await expect(
      startCli(['serve', '--policy', `${ROOT}config/examples/billing.yaml`, '--upstream', backend.url, '--max-headers', '0'], /sidecar listening/),
    ).rejects.toThrow(/--max-headers must be a positive whole number/);
  });
});
