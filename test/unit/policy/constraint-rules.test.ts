import { describe, expect, it } from 'vitest';
import { PolicyError, formatIssue, type PolicyIssue } from '../../../src/policy/issues.js';
import { loadPolicyText } from '../../../src/policy/load.js';
import { grantKey } from '../../../src/policy/types.js';

const FILE = 'rules.yaml';
const X_A = '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo';
const X_H = 'I2Pz6U94atxWo01Q4q9rXk13B4Yg5sV-d2iRxm9W2kM';

/** A policy whose grant's constraints start on line 19 (one rule a line). */
function policy(rules: string[], hostRules: string[] = ['amount: { max: 10 }']): string {
  return [
    'version: 1', //                                               1
    'provider: { name: svc, issuer: https://svc.example.com }', // 2
    'capabilities:', //                                            3
    '  - { name: createItem, method: POST, path: "/items/{id}" }', // 4
    'agents:', //                                                  5
    `  - { id: agent-a, name: a, publicKey: { kty: OKP, crv: Ed25519, x: "${X_A}" } }`, // 6
    'hosts:', //                                                   7
    '  - id: h', //                                                8
    '    name: H', //                                              9
    `    publicKey: { kty: OKP, crv: Ed25519, x: "${X_H}" }`, //   10
    '    defaultCapabilities:', //                                11
    '      - capability: createItem', //                          12
    `        constraints: { ${hostRules.join(', ')} }`, //         13
    'grants:', //                                                 14
    '  - agent: agent-a', //                                      15
    '    capability: createItem', //                              16
    '    status: active', //                                      17
    '    constraints:', //                                        18
    ...rules.map((r) => `      ${r}`), //                          19...
  ].join('\n');
}

async function issuesOf(source: string): Promise<PolicyIssue[]> {
  const e = await loadPolicyText(source, FILE).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(PolicyError);
  return (e as PolicyError).issues;
}

describe('eq, the Agent Auth Protocol name of exact', () => {
  it('loads as exact in grants and host defaults, so nothing downstream sees eq', async () => {
    const p = await loadPolicyText(policy(['region: { eq: eu }', 'n: { eq: 1, optional: true }'], ['dryRun: { eq: false }']), FILE);
    expect(p.grants.get(grantKey('agent-a', 'createItem'))!.constraints).toEqual({ region: { exact: 'eu' }, n: { exact: 1, optional: true } });
    expect([...p.hosts.values()][0]!.defaults.get('createItem')).toEqual({ dryRun: { exact: false } });
  });

  it('refuses a rule with both eq and exact, naming file, line and key', async () => {
    const issues = await issuesOf(policy(['region: { exact: eu, eq: eu }']));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ file: FILE, line: 19, key: 'grants[0].constraints.region.eq' });
    expect(formatIssue(issues[0]!)).toMatch(/^rules\.yaml:19:\d+: grants\[0\]\.constraints\.region\.eq: eq and exact are one operator/);
  });

  it('refuses both in host defaults too', async () => {
    const issues = await issuesOf(policy(['amount: { max: 1 }'], ['dryRun: { eq: false, exact: false }']));
    expect(issues.map((i) => [i.line, i.key])).toEqual([[13, 'hosts[0].defaultCapabilities[0].constraints.dryRun.eq']]);
  });
});

describe('an unknown operator in a policy file', () => {
  it('is a load error at the operator that lists eq and the modifiers', async () => {
    const [i, ...rest] = await issuesOf(policy(['amount: { maximum: 10 }']));
    expect(rest).toEqual([]);
    expect(i).toMatchObject({ line: 19, key: 'grants[0].constraints.amount.maximum' });
    expect(i!.message).toBe('unknown constraint operator "maximum" (allowed: max, min, in, not_in, exact (or eq); modifiers optional, aliases)');
  });
});

describe('optional and aliases', () => {
  it('load as written', async () => {
    const p = await loadPolicyText(policy(['temperature: { max: 1, optional: true }', 'max_tokens: { max: 1024, aliases: [max_completion_tokens] }']), FILE);
    expect(p.grants.get(grantKey('agent-a', 'createItem'))!.constraints).toEqual({
      temperature: { max: 1, optional: true },
      max_tokens: { max: 1024, aliases: ['max_completion_tokens'] },
    });
  });

  it.each([
    ['temperature: { optional: true }', 'grants[0].constraints.temperature', /a rule needs an operator/],
    ['max_tokens: { max: 1, aliases: [max_tokens] }', 'grants[0].constraints.max_tokens.aliases[0]', /"max_tokens" is the field itself/],
    ['max_tokens: { max: 1, aliases: [a, a] }', 'grants[0].constraints.max_tokens.aliases', /duplicate items/],
    ['max_tokens: { max: 1, aliases: ["a b"] }', 'grants[0].constraints.max_tokens.aliases[0]', /must match pattern/],
    ['max_tokens: { max: 1, optional: "yes" }', 'grants[0].constraints.max_tokens.optional', /boolean/],
    ['max_tokens: { max: 1, aliases: [id.value] }', 'grants[0].constraints.max_tokens.aliases[0]', /"id" is a path parameter/],
  ])('refuses %s', async (rule, key, message) => {
    const issues = await issuesOf(policy([rule]));
    expect(issues, JSON.stringify(issues)).toEqual([expect.objectContaining({ line: 19, key, message: expect.stringMatching(message) })]);
  });
});
