import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEnv, type Env } from '../support/fixture.js';
import { invoice, send } from '../support/http.js';
import { familyNames, scrape } from '../support/prom.js';

const CHART = new URL('../../charts/agents-chain-sidecar/', import.meta.url).pathname;
const RULES = join(CHART, 'rules/agents-chain.rules.yaml');
const RULE_TESTS = join(CHART, 'rules/agents-chain.rules.test.yaml');
const DASHBOARD = join(CHART, 'dashboards/agents-chain-sidecar.json');

// CI installs Debian's prometheus package and sets this, so a missing promtool fails there instead of skipping.
const requirePromtool = process.env.AGENTS_CHAIN_REQUIRE_PROMTOOL === '1';
const hasPromtool = spawnSync('promtool', ['--version']).status === 0;
if (!hasPromtool && !requirePromtool) console.warn('promtool not found: skipping the promtool checks (apt-get install prometheus)');

function promtool(args: string[], input?: string): { code: number; out: string } {
  const r = spawnSync('promtool', args, { input, encoding: 'utf8' });
  return { code: r.status ?? -1, out: `${r.stdout}${r.stderr}` };
}

interface Panel { title: string; targets?: { expr: string }[]; panels?: Panel[] }
interface Dashboard { panels: Panel[]; templating: { list: { name: string; type: string; query?: { query: string } | string }[] } }

/** Every PromQL expression of the dashboard, with Grafana's variables replaced by what Prometheus would see. */
async function dashboardExpressions(): Promise<{ title: string; expr: string }[]> {
  const d = JSON.parse(await readFile(DASHBOARD, 'utf8')) as Dashboard;
  const grafana = (e: string) => e.replace(/\$__(rate_interval|interval|range)/g, '5m').replace(/\$(namespace|pod|capability)\b/g, '.*');
  return d.panels.flatMap((p) => [p, ...(p.panels ?? [])]).flatMap((p) => (p.targets ?? []).map((t) => ({ title: p.title, expr: grafana(t.expr) })));
}

async function ruleExpressions(): Promise<string[]> {
  const doc = parseYaml(await readFile(RULES, 'utf8')) as { groups: { rules: { expr: string }[] }[] };
  return doc.groups.flatMap((g) => g.rules.map((r) => r.expr));
}

/** Metric names an expression reads (function names and label names are not followed by `{` or `[` in a selector position). */
function metricNames(expr: string): string[] {
  return [...new Set([...expr.matchAll(/\b(agents_chain_[a-z0-9_]+|process_[a-z0-9_]+|nodejs_[a-z0-9_]+)\b/g)].map((m) => m[1]!))];
}

/** A series name the scrape exposes: a family, or a histogram's _bucket/_sum/_count. */
function exported(families: Set<string>, name: string): boolean {
  if (families.has(name)) return true;
  const base = name.replace(/_(bucket|sum|count)$/, '');
  return base !== name && families.has(base);
}

describe('observability artefacts against a live sidecar', () => {
  let env: Env;
  let text: string;
  beforeAll(async () => {
    // Per-agent series on, so the dashboard's "top denied agents" panel has its metric.
    env = await startEnv({ metrics: { perAgent: { maxAgents: 10 } } });
    await send(env, { method: 'POST', path: '/invoices', token: await env.bot.signer.sign('createInvoice'), body: invoice() });
    await send(env, { method: 'POST', path: '/invoices', token: await env.bot.signer.sign('createInvoice'), body: invoice({ amount: 9999 }) });
    await send(env, { path: '/nowhere' });
    text = (await scrape(env.sidecar.adminUrl)).text;
  });
  afterAll(() => env.close());

  it('the dashboard and the alert rules name only metrics the sidecar exports', async () => {
    const families = familyNames(text);
    const used = [...(await dashboardExpressions()).map((e) => e.expr), ...(await ruleExpressions())].flatMap(metricNames);
    const d = JSON.parse(await readFile(DASHBOARD, 'utf8')) as Dashboard;
    for (const v of d.templating.list) if (v.type === 'query') used.push(...metricNames(typeof v.query === 'string' ? v.query : v.query!.query));
    expect(used.length).toBeGreaterThan(20);
    expect([...new Set(used)].filter((n) => !exported(families, n))).toEqual([]);
  });

  it('every dashboard panel has a query and the dashboard is templated on namespace, pod and capability', async () => {
    const d = JSON.parse(await readFile(DASHBOARD, 'utf8')) as Dashboard;
    expect(d.templating.list.map((v) => v.name)).toEqual(expect.arrayContaining(['namespace', 'pod', 'capability']));
    for (const p of d.panels.filter((x) => (x as { type?: string }).type !== 'row')) expect(p.targets?.length, p.title).toBeGreaterThan(0);
    for (const { title, expr } of await dashboardExpressions()) expect(expr, title).toMatch(/namespace=~"\.\*", pod=~"\.\*"/);
  });

  describe.skipIf(!hasPromtool && !requirePromtool)('promtool', () => {
    it('check metrics passes on a live scrape', () => {
      const r = promtool(['check', 'metrics'], text);
      expect(r.out).toBe('');
      expect(r.code).toBe(0);
    });

    it('check rules and test rules pass (a unit test for each alert)', async () => {
      expect(promtool(['check', 'rules', RULES])).toMatchObject({ code: 0 });
      const tested = await readFile(RULE_TESTS, 'utf8');
      const doc = parseYaml(await readFile(RULES, 'utf8')) as { groups: { rules: { alert: string }[] }[] };
      for (const { alert } of doc.groups.flatMap((g) => g.rules)) expect(tested, alert).toContain(`alertname: ${alert}`);
      const r = promtool(['test', 'rules', RULE_TESTS]);
      expect(r.out).toContain('SUCCESS');
      expect(r.code).toBe(0);
    });

    it('every PromQL expression of the dashboard parses', async () => {
      const exprs = await dashboardExpressions();
      const dir = await mkdtemp(join(tmpdir(), 'agents-chain-dashboard-'));
      // promtool has no "parse this expression" command; recording rules are parsed by check rules.
      const rules = { groups: [{ name: 'dashboard', rules: exprs.map((e, i) => ({ record: `dashboard:expr_${i}`, expr: e.expr })) }] };
      const file = join(dir, 'dashboard.rules.yaml');
      await writeFile(file, JSON.stringify(rules));
      const r = promtool(['check', 'rules', file]);
      expect(r.out).toContain(`SUCCESS: ${exprs.length} rules found`);
      expect(r.code).toBe(0);
    });
  });
});

