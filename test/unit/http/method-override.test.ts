import type { IncomingMessage } from 'node:http';
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { parseContentType } from '../../../src/http/body.js';
import {
  agreedBoundary,
  bodyOverrideDenial,
  jsonMethodOverride,
  jsonUtf8,
  multipartMethodOverride,
  multipartProblem,
} from '../../../src/http/method-override.js';
import { expectLinear } from '../../support/linear.js';

const b = (s: string): Buffer => Buffer.from(s);

describe('jsonMethodOverride', () => {
  it.each([
    '{"_method":"DELETE"}',
    '{"a":1,"_METHOD":"DELETE"}',
    '{"_Method":"PUT"}',
    '{"\\u005fmethod":"DELETE"}',
    '{"_\\u006Dethod":"DELETE"}',
    '{"\\u005F\\u004D\\u0045\\u0054\\u0048\\u004F\\u0044":"DELETE"}',
    ' {"a":1,"a":2,"_method":"DELETE"} ',
  ])('finds a top-level method override in %s', (text) => {
    expect(jsonMethodOverride(b(text))).toBe(true);
  });

  it.each([
    '{"a":"_method"}',
    '{"nested":{"_method":"DELETE"}}',
    '[{"_method":"DELETE"}]',
    '{"method":"DELETE","payment_method":"card"}',
    '_method=DELETE',
    '',
  ])('finds none in %s', (text) => {
    expect(jsonMethodOverride(b(text))).toBe(false);
  });

  it('reuses a body that was already parsed', () => {
    expect(jsonMethodOverride(b('ignored'), { _method: 'DELETE' })).toBe(true);
    expect(jsonMethodOverride(b('{"_method":"DELETE"}'), { other: 1 })).toBe(false);
  });
});

describe('multipartMethodOverride', () => {
  const part = (name: string, value = 'DELETE'): string => `--b\r\nContent-Disposition: form-data; name=${name}\r\n\r\n${value}\r\n`;
  const body = (...parts: string[]): Buffer => b(`${parts.join('')}--b--\r\n`);

  it.each(['"_method"', '"_METHOD"', '".method"', '" _method"', '_method', '"_method[]"', '"\\_method"'])('finds a part named %s', (name) => {
    expect(multipartMethodOverride(body(part('"file"; filename="a.txt"', 'x'), part(name)))).toBe(true);
  });

  it('finds none in other parts, file names or values', () => {
    expect(multipartMethodOverride(body(part('"file"; filename="_method"', '_method=DELETE'), part('"payment_method"', 'card')))).toBe(false);
  });
});

const OVERRIDE = '{"text":"hi","_method":"DELETE"}';
const utf32 = (s: string, little: boolean): Buffer => {
  const out = Buffer.alloc(s.length * 4);
  for (let i = 0; i < s.length; i++) little ? out.writeUInt32LE(s.charCodeAt(i), i * 4) : out.writeUInt32BE(s.charCodeAt(i), i * 4);
  return out;
};

describe("jsonUtf8 (Python's json.detect_encoding, RFC 4627 §3)", () => {
  it.each([
    ['UTF-8', b(OVERRIDE)],
    ['a UTF-8 BOM', b(`\ufeff${OVERRIDE}`)],
    ['UTF-16LE', Buffer.from(OVERRIDE, 'utf16le')],
    ['UTF-16LE with a BOM', Buffer.from(`\ufeff${OVERRIDE}`, 'utf16le')],
    ['UTF-16BE', Buffer.from(OVERRIDE, 'utf16le').swap16()],
    ['UTF-16BE with a BOM', Buffer.from(`\ufeff${OVERRIDE}`, 'utf16le').swap16()],
    ['UTF-32LE', utf32(OVERRIDE, true)],
    ['UTF-32BE', utf32(OVERRIDE, false)],
    ['UTF-32LE with a BOM', utf32(`\ufeff${OVERRIDE}`, true)],
    ['UTF-32BE with a BOM', utf32(`\ufeff${OVERRIDE}`, false)],
  ])('reads %s as the same text, and finds the override in it', (_what, body) => {
    expect(jsonUtf8(body).toString('utf8')).toBe(OVERRIDE);
    expect(jsonMethodOverride(body)).toBe(true);
  });

  it('returns a plain UTF-8 body itself (no copy)', () => {
    const body = b('{"a":1}');
    expect(jsonUtf8(body)).toBe(body);
  });
});

