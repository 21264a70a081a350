import type { ConstraintRule, Constraints, Scalar } from '../policy/types.js';

/** The operators a rule checks a value with, in the order violations are reported. */
export const OPERATORS = ['max', 'min', 'in', 'not_in', 'exact'] as const;
export type Operator = (typeof OPERATORS)[number];

/** The Agent Auth Protocol's spelling of `exact`; read as `exact` wherever a rule comes in. */
export const EQ_ALIAS = 'eq';

/** Keys of a rule that are not operators: they say which spellings the operators read. */
export const MODIFIERS = ['optional', 'aliases'] as const;

/** What an operator list in a message reads like: "max, min, in, not_in, exact (or eq); modifiers optional, aliases". */
export const RULE_KEYS_TEXT = `${OPERATORS.join(', ')} (or ${EQ_ALIAS}); modifiers ${MODIFIERS.join(', ')}`;

const KNOWN_KEYS: ReadonlySet<string> = new Set<string>([...OPERATORS, EQ_ALIAS, ...MODIFIERS]);

/** The keys of a written rule that are neither operators, `eq`, nor modifiers. */
export function unknownRuleKeys(rule: object): string[] {
  return Object.keys(rule).filter((k) => !KNOWN_KEYS.has(k));
}

/** The operators a rule carries (its modifiers left out). */
export function operatorsOf(rule: ConstraintRule): Operator[] {
  return OPERATORS.filter((op) => rule[op] !== undefined);
}

/** Every name the rule reads in the call: its field first, then its aliases. */
export function spellingsOf(field: string, rule: ConstraintRule): string[] {
  return rule.aliases?.length ? [field, ...rule.aliases] : [field];
}

const spellingsByRules = new WeakMap<Constraints, readonly string[]>();

/** The fields of a set of rules together with their aliases, each once (what the call is read for); worked out once per grant's rules. */
export function constrainedSpellings(constraints: Constraints): readonly string[] {
  let spellings = spellingsByRules.get(constraints);
  if (!spellings) {
    const out = new Set<string>();
    for (const [field, rule] of Object.entries(constraints)) for (const s of spellingsOf(field, rule)) out.add(s);
    spellingsByRules.set(constraints, (spellings = [...out]));
  }
  return spellings;
}

/** A rule as written: the operators, `eq`, the modifiers. */
export type WrittenRule = ConstraintRule & { eq?: Scalar };

/** A problem in one written rule: which key of the rule (undefined for the rule itself), and what. */
export interface RuleProblem {
  key?: string | [string, number];
  message: string;
}

/**
 * A written rule in the one form everything downstream reads: `eq` becomes
 * `exact`. Refused: `eq` beside `exact` (one operator, two spellings), a rule
 * without operators (modifiers alone check nothing), an alias that repeats the
 * field or another alias (`requireOperator` false: a registration's rule may
 * only add modifiers to its host's). Types are the caller's to check. Pure.
 */
export function normaliseRule(field: string, written: WrittenRule, requireOperator = true): { rule: ConstraintRule; problems: RuleProblem[] } {
  const problems: RuleProblem[] = [];
  const { eq, ...rest } = written;
  const rule: ConstraintRule = rest;
  if (eq !== undefined) {
    if (rest.exact !== undefined)
      problems.push({ key: EQ_ALIAS, message: "eq and exact are one operator (eq is the Agent Auth Protocol's name for exact): give only one" });
    else rule.exact = eq;
  }
  if (requireOperator && operatorsOf(rule).length === 0)
    problems.push({ message: `a rule needs an operator (${OPERATORS.join(', ')}); optional and aliases alone check nothing` });
  const seen = new Set([field]);
  (rule.aliases ?? []).forEach((alias, i) => {
    if (seen.has(alias)) problems.push({ key: ['aliases', i], message: `"${alias}" is ${alias === field ? 'the field itself' : 'listed twice'}` });
    seen.add(alias);
  });
  if (rule.aliases?.length === 0) delete rule.aliases;
  return { rule, problems };
}

/** Every rule of a written set normalised (see normaliseRule); problems keyed by field. Pure. */
export function normaliseConstraints(written: Record<string, WrittenRule>): { constraints: Constraints; problems: (RuleProblem & { field: string })[] } {
  const problems: (RuleProblem & { field: string })[] = [];
  // fromEntries defines own properties: a field named __proto__ stays a field.
  const constraints: Constraints = Object.fromEntries(
    Object.entries(written).map(([field, rule]) => {
      const n = normaliseRule(field, rule);
      for (const p of n.problems) problems.push({ field, ...p });
      return [field, n.rule];
    }),
  );
  return { constraints, problems };
}
