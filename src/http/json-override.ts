/*
 * A "_method" key at the top level of a JSON body, read the way lenient JSON
 * readers read it (JSON5 and JSONC: comments, unquoted and single-quoted keys,
 * escapes; UTF-16/32 by their BOM or NUL pattern). Pure.
 */

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
export function methodAt(body: Buffer, at: number): boolean {
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
