import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestSidecar, type TestSidecar } from '../support/fixture.js';
import { call, invoice } from '../support/http.js';
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

interface Panel {
  title: string;
  targets?: { expr: string }[];
  panels?: Panel[];
}
interface Dashboard {
  panels: Panel[];
  templating: { list: { name: string; type: string; query?: { query: string } | string }[] };
}

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
  let env: TestSidecar;
  let text: string;
  beforeAll(async () => {
    // Per-agent series on, so the dashboard's "top denied agents" panel has its metric.
    env = await startTestSidecar({ metrics: { perAgent: { maxAgents: 10 } } });
    await call(env, { method: 'POST', path: '/invoices', token: await env.bot.signer.sign('createInvoice'), body: invoice() });
    await call(env, { method: 'POST', path: '/invoices', token: await env.bot.signer.sign('createInvoice'), body: invoice({ amount: 9999 }) });
    await call(env, { path: '/nowhere' });
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
    const panels = d.panels.filter((x) => (x as { type?: string }).type !== 'row');
    expect(panels.length).toBeGreaterThan(0);
    for (const p of panels) expect(p.targets?.length, p.title).toBeGreaterThan(0);
    const expressions = await dashboardExpressions();
    expect(expressions.length).toBeGreaterThanOrEqual(panels.length);
    for (const { title, expr } of expressions) expect(expr, title).toMatch(/namespace=~"\.\*", pod=~"\.\*"/);
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
      const alerts = doc.groups.flatMap((g) => g.rules);
      expect(alerts.length).toBeGreaterThan(0);
      for (const { alert } of alerts) expect(tested, alert).toContain(`alertname: ${alert}`);
      const r = promtool(['test', 'rules', RULE_TESTS]);
      expect(r.out).toContain('SUCCESS');
      expect(r.code).toBe(0);
    });

    it("a fresh sidecar's own two first scrapes, fed to promtool: AgentsChainApprovalsExpiring fires on the pod's first expiry", async () => {
      const { startApprovalEnv } = await import('../support/approvals.js');
      const { randomBytes } = await import('node:crypto');
      const { parseKeyring } = await import('../../src/audit/crypto.js');
      const { exporterFromSpec } = await import('../../src/audit/exporters.js');
      const dir = await mkdtemp(join(tmpdir(), 'agents-chain-fresh-pod-'));
      const env = await startApprovalEnv({
        ttl: '1s',
        audit: { keyring: parseKeyring(randomBytes(32).toString('base64')), exporters: [exporterFromSpec(`file:${join(dir, 'audit.jsonl')}`)] },
      });
      try {
        // The pod's first scrape, before anything happened: the counters the alerts read are there, at 0.
        const first = await scrape(env.sidecar.adminUrl);
        const zero = (key: string) => expect(first.samples.get(key), key).toBe(0);
        zero('agents_chain_access_requests_resolved_total{capability="send_sms",outcome="expired"}');
        zero('agents_chain_audit_entries_dropped_total{}');
        zero('agents_chain_denials_total{capability="send_sms",reason="constraint_violated"}');
        zero('agents_chain_replay_store_errors_total{}');
        zero('agents_chain_policy_reloads_total{result="failure"}');
        expect([...first.samples].filter(([k]) => /^agents_chain_audit_export_failures_total\{exporter="file-/.test(k))).toEqual([[expect.any(String), 0]]);
        const r = await call(env, {
          method: 'POST',
          path: '/agent/request-permission',
          token: await env.bot.signer.sign('request_permission'),
          headers: { prefer: 'respond-async' },
          body: { capability: 'send_sms', args: { to: '+1', body: 'x' }, reason: 'fresh pod' },
        });
        expect(r.status).toBe(202);
        const { until } = await import('../support/until.js');
        let second = first;
        await until(
          async () =>
            (second = await scrape(env.sidecar.adminUrl)).samples.get(
              'agents_chain_access_requests_resolved_total{capability="send_sms",outcome="expired"}',
            ) === 1,
        );
        // The two scrapes as Prometheus would store them a minute apart, with the labels discovery adds.
        const counters = new Set([...second.text.matchAll(/^# TYPE (agents_chain_\S+) counter$/gm)].map((m) => m[1]!));
        const input_series = [...second.samples]
          .filter(([k]) => counters.has(k.slice(0, k.indexOf('{'))))
          .map(([k, v]) => {
            const labels = k.slice(k.indexOf('{') + 1, -1);
            const before = first.samples.get(k);
            return { series: `${k.slice(0, k.indexOf('{'))}{${labels ? `${labels},` : ''}namespace="sms",pod="sms-0"}`, values: `${before ?? '_'} ${v}` };
          });
        const tests = {
          rule_files: [RULES],
          evaluation_interval: '1m',
          tests: [
            {
              interval: '1m',
              input_series,
              alert_rule_test: [
                {
                  eval_time: '1m',
                  alertname: 'AgentsChainApprovalsExpiring',
                  exp_alerts: [
                    {
                      exp_labels: { severity: 'info', namespace: 'sms', pod: 'sms-0', capability: 'send_sms' },
                      exp_annotations: {
                        summary: 'Access requests for send_sms expire unanswered',
                        description: '1 access requests expired in the last hour on sms/sms-0: nobody is answering the approval notifications.',
                      },
                    },
                  ],
                },
                { eval_time: '1m', alertname: 'AgentsChainAuditEntriesDropped', exp_alerts: [] },
                { eval_time: '1m', alertname: 'AgentsChainDenialRateSpike', exp_alerts: [] },
              ],
            },
          ],
        };
        const file = join(dir, 'fresh-pod.test.yaml');
        await writeFile(file, JSON.stringify(tests));
        const out = promtool(['test', 'rules', file]);
        expect(out.out).toContain('SUCCESS');
        expect(out.code).toBe(0);
      } finally {
        await env.close();
      }
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
