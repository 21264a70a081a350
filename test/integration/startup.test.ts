import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { startTestSidecar } from '../support/fixture.js';

function listening(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, port: (server.address() as AddressInfo).port })));
}

describe('startSidecar on a busy port', () => {
  it('a busy admin port is an error naming the flag, and leaves the agent port free again', async () => {
    const busy = await listening();
    const free = await listening();
    const agentPort = free.port;
    await new Promise<void>((r) => free.server.close(() => r()));
    try {
      await expect(startTestSidecar({ listen: `127.0.0.1:${agentPort}`, admin: `127.0.0.1:${busy.port}` })).rejects.toThrow(/EADDRINUSE/);
      // The agent port was bound before the admin one failed: it is released, so it can be bound again.
      const again = createServer();
      await new Promise<void>((resolve, reject) => again.once('error', reject).listen(agentPort, '127.0.0.1', () => resolve()));
      await new Promise<void>((r) => again.close(() => r()));
    } finally {
      await new Promise<void>((r) => busy.server.close(() => r()));
    }
  });
});
