import { describe, expect, it } from 'vitest';
import { deny } from '../../../src/errors.js';
import { presentDenial } from '../../../src/pipeline/present.js';
import { billingPolicy } from '../../support/pipeline.js';

const policy = await billingPolicy();
const v = { field: 'amount', constraint: 'max' as const, expected: 1000, actual: 5000, message: 'amount must be at most 1000, got 5000' };

describe('presentDenial', () => {
  it('outside constraint-aware mode: the plain body, violations under both names, the catalogue status', () => {
    const plain = { ...policy, context: { ...policy.context, constraintAware: false } };
    expect(presentDenial(plain, 'createInvoice', { amount: { max: 1000 } }, deny('constraint_violated', 'no', [v]))).toEqual({
      status: 403,
      body: { error: 'constraint_violated', message: 'no', violations: [v], structuredViolations: [v] },
    });
  });

  it('in constraint-aware mode, about a capability: the envelope, its guidance and limits, the configured violation status', () => {
    const aware = { ...policy, context: { constraintAware: true, violationStatus: 422, envelope: 'errors' as const } };
    const p = presentDenial(aware, 'createInvoice', { amount: { max: 1000 } }, deny('constraint_violated', 'no', [v]));
    expect(p.status).toBe(422);
    expect(p.body).toMatchObject({
      success: false,
      permission: 'constraint_violated',
      capability: 'createInvoice',
      error: 'constraint_violated',
      activeConstraints: { amount: { max: 1000 } },
      violations: [v],
    });
    expect((p.body as { guidance: string }).guidance).toContain('amount must be at most 1000');
    // Not about a capability (an unknown route): the plain body even in constraint-aware mode.
    expect(presentDenial(aware, undefined, undefined, deny('unknown_route', 'nothing here'))).toEqual({
      status: 404,
      body: { error: 'unknown_route', message: 'nothing here' },
    });
  });
});
