import { readdirSync, readFileSync } from 'node:fs';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { INJECT_DEFAULTS } from '../../src/kubernetes/defaults.js';

// Without helm: the chart's values against its schema, every value a template reads exists in values.yaml,
// and the chart's injection defaults are the CLI's. The real helm renders the chart in
// test/integration/chart.test.ts and `make chart-lint` (test/chart/lint.mjs).
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
    expect(readdirSync(new URL('examples/', CHART)).length).toBeGreaterThan(0);
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

  it('the schema refuses bad injection and NetworkPolicy values', () => {
    const injection = values.injection as Record<string, unknown>;
    for (const bad of [
      { captureMode: 'ebpf' },
      { port: 0 },
      { adminPort: 70000 },
      { logLevel: 'verbose' },
      { drainDelaySeconds: -1 },
      { maxInFlight: 0 },
      { maxEventLoopDelayMs: -1 },
      { nativeSidecar: 'yes' },
      { extra: 1 },
    ]) {
      expect(validate({ ...values, injection: { ...injection, ...bad } }), JSON.stringify(bad)).toBe(false);
    }
    const { captureMode: _omitted, ...withoutMode } = injection;
    expect(validate({ ...values, injection: withoutMode })).toBe(false);
    expect(validate({ ...values, networkPolicy: { enabled: true, ports: [80, 80] } })).toBe(false);
    expect(validate({ ...values, networkPolicy: { enabled: true, namespace: 'Not_A_Namespace' } })).toBe(false);
    expect(validate({ ...values, networkPolicy: { enabled: true, podSelector: { matchLabels: { app: 1 } } } })).toBe(false);
    expect(validate({ ...values, metrics: { podMonitor: { labels: { release: true } } } })).toBe(false);
  });

  it("the chart's injection defaults are the CLI's (same sidecar from webhook, chart and `inject`)", () => {
    const { image: _image, imagePullPolicy: _pull, ...rest } = INJECT_DEFAULTS;
    expect(values.injection).toEqual(rest);
    const image = values.image as { repository: string; tag: string; pullPolicy: string };
    expect(`${image.repository}:${image.tag}`).toBe(INJECT_DEFAULTS.image);
    expect(image.pullPolicy).toBe(INJECT_DEFAULTS.imagePullPolicy);
  });

  it('every .Values path a template reads exists in values.yaml', () => {
    const missing: string[] = [];
    let valuesRead = 0;
    for (const f of readdirSync(new URL('templates/', CHART))) {
      for (const m of read(`templates/${f}`).matchAll(/\.Values((?:\.[A-Za-z][A-Za-z0-9]*)+)/g)) {
        valuesRead++;
        const path = m[1]!.slice(1).split('.');
        if (get(values, path) === undefined) missing.push(`${f}: .Values.${path.join('.')}`);
      }
    }
    expect(valuesRead).toBeGreaterThan(20); // the pattern finds the templates' .Values paths: there was something to check
    expect(missing).toEqual([]);
  });

  it('ships the rule file and dashboard the templates wrap', () => {
    expect(read('templates/prometheusrule.yaml')).toContain('rules/agents-chain.rules.yaml');
    expect(read('templates/grafana-dashboard.yaml')).toContain('dashboards/agents-chain-sidecar.json');
    expect(parse(read('rules/agents-chain.rules.yaml')).groups[0].rules.length).toBeGreaterThan(5);
  });
});
