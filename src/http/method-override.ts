import type { IncomingMessage } from 'node:http';
import { deny, isDenial, type Denial } from '../errors.js';
import { keyProblem, nameReadings, overridesMethod } from '../routing/query.js';
import { decodedContent, parseContentType } from './body.js';

/*
 * Method overrides in a request body: a "_method" field that PHP, Laravel,
 * Symfony, Rack, Express's method-override or Go handlers would read as the
 * real method, in a form, multipart or JSON body, read the way those parsers
 * read it. Pure but for zlib (decodedContent).
 */

/**
 * Refuses a body that overrides the method ("_method" in a form, multipart
 * or JSON body) or that the sidecar cannot read as the app will. The body is
 * read as it is meant: inflated when compressed (body-parser inflates gzip,
 * deflate and br by default). The declared Content-Type does not decide
 * which reading counts (PHP's json_decode and Laravel read a JSON body sent
 * as a form, Werkzeug reads application/x-url-encoded as a form, Rack parses
 * multipart/mixed), so every cheap check runs on every body: the JSON key
 * scan, the form-name check (strict only for a declared form), and the
 * multipart scan for any multipart/* type. The bytes forwarded are the
 * original ones.
 */
export async function bodyOverrideDenial(req: IncomingMessage, body: Buffer, limit: number): Promise<Denial | undefined> {
  const type = req.headers['content-type'] ?? '';
  const { essence, params } = parseContentType(type);
  const charset = unsafeCharset(params);
  if (charset !== undefined) {
    // iconv-lite (body-parser) decodes UTF-7, where "+AF8-method" is "_method", and many more: only known ones are checkable.
    return deny('unsupported_media_type', `charset "${printableParam(charset)}" is not accepted; send the body as UTF-8 (or UTF-16/32, ASCII, or a single-byte superset of ASCII such as ISO-8859-x or windows-125x)`);
  }
  const bytes = await decodedContent(body, req.headers['content-encoding'], limit);
  if (isDenial(bytes)) return bytes;
  const override = deny('invalid_body', 'the "_method" override is not accepted; use the real HTTP method');
  // Both form readings need a "%" escape or the letters "method": most bodies are not copied into a string at all.
  const formNamesMayMatter = mayNameMethod(bytes);
  if (essence === 'application/x-www-form-urlencoded') {
    const problem = formNamesMayMatter ? keyProblem(bytes.toString('latin1')) : undefined;
    if (problem === 'malformed') return deny('invalid_body', 'a form field name has a malformed percent-encoding (apps would read it leniently, as another name)');
    if (problem === 'method') return override;
  } else if (formNamesMayMatter && overridesMethod(bytes.toString('latin1'))) {
    return override;
  }
  if (essence.startsWith('multipart/')) {
    const problem = multipartProblem(bytes, agreedBoundary(type, params.get('boundary')?.[0]));
    if (problem === 'extended') return deny('invalid_body', 'a multipart part header uses an RFC 2231 "name*" parameter; send the field name as name="..."');
    if (problem === 'method') return override;
  }
  return jsonMethodOverride(bytes) ? override : undefined;
}

/**
 * The boundary every parser agrees on, or undefined (then every "--" line
 * counts as a delimiter, a superset of any boundary's). PHP (rfc1867.c)
 * takes the first "boundary" anywhere in the header, case-insensitively
 * (inside "xboundary=" or a quoted value too), then what follows the next
 * "=", up to "," or ";" (spaces kept) or the closing quote; Go and busboy
 * parse parameters. A PHP boundary that starts with the parsed one is fine:
 * its delimiter lines all start with the parsed delimiter.
 */
export function agreedBoundary(type: string, parsed: string | undefined): string | undefined {
  if (parsed === undefined) return undefined;
  const at = type.toLowerCase().indexOf('boundary');
  const eq = at === -1 ? -1 : type.indexOf('=', at);
  if (eq === -1) return undefined;
  let php = type.slice(eq + 1);
  if (php.startsWith('"')) {
    const close = php.indexOf('"', 1);
    php = php.slice(1, close === -1 ? php.length : close);
  } else {
    const end = php.search(/[,;]/);
    if (end !== -1) php = php.slice(0, end);
  }
  return php.startsWith(parsed) ? parsed : undefined;
}

