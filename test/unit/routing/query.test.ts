import { describe, expect, it } from 'vitest';
import {
  checkQueryShape,
  DEFAULT_MAX_QUERY_PARAMS,
  keyProblem,
  keyReadAs,
  nameReadings,
  overridesMethod,
  phpName,
  readConstrainedQuery,
} from '../../../src/routing/query.js';
import { expectLinear } from '../../support/linear.js';

const names = (...n: string[]): Set<string> => new Set(n);

function read(query: string | undefined, ...constrained: string[]): Map<string, string> {
  const r = readConstrainedQuery(query, names(...constrained));
  if (!(r instanceof Map)) throw new Error(`expected values, got ${r.code}: ${r.message}`);
  return r;
}

describe('readConstrainedQuery', () => {
  it('reads only the constrained keys', () => {
    expect(read('amount=5&currency=USD&other=x', 'amount', 'currency')).toEqual(
      new Map([
        ['amount', '5'],
        ['currency', 'USD'],
      ]),
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

  it.each([
    ['per.page', 'per_page=10&per.page=500'],
    ['per page (encoded space)', 'per_page=10&per%20page=500'],
    ['per+page', 'per+page=500'],
    ['per[page', 'per[page=500'],
    ['a leading space', '%20per_page=500'],
    ['a NUL and what follows', 'per_page=10&per_page%00x=500'],
    ["qs's leading brackets", '[per_page]=500'],
    ["qs's leading brackets with []", '[per_page][]=500'],
  ])('refuses a PHP or qs spelling of a constrained key: %s', (_name, query) => {
    expect(readConstrainedQuery(query, names('per_page'))).toMatchObject({ denied: true, code: 'invalid_query' });
  });

  it('refuses the underscore spelling of a dotted constrained key (PHP reads "a.b" as "a_b")', () => {
    expect(readConstrainedQuery('a_b=1', names('a.b'))).toMatchObject({ code: 'invalid_query' });
  });

  it('shows control characters escaped in the message', () => {
    const r = readConstrainedQuery('limit%00=500', names('limit'));
    expect(r).toMatchObject({ code: 'invalid_query', message: expect.stringContaining('"limit\\u0000"') });
  });

  it('leaves names PHP keeps apart alone', () => {
    expect(read('per]page=1&perpage=2&per_page=5', 'per_page')).toEqual(new Map([['per_page', '5']]));
  });
});

describe('phpName (checked against php -S 8.2)', () => {
  it.each([
    ['per.page', 'per_page'],
    ['per page', 'per_page'],
    ['per[page', 'per_page'],
    ['  lead', 'lead'],
    ['a\0b', 'a'],
    ['.method', '_method'],
    [' .method', '_method'],
    ['a..b', 'a__b'],
    ['e.f[', 'e_f_'],
    ['a[b[c', 'a_b_c'],
    ['x.y[z.w]', 'x_y'],
    ['per[page]x', 'per'],
    ['limit[]', 'limit'],
    ['per]page', 'per]page'],
    ['\ttab', '\ttab'],
  ])('%j is $_GET[%j]', (key, name) => {
    expect(phpName(key)).toBe(name);
  });

  it.each(['[limit]', '[', ' ', '\0x', '[]'])('drops %j (an empty name)', (key) => {
    expect(phpName(key)).toBeUndefined();
  });
});

describe('nameReadings', () => {
  it('lists every top-level name a framework reads', () => {
    expect(nameReadings('Per.Page')).toEqual(new Set(['per.page', 'per_page']));
    expect(nameReadings('[limit]')).toEqual(new Set(['[limit]', '.limit', 'limit']));
    expect(nameReadings('a[b]')).toEqual(new Set(['a[b]', 'a.b', 'a']));
  });
});

describe('checkQueryShape', () => {
  it.each([
    '_method=DELETE',
    '_METHOD=DELETE',
    '.method=DELETE',
    '%20_method=DELETE',
    '+.method=DELETE',
    '_method%00x=DELETE',
    '[_method]=DELETE',
    '_method[]=DELETE',
    '%5Fmethod=DELETE',
  ])('refuses the method override %s', (query) => {
    expect(checkQueryShape(`a=1&${query}`)).toMatchObject({ code: 'invalid_query' });
  });

  it('accepts names that only contain "method"', () => {
    expect(checkQueryShape('method=x&payment_method=card&methods[]=a')).toBeUndefined();
  });

  it(`refuses more than ${DEFAULT_MAX_QUERY_PARAMS} pairs by default, counting empty ones as Node's querystring does`, () => {
    const pairs = (n: number): string => Array.from({ length: n }, (_, i) => `k${i}=`).join('&');
    expect(checkQueryShape(pairs(DEFAULT_MAX_QUERY_PARAMS))).toBeUndefined();
    expect(checkQueryShape(pairs(DEFAULT_MAX_QUERY_PARAMS + 1))).toMatchObject({ code: 'too_many_query_parameters' });
    expect(checkQueryShape('&'.repeat(DEFAULT_MAX_QUERY_PARAMS))).toMatchObject({ code: 'too_many_query_parameters' });
  });

  it('takes the limit as a parameter', () => {
    expect(checkQueryShape('a=1&b=2&c=3', 3)).toBeUndefined();
    expect(checkQueryShape('a=1&b=2&c=3&d=4', 3)).toMatchObject({ code: 'too_many_query_parameters', message: expect.stringContaining('at most 3') });
  });
});

describe('overridesMethod (form bodies)', () => {
  it('finds "_method" under any spelling and none otherwise', () => {
    expect(overridesMethod('a=1&.method=PUT')).toBe(true);
    expect(overridesMethod('a=1&_Method=PUT')).toBe(true);
    expect(overridesMethod('a=1&b=method')).toBe(false);
    expect(overridesMethod('a=%zz')).toBe(false);
  });
});

describe('keyReadAs', () => {
  it('finds a query key some framework reads as a given name', () => {
    expect(keyReadAs('x=1&amount%00=5', new Set(['amount']))).toBe('amount\\u0000');
    expect(keyReadAs('x=1&Amount=5', new Set(['amount']))).toBe('Amount');
    expect(keyReadAs('x=1&amounts=5', new Set(['amount']))).toBeUndefined();
    expect(keyReadAs(undefined, new Set(['amount']))).toBeUndefined();
  });
});

describe('keys that are not valid percent-encoding (PHP and qs read them leniently)', () => {
  it.each([
    ['"_method", NUL, a bad escape (PHP: "_method")', '_method%00%zz=DELETE'],
    ['a name, NUL, a bad escape (PHP: "amount")', 'amount%00%zz=99999'],
    ['"_method[]" and a bad escape (qs: "_method")', '_method[]%zz=DELETE'],
    ['a truncated escape', 'x%2=1'],
    ['a lone "%"', 'x%=1'],
  ])('checkQueryShape refuses a key with %s', (_what, pair) => {
    expect(checkQueryShape(`a=1&${pair}`)).toMatchObject({ code: 'invalid_query' });
  });

  it('checkQueryShape reads a valid escape of a byte that is not UTF-8 leniently, as Latin-1, and does not refuse it', () => {
    expect(checkQueryShape('caf%E9=1&a=%E9')).toBeUndefined();
    expect(checkQueryShape('[amount]%C0=99999')).toBeUndefined(); // refused where "amount" is constrained, below
    expect(checkQueryShape('_method%00%E9=DELETE')).toMatchObject({ code: 'invalid_query' }); // PHP: "_method"
    expect(readConstrainedQuery('[amount]%C0=99999&amount=1', new Set(['amount']))).toMatchObject({ code: 'invalid_query' });
    expect(readConstrainedQuery('caf%E9=1&amount=1', new Set(['amount']))).toEqual(new Map([['amount', '1']]));
    expect(keyProblem('caf%E9=1')).toBeUndefined();
  });

  it('checkQueryShape leaves malformed values alone (they rename nothing)', () => {
    expect(checkQueryShape('q=100%&r=%zz')).toBeUndefined();
  });

  it('keyReadAs and overridesMethod read an undecodable key as PHP does, not skip it', () => {
    expect(keyReadAs('amount%00%zz=99999', new Set(['amount']))).toBe('amount\\u0000%zz');
    expect(keyReadAs('[amount]%C0=1', new Set(['amount']))).toBe('[amount]\u00c0');
    expect(overridesMethod('_method%00%zz=DELETE')).toBe(true);
    expect(overridesMethod('_method%zz=DELETE')).toBe(false); // PHP: "_method%zz", no override
  });
});

describe("qs's and Rack's top-level names", () => {
  // qs 6.x lib/parse.js parseKeys: a key that starts with a "[...]" group has that group's text as its
  // root, whatever follows ("[limit]x=500" is {limit: "500"}); text outside groups is dropped.
  it.each([
    ['[limit]x', 'limit'],
    ['[limit]%C0', 'limit'],
    ['a[b]x', 'a'],
    ['[_method]x', '_method'],
  ])('reads %s as %s (qs)', (key, name) => {
    expect(nameReadings(key).has(name)).toBe(true);
  });

  it('refuses qs\'s "[limit]x" beside a constrained "limit" (Express: req.query.limit is ["500", "5"])', () => {
    expect(readConstrainedQuery('[limit]x=500&limit=5', names('limit'))).toMatchObject({ code: 'invalid_query' });
  });

  // Rack 2.2 normalize_params: /\A[\[\]]*([^\[\]]+)\]*/ — leading brackets skipped, then the first run
  // without brackets is the name.
  it.each([']_method', '_method]', '[[_method]]', '[_method]x', ']]_method[x'])('reads %s as "_method" (Rack 2.2)', (key) => {
    expect(nameReadings(key).has('_method')).toBe(true);
    expect(overridesMethod(`${key}=DELETE`)).toBe(true);
  });

  it('still reads names that only contain "method" as themselves', () => {
    expect(overridesMethod('payment_method]=x&[methods]=y&method=z')).toBe(false);
  });
});

describe('keyProblem (form bodies)', () => {
  it('tells a malformed key from a method override, and reads leniently when asked to', () => {
    expect(keyProblem('a=1&b%zz=2')).toBe('malformed');
    expect(keyProblem('a=1&_method=PUT')).toBe('method');
    expect(keyProblem('a=1&_method%00%zz=PUT', false)).toBe('method');
    expect(keyProblem('a=1&b%zz=2', false)).toBeUndefined();
    expect(keyProblem('a=100%25&b=%zz')).toBeUndefined();
  });
});

describe('linear time on agent-controlled names (issue 15, second review: 64 KB of "[" blocked the event loop 3 s)', () => {
  const M = 1 << 20;
  it.each([
    ['"["', (n: number) => '['.repeat(n)],
    ['"[a"', (n: number) => '[a'.repeat(n / 2)],
    ['"[]"', (n: number) => '[]'.repeat(n / 2)],
    ['"]"', (n: number) => ']'.repeat(n)],
    ['"method" then "["', (n: number) => `_method${'['.repeat(n)}`],
    ['"."', (n: number) => `method${'.'.repeat(n)}`],
    ['" ["', (n: number) => `method${' ['.repeat(n / 2)}`],
  ])('1 MB of %s through nameReadings, checkQueryShape, overridesMethod, keyProblem, keyReadAs, readConstrainedQuery: linear', async (_what, input) => {
    const checks: [string, (s: string) => unknown][] = [
      ['nameReadings', (s) => nameReadings(s)],
      ['checkQueryShape', (s) => checkQueryShape(`${s}=1`, Infinity)],
      ['overridesMethod', (s) => overridesMethod(`${s}=1`)],
      ['keyProblem', (s) => keyProblem(`a=1&${s}=1`)],
      ['keyReadAs', (s) => keyReadAs(`${s}=1`, new Set(['amount']))],
      ['readConstrainedQuery', (s) => readConstrainedQuery(`${s}=1`, new Set(['amount']))],
    ];
    for (const [what, check] of checks)
      await expectLinear(
        (n) => {
          const s = input(n);
          return () => check(s);
        },
        M,
        what,
      );
  });

  it('still reads the names right', () => {
    expect(nameReadings('_method[[')).toContain('_method');
    expect(nameReadings('a[[b]]')).toContain('a');
    expect(phpName('per[page ')).toBe('per_page_');
    expect(phpName('\ufeffa.b')).toBe('\ufeffa_b');
  });
});