describe("jsonMethodOverride: the first value when more follows (Go's json.Decoder)", () => {
  it.each([`${OVERRIDE} x`, `${OVERRIDE}{"b":1}`, `\n ${OVERRIDE}]]`, '{"s":"}{","_method":"PUT"} trailing', '{"s":"\\"}","_method":"PUT"}x'])(
    'finds it in %s',
    (text) => {
      expect(jsonMethodOverride(b(text))).toBe(true);
    },
  );

  it.each(['{"text":"hi"} {"_method":"DELETE"}', 'x {"_method":"DELETE"}'])('finds none in %s', (text) => {
    expect(jsonMethodOverride(b(text))).toBe(false);
  });
});

describe('multipartMethodOverride: header blocks as PHP and busboy read them', () => {
  const mp = (disposition: string, eol = '\r\n'): Buffer => b(`--b${eol}${disposition}${eol}${eol}DELETE${eol}--b--${eol}`);
  it.each([
    ['single quotes', "Content-Disposition: form-data; name='_method'"],
    ['no "form-data;"', 'Content-Disposition: name="_method"'],
    ['two names (PHP takes the last)', 'Content-Disposition: form-data; name="x"; name="_method"'],
    ['two names (busboy takes the first)', 'Content-Disposition: form-data; name="_method"; name="x"'],
    ['a continuation line without a colon', 'Content-Disposition: form-data\r\n; name="_method"'],
    ['a continuation line with a leading space', 'Content-Disposition: form-data\r\n ; name="_method"'],
    ['upper-case NAME, no spaces', 'Content-Disposition:form-data;NAME="_method"'],
    ['a NUL in the name', 'Content-Disposition: form-data; name="_method\0x"'],
    ['an unquoted name and a stray quote', 'Content-Disposition: form-data; foo="; name=_method"'],
    ['a header block after other headers', 'Content-Type: text/plain\r\nContent-Disposition: form-data; name="_method"'],
  ])('finds a "_method" part named with %s', (_what, d) => {
    expect(multipartMethodOverride(mp(d))).toBe(true);
  });

  it('reads LF-only line ends too', () => {
    expect(multipartMethodOverride(mp('Content-Disposition: form-data; name="_method"', '\n'))).toBe(true);
  });

  it('ignores part contents, filenames and longer names', () => {
    const page = '<input type="hidden" name="_method" value="PUT">';
    expect(
      multipartMethodOverride(
        b(
          `--b\r\nContent-Disposition: form-data; name="page"; filename="_method"\r\n\r\n${page}\r\n--b\r\nContent-Disposition: form-data; name="payment_method"\r\n\r\nx\r\n--b--\r\n`,
        ),
      ),
    ).toBe(false);
  });
});

const req = (headers: Record<string, string>): IncomingMessage => ({ headers }) as unknown as IncomingMessage;

describe('bodyOverrideDenial', () => {
  it.each([
    ['a form', { 'content-type': 'application/x-www-form-urlencoded' }, '_method=DELETE'],
    ['no Content-Type, read as a form (Rack)', {}, 'a=1&_method=DELETE'],
    ['no Content-Type, read as JSON', {}, OVERRIDE],
    ['JSON', { 'content-type': 'application/json' }, OVERRIDE],
    ['text/plain, read as JSON by lenient apps', { 'content-type': 'text/plain' }, OVERRIDE],
    ['multipart', { 'content-type': 'multipart/form-data; boundary=b' }, '--b\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--b--\r\n'],
  ])('refuses the override in %s', async (_what, headers, body) => {
    expect(await bodyOverrideDenial(req(headers), b(body), 1024)).toMatchObject({ code: 'invalid_body' });
  });

  it('refuses a form field name that is not valid percent-encoding, but not a bad value', async () => {
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    expect(await bodyOverrideDenial(req(form), b('a=1&_method%00%zz=DELETE'), 1024)).toMatchObject({ code: 'invalid_body' });
    expect(await bodyOverrideDenial(req(form), b('a%zz=1'), 1024)).toMatchObject({ code: 'invalid_body' });
    expect(await bodyOverrideDenial(req(form), b('a%4=1'), 1024)).toMatchObject({ code: 'invalid_body' });
    expect(await bodyOverrideDenial(req(form), b('a=100%'), 1024)).toBeUndefined();
    // Valid escapes of bytes that are not UTF-8 (a Latin-1 form) are read leniently, not refused.
    expect(await bodyOverrideDenial(req(form), b('caf%E9=1&a%C0=2'), 1024)).toBeUndefined();
    expect(await bodyOverrideDenial(req(form), b('_method%E9=1'), 1024)).toBeUndefined();
    expect(await bodyOverrideDenial(req(form), b('%E9=1&_m%E9thod=x&_method%00%E9=DELETE'), 1024)).toMatchObject({ code: 'invalid_body' });
  });

  it('a body without Content-Type is not refused for a bad escape (only Rack reads it, and Rack refuses it)', async () => {
    expect(await bodyOverrideDenial(req({}), b('{"pct":"100%"}'), 1024)).toBeUndefined();
  });

  it('refuses a UTF-7 charset', async () => {
    expect(await bodyOverrideDenial(req({ 'content-type': 'application/json; charset="UTF-7"' }), b('{}'), 1024)).toMatchObject({
      code: 'unsupported_media_type',
    });
  });

  it.each([
    ['gzip', gzipSync],
    ['x-gzip', gzipSync],
    ['deflate', deflateSync],
    ['deflate', deflateRawSync],
    ['br', brotliCompressSync],
    [' GZIP ', gzipSync],
  ])('looks inside a %s body', async (coding, compress) => {
    const enc = { 'content-type': 'application/json', 'content-encoding': coding };
    expect(await bodyOverrideDenial(req(enc), compress(OVERRIDE), 1024)).toMatchObject({ code: 'invalid_body' });
    expect(await bodyOverrideDenial(req(enc), compress('{"text":"hi"}'), 1024)).toBeUndefined();
  });
});

