import { describe, expect, it } from 'vitest';
import { argumentLookup, planArguments } from '../../../src/constraints/arguments.js';
import type { Constraints } from '../../../src/policy/types.js';

const params = (p: Record<string, string> = {}): Record<string, string> => Object.assign(Object.create(null), p);
const noQuery = new Map<string, string>();

describe('planArguments', () => {
  const constraints: Constraints = { id: { in: ['1'] }, limit: { max: 50 }, 'customer.tier': { not_in: ['internal'] } };

  it.each(['GET', 'DELETE'])('reads constrained fields of %s from the query', (method) => {
    const plan = planArguments(constraints, method, params({ id: '1' }));
    expect(plan.query).toEqual(new Set(['limit', 'customer.tier']));
    expect(plan.body).toBe(false);
    expect(plan.bodyRoots).toEqual(new Set());
  });

  it.each(['POST', 'PUT', 'PATCH'])('reads constrained fields of %s from the JSON body', (method) => {
    const plan = planArguments(constraints, method, params({ id: '1' }));
    expect(plan.query).toEqual(new Set());
    expect(plan.body).toBe(true);
    expect(plan.bodyRoots).toEqual(new Set(['limit', 'customer']));
  });

  it('takes path parameters first and needs no body when they cover every rule', () => {
    const plan = planArguments({ id: { in: ['1'] } }, 'POST', params({ id: '1' }));
    expect(plan).toEqual({ query: new Set(), body: false, bodyRoots: new Set() });
  });

  it('does not treat inherited names as path parameters', () => {
    const plan = planArguments({ toString: { exact: 'x' } }, 'GET', params());
    expect(plan.query).toEqual(new Set(['toString']));
  });
});

describe('argumentLookup', () => {
  it('returns path parameters first, as URL values', () => {
    const p = params({ id: '42' });
    const plan = planArguments({ id: { max: 50 } }, 'GET', p);
    const lookup = argumentLookup(plan, p, new Map([['id', '999']]), undefined);
    expect(lookup('id')).toEqual({ present: true, value: '42', fromUrl: true });
  });

  it('reads GET fields from the query as URL values, absent when missing', () => {
    const plan = planArguments({ limit: { max: 50 }, customerId: { in: ['c-100'] } }, 'GET', params());
    const lookup = argumentLookup(plan, params(), new Map([['limit', '10']]), { limit: 1 });
    expect(lookup('limit')).toEqual({ present: true, value: '10', fromUrl: true });
    expect(lookup('customerId')).toEqual({ present: false });
  });

  it('reads POST fields from the body with dotted paths, as JSON values', () => {
    const body = { amount: 10, customer: { tier: 'gold', address: { country: 'FR' } }, dryRun: false, note: null };
    const plan = planArguments(
      { amount: { max: 1 }, 'customer.tier': { in: ['gold'] }, 'customer.address.country': { exact: 'FR' }, dryRun: { exact: false }, note: { exact: 'x' } },
      'POST',
      params(),
    );
    const lookup = argumentLookup(plan, params(), noQuery, body);
    expect(lookup('amount')).toEqual({ present: true, value: 10, fromUrl: false });
    expect(lookup('customer.tier')).toEqual({ present: true, value: 'gold', fromUrl: false });
    expect(lookup('customer.address.country')).toEqual({ present: true, value: 'FR', fromUrl: false });
    expect(lookup('dryRun')).toEqual({ present: true, value: false, fromUrl: false });
    expect(lookup('note')).toEqual({ present: true, value: null, fromUrl: false });
  });

  it('does not read a POST field from the query', () => {
    const plan = planArguments({ amount: { max: 1 } }, 'POST', params());
    const lookup = argumentLookup(plan, params(), new Map([['amount', '0']]), {});
    expect(lookup('amount')).toEqual({ present: false });
  });

  it('reports a field absent when the body or an intermediate is missing, null or scalar', () => {
    const plan = planArguments({ 'customer.tier': { in: ['gold'] } }, 'POST', params());
    for (const body of [undefined, null, 'text', 5, {}, { customer: null }, { customer: 'gold' }, { customer: {} }]) {
      expect(argumentLookup(plan, params(), noQuery, body)('customer.tier'), JSON.stringify(body)).toEqual({ present: false });
    }
  });

  it('reads only own properties', () => {
    const plan = planArguments({ 'customer.tier': { in: ['gold'] }, constructor: { exact: 'x' } }, 'POST', params());
    const inherited = { customer: Object.create({ tier: 'gold' }) as object };
    const lookup = argumentLookup(plan, params(), noQuery, inherited);
    expect(lookup('customer.tier')).toEqual({ present: false });
    expect(lookup('constructor')).toEqual({ present: false });
  });

  it('does not traverse arrays', () => {
    const plan = planArguments({ 'items.0.amount': { max: 1 }, 'items.length': { max: 1 }, items: { max: 1 } }, 'POST', params());
    const body = { items: [{ amount: 5 }] };
    const lookup = argumentLookup(plan, params(), noQuery, body);
    expect(lookup('items.0.amount')).toEqual({ present: false });
    expect(lookup('items.length')).toEqual({ present: false });
    // The array itself is present (and will fail any scalar rule).
    expect(lookup('items')).toEqual({ present: true, value: [{ amount: 5 }], fromUrl: false });
  });

  it('treats a top-level array body as having no fields', () => {
    const plan = planArguments({ '0': { max: 1 } }, 'POST', params());
    expect(argumentLookup(plan, params(), noQuery, [5])('0')).toEqual({ present: false });
  });
});
