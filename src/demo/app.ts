import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A tiny billing app for the demo and the benchmark. It trusts the
 * X-Agent-* headers because only the sidecar can reach it.
 */
export function createDemoApp(): Server {
  let next = 1;
  return createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://app');
      const agent = req.headers['x-agent-id'] ?? null;
      const json = (status: number, body: unknown): void => {
        const text = JSON.stringify(body);
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      };
      if (req.method === 'GET' && url.pathname === '/healthz') return json(200, { status: 'ok' });
      if (req.method === 'POST' && url.pathname === '/invoices') {
        let body: unknown;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null');
        } catch {
          return json(400, { error: 'bad json' });
        }
        return json(201, { id: `inv-${next++}`, createdBy: agent, invoice: body });
      }
      if (req.method === 'GET' && url.pathname === '/invoices/events/stream') {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        let n = 0;
        const timer = setInterval(() => {
          res.write(`event: invoice\ndata: {"seq":${++n}}\n\n`);
          if (n === 3) {
            clearInterval(timer);
            res.end();
          }
        }, 200);
        res.on('close', () => clearInterval(timer));
        return;
      }
      if (req.method === 'GET' && url.pathname === '/invoices') {
        return json(200, { customerId: url.searchParams.get('customerId'), invoices: [], requestedBy: agent });
      }
      const m = /^\/invoices\/([^/]+)$/.exec(url.pathname);
      if (req.method === 'GET' && m) return json(200, { id: decodeURIComponent(m[1]!), amount: 500, currency: 'USD', requestedBy: agent });
      json(404, { error: 'not found' });
    });
  });
}

/** `node dist/demo/app.js [PORT]` runs the app alone. */
if (import.meta.url === `file://${process.argv[1]}`) {
  const server = createDemoApp();
  server.listen(Number(process.argv[2] ?? 8081), '127.0.0.1', () => {
    process.stdout.write(`demo app on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
  });
}
