import { readdirSync, readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

// helm is not installed on these machines: the chart's values are checked against its schema here,
// and every value a template reads must exist in values.yaml. `make chart-lint` runs helm where it is.
const CHART = new URL('../../charts/agents-chain-sidecar/', import.meta.url);
const read = (p: string) => readFileSync(new URL(p, CHART), 'utf8');
const schema = JSON.parse(read('values.schema.json')) as object;
const values = parse(read('values.yaml')) as Record<string, unknown>;

function get(obj: unknown, path: string[]): unknown {
  return path.reduce<unknown>((o, k) => (o && typeof o === 'object' ? (o as Record<string, unknown>)[k] : undefined), obj);
}

describe('Helm chart', () => {
  const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);

  it('values.yaml and every examples/ values file validate against values.schema.json', () => {
    expect(validate(values), JSON.stringify(validate.errors)).toBe(true);
    for (const f of readdirSync(new URL('examples/', CHART))) {
      const example = parse(read(`examples/${f}`)) as Record<string, unknown>;
      expect(validate(example), `${f}: ${JSON.stringify(validate.errors)}`).toBe(true);
    }
  });

  it('the schema refuses what would break a release: image tag latest, an unknown key, a bad failurePolicy', () => {
    expect(validate({ ...values, image: { repository: 'x', tag: 'latest' } })).toBe(false);
    expect(validate({ ...values, imagee: {} })).toBe(false);
    expect(validate({ ...values, webhook: { failurePolicy: 'Sometimes' } })).toBe(false);
  });

  it('every .Values path a template reads exists in values.yaml', () => {
    const missing: string[] = [];
    for (const f of readdirSync(new URL('templates/', CHART))) {
      for (const m of read(`templates/${f}`).matchAll(/\.Values((?:\.[A-Za-z][A-Za-z0-9]*)+)/g)) {
        const path = m[1]!.slice(1).split('.');
        if (get(values, path) === undefined) missing.push(`${f}: .Values.${path.join('.')}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('ships the rule file and dashboard the templates wrap', () => {
    expect(read('templates/prometheusrule.yaml')).toContain('rules/agents-chain.rules.yaml');
    expect(read('templates/grafana-dashboard.yaml')).toContain('dashboards/agents-chain-sidecar.json');
    expect(parse(read('rules/agents-chain.rules.yaml')).groups[0].rules.length).toBeGreaterThan(5);
  });
});
