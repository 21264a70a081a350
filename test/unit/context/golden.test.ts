import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { constraintContext } from '../../../src/context/constraint-context.js';
import { guidanceFor } from '../../../src/context/envelope.js';
import { deny } from '../../../src/errors.js';
import { loadPolicyFile, loadPolicyText } from '../../../src/policy/load.js';

const GOLDEN = fileURLToPath(new URL('../../golden/', import.meta.url));
const EXAMPLES = fileURLToPath(new URL('../../../config/examples/', import.meta.url));

/** Compares with test/golden/NAME; UPDATE_GOLDEN=1 rewrites the file (review the diff in Git). */
function golden(name: string, actual: string): void {
  if (process.env.UPDATE_GOLDEN) writeFileSync(`${GOLDEN}${name}`, actual);
  expect(actual).toBe(readFileSync(`${GOLDEN}${name}`, 'utf8'));
}

const NOW = Date.parse('2026-06-01T00:00:00Z');

describe('golden texts for models', () => {
  it('constraint context with request_permission (sms example)', async () => {
    const policy = await loadPolicyFile(`${EXAMPLES}sms.yaml`);
    golden('constraint-context.sms-bot.txt', constraintContext(policy, 'agent-sms-bot', NOW).text);
  });

  it('constraint context without request_permission (billing example)', async () => {
    const policy = await loadPolicyFile(`${EXAMPLES}billing.yaml`);
    golden('constraint-context.billing-bot.txt', constraintContext(policy, 'agent-billing-bot', NOW).text);
  });

  it('is stable: the same policy written in another order gives the same bytes', async () => {
    // billing.yaml with its capabilities, grants and each grant's constraint fields listed in reverse order.
    const doc = parse(readFileSync(`${EXAMPLES}billing.yaml`, 'utf8')) as { capabilities: unknown[]; grants: { constraints?: Record<string, unknown> }[] };
    doc.capabilities.reverse();
    doc.grants.reverse();
    for (const g of doc.grants) if (g.constraints) g.constraints = Object.fromEntries(Object.entries(g.constraints).reverse());
    const reordered = await loadPolicyText(stringify(doc), 'billing-reordered.yaml');
    const original = await loadPolicyFile(`${EXAMPLES}billing.yaml`);
    expect([...reordered.grants.values()].map((g) => g.capability)).not.toEqual([...original.grants.values()].map((g) => g.capability));
    golden('constraint-context.billing-bot.txt', constraintContext(reordered, 'agent-billing-bot', NOW).text);
    expect(constraintContext(reordered, 'agent-billing-bot', NOW)).toEqual(constraintContext(original, 'agent-billing-bot', NOW));
  });

  const violation = deny('constraint_violated', "arguments violate the grant's constraints (to)", [
    {
      field: 'to',
      constraint: 'in',
      expected: ['+254700000001', '+254700000002'],
      actual: '+9999999',
      message: 'to must be one of ["+254700000001","+254700000002"], got "+9999999"',
    },
  ]);
  const active = { to: { in: ['+254700000001', '+254700000002'] } };

  it('guidance for a violation when request_permission exists', () => {
    golden(
      'guidance.constraint_violated.request-permission.txt',
      `${guidanceFor(violation, { capability: 'send_sms', activeConstraints: active, requestPermission: true })}\n`,
    );
  });

  it('guidance for a violation when it does not', () => {
    golden(
      'guidance.constraint_violated.no-request-permission.txt',
      `${guidanceFor(violation, { capability: 'send_sms', activeConstraints: active, requestPermission: false })}\n`,
    );
  });

  it('guidance for the other denials', () => {
    const codes = ['capability_denied', 'token_expired', 'token_replayed', 'token_invalid', 'invalid_body', 'upstream_unavailable'] as const;
    const text = codes.map((c) => `${c}: ${guidanceFor(deny(c, `example ${c} message`), { capability: 'send_sms', requestPermission: true })}`).join('\n');
    golden('guidance.other-denials.txt', `${text}\n`);
  });
});