/**
 * Charsets whose decoding the sidecar reproduces (UTF-8, UTF-16/32 as
 * jsonUtf8 detects them, and ASCII-compatible single-byte ones, where an
 * ASCII name is the same bytes), normalised as iconv-lite looks names up:
 * lower-cased, everything but [a-z0-9] dropped ("UTF--7", "utf-_7" and
 * "utf\-7" are all "utf7" to it).
 */
const SAFE_CHARSETS = new Set([
  'utf8', 'utf16', 'utf16le', 'utf16be', 'utf32', 'utf32le', 'utf32be', 'ascii', 'usascii', 'latin1',
  // Single-byte supersets of ASCII: bytes below 0x80 are ASCII in each, so the byte scan reads what the app
  // reads. Multi-byte ones (Shift_JIS, GBK, Big5) are not here: a trail byte 0x5C would end a string the
  // scan thinks goes on, and UTF-7, EBCDIC and ISO-2022 can spell "_method" without its ASCII bytes.
  ...Array.from({ length: 16 }, (_, i) => `iso8859${i + 1}`), ...Array.from({ length: 9 }, (_, i) => `windows125${i}`),
  ...Array.from({ length: 9 }, (_, i) => `cp125${i}`), 'koi8r', 'koi8u', 'macroman', 'macintosh', 'cp437', 'cp850', 'ibm437', 'ibm850',
]);

/** The first charset parameter the sidecar cannot read as the app would (any "charset*" variant included), if any. */
function unsafeCharset(params: Map<string, string[]>): string | undefined {
  for (const [name, values] of params) {
    if (!name.startsWith('charset')) continue;
    for (const v of values) if (name !== 'charset' || !SAFE_CHARSETS.has(v.toLowerCase().replace(/[^a-z0-9]/g, ''))) return v;
  }
  return undefined;
}

function printableParam(s: string): string {
  const shown = s.replace(/[^\x20-\x7e]/g, '?');
  return shown.length > 40 ? `${shown.slice(0, 40)}…` : shown;
}

/**
 * True when a JSON body carries a top-level "_method" key (any case, any
 * escaping: "\u005fmethod" is the same key), which Laravel and Express's
 * method-override (with a body getter) read as the real method. `parsed` is
 * the body when the constrained path already parsed it. The body is read as
 * lenient parsers do: a BOM is skipped and UTF-16/32 detected (Python's
 * json.loads on bytes, iconv-lite in body-parser), and the keys of the first
 * top-level object are read lexically, whatever surrounds them: Python
 * accepts NaN and Infinity, JSON5 parsers comments and trailing commas, Go's
 * json.Decoder stops after the first value. One linear pass, no parse.
 * Cheap for the common body: only one that could hold such a key (an "_"
 * followed by "method" in any case, or any "\u" escape) is scanned.
 */
export function jsonMethodOverride(body: Buffer, parsed?: unknown): boolean {
  if (parsed !== undefined) {
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return false;
    return Object.keys(parsed).some((k) => k.toLowerCase() === '_method');
  }
  const bytes = jsonUtf8(body);
  if (!mayHoldMethodKey(bytes)) return false;
  return topLevelKeyIsMethod(bytes.toString('latin1'));
}

const SIMPLE_ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

/**
 * Scans the first top-level object (after whitespace and comments) and tells
 * whether one of its keys, unescaped, is "_method" in any case. Strings are
 * tracked with their escapes; brackets give the depth; a string at depth 1
 * followed by ":" is a key. Anything else (NaN, comments, trailing commas,
 * bytes after the object) is stepped over. `text` is Latin-1-decoded UTF-8:
 * non-ASCII bytes never spell an ASCII key, so they need no decoding.
 */
