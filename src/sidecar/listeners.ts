import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { writeSocketError } from '../http/respond.js';
import type { Logger } from '../log.js';
import { handleCall } from '../pipeline/pipeline.js';
import { Admission } from './admission.js';
import type { Limits } from './limits.js';
import type { SidecarState } from './state.js';

/**
 * While a server closes, how often connections that went idle are closed: server.close alone closes only
 * those idle at the moment it is called, and a keep-alive connection goes idle after each response.
 */
const IDLE_SWEEP_INTERVAL_MS = 50;

/**
 * The agents' listener: every request goes through the pipeline under the deps current when it arrives.
 * Admission decides first (src/sidecar/admission.ts); the server's close stops its timers.
 */
export function dataServer(state: SidecarState, limits: Limits, admission = new Admission(limits)): Server {
  const data = createServer({ requireHostHeader: true }, (req, res) => {
    // Serve the call, but make the client open its next connection anew: by then it resolves to a ready endpoint.
    if (state.draining) res.setHeader('connection', 'close');
    // Admission: past the bound a call is refused at once (and still audited), never queued.
    state.track(handleCall(req, res, state.current, admission.check(state.inFlight.size, res)));
  });
  data.once('close', () => admission.close());
  // Node keeps only the first maxHeadersCount headers and drops the rest unseen: one more than the limit lets
  // checkRequestShape see that there were too many and refuse (431) instead of judging a truncated request.
  data.maxHeadersCount = limits.maxHeaders + 1;
  data.keepAliveTimeout = limits.keepAliveTimeoutMs;
  data.headersTimeout = limits.headersTimeoutMs;
  data.requestTimeout = limits.requestTimeoutMs;
  // Requests Node's parser refuses still get the JSON error shape.
  data.on('clientError', (err: NodeJS.ErrnoException, socket) => writeSocketError(socket, err));
  trackUnused(data);
  return data;
}

/** Open connections, per server; closeServer ends those that have not sent a single byte (no call is on them). */
const OPEN = new WeakMap<Server, Set<Socket>>();

/**
 * Node counts a connection that never sent a request as busy (it waits for
 * headers), so closeIdleConnections leaves it open and a shutdown would wait
 * the whole grace for it. Clients do open such connections: fetch (undici)
 * when a request is aborted before it is written, seen with the MCP SDK
 * client's close. Tracked here so closeServer can end them. Only 'close' is
 * listened to: a 'data' listener would make Node hand every byte of every
 * request to JavaScript instead of its native parser (measured: 5–6 µs per
 * call); `bytesRead` says whether a connection was used.
 */
function trackUnused(server: Server): void {
  const open = new Set<Socket>();
  OPEN.set(server, open);
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
}

/**
 * Binds `at`. "::" (what injection uses: IPv4 and IPv6 callers alike, and IPv6-only clusters) falls back
 * to 0.0.0.0 on a kernel without IPv6, where binding "::" fails.
 */
export async function listen(server: Server, at: { host: string; port: number }, log?: Logger): Promise<AddressInfo> {
  try {
    return await bind(server, at);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (at.host !== '::' || (code !== 'EAFNOSUPPORT' && code !== 'EADDRNOTAVAIL')) throw err;
    log?.warn('no IPv6 on this host: listening on 0.0.0.0 instead of [::]', { port: at.port, code });
    return bind(server, { host: '0.0.0.0', port: at.port });
  }
}

function bind(server: Server, at: { host: string; port: number }): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(at.port, at.host, () => {
      server.off('error', reject);
      // Listening on a host and port (not a pipe), so the address is an AddressInfo.
      resolve(server.address() as AddressInfo);
    });
  });
}

/**
 * Stops accepting, lets in-flight calls finish for up to `graceMs`, then cuts
 * what is left. Keep-alive connections are closed as soon as they go idle.
 * Resolves true when the grace ran out and connections were cut.
 */
export function closeServer(server: Server, graceMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    let cut = false;
    const deadline = setTimeout(() => {
      cut = true;
      server.closeAllConnections();
    }, graceMs);
    const closeIdle = (): void => {
      server.closeIdleConnections();
      for (const socket of OPEN.get(server) ?? []) if (socket.bytesRead === 0) socket.destroy();
    };
    const sweep = setInterval(closeIdle, IDLE_SWEEP_INTERVAL_MS);
    deadline.unref();
    sweep.unref();
    server.close(() => {
      clearTimeout(deadline);
      clearInterval(sweep);
      resolve(cut);
    });
    closeIdle();
  });
}

/** The URL a bound address is reached at (IPv6 literals in brackets). */
export function urlOf(a: AddressInfo): string {
  const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
  return `http://${host}:${a.port}`;
}
