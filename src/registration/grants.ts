import { deny, type Denial } from '../errors.js';
import { EQ_ALIAS, normaliseRule, OPERATORS, operatorsOf, RULE_KEYS_TEXT, unknownRuleKeys } from '../constraints/rules.js';
import type { ConstraintRule, Constraints, Host, Scalar } from '../policy/types.js';

/** What a registration asks for: capability names, or names with constraints that narrow the host's. */
export type RequestedCapability = string | { name: string; constraints?: Constraints };

export interface DerivedGrant {
  capability: string;
  constraints: Constraints;
}

const isScalar = (v: unknown): v is Scalar => typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));
const FIELD = /^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/;

/**
 * The grants a registered agent gets: the host's defaults, narrowed by what
 * the registration asks for. Asking for a capability the host may not grant,
 * or for a looser rule than the host's, is refused (capability_denied, saying what);
 * a rule with an operator the sidecar does not know is refused as the Agent Auth
 * Protocol refuses it (400 unknown_constraint_operator, the operators listed).
 * No capabilities asked for means all of the host's defaults. Pure.
 */
export function deriveGrants(host: Host, requested: unknown): DerivedGrant[] | Denial {
  const unknown = unknownOperators(requested);
  if (unknown.size) {
    const named = [...unknown].map(([k, where]) => `"${k}" (${where})`).join(', ');
    const d = deny('unknown_constraint_operator', `unknown constraint operator ${named}; allowed: ${RULE_KEYS_TEXT}`);
    return { ...d, extra: { body: { operators: [...unknown.keys()] } } };
  }
  const derived = derive(host, requested);
  return typeof derived === 'string' ? deny('capability_denied', derived) : derived;
}

