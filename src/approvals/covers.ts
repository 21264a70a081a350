import type { ConstraintViolation } from '../errors.js';
import type { ValueApproval } from './types.js';

/**
 * Whether a value approval waves every violation through: each violated field
 * was approved with exactly this value. A field the call left out is never
 * covered, not even by an approved `null` (absent and null differ: the app may
 * apply a default to the one and reject the other).
 */
export function covers(approval: ValueApproval, violations: readonly ConstraintViolation[]): boolean {
  return (
    violations.length > 0 &&
    violations.every((v) => v.absent !== true && Object.hasOwn(approval.values, v.field) && sameJson(approval.values[v.field], v.actual))
  );
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
