import type { Constraints } from '../policy/types.js';
import type { ArgumentValue } from './evaluate.js';
import { constrainedSpellings } from './rules.js';

/** Methods whose arguments travel in the URL; the others carry a JSON body. */
export const URL_ARGUMENT_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS']);

/** Where each constrained field is read from, decided by the route alone. */
export interface ArgumentPlan {
  /** Constrained query parameter names, aliases included (URL-argument methods only). */
  query: Set<string>;
  /** True when some rule reads the JSON body. */
  body: boolean;
  /** Top-level body fields that are constrained (to refuse a query copy of them). */
  bodyRoots: Set<string>;
}

/** Every spelling a rule reads (its field and its aliases) is planned like a field of its own. */
export function planArguments(constraints: Constraints, method: string, pathParams: Readonly<Record<string, string>>): ArgumentPlan {
  const plan: ArgumentPlan = { query: new Set(), body: false, bodyRoots: new Set() };
  for (const field of constrainedSpellings(constraints)) {
    if (Object.hasOwn(pathParams, field)) continue;
    if (URL_ARGUMENT_METHODS.has(method)) plan.query.add(field);
    else {
      plan.body = true;
      plan.bodyRoots.add(field.split('.')[0]!);
    }
  }
  return plan;
}

/** Resolves a constrained field: path parameter first, then query or body per the plan. */
export function argumentLookup(
  plan: ArgumentPlan,
  pathParams: Readonly<Record<string, string>>,
  query: ReadonlyMap<string, string>,
  body: unknown,
): (field: string) => ArgumentValue {
  return (field) => {
    if (Object.hasOwn(pathParams, field)) return { present: true, value: pathParams[field], fromUrl: true };
    if (plan.query.has(field)) {
      const v = query.get(field);
      return v === undefined ? { present: false } : { present: true, value: v, fromUrl: true };
    }
    let node: unknown = body;
    for (const part of field.split('.')) {
      if (typeof node !== 'object' || node === null || Array.isArray(node) || !Object.hasOwn(node, part)) return { present: false };
      node = (node as Record<string, unknown>)[part];
    }
    return { present: true, value: node, fromUrl: false };
  };
}
