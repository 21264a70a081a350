import { describe, expect, it } from 'vitest';
import { isDenial } from '../../../src/errors.js';
import { parseTarget, type RequestTarget } from '../../../src/routing/target.js';

function accepted(raw: string): RequestTarget {
  const t = parseTarget(raw);
  if (isDenial(t)) throw new Error(`expected ${raw} to be accepted, got ${t.code}: ${t.message}`);
  return t;
}

describe('parseTarget: accepted targets', () => {
  it('splits path, raw query and segments', () => {
    expect(accepted('/invoices/in%20v1?limit=5&x=%41')).toEqual({
      path: '/invoices/in%20v1',
      query: 'limit=5&x=%41',
      segments: ['invoices', 'in%20v1'],
    });
  });

  it('reports an absent query as undefined and an empty one as ""', () => {
    expect(accepted('/a').query).toBeUndefined();
    expect(accepted('/a?').query).toBe('');
  });

  it('accepts the root path', () => {
    expect(accepted('/')).toEqual({ path: '/', query: undefined, segments: [''] });
  });

  it('keeps a trailing slash as a distinct, final empty segment', () => {
    const t = accepted('/a/b/');
    expect(t.path).toBe('/a/b/');
    expect(t.segments).toEqual(['a', 'b', '']);
    expect(accepted('/a/b').segments).toEqual(['a', 'b']);
  });

  it('keeps the query raw, ";" included (only the path refuses ";")', () => {
    const t = accepted('/a?x=1;y');
    expect(t.path).toBe('/a');
    expect(t.query).toBe('x=1;y');
  });

  it('does not look for dot-segments or encoded separators in the query', () => {
    expect(accepted('/a?next=/../b&p=%2F').query).toBe('next=/../b&p=%2F');
  });

  it('accepts dots inside a segment', () => {
    expect(accepted('/a.b/c..d/...').segments).toEqual(['a.b', 'c..d', '...']);
    expect(accepted('/.well-known/x').segments).toEqual(['.well-known', 'x']);
  });

  it('accepts valid percent-encoding and leaves it undecoded', () => {
    expect(accepted('/a/%41%62').segments).toEqual(['a', '%41%62']);
  });
});

describe('parseTarget: refused targets', () => {
  it.each([
    ['empty', ''],
    ['no leading slash', 'a/b'],
    ['asterisk-form', '*'],
    ['absolute-form', 'http://x/y'],
    ['query only', '?x=1'],
    ['fragment', '/a#b'],
    ['fragment in the query', '/a?x=1#b'],
    ['".." segment', '/a/../b'],
    ['"." segment', '/a/./b'],
    ['encoded ".."', '/a/%2e%2e/b'],
    ['mixed encoded ".."', '/a/.%2E/b'],
    ['encoded "."', '/a/%2E/b'],
    ['leading ".."', '/..'],
    ['trailing "."', '/a/.'],
    ['network-path "//a"', '//a'],
    ['empty middle segment', '/a//b'],
    ['backslash', '/a\\b'],
    ['encoded slash (lower)', '/a%2fb'],
    ['encoded slash (upper)', '/a%2Fb'],
    ['encoded backslash', '/a%5cb'],
    ['encoded backslash (upper)', '/a%5Cb'],
    ['encoded NUL', '/a%00b'],
    ['";" path parameter', '/a;b'],
    ['";" before a query', '/a/b;jsessionid=1?x=1'],
    ['malformed percent', '/a/%zz'],
    ['truncated percent', '/a/%4'],
    ['lone percent', '/a/%'],
  ])('refuses %s: %s', (_name, raw) => {
    const t = parseTarget(raw);
    expect(t).toMatchObject({ denied: true, code: 'invalid_path' });
  });

  it('refuses an undefined target', () => {
    expect(parseTarget(undefined)).toMatchObject({ denied: true, code: 'invalid_path' });
  });

  it('says why in the message', () => {
    const msg = (raw: string): string => (parseTarget(raw) as { message: string }).message;
    expect(msg('*')).toMatch(/origin-form/);
    expect(msg('/a#b')).toMatch(/#/);
    expect(msg('/a/../b')).toMatch(/dot-segment/);
    expect(msg('/a//b')).toMatch(/\/\//);
    expect(msg('/a%2fb')).toMatch(/encoded/);
    expect(msg('/a;b')).toMatch(/;/);
    expect(msg('/a/%zz')).toMatch(/percent-encoding/);
  });
});
