import type { IncomingMessage } from 'node:http';
import { deny, type Denial } from '../errors.js';
import { nameReadings } from '../routing/query.js';

/** The client hung up before sending its whole body: nothing to answer, nothing to forward. */
export class ClientAbortedError extends Error {
  constructor() {
    super('client aborted the request');
    this.name = 'ClientAbortedError';
  }
}

export function hasBody(req: IncomingMessage): boolean {
  const len = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (len !== undefined && len !== '0');
}

/**
 * Buffers a request body up to `limit` bytes. A declared Content-Length over
 * the limit is refused before a byte is read; a chunked body is refused as
 * soon as it crosses the limit.
 */
export function readBodyLimited(req: IncomingMessage, limit: number): Promise<Buffer | Denial> {
  const tooLarge = deny('body_too_large', `request body exceeds ${limit} bytes`);
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > limit) return Promise.resolve(tooLarge);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        req.pause();
        resolve(tooLarge);
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => { cleanup(); resolve(Buffer.concat(chunks, size)); };
    const onError = (): void => { cleanup(); reject(new ClientAbortedError()); };
    const onAborted = (): void => { cleanup(); reject(new ClientAbortedError()); };
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
  });
}

/**
 * A constrained body must be JSON the sidecar can read exactly as the app
 * will: application/json (or +json), UTF-8, not compressed.
 */
export function checkJsonRepresentation(req: IncomingMessage): Denial | undefined {
  const enc = req.headers['content-encoding'];
  if (enc !== undefined && enc.trim().toLowerCase() !== 'identity') {
    return deny('unsupported_media_type', `Content-Encoding "${enc}" is not accepted on a constrained route; send an uncompressed body`);
  }
  const type = req.headers['content-type'];
  if (!type) return deny('unsupported_media_type', 'a constrained route needs Content-Type: application/json');
  const [essence, ...params] = type.split(';').map((s) => s.trim().toLowerCase());
  if (essence !== 'application/json' && !/^application\/[a-z0-9.+-]+\+json$/.test(essence ?? '')) {
    return deny('unsupported_media_type', `Content-Type "${type}" is not JSON; a constrained route needs application/json`);
  }
  for (const p of params) {
    const [k, v] = p.split('=').map((s) => s.trim().replace(/^"|"$/g, ''));
    if (k === 'charset' && v !== 'utf-8' && v !== 'utf8') {
      return deny('unsupported_media_type', `charset "${v}" is not accepted; JSON bodies must be UTF-8`);
    }
  }
  return undefined;
}

/**
 * True when a JSON body carries a top-level "_method" key (any case, any
 * escaping: "\u005fmethod" is the same key), which Laravel and Express's
 * method-override (with a body getter) read as the real method. `parsed` is
 * the body when the constrained path already parsed it. Cheap for the common
 * body: only one that could hold such a key (an "_" followed by "method" in
 * any case, or any "\u" escape) is parsed. A body that is not JSON to a
 * lenient parser either carries no key an app could read.
 */
export function jsonMethodOverride(body: Buffer, parsed?: unknown): boolean {
  if (parsed === undefined) {
    if (!mayHoldMethodKey(body)) return false;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      return false;
    }
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return false;
  return Object.keys(parsed).some((k) => k.toLowerCase() === '_method');
}

const METHOD = Buffer.from('method');

function mayHoldMethodKey(body: Buffer): boolean {
  if (body.indexOf('\\u') !== -1) return true;
  for (let i = body.indexOf(0x5f); i !== -1; i = body.indexOf(0x5f, i + 1)) {
    if (i + 7 > body.length) return false;
    let same = true;
    for (let j = 0; j < 6 && same; j++) same = (body[i + 1 + j]! | 0x20) === METHOD[j];
    if (same) return true;
  }
  return false;
}

/**
 * True when a multipart/form-data body has a part named "_method" under any
 * name a framework reads as it (Laravel, Symfony and Rack read multipart
 * fields like form fields; PHP mangles ".method" to "_method" here too).
 */
export function multipartMethodOverride(body: Buffer): boolean {
  const text = body.toString('latin1');
  if (!/method/i.test(text)) return false;
  const disposition = /^content-disposition:[^\r\n]*?;\s*name\s*=\s*(?:"((?:[^"\\\r\n]|\\.)*)"|([^;\s]*))/gim;
  for (const m of text.matchAll(disposition)) {
    const name = (m[1] ?? m[2] ?? '').replace(/\\(.)/g, '$1');
    if (nameReadings(name).has('_method')) return true;
  }
  return false;
}
