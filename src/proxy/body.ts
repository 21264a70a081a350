import type { IncomingMessage } from 'node:http';
import { promisify } from 'node:util';
import { brotliDecompress, gunzip, inflate, inflateRaw, type ZlibOptions } from 'node:zlib';
import { deny, isDenial, type Denial } from '../errors.js';
import { keyProblem, nameReadings, overridesMethod } from '../routing/query.js';

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
 * Refuses a body that overrides the method ("_method" in a form, multipart
 * or JSON body) or that the sidecar cannot read as the app will. The body is
 * read as it is meant: inflated when compressed (body-parser inflates gzip,
 * deflate and br by default), and a body without Content-Type is read both
 * as a form (Rack parses a POST without one as a form) and as JSON. The
 * bytes forwarded are the original ones.
 */
export async function bodyOverrideDenial(req: IncomingMessage, body: Buffer, limit: number): Promise<Denial | undefined> {
  const type = req.headers['content-type']?.trim() ?? '';
  // iconv-lite (body-parser) decodes UTF-7, where "+AF8-method" is "_method": not checkable, not used.
  if (/;\s*charset\s*=\s*"?\s*utf-?7/i.test(type)) return deny('unsupported_media_type', 'charset UTF-7 is not accepted; send the body as UTF-8');
  const bytes = await decodedContent(body, req.headers['content-encoding'], limit);
  if (isDenial(bytes)) return bytes;
  let overrides: boolean;
  if (type === '') {
    overrides = overridesMethod(bytes.toString('latin1')) || jsonMethodOverride(bytes);
  } else if (/^application\/x-www-form-urlencoded/i.test(type)) {
    const problem = keyProblem(bytes.toString('latin1'));
    if (problem === 'malformed') return deny('invalid_body', 'a form field name has a malformed percent-encoding (apps would read it leniently, as another name)');
    overrides = problem === 'method';
  } else if (/^multipart\/form-data/i.test(type)) {
    overrides = multipartMethodOverride(bytes);
  } else {
    overrides = jsonMethodOverride(bytes);
  }
  return overrides ? deny('invalid_body', 'the "_method" override is not accepted; use the real HTTP method') : undefined;
}

const INFLATE: Record<string, (buf: Buffer, opts: ZlibOptions) => Promise<Buffer>> = {
  gzip: promisify(gunzip),
  'x-gzip': promisify(gunzip),
  deflate: promisify(inflate),
  br: promisify(brotliDecompress) as (buf: Buffer, opts: ZlibOptions) => Promise<Buffer>,
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

/**
 * True when a JSON body carries a top-level "_method" key (any case, any
 * escaping: "\u005fmethod" is the same key), which Laravel and Express's
 * method-override (with a body getter) read as the real method. `parsed` is
 * the body when the constrained path already parsed it. The body is read as
 * lenient parsers do: a BOM is skipped and UTF-16/32 detected (Python's
 * json.loads on bytes, iconv-lite in body-parser), and when more follows the
 * first value, that first value is read (Go's json.Decoder stops there).
 * Cheap for the common body: only one that could hold such a key (an "_"
 * followed by "method" in any case, or any "\u" escape) is parsed. A body
 * that is not JSON to a lenient parser either carries no key an app could read.
 */
export function jsonMethodOverride(body: Buffer, parsed?: unknown): boolean {
  if (parsed === undefined) {
    const bytes = jsonUtf8(body);
    if (!mayHoldMethodKey(bytes)) return false;
    parsed = parseFirstValue(bytes.toString('utf8'));
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return false;
  return Object.keys(parsed).some((k) => k.toLowerCase() === '_method');
}

/**
 * A JSON body as UTF-8 without a BOM, detected as Python's json.detect_encoding
 * does (RFC 4627 §3: the NULs among the first four bytes give UTF-16/32 and
 * their byte order; a BOM gives it too).
 */
export function jsonUtf8(body: Buffer): Buffer {
  const [a, b, c, d] = body;
  if (a === 0xef && b === 0xbb && c === 0xbf) return body.subarray(3);
  if (body.length < 2 || (a !== 0 && b !== 0 && !(a === 0xfe && b === 0xff) && !(a === 0xff && b === 0xfe))) return body;
  let text: string;
  if (a === 0 && b === 0 && c === 0xfe && d === 0xff) text = utf32(body.subarray(4), false);
  else if (a === 0xff && b === 0xfe && c === 0 && d === 0) text = utf32(body.subarray(4), true);
  else if (a === 0xfe && b === 0xff) text = utf16be(body.subarray(2));
  else if (a === 0xff && b === 0xfe) text = body.toString('utf16le', 2);
  else if (body.length === 2) text = a === 0 ? utf16be(body) : body.toString('utf16le');
  else if (body.length === 3) return body;
  else if (a === 0) text = b ? utf16be(body) : utf32(body, false);
  else text = c || d ? body.toString('utf16le') : utf32(body, true);
  return Buffer.from(text, 'utf8');
}

function utf16be(b: Buffer): string {
  const copy = Buffer.from(b.subarray(0, b.length & ~1));
  return copy.swap16().toString('utf16le');
}

function utf32(b: Buffer, little: boolean): string {
  let out = '';
  for (let i = 0; i + 4 <= b.length; i += 4) {
    const cp = little ? b.readUInt32LE(i) : b.readUInt32BE(i);
    out += cp <= 0x10ffff ? String.fromCodePoint(cp) : '\ufffd';
  }
  return out;
}

/** The body's JSON value, or its first top-level value when more follows; undefined when neither parses. */
function parseFirstValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    const end = firstValueEnd(text);
    if (end === undefined) return undefined;
    try {
      return JSON.parse(text.slice(0, end));
    } catch {
      return undefined;
    }
  }
}

/** Where the first top-level object or array ends (brackets counted outside strings), if it does. */
function firstValueEnd(text: string): number | undefined {
  let i = 0;
  while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r')) i++;
  if (text[i] !== '{' && text[i] !== '[') return undefined;
  let depth = 0;
  let inString = false;
  for (; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c) i++;
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x7b || ch === 0x5b) depth++;
    else if ((ch === 0x7d || ch === 0x5d) && --depth === 0) return i + 1;
  }
  return undefined;
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
 * Parsers disagree on the header block (PHP takes the last of two "name"s,
 * busboy the first; PHP reads 'single quotes', a missing "form-data;" and
 * continuation lines), so every name=value in every part's header area
 * counts: the lines after any line starting with "--" (every boundary
 * delimiter does), up to the blank line that ends the headers. Cheap: only a
 * body holding "method" is scanned. (RFC 2231 "name*=" is read by neither
 * PHP nor busboy, and is not looked at.)
 */