export function topLevelKeyIsMethod(text: string): boolean {
  let i = skipBlank(text, 0);
  if (text[i] !== '{') return false;
  let depth = 0;
  for (; i < text.length; i++) {
    const ch = text[i];
    if (ch === '"') {
      // A string: decode at most 8 characters (enough to tell "_method"), skip the rest.
      let key = '';
      let long = false;
      for (i++; i < text.length && text[i] !== '"'; i++) {
        let c = text[i]!;
        if (c === '\\') {
          const e = text[++i] ?? '';
          if (e === 'u') {
            const hex = text.slice(i + 1, i + 5);
            c = /^[0-9A-Fa-f]{4}$/.test(hex) ? String.fromCharCode(parseInt(hex, 16)) : '\ufffd';
            i += /^[0-9A-Fa-f]{4}$/.test(hex) ? 4 : 0;
          } else c = SIMPLE_ESCAPES[e] ?? e;
        }
        if (!long) {
          key += c;
          if (key.length > 7) long = true;
        }
      }
      if (depth === 1 && !long && key.toLowerCase() === '_method' && text[skipBlank(text, i + 1)] === ':') return true;
    } else if (depth === 1 && (ch === '_' || ch === "'")) {
      // JSON5 keys: unquoted ("_method: 1") or single-quoted ('_method': 1). An "_" or "'" is never
      // outside a string in JSON, so this only reads what JSON5 parsers read.
      const end = ch === "'" ? text.indexOf("'", i + 1) : identifierEnd(text, i);
      const key = ch === "'" ? text.slice(i + 1, end === -1 ? text.length : end) : text.slice(i, end);
      if (key.toLowerCase() === '_method' && end !== -1 && text[skipBlank(text, ch === "'" ? end + 1 : end)] === ':') return true;
      if (end === -1) return false;
      i = ch === "'" ? end : end - 1;
    } else if (ch === '/' && (text[i + 1] === '*' || text[i + 1] === '/')) {
      i = skipBlank(text, i) - 1;
    } else if (ch === '{' || ch === '[') depth++;
    else if ((ch === '}' || ch === ']') && --depth === 0) return false;
  }
  return false;
}

/** The end of an identifier (JSON5's unquoted key: letters, digits, "_", "$") starting at `i`. */
function identifierEnd(text: string, i: number): number {
  while (i < text.length && /[A-Za-z0-9_$]/.test(text[i]!)) i++;
  return i;
}

