import { describe, expect, it } from 'vitest';
import { jsonMethodOverride, multipartMethodOverride } from '../../../src/proxy/body.js';

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
    '{"_method": broken',
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
