import { describe, expect, it } from 'vitest';
import type { Host } from '../../../src/policy/types.js';
import { deriveGrants } from '../../../src/registration/grants.js';

const host = {
  id: 'h',
  name: 'H',
  maxAgents: 10,
  defaults: new Map([
    ['createInvoice', { amount: { max: 1000, min: 1 }, currency: { in: ['USD', 'EUR'] }, tier: { not_in: ['internal'] }, dryRun: { exact: false } }],
    ['getInvoice', {}],
  ]),
} as unknown as Host;

describe('deriveGrants', () => {
  it('gives all the host defaults when nothing is asked for', () => {
    expect(deriveGrants(host, undefined)).toEqual([
      { capability: 'createInvoice', constraints: host.defaults.get('createInvoice') },
      { capability: 'getInvoice', constraints: {} },
    ]);
  });

  it('narrows: tighter max/min, a subset of in, more not_in, new fields; the host rules are kept', () => {
    const r = deriveGrants(host, [
      {
        name: 'createInvoice',
        constraints: { amount: { max: 500, min: 10 }, currency: { in: ['USD'] }, tier: { not_in: ['trial'] }, region: { exact: 'eu' } },
      },
    ]);
    expect(r).toEqual([
      {
        capability: 'createInvoice',
        constraints: {
          amount: { max: 500, min: 10 },
          currency: { in: ['USD'] },
          tier: { not_in: ['internal', 'trial'] },
          dryRun: { exact: false },
          region: { exact: 'eu' },
        },
      },
    ]);
    // The host's policy object is not modified.
    expect(host.defaults.get('createInvoice')!.amount).toEqual({ max: 1000, min: 1 });
  });

  it.each([
    [[{ name: 'createInvoice', constraints: { amount: { max: 2000 } } }], /max 2000 is looser than the host's 1000/],
    [[{ name: 'createInvoice', constraints: { amount: { min: 0 } } }], /min 0 is looser than the host's 1/],
    [[{ name: 'createInvoice', constraints: { currency: { in: ['USD', 'GBP'] } } }], /in allows \["GBP"\]/],
    [[{ name: 'createInvoice', constraints: { dryRun: { exact: true } } }], /exact true differs/],
    [[{ name: 'createInvoice', constraints: { amount: { max: 5, min: 50 } } }], /min is greater than max/],
    [[{ name: 'createInvoice', constraints: { amount: { max: '5' } } }], /max must be a number/],
    [['deleteInvoice'], /may not grant "deleteInvoice"/],
    [['getInvoice', 'getInvoice'], /asked for twice/],
    ['getInvoice', /must be a list/],
    [[42], /a name or \{name, constraints\}/],
    [[{ name: 'createInvoice', constraints: JSON.parse('{"__proto__": {"max": 1}}') }], /not a usable field name/],
  ])('refuses %j', (asked, message) => {
    expect(deriveGrants(host, asked)).toMatchObject({ denied: true, code: 'capability_denied', message: expect.stringMatching(message) });
  });
});

describe('currentGrants', () => {
  it('keeps what the host still allows, drops what it no longer grants or now grants more tightly', async () => {
    const { currentGrants } = await import('../../../src/registration/grants.js');
    const recorded: import('../../../src/registration/grants.js').DerivedGrant[] = [
      { capability: 'createInvoice', constraints: { amount: { max: 500 }, currency: { in: ['USD'] } } },
      { capability: 'getInvoice', constraints: {} },
      { capability: 'deleteInvoice', constraints: {} },
    ];
    expect(currentGrants(host, recorded).map((g) => g.capability)).toEqual(['createInvoice', 'getInvoice']);
    const tighter = { ...host, defaults: new Map([['createInvoice', { amount: { max: 100 } }]]) } as unknown as Host;
    expect(currentGrants(tighter, recorded)).toEqual([]);
  });
});
