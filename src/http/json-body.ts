import type { IncomingMessage } from 'node:http';
import { deny, type Denial } from '../errors.js';
import { parseStrictJsonBytes, StrictJsonError } from '../json/strict.js';

/**
 * Reads a small JSON object body (registration, revoke, admin API) with the
 * strict parser every other body the sidecar judges goes through: duplicate
 * keys, lone surrogates, a BOM or invalid UTF-8 are refused, not resolved
 * the way JSON.parse happens to. An empty body is `{}`. `what` names the
 * expected shape in the refusal.
 */
export async function readJsonObject(req: IncomingMessage, what: string, limit = 64 * 1024): Promise<Record<string, unknown> | Denial> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const c of req) {
      size += (c as Buffer).length;
      // invalid_body, not body_too_large: these small control bodies always answered 400 for any unreadable body.
      if (size > limit) return deny('invalid_body', `${what}: the body is larger than ${limit} bytes`);
      chunks.push(c as Buffer);
    }
  } catch (err) {
    return deny('invalid_body', `${what}: the body could not be read: ${(err as Error).message}`);
  }
  if (size === 0) return {};
  try {
    const v = parseStrictJsonBytes(Buffer.concat(chunks));
    return typeof v === 'object' && v !== null && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : deny('invalid_body', `${what}: the body is not a JSON object`);
  } catch (err) {
    return deny('invalid_body', `${what}: ${err instanceof StrictJsonError ? `the body is not strict JSON: ${err.message}` : 'the body is not JSON'}`);
  }
}
