import type { ConstraintViolation } from '../errors.js';
import type { ConstraintRule, Constraints, Scalar } from '../policy/types.js';

/**
 * An argument as found in the request. `fromUrl` values (query and path
 * parameters) are always strings; a numeric rule reads them only in
 * canonical decimal form, so "1e3", "01" or " 5" never pass as numbers.
 */
export type ArgumentValue = { present: false } | { present: true; value: unknown; fromUrl: boolean };

const CANONICAL_DECIMAL = /^-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$/;

function asNumber(a: { value: unknown; fromUrl: boolean }): number | undefined {
  if (typeof a.value === 'number') return a.value;
  if (a.fromUrl && typeof a.value === 'string' && CANONICAL_DECIMAL.test(a.value) && a.value !== '-0') {
    const n = Number(a.value);
    return Number.isFinite(n) ? n : undefined;
  }
  return undefined;
}

function isScalar(v: unknown): v is Scalar {
  return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
}

/** Strict equality: same type, same value. URL strings compare to numbers and booleans by their canonical text. */
function equals(a: { value: unknown; fromUrl: boolean }, expected: Scalar): boolean {
  if (a.fromUrl && typeof a.value === 'string' && typeof expected !== 'string') {
    return typeof expected === 'number' ? asNumber(a) === expected : a.value === String(expected);
  }
  return isScalar(a.value) && a.value === expected;
}

/**
 * Deny-list matching is loose on purpose: an app may coerce "5", " 5", "5.0"
 * or "TRUE" into the listed value, so any form that could become it counts as
 * a match. (Allow-lists stay strict: they fail closed on their own.)
 */
function looselyEquals(value: unknown, listed: Scalar): boolean {
  if (value === listed) return true;
  // Case-insensitive collations, padding and compatibility forms: "Internal ", "ＩＮＴＥＲＮＡＬ".
  if (typeof value === 'string' && typeof listed === 'string') return fold(value) === fold(listed);
  if (typeof value === 'number' && typeof listed === 'string') return String(value) === listed.trim();
  if (typeof value !== 'string') return false;
  const text = value.trim();
  if (typeof listed === 'number') return text !== '' && Number(text) === listed;
  if (typeof listed === 'boolean') return text.toLowerCase() === String(listed);
  return false;
}

function fold(s: string): string {
  return s.normalize('NFKC').trim().toLowerCase();
}

function describe(v: unknown): string {
  return v === undefined ? 'absent' : JSON.stringify(v);
}

/** Evaluates every rule; returns all violations (empty when the call complies). */
export function evaluateConstraints(constraints: Constraints, lookup: (field: string) => ArgumentValue): ConstraintViolation[] {
  const out: ConstraintViolation[] = [];
  for (const [field, rule] of Object.entries(constraints)) {
    const arg = lookup(field);
    for (const v of checkRule(field, rule, arg)) out.push(v);
  }
  return out;
}

function checkRule(field: string, rule: ConstraintRule, arg: ArgumentValue): ConstraintViolation[] {
  const out: ConstraintViolation[] = [];
  const actual = arg.present ? arg.value : undefined;
  const fail = (constraint: ConstraintViolation['constraint'], expected: unknown, message: string): void => {
    out.push(
      arg.present ? { field, constraint, expected, actual: actual ?? null, message } : { field, constraint, expected, actual: null, message, absent: true },
    );
  };
  if (!arg.present) {
    for (const op of Object.keys(rule) as ConstraintViolation['constraint'][]) {
      fail(op, rule[op], `${field} is required by the "${op}" constraint but is absent`);
    }
    return out;
  }
  if (rule.max !== undefined) {
    const n = asNumber(arg);
    if (n === undefined) fail('max', rule.max, `${field} must be a number <= ${rule.max}, got ${describe(actual)}`);
    else if (n > rule.max) fail('max', rule.max, `${field} must be <= ${rule.max}, got ${n}`);
  }
  if (rule.min !== undefined) {
    const n = asNumber(arg);
    if (n === undefined) fail('min', rule.min, `${field} must be a number >= ${rule.min}, got ${describe(actual)}`);
    else if (n < rule.min) fail('min', rule.min, `${field} must be >= ${rule.min}, got ${n}`);
  }
  if (rule.in !== undefined && !rule.in.some((e) => equals(arg, e))) {
    fail('in', rule.in, `${field} must be one of ${JSON.stringify(rule.in)}, got ${describe(actual)}`);
  }
  if (rule.not_in !== undefined) {
    if (!isScalar(actual))
      fail('not_in', rule.not_in, `${field} must be a string, number or boolean not in ${JSON.stringify(rule.not_in)}, got ${describe(actual)}`);
    else if (rule.not_in.some((e) => looselyEquals(actual, e)))
      fail('not_in', rule.not_in, `${field} must not be one of ${JSON.stringify(rule.not_in)}, got ${describe(actual)}`);
  }
  if (rule.exact !== undefined && !equals(arg, rule.exact)) {
    fail('exact', rule.exact, `${field} must be exactly ${JSON.stringify(rule.exact)}, got ${describe(actual)}`);
  }
  return out;
}
