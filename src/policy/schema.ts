import { readFileSync } from 'node:fs';
import { Ajv, type ErrorObject } from 'ajv';
import { RULE_KEYS_TEXT } from '../constraints/rules.js';
import type { PathPart } from './issues.js';

/** The JSON Schema shipped in config/ for editors is the one enforced here. */
export const POLICY_SCHEMA_URL = new URL('../../config/policy.schema.json', import.meta.url);

let validator: ReturnType<Ajv['compile']> | undefined;

function compiled(): ReturnType<Ajv['compile']> {
  if (!validator) {
    const schema = JSON.parse(readFileSync(POLICY_SCHEMA_URL, 'utf8')) as object;
    // Formats are checked by the loader itself (with better messages).
    const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true, validateFormats: false });
    validator = ajv.compile(schema);
  }
  return validator;
}

export interface SchemaProblem {
  path: PathPart[];
  asKey: boolean;
  message: string;
}

export function validateAgainstSchema(value: unknown): SchemaProblem[] {
  const validate = compiled();
  if (validate(value)) return [];
  return dedupe((validate.errors ?? []).map(explain));
}

function toPath(instancePath: string): PathPart[] {
  if (instancePath === '') return [];
  return instancePath
    .slice(1)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((p) => (/^(0|[1-9][0-9]*)$/.test(p) ? Number(p) : p));
}

function explain(e: ErrorObject): SchemaProblem {
  const path = toPath(e.instancePath);
  const parent = path[path.length - 1];
  const grandparent = path[path.length - 2];
  switch (e.keyword) {
    case 'additionalProperties': {
      const key = String((e.params as { additionalProperty: string }).additionalProperty);
      const inConstraints = grandparent === 'constraints';
      const message = inConstraints
        ? `unknown constraint operator "${key}" (allowed: ${RULE_KEYS_TEXT})`
        : key === 'd' && parent === 'publicKey'
          ? 'private key material ("d") must never be in the policy; give the public key only'
          : `unknown key "${key}"`;
      return { path: [...path, key], asKey: true, message };
    }
    case 'required':
      return { path, asKey: false, message: `missing required key "${(e.params as { missingProperty: string }).missingProperty}"` };
    case 'propertyNames':
      return {
        path,
        asKey: false,
        message: `invalid field name "${(e.params as { propertyName: string }).propertyName}" (use dotted names like customer.tier)`,
      };
    case 'const':
      return { path, asKey: false, message: `must be ${JSON.stringify((e.params as { allowedValue: unknown }).allowedValue)}` };
    case 'enum':
      return {
        path,
        asKey: false,
        message: `must be one of ${(e.params as { allowedValues: unknown[] }).allowedValues.map((v) => JSON.stringify(v)).join(', ')}`,
      };
    default:
      return { path, asKey: false, message: e.message ?? e.keyword };
  }
}

function dedupe(list: SchemaProblem[]): SchemaProblem[] {
  const seen = new Set<string>();
  // propertyNames reports twice (the name, then the failing pattern); keep the first.
  return list.filter((p) => {
    const id = `${p.path.join('/')}|${p.message}`;
    if (seen.has(id) || (p.message.startsWith('must match pattern') && seen.has(`${p.path.join('/')}|name`))) return false;
    seen.add(id);
    return true;
  });
}
