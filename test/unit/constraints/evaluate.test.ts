import { describe, expect, it } from 'vitest';
import { evaluateConstraints, type ArgumentValue } from '../../../src/constraints/evaluate.js';
import type { ConstraintRule, Constraints } from '../../../src/policy/types.js';

const json = (value: unknown): ArgumentValue => ({ present: true, value, fromUrl: false });
const url = (value: string): ArgumentValue => ({ present: true, value, fromUrl: true });
const absent: ArgumentValue = { present: false };

/** Evaluates one rule on field "f" against one argument. */
const check = (rule: ConstraintRule, arg: ArgumentValue) => evaluateConstraints({ f: rule }, () => arg);
const ops = (rule: ConstraintRule, arg: ArgumentValue): string[] => check(rule, arg).map((v) => v.constraint);

describe('evaluateConstraints: numeric bounds on JSON values', () => {
  it('accepts numbers within max and min, bounds inclusive', () => {
    expect(check({ max: 1000 }, json(1000))).toEqual([]);
    expect(check({ max: 1000 }, json(-5.5))).toEqual([]);
    expect(check({ min: 0 }, json(0))).toEqual([]);
    expect(check({ min: 1, max: 10 }, json(5))).toEqual([]);
  });

  it('reports a value over max with field, constraint, expected, actual and message', () => {
    const [v, ...rest] = check({ max: 1000 }, json(1000.01));
    expect(rest).toEqual([]);
    expect(v).toMatchObject({ field: 'f', constraint: 'max', expected: 1000, actual: 1000.01 });
    expect(v!.message).toContain('f');
    expect(v!.message).toContain('1000');
  });

  it('reports a value under min', () => {
    expect(check({ min: 10 }, json(9))).toEqual([expect.objectContaining({ field: 'f', constraint: 'min', expected: 10, actual: 9 })]);
  });

  it.each([
    ['a numeric string', '5'],
    ['a boolean', true],
    ['null', null],
    ['an array', [5]],
    ['an object', { value: 5 }],
  ])('never lets %s satisfy max or min', (_name, value) => {
    expect(ops({ max: 1000, min: 0 }, json(value))).toEqual(['max', 'min']);
  });
});

describe('evaluateConstraints: numeric bounds on URL strings', () => {
  it.each(['5', '-2', '1.5', '0', '0.25', '-0.5', '1000'])('reads canonical decimal %j as a number', (s) => {
    expect(check({ max: 1000, min: -10 }, url(s))).toEqual([]);
  });

  it('compares the URL number against the bound', () => {
    expect(check({ max: 1000 }, url('1001'))).toEqual([expect.objectContaining({ constraint: 'max', expected: 1000, actual: '1001' })]);
    expect(ops({ min: 0 }, url('-1'))).toEqual(['min']);
  });

  it.each(['05', '1e3', '1.50', ' 5', '5 ', '', '-0', '0x10', '+5', '.5', '5.', 'NaN', 'Infinity', '1_000', '٥'])(
    'refuses non-canonical %j for max and min',
    (s) => {
      expect(ops({ max: 1e9, min: -1e9 }, url(s))).toEqual(['max', 'min']);
    },
  );
});

