import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Pool, request } from '../../../src/http/undici.js';

// src/http/undici.ts loads undici's Pool and request API without its index (fetch, WebSocket, cache: ~9 MB).
// These guard the deep paths: an undici that moved them fails here, and the classes must be undici's own.
describe("undici's core, loaded without its index", () => {
  let url = '';
  const seen: string[] = [];
  const server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    req.resume().on('end', () => res.writeHead(201, { 'content-type': 'text/plain' }).end('ok'));
  });
  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it("Pool is undici's Pool, with the request API index.js adds", async () => {
    const undici = await import('undici');
    expect(Pool).toBe(undici.Pool);
    const pool = new Pool(url);
    const res = await pool.request({ method: 'GET', path: '/a?b=1' });
    expect([res.statusCode, await res.body.text()]).toEqual([201, 'ok']);
    await pool.close();
  });

  it('request(url) posts on the global dispatcher, path and query as given', async () => {
    const res = await request(`${url}/hook/x?y=2`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    expect(res.statusCode).toBe(201);
    await res.body.dump();
    expect(seen).toContain('POST /hook/x?y=2');
  });
});
