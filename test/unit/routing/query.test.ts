import { describe, expect, it } from 'vitest';
import { queryNames, readConstrainedQuery } from '../../../src/routing/query.js';

const names = (...n: string[]): Set<string> => new Set(n);

function read(query: string | undefined, ...constrained: string[]): Map<string, string> {
  const r = readConstrainedQuery(query, names(...constrained));
  if (!(r instanceof Map)) throw new Error(`expected values, got ${r.code}: ${r.message}`);
  return r;
}

describe('readConstrainedQuery', () => {
  it('reads only the constrained keys', () => {
    expect(read('amount=5&currency=USD&other=x', 'amount', 'currency')).toEqual(
      new Map([['amount', '5'], ['currency', 'USD']]),
    );
  });

  it('returns an empty map for no query or no constrained names', () => {
    expect(read(undefined, 'amount').size).toBe(0);
    expect(read('', 'amount').size).toBe(0);
    expect(read('amount=5').size).toBe(0);
  });

  it('decodes keys before comparing them', () => {
    // %6F is "o": "am%6Funt" decodes to "amount" (note "am%6Fount" would be "amoount").
    expect(read('am%6Funt=5', 'amount').get('amount')).toBe('5');
    expect(read('%61%6D%6F%75%6E%74=7', 'amount').get('amount')).toBe('7');
  });

  it('decodes values, with "+" as a space and %2B as a plus', () => {
    expect(read('currency=U+S%20D', 'currency').get('currency')).toBe('U S D');
    expect(read('q=1%2B1', 'q').get('q')).toBe('1+1');
  });

  it('reads a key without "=" as an empty value', () => {
    expect(read('flag&x=1', 'flag').get('flag')).toBe('');
  });

  it('ignores empty pairs', () => {
    expect(read('&&amount=5&', 'amount').get('amount')).toBe('5');
  });

  it('keeps everything after the first "=" in the value', () => {
    expect(read('expr=a=b', 'expr').get('expr')).toBe('a=b');
  });

  it.each([
    ['repeated', 'amount=1&amount=2000'],
    ['repeated via encoding', 'amount=1&am%6Funt=2000'],
    ['repeated with an empty copy', 'amount=1&amount'],
    ['"amount[]"', 'amount[]=5'],
    ['"amount[0]"', 'amount[0]=5'],
    ['encoded brackets', 'amount%5B%5D=5'],
    ['bracket after a plain copy', 'amount=1&amount[x]=2000'],
    ['malformed key encoding', 'am%zzount=1&amount=5'],
    ['malformed value encoding', 'amount=%zz'],
    ['truncated value encoding', 'amount=5%2'],
  ])('refuses a constrained key %s: %s', (_name, query) => {
    expect(readConstrainedQuery(query, names('amount'))).toMatchObject({ denied: true, code: 'invalid_query' });
  });

  it('names the offending parameter', () => {
    const r = readConstrainedQuery('amount=1&amount=2', names('amount'));
    expect(r).toMatchObject({ code: 'invalid_query', message: expect.stringContaining('"amount"') });
  });

  it('allows unconstrained keys to repeat or use brackets', () => {
    expect(read('tag=a&tag=b&tag[]=c&ids[0]=1&amount=5', 'amount')).toEqual(new Map([['amount', '5']]));
  });

  it('does not confuse a constrained key with a longer one', () => {
    expect(read('amountX=9&amount=5&xamount=7', 'amount')).toEqual(new Map([['amount', '5']]));
  });
});

describe('queryNames', () => {
  it('returns decoded top-level names with brackets stripped', () => {
    expect(queryNames('a=1&b[]=2&c%5B0%5D=3&d&e%6E=4&f+g=5')).toEqual(new Set(['a', 'b', 'c', 'd', 'en', 'f g']));
  });

  it('returns an empty set for no query', () => {
    expect(queryNames(undefined)).toEqual(new Set());
    expect(queryNames('')).toEqual(new Set());
  });

  it('skips keys it cannot decode', () => {
    expect(queryNames('%zz=1&ok=2')).toEqual(new Set(['ok']));
  });
});
