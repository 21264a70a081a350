import { describe, expect, it } from 'vitest';
import { denialBody, statusOf, type Denial } from '../../../src/errors.js';
import type { Host } from '../../../src/policy/types.js';
import { currentGrants, deriveGrants } from '../../../src/registration/grants.js';

const host = {
  id: 'h',
  name: 'H',
  maxAgents: 10,
  defaults: new Map([
    [
      'message',
      {
        model: { in: ['claude-haiku-4-5', 'claude-sonnet-4-5'] },
        max_tokens: { max: 1024, aliases: ['max_completion_tokens'] },
        temperature: { max: 1, optional: true },
        top_k: { max: 50, optional: true, aliases: ['topK'] },
      },
    ],
  ]),
} as unknown as Host;

const ask = (constraints: unknown): unknown => [{ name: 'message', constraints }];

describe('deriveGrants: the protocol spellings', () => {
  it('reads eq as exact, and a bare value as {exact: it}', () => {
    expect(deriveGrants(host, ask({ model: { eq: 'claude-haiku-4-5' }, stream: false }))).toEqual([
      {
        capability: 'message',
        constraints: expect.objectContaining({ model: { in: ['claude-haiku-4-5', 'claude-sonnet-4-5'], exact: 'claude-haiku-4-5' }, stream: { exact: false } }),
      },
    ]);
  });

  it('refuses eq beside exact', () => {
    expect(deriveGrants(host, ask({ region: { eq: 'eu', exact: 'eu' } }))).toMatchObject({
      code: 'capability_denied',
      message: expect.stringMatching(/message\.region: eq and exact are one operator/),
    });
  });

  it('answers unknown operators as the Agent Auth Protocol does: 400 unknown_constraint_operator, the operators listed', () => {
    const d = deriveGrants(host, [
      { name: 'message', constraints: { max_tokens: { below: 5 }, model: { like: 'claude%', below: 1 } } },
      { name: 'message', constraints: { top_k: { lte: 5 } } },
    ]) as Denial;
    expect(d.code).toBe('unknown_constraint_operator');
    expect(statusOf(d.code)).toBe(400);
    expect(d.message).toMatch(/"below" \(message\.max_tokens\), "like" \(message\.model\), "lte" \(message\.top_k\)/);
    expect(d.message).toContain('eq');
    expect(denialBody(d)).toMatchObject({ error: 'unknown_constraint_operator', operators: ['below', 'like', 'lte'] });
  });
});

describe('deriveGrants: optional and aliases are narrowed like operators', () => {
  it('keeps the host modifiers when the registration does not mention them', () => {
    const [g] = deriveGrants(host, ask({ max_tokens: { max: 256 }, temperature: { max: 0.5 } })) as { constraints: Record<string, unknown> }[];
    expect(g!.constraints.max_tokens).toEqual({ max: 256, aliases: ['max_completion_tokens'] });
    expect(g!.constraints.temperature).toEqual({ max: 0.5, optional: true });
  });

  it('may make an optional field required, and add spellings to an optional rule', () => {
    const [g] = deriveGrants(host, ask({ temperature: { optional: false }, top_k: { aliases: ['top-k'] } })) as { constraints: Record<string, unknown> }[];
    expect(g!.constraints.temperature).toEqual({ max: 1 });
    expect(g!.constraints.top_k).toEqual({ max: 50, optional: true, aliases: ['topK', 'top-k'] });
  });

  it('keeps every host spelling: an asked alias list adds to it, never replaces it', () => {
    const [g] = deriveGrants(host, ask({ top_k: { max: 10, aliases: [] } })) as { constraints: Record<string, unknown> }[];
    expect(g!.constraints.top_k).toEqual({ max: 10, optional: true, aliases: ['topK'] });
  });

  it('lets a new field be optional (it only adds a check)', () => {
    const [g] = deriveGrants(host, ask({ top_p: { max: 0.9, optional: true } })) as { constraints: Record<string, unknown> }[];
    expect(g!.constraints.top_p).toEqual({ max: 0.9, optional: true });
  });

  it.each([
    [{ model: { optional: true } }, /message\.model: optional is looser than the host's rule, which requires model/],
    [{ max_tokens: { max: 100, optional: true } }, /optional is looser/],
    // A new spelling of a required field would let a call send it instead of max_tokens.
    [{ max_tokens: { aliases: ['maxTokens'] } }, /aliases \["maxTokens"\] would let a call send them instead of max_tokens/],
    [{ region: { optional: true } }, /message\.region: a rule needs an operator/],
    [{ max_tokens: { max: 100, aliases: ['max_tokens'] } }, /"max_tokens" is the field itself/],
    [{ max_tokens: { aliases: 'max_completion_tokens' } }, /aliases must be a list of field names/],
    [{ temperature: { optional: 'yes' } }, /optional must be true or false/],
    [{ 'bad..name': { max: 1 } }, /not a usable field name/],
  ])('refuses %j', (constraints, message) => {
    expect(deriveGrants(host, ask(constraints))).toMatchObject({ denied: true, code: 'capability_denied', message: expect.stringMatching(message) });
  });
});

describe('currentGrants with modifiers', () => {
  it('drops a recorded optional rule once the host requires the field (fail closed)', () => {
    const recorded = deriveGrants(host, ask({ temperature: { max: 0.5 } })) as { capability: string; constraints: Record<string, never> }[];
    expect(currentGrants(host, recorded)).toEqual(recorded);
    const stricter = {
      ...host,
      defaults: new Map([['message', { ...host.defaults.get('message'), temperature: { max: 1 } }]]),
    } as unknown as Host;
    expect(currentGrants(stricter, recorded)).toEqual([]);
  });
});
