import { describe, expect, it } from 'vitest';
import { argumentLookup, planArguments } from '../../../src/constraints/arguments.js';
import { evaluateConstraints, type ArgumentValue } from '../../../src/constraints/evaluate.js';
import { normaliseRule, unknownRuleKeys } from '../../../src/constraints/rules.js';
import { describeRule } from '../../../src/context/describe.js';
import type { Constraints } from '../../../src/policy/types.js';

/** Evaluates against a JSON body, as a POST route reads it. */
function evaluate(constraints: Constraints, body: Record<string, unknown>) {
  const params = Object.create(null) as Record<string, string>;
  const plan = planArguments(constraints, 'POST', params);
  return evaluateConstraints(constraints, argumentLookup(plan, params, new Map(), body));
}

describe('optional: absent passes, present is checked as usual', () => {
  const temperature: Constraints = { temperature: { max: 1, optional: true } };

  it('passes a call that leaves the field out', () => {
    expect(evaluate(temperature, { model: 'x' })).toEqual([]);
  });

  it('checks a value that is sent', () => {
    expect(evaluate(temperature, { temperature: 0.7 })).toEqual([]);
    expect(evaluate(temperature, { temperature: 1.5 })).toEqual([
      expect.objectContaining({ field: 'temperature', constraint: 'max', expected: 1, actual: 1.5 }),
    ]);
  });

  it('counts null as sent (it is not the same as leaving the field out)', () => {
    expect(evaluate(temperature, { temperature: null }).map((v) => v.constraint)).toEqual(['max']);
  });

  it('still applies a deny-list to a value that is sent', () => {
    const c: Constraints = { 'customer.tier': { not_in: ['internal'], optional: true } };
    expect(evaluate(c, {})).toEqual([]);
    expect(evaluate(c, { customer: {} })).toEqual([]);
    expect(evaluate(c, { customer: { tier: ' INTERNAL' } }).map((v) => v.constraint)).toEqual(['not_in']);
    expect(evaluate(c, { customer: { tier: ['internal'] } }).map((v) => v.constraint)).toEqual(['not_in']);
  });

  it('leaves required fields required (the default)', () => {
    expect(evaluate({ temperature: { max: 1 } }, {})).toEqual([
      expect.objectContaining({ field: 'temperature', constraint: 'max', absent: true, actual: null }),
    ]);
    expect(evaluate({ temperature: { max: 1, optional: false } }, {})).toHaveLength(1);
  });
});

describe('aliases: every spelling sent is checked', () => {
  const tokens: Constraints = { max_tokens: { max: 1024, aliases: ['max_completion_tokens'] } };

  it('passes either spelling within the limit', () => {
    expect(evaluate(tokens, { max_tokens: 100 })).toEqual([]);
    expect(evaluate(tokens, { max_completion_tokens: 100 })).toEqual([]);
    expect(evaluate(tokens, { max_tokens: 100, max_completion_tokens: 1000 })).toEqual([]);
  });

  it('refuses the alias over the limit, naming the spelling at fault', () => {
    const [v, ...rest] = evaluate(tokens, { max_completion_tokens: 99999 });
    expect(rest).toEqual([]);
    expect(v).toMatchObject({ field: 'max_completion_tokens', constraint: 'max', expected: 1024, actual: 99999 });
    expect(v!.message).toBe('max_completion_tokens (an alias of max_tokens) must be <= 1024, got 99999');
  });

  it('refuses a call whose spellings disagree when one of them is over (the app may read either)', () => {
    expect(evaluate(tokens, { max_tokens: 10, max_completion_tokens: 99999 })).toEqual([
      expect.objectContaining({ field: 'max_completion_tokens', actual: 99999 }),
    ]);
    expect(evaluate(tokens, { max_tokens: 99999, max_completion_tokens: 10 })).toEqual([expect.objectContaining({ field: 'max_tokens', actual: 99999 })]);
  });

  it('is absent only when no spelling is sent', () => {
    expect(evaluate(tokens, {})).toEqual([
      expect.objectContaining({
        field: 'max_tokens',
        constraint: 'max',
        absent: true,
        message: 'max_tokens (or max_completion_tokens) is required by the "max" constraint but is absent',
      }),
    ]);
    expect(evaluate({ max_tokens: { ...tokens.max_tokens, optional: true } }, {})).toEqual([]);
  });

  it('reads aliases from the query of a GET route, and plans them like fields', () => {
    const c: Constraints = { limit: { max: 50, aliases: ['page_size'] } };
    const params = Object.create(null) as Record<string, string>;
    const plan = planArguments(c, 'GET', params);
    expect(plan.query).toEqual(new Set(['limit', 'page_size']));
    expect(planArguments(c, 'POST', params).bodyRoots).toEqual(new Set(['limit', 'page_size']));
    const lookup = argumentLookup(plan, params, new Map([['page_size', '500']]), undefined);
    expect(evaluateConstraints(c, lookup)).toEqual([expect.objectContaining({ field: 'page_size', actual: '500' })]);
  });

  it('reads a dotted alias in the body', () => {
    const c: Constraints = { 'options.n': { exact: 1, aliases: ['n'] } };
    expect(evaluate(c, { n: 1 })).toEqual([]);
    expect(evaluate(c, { options: { n: 2 } }).map((v) => v.field)).toEqual(['options.n']);
  });
});

describe('normaliseRule', () => {
  it('reads eq as exact', () => {
    expect(normaliseRule('n', { eq: 1 })).toEqual({ rule: { exact: 1 }, problems: [] });
    expect(normaliseRule('n', { eq: false, optional: true })).toEqual({ rule: { exact: false, optional: true }, problems: [] });
  });

  it('refuses eq beside exact, even when they agree', () => {
    expect(normaliseRule('n', { eq: 1, exact: 1 }).problems).toEqual([{ key: 'eq', message: expect.stringContaining('eq and exact are one operator') }]);
  });

  it('refuses a rule with modifiers only, and aliases repeating a name', () => {
    expect(normaliseRule('t', { optional: true }).problems).toEqual([{ message: expect.stringContaining('a rule needs an operator') }]);
    expect(normaliseRule('t', { optional: true }, false).problems).toEqual([]);
    expect(normaliseRule('t', { max: 1, aliases: ['u', 't', 'u'] }).problems).toEqual([
      { key: ['aliases', 1], message: '"t" is the field itself' },
      { key: ['aliases', 2], message: '"u" is listed twice' },
    ]);
  });

  it('drops an empty alias list', () => {
    expect(normaliseRule('t', { max: 1, aliases: [] }).rule).toEqual({ max: 1 });
  });

  it('knows the operators, eq and the modifiers, and nothing else', () => {
    expect(unknownRuleKeys({ max: 1, min: 0, in: [], not_in: [], exact: 1, eq: 1, optional: true, aliases: [], lte: 1, maximum: 2 })).toEqual([
      'lte',
      'maximum',
    ]);
  });
});

describe('describeRule shows the modifiers', () => {
  it('says a field may be left out, and which other spellings are read', () => {
    expect(describeRule({ max: 1, optional: true })).toBe('must be a number no greater than 1; may be left out');
    expect(describeRule({ max: 1024, aliases: ['max_completion_tokens'] })).toBe(
      'must be a number no greater than 1024; also read as max_completion_tokens (each one sent must comply)',
    );
    expect(describeRule({ max: 1 })).toBe('must be a number no greater than 1');
  });
});
