import { describe, expect, it } from 'vitest';
import { matchTemplate, parseTemplate, templatesOverlap, type PathTemplate } from '../../../src/routing/template.js';

function t(source: string): PathTemplate {
  const p = parseTemplate(source);
  if (typeof p === 'string') throw new Error(`template ${source} refused: ${p}`);
  return p;
}

/** Raw request segments the way parseTarget produces them. */
const seg = (path: string): string[] => path.slice(1).split('/');

describe('parseTemplate', () => {
  it('parses literals and parameters', () => {
    expect(t('/invoices/{id}/lines').segments).toEqual([{ literal: 'invoices' }, { param: 'id' }, { literal: 'lines' }]);
    expect(t('/a/').segments).toEqual([{ literal: 'a' }, { literal: '' }]);
    expect(t('/invoices/{id}').source).toBe('/invoices/{id}');
  });

  it.each([
    ['no leading slash', 'a', /start with/],
    ['two params in one segment', '/a/{x}{y}', /whole parameter/],
    ['partial param', '/a/x{y}', /whole parameter/],
    ['repeated param', '/a/{x}/{x}', /appears twice/],
    ['empty segment', '/a//b', /\/\//],
    ['";"', '/a;b', /;/],
    ['"%"', '/a%20b', /percent/],
    ['dot-segment', '/a/../b', /dot-segment/],
    ['bad param name', '/a/{1x}', /whole parameter/],
  ])('refuses %s: %s', (_name, source, message) => {
    const p = parseTemplate(source);
    expect(typeof p).toBe('string');
    expect(p).toMatch(message);
  });
});

describe('matchTemplate', () => {
  it('returns decoded parameters', () => {
    expect(matchTemplate(t('/invoices/{id}'), seg('/invoices/in%20v1'))).toEqual({ id: 'in v1' });
    expect(matchTemplate(t('/u/{a}/x/{b}'), seg('/u/%C3%A9/x/2'))).toEqual({ a: 'é', b: '2' });
  });

  it('returns an empty parameter set for an all-literal match', () => {
    expect(matchTemplate(t('/healthz'), seg('/healthz'))).toEqual({});
  });

  it('matches literals case-sensitively and byte-for-byte', () => {
    expect(matchTemplate(t('/Invoices'), seg('/invoices'))).toBeUndefined();
    expect(matchTemplate(t('/invoices'), seg('/INVOICES'))).toBeUndefined();
    expect(matchTemplate(t('/a'), seg('/%61'))).toBeUndefined();
  });

  it('treats a trailing slash as a different path', () => {
    expect(matchTemplate(t('/a/b'), seg('/a/b/'))).toBeUndefined();
    expect(matchTemplate(t('/a/b/'), seg('/a/b'))).toBeUndefined();
    expect(matchTemplate(t('/a/b/'), seg('/a/b/'))).toEqual({});
  });

  it('never matches a parameter to an empty segment', () => {
    expect(matchTemplate(t('/a/{x}'), seg('/a/'))).toBeUndefined();
    expect(matchTemplate(t('/{x}'), seg('/'))).toBeUndefined();
  });

  it('requires the same number of segments', () => {
    expect(matchTemplate(t('/a/{x}'), seg('/a/b/c'))).toBeUndefined();
    expect(matchTemplate(t('/a/{x}'), seg('/a'))).toBeUndefined();
  });

  it('returns parameters without a prototype chain to pollute', () => {
    const p = matchTemplate(t('/a/{x}'), seg('/a/1'))!;
    expect(Object.getPrototypeOf(p)).toBeNull();
  });
});

describe('templatesOverlap', () => {
  it.each([
    ['/a/{x}', '/a/b', true],
    ['/a/{x}', '/a/{y}', true],
    ['/{x}/b', '/a/{y}', true],
    ['/a/b', '/a/b', true],
    ['/a', '/a/', false],
    ['/a/{x}', '/a/', false],
    ['/{x}', '/', false],
    ['/a/b', '/a/c', false],
    ['/a/{x}', '/a/{x}/c', false],
    ['/a', '/a/{x}', false],
  ])('%s vs %s -> %s', (a, b, expected) => {
    expect(templatesOverlap(t(a), t(b))).toBe(expected);
    expect(templatesOverlap(t(b), t(a))).toBe(expected);
  });
});
