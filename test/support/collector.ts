import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type CollectorMode = 'ok' | 'fail' | 'stall';

/**
 * A real audit collector on loopback. It stores each batch once per sequence
 * number (the exporter's idempotency key), and can answer 500, stall, or stop
 * listening altogether to simulate an outage.
 */
export interface Collector {
  url: string;
  mode: CollectorMode;
  /** seq -> the batch line, as received. */
  batches: Map<number, string>;
  /** Every request body, in arrival order (for receivers that are not audit exporters: webhooks). */
  bodies: string[];
  received: number;
  stop(): Promise<void>;
  restart(): Promise<void>;
  close(): Promise<void>;
}

export async function startCollector(port = 0): Promise<Collector> {
  let server: Server;
  const c: Collector = {
    url: '',
    mode: 'ok',
    batches: new Map(),
    bodies: [],
    received: 0,
    stop: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
    restart: async () => {
      server = make();
      await listen(server, Number(new URL(c.url).port));
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
  const make = () =>
    createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (d: Buffer) => chunks.push(d));
      req.on('end', () => {
        c.received++;
        const seq = Number(req.headers['idempotency-key']);
        const line = Buffer.concat(chunks).toString();
        c.bodies.push(line);
        if (c.mode === 'fail') return void res.writeHead(500).end();
        if (c.mode === 'stall') {
          // Stores it, but answers too late: the exporter gives up and sends it again.
          if (!c.batches.has(seq)) c.batches.set(seq, line);
          setTimeout(() => {
            if (!res.destroyed) res.writeHead(200).end();
          }, 1000);
          return;
        }
        if (!c.batches.has(seq)) c.batches.set(seq, line);
        res.writeHead(200).end();
      });
    });
  server = make();
  await listen(server, port);
  c.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ingest`;
  return c;
}

function listen(server: Server, port: number): Promise<void> {
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
}

/** Batch lines ordered by sequence number. */
export function orderedLines(c: Collector): string[] {
  return [...c.batches.entries()].sort((a, b) => a[0] - b[0]).map(([, l]) => l);
}
