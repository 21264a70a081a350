import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
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
    // undici takes an EventEmitter as the abort signal: far cheaper per call than an AbortController.
    const abort = new EventEmitter();
    const onClose = (): void => { if (!res.writableFinished) abort.emit('abort'); };
    res.on('close', onClose);
    let upstream;
    try {
      upstream = await this.pool.request({
        method: req.method as 'GET',
        path: req.target,
        headers: req.headers,
        body: req.body,
        signal: abort,
      });
    } catch (err) {
      res.off('close', onClose);
      return deny('upstream_unavailable', `the app did not answer: ${(err as Error).message}`);
    }
    const headers = downstreamResponseHeaders(upstream.headers);
    headers['x-request-id'] = req.requestId;
    res.writeHead(upstream.statusCode, headers);
    // A streamed response (SSE, chunked) gets its headers at once; a sized one
    // sends them with the body, in one write.
    if (headers['content-length'] === undefined) res.flushHeaders();
    await relay(upstream.body, res);
    res.off('close', onClose);
    return { status: upstream.statusCode };
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}

/**
 * Streams the app's body to the client. Plain pipe plus two listeners:
 * stream.pipeline allocates an AbortController per call, which showed up in
 * profiles. If either side fails mid-response, both are torn down.
 */
function relay(body: NodeJS.ReadableStream & { destroy(err?: Error): void }, res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => { body.off('error', fail); res.off('close', done); resolve(); };
    const fail = (): void => { res.destroy(); done(); };
    body.once('error', fail);
    res.once('close', done);
    res.once('finish', done);
    body.pipe(res);
    res.once('close', () => { if (!res.writableFinished) body.destroy(); });
  });
}