describe("jsonMethodOverride: a lexical scan of the first object's keys (issue 15, second review)", () => {
  it.each([
    ["NaN (Python's json.loads accepts it)", '{"_method":"DELETE","x":NaN}'],
    ['Infinity', '{"x":Infinity,"_method":"DELETE"}'],
    ['-Infinity', '{"x":-Infinity,"_method":"DELETE"}'],
    ['a comment (JSON5, JSONC)', '/* c */ {// "x"\n"_method" /* "y" */ : "DELETE"}'],
    ['a trailing comma', '{"a":1,"_method":"DELETE",}'],
    ['a truncated body', '{"a":[1,{"b":2}],"_method":"DELETE"'],
    ['escapes', '{"a\\"}":1,"\\u005F\\u006dethod":"DELETE"}'],
    ['spaces before the colon', '{"_METHOD"  \r\n: "DELETE"}'],
  ])('finds "_method" beside %s', (_what, text) => {
    expect(jsonMethodOverride(b(text))).toBe(true);
  });

  it.each([
    '{"a":NaN,"b":{"_method":"DELETE"}}',
    '{"a":"_method","b":["_method"]}',
    '{"_method_x":1,"x_method":2,"_methodx":"y"}',
    '{"a":"/* not a comment \\"","_methods":1}',
    '[{"_method":"DELETE"}]',
    '"_method"',
  ])('finds none in %s', (text) => {
    expect(jsonMethodOverride(b(text))).toBe(false);
  });

  it('finds it in UTF-16 beside NaN (decoded before the scan)', () => {
    expect(jsonMethodOverride(Buffer.from('{"x":NaN,"_method":"DELETE"}', 'utf16le'))).toBe(true);
  });
});

describe('charset on a scanned body (iconv-lite normalises names: lower-case, only [a-z0-9])', () => {
  const type = (t: string): IncomingMessage => req({ 'content-type': t });
  it.each([
    'application/json; charset=utf-7',
    'application/json; charset=utf--7',
    'application/json; charset=utf-_7',
    'text/plain; charset=shift_jis',
    'application/x-www-form-urlencoded; charset=big5',
    'application/json; charset=iso-2022-jp',
    'application/json; charset=utf-.7',
    'application/json; charset="utf\\-7"',
    'application/json; charset = "UTF-7"',
    'application/x-www-form-urlencoded; charset=utf7',
    'text/plain; charset=unicode-1-1-utf-7',
    'application/json; charset=ibm037',
    "application/json; charset*=utf-8''utf-7",
    'application/json; charset=utf-8; charset=utf-7',
    'application/json; charset=',
  ])('refuses %s (unsupported_media_type)', async (t) => {
    expect(await bodyOverrideDenial(type(t), b('{}'), 1024)).toMatchObject({ code: 'unsupported_media_type' });
  });

  it.each([
    'application/json',
    'application/json; charset=utf-8',
    'application/json; charset="UTF-8"',
    'application/json;charset=UTF8',
    'text/plain; charset=us-ascii',
    'application/x-www-form-urlencoded; charset=ISO-8859-1',
    'application/json; charset=utf-16le',
    'application/json; charset=latin1',
    'multipart/form-data; boundary="a;charset=utf-7"',
    'application/x-www-form-urlencoded; charset=windows-1252',
    'text/plain; charset=ISO-8859-15',
    'text/plain; charset=KOI8-R',
  ])('accepts %s', async (t) => {
    expect(await bodyOverrideDenial(type(t), b('{}'), 1024)).toBeUndefined();
  });
});

