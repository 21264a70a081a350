import type { ConstraintRule } from '../policy/types.js';

/** One rule in plain words, for people and models: "must be at most 1000; must be one of ["USD", "EUR"]; may be left out". */
export function describeRule(rule: ConstraintRule): string {
  const parts: string[] = [];
  if (rule.min !== undefined && rule.max !== undefined) parts.push(`must be a number from ${rule.min} to ${rule.max}`);
  else if (rule.max !== undefined) parts.push(`must be a number no greater than ${rule.max}`);
  else if (rule.min !== undefined) parts.push(`must be a number no less than ${rule.min}`);
  if (rule.in !== undefined) parts.push(`must be one of ${list(rule.in)}`);
  if (rule.not_in !== undefined) parts.push(`must not be any of ${list(rule.not_in)}`);
  if (rule.exact !== undefined) parts.push(`must be exactly ${JSON.stringify(rule.exact)}`);
  // The modifiers change what a model may send: say them, or it would take them for required single names.
  if (rule.aliases?.length) parts.push(`also read as ${rule.aliases.join(', ')} (each one sent must comply)`);
  if (rule.optional === true) parts.push('may be left out');
  return parts.join('; ');
}

function list(values: readonly unknown[]): string {
  return `[${values.map((v) => JSON.stringify(v)).join(', ')}]`;
}
