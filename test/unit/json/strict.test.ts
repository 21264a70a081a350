import { describe, expect, it } from 'vitest';
import { parseStrictJson, parseStrictJsonBytes, StrictJsonError } from '../../../src/json/strict.js';

const bytes = (...b: number[]): Uint8Array => Uint8Array.from(b);
const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

/** Asserts a StrictJsonError whose message contains `part`; returns it for offset checks. */
function failsWith(text: string, part: string | RegExp): StrictJsonError {
  let caught: unknown;
  try {
    parseStrictJson(text);
  } catch (e) {
    caught = e;
  }
  expect(caught, `expected ${JSON.stringify(text)} to be refused`).toBeInstanceOf(StrictJsonError);
  expect((caught as StrictJsonError).message).toMatch(part);
  return caught as StrictJsonError;
}

function bytesFailWith(b: Uint8Array, part: string | RegExp): void {
  expect(() => parseStrictJsonBytes(b)).toThrow(StrictJsonError);
  expect(() => parseStrictJsonBytes(b)).toThrow(part);
}

describe('parseStrictJson: valid documents', () => {
  it.each([
    ['{}', {}],
    ['[]', []],
    ['{"a":1,"b":[true,false,null],"c":{"d":"e"}}', { a: 1, b: [true, false, null], c: { d: 'e' } }],
    [' \t\r\n[1, 2 ,3]\n ', [1, 2, 3]],
    ['"plain"', 'plain'],
    ['0', 0],
    ['-12.5', -12.5],
    ['null', null],
  ])('parses %s', (text, expected) => {
    expect(parseStrictJson(text)).toEqual(expected);
  });

  it('round-trips what JSON.stringify produces', () => {
    const value = { name: 'inv "1"\\', tags: ['a', 'b'], nested: { deep: [{ x: 1.25 }, []] }, ok: true, none: null };
    expect(parseStrictJson(JSON.stringify(value))).toEqual(value);
  });

  it('decodes every simple escape', () => {
    expect(parseStrictJson('"\\" \\\\ \\/ \\b \\f \\n \\r \\t"')).toBe('" \\ / \b \f \n \r \t');
  });

  it('decodes \\u escapes, including a valid surrogate pair', () => {
    expect(parseStrictJson('"\\u0041\\u00e9\\u20AC"')).toBe('Aé€');
    expect(parseStrictJson('"\\ud83d\\ude00"')).toBe('😀');
    expect(parseStrictJson('"😀"')).toBe('😀');
  });

  it('accepts 1.5e3 and the largest safe integer', () => {
    expect(parseStrictJson('1.5e3')).toBe(1500);
    expect(parseStrictJson('9007199254740991')).toBe(9007199254740991);
    expect(parseStrictJson('-9007199254740991')).toBe(-9007199254740991);
  });

  it('refuses any number beyond the safe integer range, whatever its form', () => {
    failsWith('1e21', 'safe integer range');
    failsWith('9007199254740993.0', 'safe integer range');
    failsWith('-9007199254740993e0', 'safe integer range');
  });

  it('refuses numbers with more significant digits than a double holds', () => {
    failsWith('1000.00000000000000001', 'significant digits');
    expect(parseStrictJson('0.1')).toBe(0.1);
    expect(parseStrictJson('123456789.12345678')).toBe(123456789.12345678);
  });

  it('refuses keys that differ only in case (Go and ASP.NET fold them)', () => {
    failsWith('{"amount":5,"AMOUNT":99999}', 'different case');
    failsWith('{"mask":1,"ma\u017fk":2}', 'different case');
    expect(parseStrictJson('{"a":{"x":1},"b":{"X":2}}')).toEqual({ a: { x: 1 }, b: { X: 2 } });
  });

  it('makes "__proto__" an own property, never the prototype', () => {
    const v = parseStrictJson('{"__proto__":{"polluted":true},"a":1}') as Record<string, unknown>;
    expect(Object.hasOwn(v, '__proto__')).toBe(true);
    expect(Object.getOwnPropertyDescriptor(v, '__proto__')?.value).toEqual({ polluted: true });
    expect((v as { polluted?: unknown }).polluted).toBeUndefined();
    expect(Object.getPrototypeOf(v)).not.toEqual({ polluted: true });
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it('accepts nesting of exactly 64 levels', () => {
    expect(() => parseStrictJson('['.repeat(64) + ']'.repeat(64))).not.toThrow();
    expect(() => parseStrictJson('['.repeat(64) + '1' + ']'.repeat(64))).not.toThrow();
  });
});

describe('parseStrictJson: refused documents', () => {
  it('refuses a duplicate key, pointing at the second copy', () => {
    const e = failsWith('{"a":1,"a":2}', 'duplicate key "a"');
    expect(e.offset).toBe(7);
  });

  it('refuses a duplicate key in a nested object', () => {
    failsWith('{"outer":{"k":1,"k":1}}', 'duplicate key "k"');
    failsWith('[{"ok":1},{"x":1,"y":2,"x":3}]', 'duplicate key "x"');
  });

  it('refuses keys that are duplicates only after unescaping', () => {
    failsWith('{"a":1,"\\u0061":2}', 'duplicate key "a"');
  });

  it('refuses trailing data', () => {
    const e = failsWith('{"a":1} x', 'unexpected data after JSON value');
    expect(e.offset).toBe(8);
    failsWith('{}{}', 'unexpected data');
    failsWith('1 2', 'unexpected data');
  });

  it('refuses integers outside the safe range', () => {
    failsWith('9007199254740993', 'safe integer range');
    failsWith('9007199254740992', 'safe integer range');
    failsWith('-9007199254740993', 'safe integer range');
    failsWith('{"amount":9007199254740993}', 'safe integer range');
  });

  it('refuses numbers that overflow to infinity', () => {
    failsWith('1e400', 'out of range');
    failsWith('-1e400', 'out of range');
    failsWith('[1.0e309]', 'out of range');
  });

  it('refuses an escaped lone surrogate', () => {
    failsWith('"\\ud800"', 'lone surrogate');
    failsWith('"\\udc00"', 'lone surrogate');
    failsWith('"\\ude00\\ud83d"', 'lone surrogate'); // reversed pair
    failsWith('{"\\ud800":1}', 'lone surrogate');
  });

  it('refuses a raw lone surrogate in the text', () => {
    failsWith('"a\ud800b"', 'lone surrogate');
    failsWith('"\udfff"', 'lone surrogate');
  });

  it('refuses control characters inside strings', () => {
    failsWith('"a\nb"', 'control character');
    failsWith('"\u0000"', 'control character');
    failsWith('"\t"', 'control character');
    failsWith('"\u001f"', 'control character');
  });

  it('refuses leading zeros', () => {
    expect(() => parseStrictJson('01')).toThrow(StrictJsonError);
    expect(() => parseStrictJson('[00]')).toThrow(StrictJsonError);
    expect(() => parseStrictJson('{"n":-01}')).toThrow(StrictJsonError);
  });

  it('refuses other malformed numbers', () => {
    for (const t of ['-', '+1', '.5', '1.', '1e', '0x10', 'NaN', 'Infinity']) {
      expect(() => parseStrictJson(t), t).toThrow(StrictJsonError);
    }
  });

  it('refuses trailing commas', () => {
    failsWith('[1,2,]', 'unexpected character "]"');
    failsWith('{"a":1,}', 'expected string key');
  });

  it('refuses invalid escapes, literals and unterminated input', () => {
    failsWith('"\\x41"', 'invalid escape');
    failsWith('"\\u12"', 'invalid unicode escape');
    failsWith('"abc', 'unterminated string');
    failsWith('tru', 'invalid literal');
    failsWith('', 'unexpected end of input');
    failsWith("{'a':1}", 'expected string key');
  });

  it('refuses nesting deeper than 64', () => {
    failsWith('['.repeat(65) + '1' + ']'.repeat(65), 'nesting too deep');
    failsWith('{"a":'.repeat(65) + '1' + '}'.repeat(65), 'nesting too deep');
  });

  it('refuses 65 levels of nesting even when the innermost container is empty', () => {
    failsWith('['.repeat(65) + ']'.repeat(65), 'nesting too deep');
    failsWith('{"a":'.repeat(64) + '{}' + '}'.repeat(64), 'nesting too deep');
  });

  it('does not overflow the stack on very deep input', () => {
    failsWith('['.repeat(100_000), 'nesting too deep');
  });

  it('refuses a BOM in text form too', () => {
    expect(() => parseStrictJson('\ufeff{}')).toThrow(StrictJsonError);
  });
});

describe('parseStrictJsonBytes', () => {
  it('parses UTF-8 bytes', () => {
    expect(parseStrictJsonBytes(utf8('{"name":"café 😀"}'))).toEqual({ name: 'café 😀' });
  });

  it('refuses a UTF-8 byte order mark', () => {
    bytesFailWith(bytes(0xef, 0xbb, 0xbf, 0x7b, 0x7d), 'byte order mark');
  });

  it.each([
    ['a lone continuation byte', [0x22, 0x80, 0x22]],
    ['a truncated sequence', [0x22, 0xc3, 0x22]],
    ['an overlong encoding of "/"', [0x22, 0xc0, 0xaf, 0x22]],
    ['a CESU-8 encoded surrogate', [0x22, 0xed, 0xa0, 0x80, 0x22]],
    ['a byte that never occurs in UTF-8', [0x22, 0xff, 0x22]],
    ['a code point above U+10FFFF', [0x22, 0xf4, 0x90, 0x80, 0x80, 0x22]],
  ])('refuses invalid UTF-8: %s', (_name, b) => {
    bytesFailWith(bytes(...b), 'invalid UTF-8');
  });

  it('applies the same strict rules after decoding', () => {
    bytesFailWith(utf8('{"a":1,"a":2}'), 'duplicate key');
    bytesFailWith(utf8('"\\ud800"'), 'lone surrogate');
    bytesFailWith(utf8('9007199254740993'), 'safe integer range');
  });
});

describe('parseStrictJson key report', () => {
  it('reports every object key at any depth, inside arrays too', () => {
    const keys: string[] = [];
    parseStrictJsonBytes(Buffer.from('{"a":1,"b":{"c":[{"d":2},{"e":{"f":null}}]},"g":[]}'), keys);
    expect(keys.sort()).toEqual(['a', 'b', 'c', 'd', 'e', 'f', 'g']);
  });
});