describe('bodyOverrideDenial: every cheap check runs whatever the declared type', () => {
  const mp = (type: string, name = '"_method"'): [string, Record<string, string>, string] => [
    type,
    { 'content-type': `${type}; boundary=b` },
    `--b\r\nContent-Disposition: form-data; name=${name}\r\n\r\nDELETE\r\n--b--\r\n`,
  ];
  it.each([
    ["JSON sent as a form (PHP's json_decode, Laravel)", { 'content-type': 'application/x-www-form-urlencoded' }, OVERRIDE],
    ['JSON sent as multipart', { 'content-type': 'multipart/form-data; boundary=b' }, OVERRIDE],
    ['a form sent as application/x-url-encoded (Werkzeug)', { 'content-type': 'application/x-url-encoded' }, 'a=1&_method=DELETE'],
    ['a form sent as JSON', { 'content-type': 'application/json' }, 'a=1&.method=DELETE'],
    mp('multipart/mixed'),
    mp('multipart/related'),
    mp('Multipart/Alternative'),
  ])('refuses the override in %s', async (_what, headers, body) => {
    expect(await bodyOverrideDenial(req(headers), b(body), 1024)).toMatchObject({ code: 'invalid_body' });
  });

  it('does not refuse a malformed key outside a declared form', async () => {
    expect(await bodyOverrideDenial(req({ 'content-type': 'text/plain' }), b('discount=100%zz&x%=1'), 1024)).toBeUndefined();
  });
});

describe('multipartProblem: RFC 2231 names, line ends, the declared boundary', () => {
  const mp = (headers: string, boundary = 'XX'): Buffer => b(`--${boundary}\r\n${headers}\r\n\r\nDELETE\r\n--${boundary}--\r\n`);

  it.each([
    "Content-Disposition: form-data; name*=utf-8''%5Fmethod",
    "Content-Disposition: form-data; name*=UTF-8''_m%65thod",
    'Content-Disposition: form-data; name*0=_met; name*1=hod',
    'Content-Disposition: form-data; NAME *= x',
  ])('refuses a part named with RFC 2231 "name*" (%s), read by Go and Werkzeug', (h) => {
    expect(multipartProblem(mp(h), 'XX')).toBe('extended');
  });

  it('accepts "filename*" (RFC 5987 names a file, not a field)', () => {
    expect(multipartProblem(mp('Content-Disposition: form-data; name="f"; filename*=utf-8\'\'caf%C3%A9.txt'), 'XX')).toBeUndefined();
  });

  it.each([
    ['a bare CR line end', 'Content-Type: text/plain\rContent-Disposition: form-data; name="_method"'],
    ['a bare LF inside a CRLF block', 'Content-Type: text/plain\nContent-Disposition: form-data; name="_method"'],
    ['an LF LF before the CRLF CRLF (busboy ends there, others do not)', 'Content-Type: text/plain\n\nContent-Disposition: form-data; name="_method"'],
  ])('reads header lines up to the first CRLF CRLF: %s', (_what, h) => {
    expect(multipartProblem(mp(h), 'XX')).toBe('method');
  });

  it('finds the delimiter quoted, with trailing whitespace, and on a body with CR-only line ends', async () => {
    const body = b('preamble\r\n--XX  \r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--XX--\r\n');
    await expect(bodyOverrideDenial(req({ 'content-type': 'multipart/form-data; boundary="XX"' }), body, 1024)).resolves.toMatchObject({
      code: 'invalid_body',
    });
    expect(multipartProblem(b('--XX\rContent-Disposition: form-data; name="_method"\r\r\nx'), 'XX')).toBe('method');
  });

  it.each([
    ['a unified diff', '--- a/form.html\n+++ b/form.html\n@@ -1 +1 @@\n-<input name="_method" value="PUT">\n+<input name="_method" value="DELETE">\n'],
    ['an SQL comment', 'SELECT 1;\n-- name="_method"\nSELECT 2;\n'],
    ['a Markdown front matter', '---\nname: _method\n---\n'],
    ["another boundary's delimiter", '--YY\r\nContent-Disposition: form-data; name="_method"\r\n\r\nx\r\n'],
  ])('forwards an uploaded file holding %s (only lines after "--" + the declared boundary start a header block)', (_what, file) => {
    const body = b(`--XX\r\nContent-Disposition: form-data; name="file"; filename="f.txt"\r\nContent-Type: text/plain\r\n\r\n${file}\r\n--XX--\r\n`);
    expect(multipartProblem(body, 'XX')).toBeUndefined();
  });
});

