import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate, inflateRaw, type ZlibOptions } from 'node:zlib';
import { deny, type Denial } from '../errors.js';

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
    const onEnd = (): void => {
      cleanup();
      resolve(Buffer.concat(chunks, size));
    };
    const onError = (): void => {
      cleanup();
      reject(new ClientAbortedError());
    };
    const onAborted = (): void => {
      cleanup();
      reject(new ClientAbortedError());
    };
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
export function checkJsonRepresentation(headers: IncomingHttpHeaders): Denial | undefined {
  const enc = headers['content-encoding'];
  if (enc !== undefined && enc.trim().toLowerCase() !== 'identity') {
    return deny('unsupported_media_type', `Content-Encoding "${enc}" is not accepted on a constrained route; send an uncompressed body`);
  }
  const type = headers['content-type'];
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
 * A Content-Type's essence (lower-cased) and parameters (names lower-cased;
 * values unquoted and unescaped, as RFC 9110 §5.6.6 quoted-strings). Linear:
 * one pass, quotes honoured, so ";" inside a quoted value does not split.
 */
export function parseContentType(type: string): { essence: string; params: Map<string, string[]> } {
  const all = new Map<string, string[]>();
  const semi = type.indexOf(';');
  const essence = (semi === -1 ? type : type.slice(0, semi)).trim().toLowerCase();
  let i = semi === -1 ? type.length : semi + 1;
  while (i < type.length) {
    let eq = i;
    while (eq < type.length && type[eq] !== '=' && type[eq] !== ';') eq++;
    const name = type.slice(i, eq).trim().toLowerCase();
    let value = '';
    i = eq;
    if (type[i] === '=') {
      i++;
      while (i < type.length && (type[i] === ' ' || type[i] === '\t')) i++;
      if (type[i] === '"') {
        for (i++; i < type.length && type[i] !== '"'; i++) value += type[i] === '\\' && i + 1 < type.length ? type[++i] : type[i];
        while (i < type.length && type[i] !== ';') i++;
      } else {
        const end = type.indexOf(';', i);
        value = type.slice(i, end === -1 ? type.length : end).trim();
        i = end === -1 ? type.length : end;
      }
    }
    i++; // past ";"
    if (name === '') continue;
    const list = all.get(name);
    if (list) list.push(value);
    else all.set(name, [value]);
  }
  return { essence, params: all };
}

const INFLATE: Record<string, (buf: Buffer, opts: ZlibOptions) => Promise<Buffer>> = {
  gzip: promisify(gunzip),
  'x-gzip': promisify(gunzip),
  deflate: promisify(inflate),
  br: promisify(brotliDecompress),
};
const inflateRawAsync = promisify(inflateRaw);

/**
 * The body as the app's parser reads it: a single gzip, deflate (zlib or
 * raw) or br coding inflated, at most `limit` bytes of output (the same
 * bound as the raw body); any other coding cannot be checked and is refused.
 */
export async function decodedContent(body: Buffer, encoding: string | undefined, limit: number): Promise<Buffer | Denial> {
  const coding = encoding?.trim().toLowerCase() ?? '';
  if (coding === '' || coding === 'identity') return body;
  const inflate = INFLATE[coding];
  if (!inflate) return deny('unsupported_media_type', `Content-Encoding "${encoding}" is not accepted: the sidecar reads gzip, deflate and br only`);
  const opts = { maxOutputLength: Math.max(limit, 1) };
  try {
    return await inflate(body, opts);
  } catch (err) {
    if (err instanceof RangeError) return deny('body_too_large', `the inflated request body exceeds ${limit} bytes`);
    if (coding === 'deflate') {
      // Some clients send raw deflate, and some servers accept it.
      try {
        return await inflateRawAsync(body, opts);
      } catch (raw) {
        if (raw instanceof RangeError) return deny('body_too_large', `the inflated request body exceeds ${limit} bytes`);
      }
    }
    // 415 as for a coding it cannot read (RFC 9110 §15.5.16): the coding is what cannot be processed.
    return deny('unsupported_media_type', `the body does not decode as Content-Encoding "${encoding}"; send it uncompressed or validly encoded`);
  }
}
