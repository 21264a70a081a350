import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the app behind the sidecar received, byte for byte. */
export interface Recorded {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  rawHeaders: string[];
  body: Buffer;
}

export interface Recorder {
  url: string;
  requests: Recorded[];
  /** Replace the default answer (200 JSON echo). */
  handler?: (req: Recorded, res: ServerResponse) => void;
  close(): Promise<void>;
}

/** A real upstream app on loopback that records every request it gets. */
export async function startRecorder(): Promise<Recorder> {
  const requests: Recorded[] = [];
  const rec: Recorder = { url: '', requests, close: async () => {} };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const r: Recorded = { method: req.method!, url: req.url!, headers: req.headers, rawHeaders: req.rawHeaders, body: Buffer.concat(chunks) };
      requests.push(r);
      if (rec.handler) return rec.handler(r, res);
      const body = JSON.stringify({ ok: true, method: r.method, url: r.url });
      res.writeHead(200, { 'content-type': 'application/json', 'x-app': 'recorder' });
      res.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  rec.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  rec.close = () =>
    new Promise((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return rec;
}
