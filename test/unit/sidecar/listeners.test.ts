import { connect } from 'node:net';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { closeServer, dataServer, listen } from '../../../src/sidecar/listeners.js';
import { DEFAULT_LIMITS } from '../../../src/sidecar/limits.js';
import { SidecarState } from '../../../src/sidecar/state.js';

describe('closeServer', () => {
  it('ends a connection that never sent a byte instead of waiting the whole grace for it', async () => {
    // Node counts such a connection as waiting for headers, so closeIdleConnections alone leaves it open.
    const server = dataServer(new SidecarState(undefined as never), DEFAULT_LIMITS);
    const { port } = await listen(server, { host: '127.0.0.1', port: 0 });
    const silent = connect(port, '127.0.0.1');
    await once(silent, 'connect');
    const closed = once(silent, 'close');
    const started = Date.now();
    const cut = await closeServer(server, 10_000);
    await closed;
    expect(cut).toBe(false);
    expect(Date.now() - started).toBeLessThan(2000);
  });
});
