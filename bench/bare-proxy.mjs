// Bare passthrough proxies with no checks: the baseline the sidecar is measured against.
//   node bench/bare-proxy.mjs undici PORT UPSTREAM   (the sidecar's forwarding library; body buffered like the sidecar)
//   node bench/bare-proxy.mjs node-http PORT UPSTREAM
//   node bench/bare-proxy.mjs http-proxy-3 PORT UPSTREAM
import { createServer } from 'node:http';

const [kind, portText, upstream] = process.argv.slice(2);
let handler;
if (kind === 'undici') {
  const { Pool } = await import('undici');
  const pool = new Pool(upstream, { connections: 128, pipelining: 1 });
  handler = async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    try {
      const headers = { ...req.headers };
      delete headers.connection;
      const r = await pool.request({ method: req.method, path: req.url, headers, body: Buffer.concat(chunks) });
      const out = { ...r.headers };
      delete out.connection;
      delete out['keep-alive'];
      delete out['transfer-encoding'];
      res.writeHead(r.statusCode, out);
      r.body.pipe(res);
    } catch (err) {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    }
  };
} else if (kind === 'node-http') {
  const http = await import('node:http');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 128 });
  const u = new URL(upstream);
  handler = (req, res) => {
    const headers = { ...req.headers };
    delete headers.connection;
    const up = http.request({ host: u.hostname, port: u.port, method: req.method, path: req.url, headers, agent }, (r) => {
      const out = { ...r.headers };
      delete out.connection;
      delete out['keep-alive'];
      delete out['transfer-encoding'];
      res.writeHead(r.statusCode, out);
      r.pipe(res);
    });
    up.on('error', () => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
    req.pipe(up);
  };
} else {
  const { createProxyServer } = await import('http-proxy-3');
  const proxy = createProxyServer({ target: upstream, agent: new (await import('node:http')).Agent({ keepAlive: true, maxSockets: 128 }) });
  proxy.on('error', (_e, _req, res) => {
    try {
      res.writeHead(502).end();
    } catch {}
  });
  handler = (req, res) => proxy.web(req, res);
}
const server = createServer(handler);
server.keepAliveTimeout = 65_000;
server.listen(Number(portText ?? 0), '127.0.0.1', () => process.stdout.write(`listening ${server.address().port}\n`));
