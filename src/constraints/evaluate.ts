import type { ConstraintViolation } from '../errors.js';
import type { ConstraintRule, Constraints, Scalar } from '../policy/types.js';
import { operatorsOf, spellingsOf } from './rules.js';

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

/**
 * Evaluates every rule; returns all violations (empty when the call complies).
 * A rule reads every spelling of its field (the field, then its aliases): each
 * one present is checked, since the app may read any of them, and the rule's
 * violation names the spelling at fault. No spelling present is a violation
 * of each operator, unless the rule is optional.
 */
export function evaluateConstraints(constraints: Constraints, lookup: (field: string) => ArgumentValue): ConstraintViolation[] {
  const out: ConstraintViolation[] = [];
  for (const [field, rule] of Object.entries(constraints)) {
    if (!rule.aliases?.length) {
      // The common rule, one spelling: no list to build per call.
      const arg = lookup(field);
      if (arg.present) for (const v of checkValue(field, field, rule, arg)) out.push(v);
      else if (rule.optional !== true) for (const v of absentViolations(field, [field], rule)) out.push(v);
      continue;
    }
    const spellings = spellingsOf(field, rule);
    let found = 0;
    for (const spelling of spellings) {
      const arg = lookup(spelling);
      if (!arg.present) continue;
      found++;
      const label = spelling === field ? field : `${spelling} (an alias of ${field})`;
      for (const v of checkValue(spelling, label, rule, arg)) out.push(v);
    }
    if (found === 0 && rule.optional !== true) for (const v of absentViolations(field, spellings, rule)) out.push(v);
  }
  return out;
}

function absentViolations(field: string, spellings: string[], rule: ConstraintRule): ConstraintViolation[] {
  const named = spellings.length > 1 ? `${field} (or ${spellings.slice(1).join(', ')})` : field;
  return operatorsOf(rule).map((op) => ({
    field,
    constraint: op,
    expected: rule[op],
    actual: null,
    message: `${named} is required by the "${op}" constraint but is absent`,
    absent: true as const,
  }));
}

/** The operators of a rule against one present value; `label` is how messages name the field. */
function checkValue(field: string, label: string, rule: ConstraintRule, arg: Extract<ArgumentValue, { present: true }>): ConstraintViolation[] {
  const out: ConstraintViolation[] = [];
  const actual = arg.value;
  const fail = (constraint: ConstraintViolation['constraint'], expected: unknown, message: string): void => {
    out.push({ field, constraint, expected, actual: actual ?? null, message });
  };
  if (rule.max !== undefined) {
    const n = asNumber(arg);
    if (n === undefined) fail('max', rule.max, `${label} must be a number <= ${rule.max}, got ${describe(actual)}`);
    else if (n > rule.max) fail('max', rule.max, `${label} must be <= ${rule.max}, got ${n}`);
  }
  if (rule.min !== undefined) {
    const n = asNumber(arg);
    if (n === undefined) fail('min', rule.min, `${label} must be a number >= ${rule.min}, got ${describe(actual)}`);
    else if (n < rule.min) fail('min', rule.min, `${label} must be >= ${rule.min}, got ${n}`);
  }
  if (rule.in !== undefined && !rule.in.some((e) => equals(arg, e))) {
    fail('in', rule.in, `${label} must be one of ${JSON.stringify(rule.in)}, got ${describe(actual)}`);
  }
  if (rule.not_in !== undefined) {
    if (!isScalar(actual))
      fail('not_in', rule.not_in, `${label} must be a string, number or boolean not in ${JSON.stringify(rule.not_in)}, got ${describe(actual)}`);
    else if (rule.not_in.some((e) => looselyEquals(actual, e)))
      fail('not_in', rule.not_in, `${label} must not be one of ${JSON.stringify(rule.not_in)}, got ${describe(actual)}`);
  }
  if (rule.exact !== undefined && !equals(arg, rule.exact)) {
    fail('exact', rule.exact, `${label} must be exactly ${JSON.stringify(rule.exact)}, got ${describe(actual)}`);
  }
  return out;
}
