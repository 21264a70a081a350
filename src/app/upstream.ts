import { EventEmitter } from 'node:events';
import { pipeline, type Readable } from 'node:stream';
import type { ServerResponse } from 'node:http';
import { Pool } from 'undici';
import { deny, isDenial, type Denial } from '../errors.js';
import type { Constraints, Policy } from '../policy/types.js';
import { presentSuccess } from '../pipeline/present.js';
import { downstreamResponseHeaders } from '../http/headers.js';
import { relayAnswer, writeRewrittenJson } from '../http/respond.js';
import type { MessageRewrite } from '../mcp/rewrite.js';
import { rewriteJsonText } from '../mcp/rewrite.js';
import { sseRewriter } from '../mcp/sse.js';

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
  /** `envelope: all`: wrap a successful JSON answer in the ConstraintAwareResult. */
  wrap?: { policy: Policy; capability: string; constraints?: Constraints };
  /** An MCP list request: each JSON-RPC message of the answer (JSON or SSE) rewritten on its way back. */
  rewrite?: MessageRewrite;
  /** A long-lived stream (an MCP server's GET): sent on its own pool, so open streams never hold the connections calls need. */
  stream?: boolean;
}

export interface ForwardResult {
  status: number;
  /** Response body bytes relayed to the caller (a stream's total, once it ended). */
  bytes?: number;
  /** The app's Mcp-Session-Id response header (an MCP server's answer to initialize). */
  sessionId?: string;
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
    const onClose = (): void => {
      if (!res.writableFinished) abort.emit('abort');
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
      return deny('upstream_unavailable', `the app did not answer: ${(err as Error).message}`);
    }
    const session = upstream.headers['mcp-session-id'];
    const sessionId = typeof session === 'string' ? session : undefined;
    const headers = downstreamResponseHeaders(upstream.headers);
    headers['x-request-id'] = req.requestId;
    if (req.permission) headers['agent-permission'] = req.permission;
    if (req.wrap && upstream.statusCode < 300 && isJson(headers['content-type']) && !headers['content-encoding']) {
      res.off('close', onClose);
      const text = JSON.stringify(presentSuccess(req.wrap.policy, req.wrap.capability, req.wrap.constraints, await readJson(upstream.body)));
      writeRewrittenJson(res, upstream.statusCode, headers, text);
      return { status: upstream.statusCode };
    }
    if (req.rewrite && upstream.statusCode < 300) {
      res.off('close', onClose);
      const result = await rewritten(res, upstream.statusCode, headers, upstream.body, req.rewrite);
      return isDenial(result) ? result : { ...result, sessionId };
    }
    const bytes = await relayAnswer(res, upstream.statusCode, headers, upstream.body);
    res.off('close', onClose);
    return sessionId ? { status: upstream.statusCode, bytes, sessionId } : { status: upstream.statusCode, bytes };
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

/**
 * An MCP list answer with each message rewritten (filtered to what the agent
 * may call): a JSON body whole, an SSE stream event by event. An answer the
 * sidecar cannot read (compressed, another media type) is refused: passing it
 * on would show the agent tools it holds no grant for.
 */
async function rewritten(
  res: ServerResponse,
  status: number,
  headers: Record<string, string | string[]>,
  body: Readable,
  rewrite: MessageRewrite,
): Promise<ForwardResult | Denial> {
  const type = mediaType(headers['content-type']);
  if (headers['content-encoding'] || (type !== 'application/json' && type !== 'text/event-stream')) {
    body.destroy();
    return deny(
      'upstream_unavailable',
      `the MCP server's list answer (${type || 'no type'}${headers['content-encoding'] ? ', compressed' : ''}) cannot be filtered`,
    );
  }
  if (type === 'application/json') {
    const text = await readText(body, MAX_LIST_BYTES);
    if (text === undefined) return deny('upstream_unavailable', `the MCP server's list answer exceeds ${MAX_LIST_BYTES} bytes`);
    const out = rewriteJsonText(text, rewrite) ?? text;
    writeRewrittenJson(res, status, headers, out);
    return { status, bytes: Buffer.byteLength(out) };
  }
  delete headers['content-length'];
  const events = sseRewriter(rewrite);
  pipeline(body, events, () => undefined);
  return { status, bytes: await relayAnswer(res, status, headers, events) };
}

const MAX_LIST_BYTES = 8 * 1024 * 1024;

function mediaType(type: string | string[] | undefined): string {
  return (Array.isArray(type) ? type[0] : type)?.split(';')[0]?.trim().toLowerCase() ?? '';
}

async function readText(body: Readable, max: number): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of body) {
    size += (c as Buffer).length;
    if (size > max) {
      body.destroy();
      return undefined;
    }
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
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