describe('linear time on adversarial inputs (1 MB each, issue 15 second review)', () => {
  const M = 1 << 20;
  const inputs: ((n: number) => string)[] = [
    (n) => '['.repeat(n),
    (n) => '[a'.repeat(n / 2),
    (n) => '[]'.repeat(n / 2),
    (n) => ']'.repeat(n),
    (n) => `_method${'['.repeat(n)}`,
    (n) => `{"_method${'"'.repeat(n)}`,
    (n) => `{"${'\\u'.repeat(n / 2)}`,
    (n) => '{'.repeat(n),
    (n) => `{"_method":${'['.repeat(n)}`,
  ];
  it.each(inputs.map((s, i) => [i, s] as const))('input %i: every body check grows linearly', async (_i, input) => {
    const checks: [string, (n: number) => () => unknown][] = [
      [
        'jsonMethodOverride',
        (n) => {
          const body = b(input(n));
          return () => jsonMethodOverride(body);
        },
      ],
      [
        'multipart name',
        (n) => {
          const body = b(`--B\r\nContent-Disposition: form-data; name=${input(n)}\r\n\r\nx`);
          return () => multipartProblem(body, 'B');
        },
      ],
      [
        'multipart delimiters',
        (n) => {
          const body = b(`method${'\n--B'.repeat(n / 4)}`);
          return () => multipartProblem(body, 'B');
        },
      ],
      [
        'multipart without boundary',
        (n) => {
          const body = b(`method${'\n--'.repeat(n / 3)}`);
          return () => multipartProblem(body);
        },
      ],
      ...['application/x-www-form-urlencoded', 'text/plain', 'multipart/form-data; boundary=B'].map(
        (type) =>
          [
            `bodyOverrideDenial ${type}`,
            (n: number) => {
              const body = b(input(n));
              return () => bodyOverrideDenial(req({ 'content-type': type }), body, 2 * n);
            },
          ] as [string, (n: number) => () => unknown],
      ),
    ];
    for (const [what, make] of checks) await expectLinear(make, M, what);
  });
});

describe('JSON5 keys and the boundary PHP reads', () => {
  it.each(["{_method: 'DELETE'}", "{a: 1, '_METHOD': 'DELETE'}", '{"a":NaN, _method /* c */ : 1}'])('finds a JSON5 key in %s', (text) => {
    expect(jsonMethodOverride(b(text))).toBe(true);
  });

  it.each(["{a: '_method', b: _method}", '{"x_method":1,"a":"it\'s","b":"_method"}'])('finds none in %s', (text) => {
    expect(jsonMethodOverride(b(text))).toBe(false);
  });

  it.each([
    ['PHP takes "boundary" inside "xboundary="', 'multipart/form-data; xboundary=zz; boundary=b', undefined],
    ['PHP takes it from a quoted value', 'multipart/form-data; a="boundary=zz"; boundary=b', undefined],
    ['the same boundary', 'multipart/form-data; boundary=b', 'b'],
    ['quoted', 'multipart/form-data; boundary="b c"', 'b c'],
    ['PHP keeps trailing spaces (a longer boundary, same lines)', 'multipart/form-data; boundary=b ', 'b'],
  ])('agreedBoundary: %s', (_what, type, want) => {
    expect(agreedBoundary(type, parseContentType(type).params.get('boundary')?.[0])).toBe(want);
  });

  it('scans every "--" line when PHP would read another boundary', async () => {
    const body = b('--zz\r\nContent-Disposition: form-data; name="_method"\r\n\r\nDELETE\r\n--zz--\r\n');
    await expect(bodyOverrideDenial(req({ 'content-type': 'multipart/form-data; xboundary=zz; boundary=b' }), body, 1024)).resolves.toMatchObject({
      code: 'invalid_body',
    });
    expect(await bodyOverrideDenial(req({ 'content-type': 'multipart/form-data; boundary=b' }), body, 1024)).toBeUndefined();
  });
});
