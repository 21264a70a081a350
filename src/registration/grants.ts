import { deny, type Denial } from '../errors.js';
import type { ConstraintRule, Constraints, Host, Scalar } from '../policy/types.js';

/** What a registration asks for: capability names, or names with constraints that narrow the host's. */
export type RequestedCapability = string | { name: string; constraints?: Constraints };

export interface DerivedGrant {
  capability: string;
  constraints: Constraints;
}

const isScalar = (v: unknown): v is Scalar => typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));
const RULE_KEYS = new Set(['max', 'min', 'in', 'not_in', 'exact']);

/**
 * The grants a registered agent gets: the host's defaults, narrowed by what
 * the registration asks for. Asking for a capability the host may not grant,
 * or for a looser rule than the host's, is refused (capability_denied, saying what).
 * No capabilities asked for means all of the host's defaults. Pure.
 */
export function deriveGrants(host: Host, requested: unknown): DerivedGrant[] | Denial {
  const derived = derive(host, requested);
  return typeof derived === 'string' ? deny('capability_denied', derived) : derived;
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
  if (typeof asked !== 'object' || asked === null || Array.isArray(asked)) return `constraints of "${capability}" must be an object`;
  const out: Constraints = structuredClone(host);
  for (const [field, rule] of Object.entries(asked as Record<string, unknown>)) {
    const where = `${capability}.${field}`;
    if (field === '__proto__' || field === 'constructor' || field === 'prototype') return `${where}: not a usable field name`;
    const checked = readRule(rule, where);
    if (typeof checked === 'string') return checked;
    const h = host[field] ?? {};
    const r = checked;
    const merged: ConstraintRule = { ...h };
    if (r.max !== undefined) {
      if (h.max !== undefined && r.max > h.max) return `${where}: max ${r.max} is looser than the host's ${h.max}`;
      merged.max = r.max;
    }
    if (r.min !== undefined) {
      if (h.min !== undefined && r.min < h.min) return `${where}: min ${r.min} is looser than the host's ${h.min}`;
      merged.min = r.min;
    }
    if (r.in !== undefined) {
      const outside = h.in ? r.in.filter((v) => !h.in!.includes(v)) : [];
      if (outside.length) return `${where}: in allows ${JSON.stringify(outside)}, which the host's list does not`;
      merged.in = r.in;
    }
    if (r.not_in !== undefined) merged.not_in = [...new Set([...(h.not_in ?? []), ...r.not_in])];
    if (r.exact !== undefined) {
      if (h.exact !== undefined && r.exact !== h.exact) return `${where}: exact ${JSON.stringify(r.exact)} differs from the host's ${JSON.stringify(h.exact)}`;
      merged.exact = r.exact;
    }
    if (merged.min !== undefined && merged.max !== undefined && merged.min > merged.max) return `${where}: min is greater than max`;
    out[field] = merged;
  }
  return out;
}

function readRule(rule: unknown, where: string): ConstraintRule | string {
  if (typeof rule !== 'object' || rule === null || Array.isArray(rule)) return `${where}: a constraint is an object like {"max": 100}`;
  const r = rule as Record<string, unknown>;
  for (const k of Object.keys(r)) if (!RULE_KEYS.has(k)) return `${where}: unknown operator "${k}" (max, min, in, not_in, exact)`;
  for (const k of ['max', 'min'] as const)
    if (r[k] !== undefined && !(typeof r[k] === 'number' && Number.isFinite(r[k]))) return `${where}: ${k} must be a number`;
  for (const k of ['in', 'not_in'] as const)
    if (r[k] !== undefined && !(Array.isArray(r[k]) && (r[k] as unknown[]).every(isScalar)))
      return `${where}: ${k} must be a list of strings, numbers or booleans`;
  if (r.exact !== undefined && !isScalar(r.exact)) return `${where}: exact must be a string, number or boolean`;
  return r;
}

/**
 * A registered agent's grants under the host's current defaults: a capability
 * the host may no longer grant is dropped, and so is one whose recorded rules
 * are now looser than the host's (fail closed until the agent is registered
 * again with a new key). Pure.
 */
export function currentGrants(host: Host, recorded: readonly DerivedGrant[]): DerivedGrant[] {
  return recorded.flatMap((g) => {
    const defaults = host.defaults.get(g.capability);
    if (!defaults) return [];
    const merged = narrow(defaults, g.constraints, g.capability);
    return typeof merged === 'string' ? [] : [{ capability: g.capability, constraints: merged }];
  });
}
