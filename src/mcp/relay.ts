import type { ServerResponse } from 'node:http';
import { pipeline, type Readable } from 'node:stream';
import { deny, type Denial } from '../errors.js';
import { parseContentType } from '../http/body.js';
import { relayAnswer, writeRewrittenJson } from '../http/respond.js';
import { rewriteJsonText, type MessageRewrite } from './rewrite.js';
import { sseRewriter } from './sse.js';

/**
 * An MCP list answer with each message rewritten (filtered to what the agent
 * may call): a JSON body whole, an SSE stream event by event. An answer the
 * sidecar cannot read (compressed, another media type) is refused: passing it
 * on would show the agent tools it holds no grant for.
 */
export async function relayRewritten(
  res: ServerResponse,
  status: number,
  headers: Record<string, string | string[]>,
  body: Readable,
  rewrite: MessageRewrite,
): Promise<{ status: number; bytes: number } | Denial> {
  const given = headers['content-type'];
  const type = parseContentType((Array.isArray(given) ? given[0] : given) ?? '').essence;
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
    // A BOM is dropped as fetch's response.json() drops it; anything the rewrite cannot read is refused, never passed on.
    const out = rewriteJsonText(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text, rewrite);
    if (out === undefined) return deny('upstream_unavailable', "the MCP server's list answer is not a JSON-RPC message the sidecar can filter");
    writeRewrittenJson(res, status, headers, out);
    return { status, bytes: Buffer.byteLength(out) };
  }
  delete headers['content-length'];
  const events = sseRewriter(rewrite);
  pipeline(body, events, () => undefined);
  return { status, bytes: await relayAnswer(res, status, headers, events) };
}

const MAX_LIST_BYTES = 8 * 1024 * 1024;

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