describe('evaluateConstraints: in, not_in, exact', () => {
  it('accepts a JSON value of the same type and value', () => {
    expect(check({ in: ['USD', 'EUR'] }, json('EUR'))).toEqual([]);
    expect(check({ in: [1, 2] }, json(2))).toEqual([]);
    expect(check({ exact: false }, json(false))).toEqual([]);
    expect(check({ not_in: ['internal'] }, json('gold'))).toEqual([]);
  });

  it('never equates different JSON types', () => {
    expect(ops({ exact: 'false' }, json(false))).toEqual(['exact']);
    expect(ops({ exact: false }, json('false'))).toEqual(['exact']);
    expect(ops({ in: ['5'] }, json(5))).toEqual(['in']);
    expect(ops({ in: [5] }, json('5'))).toEqual(['in']);
    expect(ops({ exact: 0 }, json(false))).toEqual(['exact']);
  });

  it('is case- and whitespace-sensitive for strings', () => {
    expect(ops({ in: ['USD'] }, json('usd'))).toEqual(['in']);
    expect(ops({ in: ['USD'] }, json('USD '))).toEqual(['in']);
  });

  it('reports a not_in hit', () => {
    expect(check({ not_in: ['internal'] }, json('internal'))).toEqual([
      expect.objectContaining({ field: 'f', constraint: 'not_in', expected: ['internal'], actual: 'internal' }),
    ]);
  });

  it.each([
    ['null', null],
    ['an array', ['USD']],
    ['an object', { tier: 'gold' }],
  ])('never lets %s satisfy in, not_in or exact', (_name, value) => {
    expect(ops({ in: ['USD'] }, json(value))).toEqual(['in']);
    expect(ops({ not_in: ['internal'] }, json(value))).toEqual(['not_in']);
    expect(ops({ exact: 'USD' }, json(value))).toEqual(['exact']);
  });

  it('reports actual null (not undefined) for a JSON null', () => {
    expect(check({ exact: 'x' }, json(null))[0]).toMatchObject({ actual: null });
  });

  it('compares URL strings to numbers by canonical decimal', () => {
    expect(check({ in: [5, 10] }, url('5'))).toEqual([]);
    expect(check({ exact: 5 }, url('5'))).toEqual([]);
    expect(check({ exact: 1.5 }, url('1.5'))).toEqual([]);
    expect(ops({ exact: 5 }, url('05'))).toEqual(['exact']);
    expect(ops({ exact: 5 }, url('5.0'))).toEqual(['exact']);
    expect(ops({ in: [1000] }, url('1e3'))).toEqual(['in']);
    expect(ops({ not_in: [5] }, url('5'))).toEqual(['not_in']);
  });

  it('compares URL strings to booleans by their exact text', () => {
    expect(check({ exact: false }, url('false'))).toEqual([]);
    expect(check({ in: [true] }, url('true'))).toEqual([]);
    expect(ops({ exact: false }, url('False'))).toEqual(['exact']);
    expect(ops({ exact: false }, url('0'))).toEqual(['exact']);
    expect(ops({ exact: true }, url(''))).toEqual(['exact']);
  });

  it('compares URL strings to strings as strings', () => {
    expect(check({ in: ['c-100', '5'] }, url('5'))).toEqual([]);
    expect(ops({ exact: 'USD' }, url('usd'))).toEqual(['exact']);
  });
});

describe('evaluateConstraints: absent fields and many violations', () => {
  it('reports one violation per operator of the rule when the field is absent', () => {
    const vs = check({ max: 10, min: 1, in: [5], not_in: [7], exact: 5 }, absent);
    expect(vs.map((v) => v.constraint).sort()).toEqual(['exact', 'in', 'max', 'min', 'not_in']);
    for (const v of vs) {
      expect(v.field).toBe('f');
      expect(v.actual).toBeNull();
      expect(v.message).toMatch(/absent/);
    }
    expect(vs.find((v) => v.constraint === 'max')?.expected).toBe(10);
    expect(vs.find((v) => v.constraint === 'in')?.expected).toEqual([5]);
  });

  it('reports every violation across fields and operators', () => {
    const constraints: Constraints = {
      amount: { max: 1000 },
      currency: { in: ['USD', 'EUR'] },
      'customer.tier': { not_in: ['internal'] },
      dryRun: { exact: false },
      limit: { min: 1, max: 50 },
    };
    const args: Record<string, ArgumentValue> = {
      amount: json(5000),
      currency: json('GBP'),
      'customer.tier': json('internal'),
      dryRun: absent,
      limit: json('7'),
    };
    const vs = evaluateConstraints(constraints, (f) => args[f] ?? absent);
    expect(vs.map((v) => [v.field, v.constraint])).toEqual([
      ['amount', 'max'],
      ['currency', 'in'],
      ['customer.tier', 'not_in'],
      ['dryRun', 'exact'],
      ['limit', 'max'],
      ['limit', 'min'],
    ]);
  });

  it('reports nothing when every rule holds', () => {
    const vs = evaluateConstraints(
      { amount: { max: 1000, min: 1 }, currency: { in: ['USD'] }, dryRun: { exact: false } },
      (f) => ({ amount: json(10), currency: json('USD'), dryRun: json(false) })[f] ?? absent,
    );
    expect(vs).toEqual([]);
  });

  it('asks the lookup for each constrained field once', () => {
    const asked: string[] = [];
    evaluateConstraints({ a: { max: 1, min: 0 }, 'b.c': { exact: 'x' } }, (f) => {
      asked.push(f);
      return absent;
    });
    expect(asked).toEqual(['a', 'b.c']);
  });
});