/** The unknown keys of every rule object asked for, each once in the order asked, with where it was first seen. */
function unknownOperators(requested: unknown): Map<string, string> {
  const out = new Map<string, string>();
  if (!Array.isArray(requested)) return out;
  for (const item of requested as unknown[]) {
    if (!isObject(item)) continue;
    const { name, constraints } = item;
    if (!isObject(constraints)) continue;
    for (const [field, rule] of Object.entries(constraints))
      if (isObject(rule)) for (const k of unknownRuleKeys(rule)) if (!out.has(k)) out.set(k, `${String(name)}.${field}`);
  }
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** deriveGrants, with the refusal as the reason's text (the rule helpers below compose those texts). */
function derive(host: Host, requested: unknown): DerivedGrant[] | string {
  if (requested === undefined) return [...host.defaults].map(([capability, constraints]) => ({ capability, constraints }));
  if (!Array.isArray(requested)) return '"capabilities" must be a list of capability names or {name, constraints}';
  const out: DerivedGrant[] = [];
  for (const item of requested) {
    const name = typeof item === 'string' ? item : (item as { name?: unknown })?.name;
    if (typeof name !== 'string') return 'each capability is a name or {name, constraints}';
    const defaults = host.defaults.get(name);
    if (!defaults) return `host "${host.id}" may not grant "${name}"`;
    if (out.some((g) => g.capability === name)) return `"${name}" is asked for twice`;
    const asked = typeof item === 'string' ? {} : ((item as { constraints?: unknown }).constraints ?? {});
    const merged = narrow(defaults, asked, name);
    if (typeof merged === 'string') return merged;
    out.push({ capability: name, constraints: merged });
  }
  return out;
}

function narrow(host: Constraints, asked: unknown, capability: string): Constraints | string {
  if (!isObject(asked)) return `constraints of "${capability}" must be an object`;
  const out: Constraints = structuredClone(host);
  for (const [field, rule] of Object.entries(asked)) {
    const where = `${capability}.${field}`;
    if (field === '__proto__' || field === 'constructor' || field === 'prototype' || !FIELD.test(field)) return `${where}: not a usable field name`;
    const checked = readRule(field, rule, where);
    if (typeof checked === 'string') return checked;
    const merged = narrowRule(Object.hasOwn(host, field) ? host[field] : undefined, checked, field, where);
    if (typeof merged === 'string') return merged;
    out[field] = merged;
  }
  return out;
}

/** One asked rule over the host's rule for that field (none: any rule narrows nothing away). */
function narrowRule(h: ConstraintRule | undefined, r: ConstraintRule, field: string, where: string): ConstraintRule | string {
  const merged: ConstraintRule = { ...h };
  if (r.max !== undefined) {
    if (h?.max !== undefined && r.max > h.max) return `${where}: max ${r.max} is looser than the host's ${h.max}`;
    merged.max = r.max;
  }
  if (r.min !== undefined) {
    if (h?.min !== undefined && r.min < h.min) return `${where}: min ${r.min} is looser than the host's ${h.min}`;
    merged.min = r.min;
  }
  if (r.in !== undefined) {
    const outside = h?.in ? r.in.filter((v) => !h.in!.includes(v)) : [];
    if (outside.length) return `${where}: in allows ${JSON.stringify(outside)}, which the host's list does not`;
    merged.in = r.in;
  }
  if (r.not_in !== undefined) merged.not_in = [...new Set([...(h?.not_in ?? []), ...r.not_in])];
  if (r.exact !== undefined) {
    if (h?.exact !== undefined && r.exact !== h.exact) return `${where}: exact ${JSON.stringify(r.exact)} differs from the host's ${JSON.stringify(h.exact)}`;
    merged.exact = r.exact;
  }
  // The host requires the field: letting the call leave it out would pass calls the host refuses.
  const hostRequires = h !== undefined && h.optional !== true;
  if (r.optional !== undefined) {
    if (r.optional && hostRequires) return `${where}: optional is looser than the host's rule, which requires ${field}`;
    if (r.optional) merged.optional = true;
    else delete merged.optional;
  }
  if (r.aliases !== undefined) {
    // Dropping one of the host's spellings would leave it unchecked; a new one, under a required rule, would stand in for the field.
    const added = r.aliases.filter((a) => !(h?.aliases ?? []).includes(a));
    if (added.length && hostRequires)
      return `${where}: aliases ${JSON.stringify(added)} would let a call send them instead of ${field}, which the host requires`;
    merged.aliases = [...new Set([...(h?.aliases ?? []), ...r.aliases])];
  }
  if (operatorsOf(merged).length === 0) return `${where}: a rule needs an operator (${OPERATORS.join(', ')})`;
  if (merged.min !== undefined && merged.max !== undefined && merged.min > merged.max) return `${where}: min is greater than max`;
  return merged;
}

/**
 * An asked rule, checked and normalised: the protocol's forms are read as the
 * policy's (`eq` as `exact`; a bare string, number or boolean as `{exact: it}`).
 */
function readRule(field: string, rule: unknown, where: string): ConstraintRule | string {
  if (isScalar(rule)) return { exact: rule };
  if (!isObject(rule)) return `${where}: a constraint is an object like {"max": 100}`;
  const r = rule;
  // deriveGrants answers these first; a recorded grant (currentGrants) never has any.
  const unknown = unknownRuleKeys(r);
  if (unknown.length) return `${where}: unknown constraint operator "${unknown[0]}" (allowed: ${RULE_KEYS_TEXT})`;
  for (const k of ['max', 'min'] as const)
    if (r[k] !== undefined && !(typeof r[k] === 'number' && Number.isFinite(r[k]))) return `${where}: ${k} must be a number`;
  for (const k of ['in', 'not_in'] as const)
    if (r[k] !== undefined && !(Array.isArray(r[k]) && (r[k] as unknown[]).every(isScalar)))
      return `${where}: ${k} must be a list of strings, numbers or booleans`;
  for (const k of ['exact', EQ_ALIAS] as const) if (r[k] !== undefined && !isScalar(r[k])) return `${where}: ${k} must be a string, number or boolean`;
  if (r.optional !== undefined && typeof r.optional !== 'boolean') return `${where}: optional must be true or false`;
  if (r.aliases !== undefined && !(Array.isArray(r.aliases) && r.aliases.every((a) => typeof a === 'string' && FIELD.test(a) && a !== '__proto__')))
    return `${where}: aliases must be a list of field names`;
  const { rule: normal, problems } = normaliseRule(field, r, false);
  return problems.length ? `${where}: ${problems[0]!.message}` : normal;
}

/**
 * A registered agent's grants under the host's current defaults: a capability
 * the host may no longer grant is dropped, and so is one whose recorded rules
 * are now looser than the host's (fail closed until the agent is registered
 * again with a new key). Pure.
 */
export function currentGrants(host: Pick<Host, 'defaults'>, recorded: readonly DerivedGrant[]): DerivedGrant[] {
  return recorded.flatMap((g) => {
    const defaults = host.defaults.get(g.capability);
    if (!defaults) return [];
    const merged = narrow(defaults, g.constraints, g.capability);
    return typeof merged === 'string' ? [] : [{ capability: g.capability, constraints: merged }];
  });
}
