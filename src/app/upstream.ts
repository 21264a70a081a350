import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { Pool } from '../http/undici.js';
import { deny, type Denial } from '../errors.js';
import { downstreamResponseHeaders } from '../http/headers.js';
import { relayAnswer, writeRewrittenJson } from '../http/respond.js';
import { relayRewritten } from '../mcp/relay.js';
import type { MessageRewrite } from '../mcp/rewrite.js';

export interface ForwardRequest {
  method: string;
  /** Raw path and query, exactly as checked. */
  target: string;
  headers: string[];
  /** The buffered bytes the sidecar read (and, on capability routes, checked), or nothing. */
  body: Buffer | undefined;
  requestId: string;
  /** Sent back as Agent-Permission on capability calls. */
  permission?: 'not_required' | 'approved';
  /** A successful JSON answer, rewritten whole (`envelope: all`'s ConstraintAwareResult). */
  wrap?: (result: unknown) => unknown;
  /** A successful JSON answer, framed as it streams (execute's `{"data": <answer>}`): never buffered. */
  frame?: { prefix: string; suffix: string };
  /** An MCP list request: each JSON-RPC message of the answer (JSON or SSE) rewritten on its way back. */
  rewrite?: MessageRewrite;
  /** A long-lived stream (an MCP server's GET): sent on its own pool, so open streams never hold the connections calls need. */
  stream?: boolean;
  /** Told the app's status and headers as soon as they arrive, before the body is relayed (an MCP session is bound then). */
  onHeaders?: (status: number, headers: Readonly<Record<string, string | string[] | undefined>>) => void;
}

export interface ForwardResult {
  status: number;
  /** Response body bytes relayed to the caller (a stream's total, once it ended). */
  bytes?: number;
}

/**
 * The app behind the sidecar. undici sends `path` verbatim (http-proxy-3
 * re-serialises it through `new URL`, which rewrites some bytes), keeps a
 * pool of keep-alive connections, and hands the response back as a stream so
 * server-sent events flow through unbuffered.
 */
export class Upstream {
  private readonly pool: Pool;
  /** Long-lived streams (MCP GET): no connection limit here; the pipeline bounds them per agent. */
  private readonly streams: Pool;
  readonly origin: string;

  constructor(url: string, connections = 128, headersTimeoutMs = 60_000) {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`upstream must be http:// or https://, got ${url}`);
    if (u.pathname !== '/' || u.search || u.hash) throw new Error(`upstream must be an origin without a path, got ${url}`);
    this.origin = u.origin;
    // headersTimeout bounds a stuck app (a model provider gets 10 min: long completions answer late); no bodyTimeout, so streams stay open.
    this.pool = new Pool(u.origin, { connections, pipelining: 1, keepAliveTimeout: 4_000, headersTimeout: headersTimeoutMs, bodyTimeout: 0 });
    this.streams = new Pool(u.origin, { pipelining: 1, keepAliveTimeout: 4_000, headersTimeout: headersTimeoutMs, bodyTimeout: 0 });
  }

  async forward(req: ForwardRequest, res: ServerResponse): Promise<ForwardResult | Denial> {
    // undici takes an EventEmitter as the abort signal: far cheaper per call than an AbortController.
    const abort = new EventEmitter();
    let clientGone = false;
    const onClose = (): void => {
      if (res.writableFinished) return;
      clientGone = true;
      abort.emit('abort');
    };
    res.on('close', onClose);
    let upstream;
    try {
      upstream = await (req.stream ? this.streams : this.pool).request({
        method: req.method,
        path: req.target,
        headers: req.headers,
        body: req.body,
        signal: abort,
      });
    } catch (err) {
      res.off('close', onClose);
      // The caller hung up while the app was still working: its call is cancelled, not the app's failure.
      if (clientGone) return deny('client_closed_request', 'the client closed the connection before the app answered');
      return deny('upstream_unavailable', `the app did not answer: ${(err as Error).message}`);
    }
    req.onHeaders?.(upstream.statusCode, upstream.headers);
    const headers = downstreamResponseHeaders(upstream.headers);
    headers['x-request-id'] = req.requestId;
    if (req.permission) headers['agent-permission'] = req.permission;
    const rewritable = hasBody(req.method, upstream.statusCode) && isJson(headers['content-type']) && !headers['content-encoding'];
    if (req.frame && rewritable && headers['content-length'] !== '0') {
      const frame = { prefix: Buffer.from(req.frame.prefix), suffix: Buffer.from(req.frame.suffix) };
      const length = headers['content-length'];
      if (length !== undefined) headers['content-length'] = String(Number(length) + frame.prefix.length + frame.suffix.length);
      const bytes = await relayAnswer(res, upstream.statusCode, headers, upstream.body, frame);
      res.off('close', onClose);
      return { status: upstream.statusCode, bytes };
    }
    if (req.wrap && rewritable) {
      res.off('close', onClose);
      const text = JSON.stringify(req.wrap(await readJson(upstream.body)));
      writeRewrittenJson(res, upstream.statusCode, headers, text);
      return { status: upstream.statusCode };
    }
    if (req.rewrite && upstream.statusCode < 300) {
      // Still cancelled if the client goes away while a list answer is read.
      const result = await relayRewritten(res, upstream.statusCode, headers, upstream.body, req.rewrite);
      res.off('close', onClose);
      return result;
    }
    const bytes = await relayAnswer(res, upstream.statusCode, headers, upstream.body);
    res.off('close', onClose);
    return { status: upstream.statusCode, bytes };
  }

  /**
   * One call with the whole answer buffered (approved requests), bounded in
   * time and size: a stream that never ends must not hold an agent forever.
   */
  async fetch(
    method: string,
    target: string,
    headers: string[],
    body: Buffer | undefined,
    limits: { timeoutMs: number; maxBytes: number } = { timeoutMs: 30_000, maxBytes: 1024 * 1024 },
  ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
    const r = await this.pool.request({ method: method, path: target, headers, body, signal: AbortSignal.timeout(limits.timeoutMs) });
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const c of r.body) {
      size += (c as Buffer).length;
      if (size > limits.maxBytes) {
        r.body.destroy();
        throw new Error(`the app answered more than ${limits.maxBytes} bytes`);
      }
      chunks.push(c as Buffer);
    }
    return { status: r.statusCode, headers: r.headers, body: Buffer.concat(chunks) };
  }

  async close(): Promise<void> {
    await Promise.all([this.pool.close(), this.streams.close()]);
  }
}

/** A 2xx answer that carries a body to rewrite: not a HEAD's, not 204, 205 or a 1xx/3xx. */
function hasBody(method: string, status: number): boolean {
  return status >= 200 && status < 300 && status !== 204 && status !== 205 && method.toUpperCase() !== 'HEAD';
}

function isJson(type: string | string[] | undefined): boolean {
  const t = (Array.isArray(type) ? type[0] : type)?.split(';')[0]?.trim().toLowerCase() ?? '';
  return t === 'application/json' || t.endsWith('+json');
}

/** The app's JSON answer, parsed (the text as a string when it is not JSON after all). */
async function readJson(body: AsyncIterable<unknown>): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of body) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
