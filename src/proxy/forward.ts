import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream/promises';
import { Pool } from 'undici';
import { deny, type Denial } from '../errors.js';
import { downstreamResponseHeaders } from './headers.js';

export interface ForwardRequest {
  method: string;
  /** Raw path and query, exactly as checked. */
  target: string;
  headers: string[];
  /** Buffered bytes, the caller's stream (unchecked public routes), or nothing. */
  body: Buffer | IncomingMessage | undefined;
  requestId: string;
}

export interface ForwardResult {
  status: number;
}

/**
 * The app behind the sidecar. undici sends `path` verbatim (http-proxy-3
 * re-serialises it through `new URL`, which rewrites some bytes), keeps a
 * pool of keep-alive connections, and hands the response back as a stream so
 * server-sent events flow through unbuffered.
 */
export class Upstream {
  private readonly pool: Pool;
  readonly origin: string;

  constructor(url: string, connections = 128) {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`upstream must be http:// or https://, got ${url}`);
    if (u.pathname !== '/' || u.search || u.hash) throw new Error(`upstream must be an origin without a path, got ${url}`);
    this.origin = u.origin;
    this.pool = new Pool(u.origin, { connections, pipelining: 1, keepAliveTimeout: 4_000 });
  }

  async forward(req: ForwardRequest, res: ServerResponse): Promise<ForwardResult | Denial> {
    const abort = new AbortController();
    const onClose = (): void => { if (!res.writableFinished) abort.abort(); };
    res.on('close', onClose);
    let upstream;
    try {
      upstream = await this.pool.request({
        method: req.method as 'GET',
        path: req.target,
        headers: req.headers,
        body: req.body,
        signal: abort.signal,
      });
    } catch (err) {
      res.off('close', onClose);
      return deny('upstream_unavailable', `the app did not answer: ${(err as Error).message}`);
    }
    const headers = downstreamResponseHeaders(upstream.headers);
    headers['x-request-id'] = req.requestId;
    res.writeHead(upstream.statusCode, headers);
    // Flush headers now: a streaming response (SSE) must not wait for a first chunk.
    res.flushHeaders();
    try {
      await pipeline(upstream.body, res);
    } catch {
      // Client went away or the app broke mid-response: nothing left to send.
      res.destroy();
    } finally {
      res.off('close', onClose);
    }
    return { status: upstream.statusCode };
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