export function multipartMethodOverride(body: Buffer): boolean {
  const text = body.toString('latin1');
  if (!/method/i.test(text)) return false;
  // From each line starting with "--" (jumped to with indexOf), read header lines up to a blank one.
  for (let at = text.startsWith('--') ? 0 : lineStartingWithDashes(text, 0); at !== -1; at = lineStartingWithDashes(text, at)) {
    for (let start = text.indexOf('\n', at) + 1; start > 0 && start < text.length;) {
      let end = text.indexOf('\n', start);
      if (end === -1) end = text.length;
      const line = text.slice(start, end);
      if (line === '' || line === '\r' || line.startsWith('--')) break;
      if (partNameIsMethod(line)) return true;
      at = start;
      start = end + 1;
    }
  }
  return false;
}

/** The start of the next line after `from` that begins with "--", or -1. */
function lineStartingWithDashes(text: string, from: number): number {
  const i = text.indexOf('\n--', from);
  return i === -1 ? -1 : i + 1;
}

const NAME_PARAM = /(?:^|[^a-z0-9_-])name\s*=\s*(?:"((?:[^"\\]|\\.)*)"?|'([^']*)'?|([^;,\s"']*))/gi;

function partNameIsMethod(line: string): boolean {
  if (!/name/i.test(line)) return false;
  for (const m of line.matchAll(NAME_PARAM)) {
    const value = m[1] ?? m[2] ?? m[3] ?? '';
    for (const v of [value, value.replace(/\\(.)/g, '$1')]) if (nameReadings(v).has('_method')) return true;
  }
  return false;
}
