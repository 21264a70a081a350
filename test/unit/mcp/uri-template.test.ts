import { UriTemplate as SdkUriTemplate } from '@modelcontextprotocol/sdk/shared/uriTemplate.js';
import { describe, expect, it } from 'vitest';
import { matchUriTemplate, parseUriTemplate, type UriTemplate } from '../../../src/mcp/uri-template.js';

function parsed(source: string): UriTemplate {
  const t = parseUriTemplate(source);
  if (typeof t === 'string') throw new Error(`refused ${source}: ${t}`);
  return t;
}

describe('parseUriTemplate', () => {
  it('reads literal text and simple variables, in order', () => {
    expect(parsed('invoice://{id}')).toMatchObject({ source: 'invoice://{id}', names: ['id'] });
    expect(parsed('file://{dir}/{name}.txt').names).toEqual(['dir', 'name']);
    expect(parsed('doc://latest').names).toEqual([]);
    expect(parsed('{_a1}').names).toEqual(['_a1']);
  });

  it.each([
    ['{+path}', 'not a simple variable'],
    ['file://{#frag}', 'not a simple variable'],
    ['x://{a,b}', 'not a simple variable'],
    ['x://{list*}', 'not a simple variable'],
    ['x://{?q}', 'not a simple variable'],
    ['x://{/seg}', 'not a simple variable'],
    ['x://{.ext}', 'not a simple variable'],
    ['x://{}', 'not a simple variable'],
    ['x://{1id}', 'not a simple variable'],
    ['x://{a-b}', 'not a simple variable'],
    ['x://{ id }', 'not a simple variable'],
    ['x://{id}/{id}', 'appears twice'],
    ['invoice://{id', 'unbalanced'],
    ['invoice://id}', 'unbalanced'],
    ['invoice://{{id}', 'unbalanced'],
    ['invoice://{id}}', 'unbalanced'],
    ['}{', 'unbalanced'],
    ['{', 'unbalanced'],
  ])('refuses %j (%s)', (source, why) => {
    const t = parseUriTemplate(source);
    expect(typeof t, `${source} was accepted`).toBe('string');
    expect(t).toContain(why);
  });
});

describe('matchUriTemplate', () => {
  it('gives the variables of a matching URI, undecoded', () => {
    expect(matchUriTemplate(parsed('invoice://{id}'), 'invoice://inv-1')).toEqual({ id: 'inv-1' });
    expect(matchUriTemplate(parsed('file://{dir}/{name}.txt'), 'file://etc/a.b.txt')).toEqual({ dir: 'etc', name: 'a.b' });
    expect(matchUriTemplate(parsed('invoice://{id}'), 'invoice://a%2Fb')).toEqual({ id: 'a%2Fb' });
    expect(matchUriTemplate(parsed('doc://latest'), 'doc://latest')).toEqual({});
  });

  it('a variable is one or more characters other than "/" and ","', () => {
    const t = parsed('invoice://{id}');
    for (const uri of ['invoice://', 'invoice://a/b', 'invoice://a,b', 'invoice://a/', 'invoice:///a', 'invoice://,'])
      expect(matchUriTemplate(t, uri), uri).toBeUndefined();
    expect(matchUriTemplate(t, 'invoice://a b?c=d#e')).toEqual({ id: 'a b?c=d#e' });
  });

  it('is anchored at both ends and case-sensitive', () => {
    const t = parsed('invoice://{id}');
    for (const uri of ['xinvoice://a', ' invoice://a', 'INVOICE://a', 'invoice:/a']) expect(matchUriTemplate(t, uri), uri).toBeUndefined();
    expect(matchUriTemplate(parsed('doc://latest'), 'doc://latest/')).toBeUndefined();
    expect(matchUriTemplate(parsed('doc://latest'), 'doc://latest\n')).toBeUndefined();
  });

  it('reads regular expression characters in the literal text literally', () => {
    const t = parsed('a.b+c://(x)[y]^$|?*\\/{id}');
    expect(matchUriTemplate(t, 'a.b+c://(x)[y]^$|?*\\/7')).toEqual({ id: '7' });
    expect(matchUriTemplate(t, 'aXbbc://(x)[y]^$|?*\\/7')).toBeUndefined();
    expect(matchUriTemplate(parsed('v1.{id}'), 'v1x7')).toBeUndefined();
  });
});

describe('the same matches as the official SDK (what the server will see)', () => {
  const TEMPLATES = ['invoice://{id}', 'file://{dir}/{name}', 'file://{dir}/{name}.txt', 'doc://latest', 'a.b://x-{id}-y', 'mix://{a}{b}'];
  const URIS = [
    'invoice://inv-1',
    'invoice://inv%2D1',
    'invoice://a,b',
    'invoice://a/b',
    'invoice://',
    'invoice://a b?c=d#e',
    'invoice://ü',
    'file://etc/passwd',
    'file://etc/passwd.txt',
    'file://e/t/c',
    'file://,/x',
    'file:///x',
    'doc://latest',
    'doc://latest2',
    'a.b://x-7-y',
    'aXb://x-7-y',
    'a.b://x--y',
    'a.b://x-1-2-y',
    'mix://ab',
    'mix://abc',
    'mix://a',
  ];
  it.each(TEMPLATES)('%s', (source) => {
    const ours = parsed(source);
    const sdk = new SdkUriTemplate(source);
    for (const uri of URIS) expect(matchUriTemplate(ours, uri) ?? null, `${source} ~ ${uri}`).toEqual(sdk.match(uri));
  });
});
