import type { IncomingMessage, ServerResponse } from 'node:http';
import { parseStrictJsonBytes, StrictJsonError } from '../json/strict.js';

/** Writes one JSON answer (errors, envelopes, admin replies). */
export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(text)),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(text);
}

/**
 * Reads a small JSON object body (registration, revoke, admin API) with the
 * strict parser every other body the sidecar judges goes through: duplicate
 * keys, lone surrogates, a BOM or invalid UTF-8 are refused, not resolved
 * the way JSON.parse happens to. An empty body is `{}`. The reason, as a
 * string, when it is not a JSON object.
 */
export async function readStrictJsonObject(req: IncomingMessage, limit = 64 * 1024): Promise<Record<string, unknown> | string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const c of req) {
      size += (c as Buffer).length;
      if (size > limit) return `the body is larger than ${limit} bytes`;
      chunks.push(c as Buffer);
    }
  } catch (err) {
    return `the body could not be read: ${(err as Error).message}`;
  }
  if (size === 0) return {};
  try {
    const v = parseStrictJsonBytes(Buffer.concat(chunks));
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : 'the body is not a JSON object';
  } catch (err) {
    return err instanceof StrictJsonError ? `the body is not strict JSON: ${err.message}` : 'the body is not JSON';
  }
}

/** readStrictJsonObject, undefined when the body is not a JSON object. */
export async function readJsonObject(req: IncomingMessage, limit = 64 * 1024): Promise<Record<string, unknown> | undefined> {
  const v = await readStrictJsonObject(req, limit);
  return typeof v === 'string' ? undefined : v;
}
