/**
 * A strict JSON parser (RFC 8259) for bytes the sidecar must judge: tokens and
 * constrained request bodies. JSON.parse silently keeps the last of duplicate
 * keys, turns 1e400 into Infinity, rounds 2^53+1 and accepts lone surrogates;
 * an app parsing the same bytes differently could then see values the sidecar
 * never checked. Here each of those is an error.
 */
export class StrictJsonError extends Error {
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(`${message} at offset ${offset}`);
    this.name = 'StrictJsonError';
  }
}

/** The one-character escapes of RFC 8259 §7 and what they stand for (`\\u` is read apart). */
const ESCAPES = new Map([
  ['"', '"'],
  ['\\', '\\'],
  ['/', '/'],
  ['b', '\b'],
  ['f', '\f'],
  ['n', '\n'],
  ['r', '\r'],
  ['t', '\t'],
]);
const MAX_DEPTH = 64;

/** `keys`, when given, receives every object key in the document (any depth, repeats included). */
export function parseStrictJson(text: string, keys?: string[]): unknown {
  const p = new Parser(text, keys);
  p.ws();
  const v = p.value(0);
  p.ws();
  if (p.i !== text.length) p.fail('unexpected data after JSON value');
  return v;
}

/** Stateless without `stream`: one decoder serves every call (a new one per body cost about a microsecond). */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
/** Sticky: matched at `lastIndex`, set before each use (the parser is synchronous). */
const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;

/** Decodes UTF-8 bytes strictly (no BOM, no invalid sequences), then parses. */
export function parseStrictJsonBytes(bytes: Uint8Array, keys?: string[]): unknown {
  if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
    throw new StrictJsonError('byte order mark is not allowed', 0);
  }
  let text: string;
  try {
    text = UTF8.decode(bytes);
  } catch {
    throw new StrictJsonError('invalid UTF-8', 0);
  }
  return parseStrictJson(text, keys);
}

/** Simple case folding as Go's encoding/json applies it (K and ſ fold too). */
function foldKey(key: string): string {
  return key
    .toLowerCase()
    .replace(/\u212a/g, 'k')
    .replace(/\u017f/g, 's');
}

class Parser {
  i = 0;
  constructor(
    private readonly s: string,
    private readonly keys?: string[],
  ) {}

  fail(msg: string): never {
    throw new StrictJsonError(msg, this.i);
  }

  ws(): void {
    const s = this.s;
    while (this.i < s.length) {
      const c = s.charCodeAt(this.i);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) this.i++;
      else break;
    }
  }

  /** `depth` counts the containers around this value. */
  value(depth: number): unknown {
    const c = this.s[this.i];
    switch (c) {
      case '{':
        return this.object(depth);
      case '[':
        return this.array(depth);
      case '"':
        return this.string();
      case 't':
        return this.literal('true', true);
      case 'f':
        return this.literal('false', false);
      case 'n':
        return this.literal('null', null);
      case undefined:
        return this.fail('unexpected end of input');
      default:
        if (c === '-' || (c >= '0' && c <= '9')) return this.number();
        return this.fail(`unexpected character ${JSON.stringify(c)}`);
    }
  }

  literal<T>(word: string, v: T): T {
    if (!this.s.startsWith(word, this.i)) this.fail('invalid literal');
    this.i += word.length;
    return v;
  }

  object(depth: number): Record<string, unknown> {
    if (depth >= MAX_DEPTH) this.fail(`nesting too deep (over ${MAX_DEPTH} levels)`);
    // Null prototype: a "__proto__" key is an ordinary key, never a prototype.
    const out = Object.create(null) as Record<string, unknown>;
    const folded = new Set<string>();
    this.i++;
    this.ws();
    if (this.s[this.i] === '}') {
      this.i++;
      return out;
    }
    for (;;) {
      if (this.s[this.i] !== '"') this.fail('expected string key');
      const keyAt = this.i;
      const key = this.string();
      if (Object.hasOwn(out, key)) {
        this.i = keyAt;
        this.fail(`duplicate key ${JSON.stringify(key)}`);
      }
      // Go, ASP.NET and lenient Jackson match keys ignoring case, last one winning.
      const f = foldKey(key);
      if (folded.has(f)) {
        this.i = keyAt;
        this.fail(`key ${JSON.stringify(key)} repeats another key in different case`);
      }
      folded.add(f);
      this.keys?.push(key);
      this.ws();
      if (this.s[this.i] !== ':') this.fail('expected ":"');
      this.i++;
      this.ws();
      out[key] = this.value(depth + 1);
      this.ws();
      const c = this.s[this.i];
      if (c === ',') {
        this.i++;
        this.ws();
        continue;
      }
      if (c === '}') {
        this.i++;
        return out;
      }
      this.fail('expected "," or "}"');
    }
  }

  array(depth: number): unknown[] {
    if (depth >= MAX_DEPTH) this.fail(`nesting too deep (over ${MAX_DEPTH} levels)`);
    const out: unknown[] = [];
    this.i++;
    this.ws();
    if (this.s[this.i] === ']') {
      this.i++;
      return out;
    }
    for (;;) {
      out.push(this.value(depth + 1));
      this.ws();
      const c = this.s[this.i];
      if (c === ',') {
        this.i++;
        this.ws();
        continue;
      }
      if (c === ']') {
        this.i++;
        return out;
      }
      this.fail('expected "," or "]"');
    }
  }

  number(): number {
    NUMBER.lastIndex = this.i;
    const r = NUMBER.exec(this.s);
    if (!r) this.fail('invalid number');
    const text = r[0];
    const n = Number(text);
    if (!Number.isFinite(n)) this.fail('number out of range');
    if (Math.abs(n) > Number.MAX_SAFE_INTEGER) this.fail('number outside the safe integer range');
    // More digits than a double holds: an exact-decimal parser would read another value (17 characters hold at most 17 digits).
    if (text.length <= 17) {
      this.i += text.length;
      return n;
    }
    const digits = text
      .replace(/[eE].*$/, '')
      .replace(/[-.]/g, '')
      .replace(/^0+/, '')
      .replace(/0+$/, '');
    if (digits.length > 17) this.fail('number has more significant digits than a double can hold');
    this.i += text.length;
    return n;
  }

  string(): string {
    const s = this.s;
    this.i++; // opening quote
    let out = '';
    let start = this.i;
    for (;;) {
      if (this.i >= s.length) this.fail('unterminated string');
      const c = s.charCodeAt(this.i);
      if (c === 0x22) {
        out += s.slice(start, this.i);
        this.i++;
        break;
      }
      if (c < 0x20) this.fail('control character in string');
      if (c === 0x5c) {
        out += s.slice(start, this.i) + this.escape();
        start = this.i;
        continue;
      }
      this.i++;
    }
    // Escaped or raw, an unpaired surrogate has no UTF-8 form: parsers disagree on it.
    if (!out.isWellFormed()) this.fail('lone surrogate in string');
    return out;
  }

  /** The escape sequence whose backslash is at `this.i`, decoded; leaves `this.i` after it. */
  escape(): string {
    this.i++;
    const e = this.s[this.i];
    if (e === 'u') {
      const hex = this.s.slice(this.i + 1, this.i + 5);
      if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail('invalid unicode escape');
      this.i += 5;
      return String.fromCharCode(parseInt(hex, 16));
    }
    const text = e === undefined ? undefined : ESCAPES.get(e);
    if (text === undefined) return this.fail('invalid escape');
    this.i++;
    return text;
  }
}
