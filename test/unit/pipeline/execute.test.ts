import { beforeAll, describe, expect, it } from 'vitest';
import { executedRequest } from '../../../src/pipeline/execute.js';
import { isDenial } from '../../../src/errors.js';
import { loadPolicyText } from '../../../src/policy/load.js';
import type { Policy } from '../../../src/policy/types.js';

let policy: Policy;
const limits = { maxBodyBytes: 1024, maxQueryParams: 100 };

beforeAll(async () => {
  policy = await loadPolicyText(
    `
version: 1
provider: { name: s, issuer: https://s.example.com }
capabilities:
  - { name: exportInvoices, method: GET, path: /exports/invoices }
  - { name: getInvoice, method: GET, path: "/invoices/{id}" }
  - { name: createTransfer, method: POST, path: "/accounts/{account}/transfers", maxBodyBytes: 40 }
`,
    'p.yaml',
  );
});

const build = (input: unknown) => executedRequest(policy, input, limits);
const refusal = (input: unknown) => {
  const r = build(input);
  return isDenial(r) ? `${r.code}: ${r.message}` : 'built';
};

describe('execute → the capability’s own request', () => {
  it('fills path parameters, encodes them, sends the rest as the query of a GET', () => {
    const r = build({ capability: 'getInvoice', arguments: { id: 'a b', expand: 'lines', n: 2, flag: true } });
    if (isDenial(r)) throw new Error(r.message);
    expect(r.raw).toBe('/invoices/a%20b?expand=lines&n=2&flag=true');
    expect(r.body).toBeUndefined();
    expect(r.params).toEqual({ id: 'a b' });
  });

  it('sends the rest as the JSON body of a POST, without the path parameters', () => {
    const r = build({ capability: 'createTransfer', arguments: { account: 7, amount: 5 } });
    if (isDenial(r)) throw new Error(r.message);
    expect(r.raw).toBe('/accounts/7/transfers');
    expect(JSON.parse(r.body!.toString())).toEqual({ amount: 5 });
    expect(build({ capability: 'exportInvoices' })).toMatchObject({ raw: '/exports/invoices' });
  });

  it('refuses what a direct call could not be', () => {
    expect(refusal({ capability: 'getInvoice', arguments: {} })).toMatch(/^invalid_body: arguments.id .* is required/);
    expect(refusal({ capability: 'getInvoice', arguments: { id: '' } })).toMatch(/^invalid_body/);
    expect(refusal({ capability: 'getInvoice', arguments: { id: '1', tags: ['a'] } })).toMatch(/^invalid_body: arguments.tags/);
    expect(refusal({ capability: 'getInvoice', arguments: { id: '..' } })).toMatch(/^invalid_path/);
    expect(refusal({ capability: 'getInvoice', arguments: { id: 'a/b' } })).toMatch(/^invalid_path: .*encoded/);
    expect(refusal({ capability: 'createTransfer', arguments: { account: 'a', _method: 'DELETE' } })).toMatch(/_method/);
    expect(refusal({ capability: 'createTransfer', arguments: { account: 'a', memo: 'x'.repeat(50) } })).toMatch(/^body_too_large/);
    expect(refusal({ capability: 'nope' })).toMatch(/^unknown_route/);
    expect(refusal({ capability: 'getInvoice', arguments: { id: '1' }, path: '/x' })).toMatch(/unknown member "path"/);
    expect(refusal({ capability: 'getInvoice', arguments: [] })).toMatch(/"arguments" must be a JSON object/);
    expect(refusal(['getInvoice'])).toMatch(/must be a JSON object/);
  });
});