/** The index of the first character at or after `i` that is not whitespace or a comment (JSON5, JSONC). */
function skipBlank(text: string, i: number): number {
  for (;;) {
    while (i < text.length && (text[i] === ' ' || text[i] === '\t' || text[i] === '\n' || text[i] === '\r')) i++;
    if (text[i] !== '/') return i;
    if (text[i + 1] === '/') {
      const nl = text.indexOf('\n', i);
      i = nl === -1 ? text.length : nl + 1;
    } else if (text[i + 1] === '*') {
      const close = text.indexOf('*/', i + 2);
      i = close === -1 ? text.length : close + 2;
    } else return i;
  }
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

const METHOD = Buffer.from('method');

/** Whether `body` holds "method" (ASCII, any case) at `at`. */
function methodAt(body: Buffer, at: number): boolean {
  if (at + 6 > body.length) return false;
  for (let j = 0; j < 6; j++) if ((body[at + j]! | 0x20) !== METHOD[j]) return false;
  return true;
}

/** A JSON key could be "_method": an "_" followed by "method" (any case), or any "\\u" escape. */
function mayHoldMethodKey(body: Buffer): boolean {
  if (body.indexOf('\\u') !== -1) return true;
  for (let i = body.indexOf(0x5f); i !== -1; i = body.indexOf(0x5f, i + 1)) if (methodAt(body, i + 1)) return true;
  return false;
}

/** A form name could read as "_method": it needs a "%" escape or the letters "method" (any case) somewhere. */
function mayNameMethod(body: Buffer): boolean {
  if (body.indexOf(0x25) !== -1) return true;
  for (const m of [0x6d, 0x4d]) {
    for (let i = body.indexOf(m); i !== -1; i = body.indexOf(m, i + 1)) if (methodAt(body, i)) return true;
  }
  return false;
}

/** What a multipart body holds that some app would misread: a "_method" part, or a part named with RFC 2231 "name*". */
export type MultipartProblem = 'method' | 'extended';

/**
 * The first problem in a multipart body's part headers: a part named
 * "_method" under any name a framework reads as it (Laravel, Symfony and
 * Rack read multipart fields like form fields; PHP mangles ".method" to
 * "_method" here too), or a "name*" parameter (RFC 2231: Go's net/http and
 * Werkzeug decode "name*=utf-8''%5Fmethod" and join "name*0=_met;
 * name*1=hod"; refused rather than decoded). Parsers disagree on the header
 * block (PHP takes the last of two "name"s, busboy the first; PHP reads
 * 'single quotes', a missing "form-data;" and continuation lines), so every
 * name=value in every header line counts. A block starts after a line that
 * begins with "--" and the declared boundary (any "--" line when none is
 * declared) and ends at the first CRLF CRLF (the latest any parser ends it)
 * or the next delimiter; CR, LF and CRLF all end a line. Part contents are
 * not read, so an uploaded diff or SQL file with "--" lines passes. Linear;
 * only a body holding "method", "\\" or "name*" is scanned.
 */
export function multipartProblem(body: Buffer, boundary?: string): MultipartProblem | undefined {
  const text = body.toString('latin1');
  // "\\": a quoted name may be escaped ("_m\\ethod"), which PHP unescapes.
  if (!/method|\\|name\s*\*/i.test(text)) return undefined;
  const delimiter = `--${boundary ?? ''}`;
  let blockEnd = -1;
  for (let at = nextDelimiter(text, delimiter, 0); at !== -1;) {
    const next = nextDelimiter(text, delimiter, at + delimiter.length);
    // The header block: from the end of the delimiter line to the first CRLF CRLF, or the next delimiter.
    let start = lineEnd(text, at + delimiter.length);
    if (blockEnd < start) {
      blockEnd = text.indexOf('\r\n\r\n', start);
      if (blockEnd === -1) blockEnd = text.length; // searched once, not once per delimiter
    }
    const stop = Math.min(blockEnd, next === -1 ? text.length : next);
    while (start < stop) {
      let end = start;
      while (end < stop && text[end] !== '\r' && text[end] !== '\n') end++;
      const problem = partHeaderProblem(text.slice(start, end));
      if (problem) return problem;
      start = end + 1;
    }
    at = next;
  }
  return undefined;
}

/** True when a multipart body has a problem (see multipartProblem); kept for callers that only ask yes or no. */
export function multipartMethodOverride(body: Buffer, boundary?: string): boolean {
  return multipartProblem(body, boundary) !== undefined;
}

/** The next index at or after `from` where a line (CR, LF or CRLF ended) begins with `delimiter`, or -1. */
function nextDelimiter(text: string, delimiter: string, from: number): number {
  for (let i = text.indexOf(delimiter, from); i !== -1; i = text.indexOf(delimiter, i + 1)) {
    if (i === 0 || text[i - 1] === '\n' || text[i - 1] === '\r') return i;
  }
  return -1;
}

/** The index just past the line end (CRLF, CR or LF) at or after `i`, or the text's length. */
function lineEnd(text: string, i: number): number {
  while (i < text.length && text[i] !== '\r' && text[i] !== '\n') i++;
  if (text[i] === '\r' && text[i + 1] === '\n') return i + 2;
  return Math.min(i + 1, text.length);
}

const NAME_PARAM = /(?:^|[^a-z0-9_-])name\s*=\s*(?:"((?:[^"\\]|\\.)*)"?|'([^']*)'?|([^;,\s"']*))/gi;

/** RFC 2231 extended "name*", "name*0", "name*0*" (not "filename*", which names no field). */
const EXTENDED_NAME = /(?:^|[^a-z0-9_-])name\s*\*/i;

function partHeaderProblem(line: string): MultipartProblem | undefined {
  if (!/name/i.test(line)) return undefined;
  if (EXTENDED_NAME.test(line)) return 'extended';
  for (const m of line.matchAll(NAME_PARAM)) {
    const value = m[1] ?? m[2] ?? m[3] ?? '';
    for (const v of [value, value.replace(/\\(.)/g, '$1')]) if (nameReadings(v).has('_method')) return 'method';
  }
  return undefined;
}
