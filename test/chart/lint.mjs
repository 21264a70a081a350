#!/usr/bin/env node
// `make chart-lint`: the chart checked by the real helm (make k8s-tools), the way a user meets it.
//   - helm lint --strict and helm template for the default values, every file in examples/, and each
//     boolean in values.yaml set to true and to false (found by walking values.yaml, so a new toggle is
//     covered without touching this file);
//   - every rendered object validated against the Kubernetes OpenAPI schemas (kubernetes-models) or the
//     CRD schemas it uses (@kubernetes-models/prometheus-operator, @kubernetes-models/cert-manager); an
//     object of a kind without a known schema is a problem, so is an alpha/beta built-in API;
//   - unknown fields too (a typo such as "livenesProbe" passes those schemas, which allow extra keys, and
//     the API server drops or refuses it): each object is type-checked by TypeScript against the same
//     packages' interfaces, whose excess-property check names the field;
//   - NOTES.txt rendered for every case too (helm template skips it; a broken NOTES only shows at install);
//   - the "agents-chain-sidecar.container" named template rendered into a Deployment and validated;
//   - the chart as a subchart of another chart.
// Exits 1 naming the case (values file or toggle), the object (kind/name, template) and the error.
// Usage: node test/chart/lint.mjs [CHART_DIR]   (default charts/agents-chain-sidecar)
// Env: AGENTS_CHAIN_HELM (default .cache/k8s/helm/helm).
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { parse, parseAllDocuments, stringify } from 'yaml';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CHART = join(ROOT, 'charts/agents-chain-sidecar');
const HELM = process.env.AGENTS_CHAIN_HELM || join(ROOT, '.cache/k8s/helm/helm');
// The oldest Kubernetes the chart supports (Chart.yaml kubeVersion) gets its own rendering pass.
const MIN_KUBE = '1.27.0';

// What a toggle needs besides itself to render: turning it on (or off) alone would rightly fail. A new
// toggle that cannot render alone fails the lint until its companions are listed here.
const CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n'; // only its shape is checked at render
const COMPANIONS = {
  'webhook.tls.certManager.enabled=false': {
    webhook: { tls: { existingSecret: 'agents-chain-webhook-tls', caBundle: Buffer.from(CA_PEM).toString('base64') } },
  },
  'networkPolicy.enabled=true': { networkPolicy: { podSelector: { matchLabels: { app: 'billing' } } } },
  'policy.create=true': {
    policy: {
      content: [
        'version: 1',
        'provider: { name: billing-service, issuer: https://billing.example.com }',
        'capabilities:',
        '  - { name: getInvoice, method: GET, path: "/invoices/{id}" }',
        '',
      ].join('\n'),
    },
  },
};

// The named template rendered the way the comment in _helpers.tpl shows, inside a Deployment.
const EMBED = `apiVersion: apps/v1
kind: Deployment
metadata: { name: lint-embedded-sidecar, namespace: {{ .Release.Namespace }} }
spec:
  selector: { matchLabels: { app: lint-embedded } }
  template:
    metadata: { labels: { app: lint-embedded } }
    spec:
      containers:
        - { name: app, image: "example/app:1.0", ports: [{ name: http, containerPort: 3000 }] }
        {{- include "agents-chain-sidecar.container" (dict "image" "ghcr.io/agents-chain/sidecar:0.1.0" "upstreamPort" 3000 "adminTokenSecret" "billing-admin" "approvals" true "logLevel" "debug") | nindent 8 }}
      volumes:
        {{- include "agents-chain-sidecar.volumes" (dict "policyConfigMap" "billing-policy") | nindent 8 }}
`;
const NOTES_DEFINE = (notes) => `{{- define "lint.notes" -}}\n${notes}\n{{- end -}}\n`;
const NOTES_DOC = 'lintNotes: {{ include "lint.notes" . | toJson }}\n';
const EXTRA_SOURCES = new Set(['agents-chain-sidecar/templates/zz-lint-notes.yaml', 'lint-parent/charts/agents-chain-sidecar/templates/zz-lint-notes.yaml']);

/** Every boolean leaf of values.yaml, as dotted paths. */
export function booleanToggles(values, prefix = []) {
  const out = [];
  for (const [k, v] of Object.entries(values ?? {})) {
    if (typeof v === 'boolean') out.push([...prefix, k].join('.'));
    else if (v && typeof v === 'object' && !Array.isArray(v)) out.push(...booleanToggles(v, [...prefix, k]));
  }
  return out;
}

function merge(a, b) {
  if (!b || typeof b !== 'object' || Array.isArray(b)) return b;
  const out = { ...(a && typeof a === 'object' && !Array.isArray(a) ? a : {}) };
  for (const [k, v] of Object.entries(b)) out[k] = merge(out[k], v);
  return out;
}

function setPath(path, value) {
  return path.split('.').reduceRight((acc, k) => ({ [k]: acc }), value);
}

/** The lint cases: [name, values object or file, extra helm args]. */
export function lintCases(chartDir = CHART) {
  const values = parse(readFileSync(join(chartDir, 'values.yaml'), 'utf8'));
  const cases = [
    { name: 'default values', args: [] },
    { name: `default values, Kubernetes ${MIN_KUBE}`, args: ['--kube-version', MIN_KUBE] },
    { name: 'as a subchart (a dependency of another chart)', parent: true, args: [] },
  ];
  for (const f of readdirSync(join(chartDir, 'examples'))
    .filter((f) => /\.ya?ml$/.test(f))
    .sort()) {
    cases.push({ name: `examples/${f}`, file: join(chartDir, 'examples', f), args: [] });
  }
  for (const path of booleanToggles(values)) {
    for (const on of [true, false]) {
      const key = `${path}=${on}`;
      cases.push({ name: `toggle ${key}`, values: merge(COMPANIONS[key] ?? {}, setPath(path, on)), args: [] });
    }
  }
  return cases;
}

let registry;
async function models() {
  if (registry) return registry;
  registry = new Map();
  const seen = new Set();
  const walk = (ns) => {
    if (seen.has(ns)) return;
    seen.add(ns);
    for (const v of Object.values(ns)) {
      if (typeof v === 'function' && typeof v.apiVersion === 'string' && typeof v.kind === 'string') registry.set(`${v.apiVersion} ${v.kind}`, v);
      else if (v && typeof v === 'object') walk(v);
    }
  };
  for (const m of await Promise.all([import('kubernetes-models'), import('@kubernetes-models/prometheus-operator'), import('@kubernetes-models/cert-manager')]))
    walk(m);
  return registry;
}

// Built-in groups are "core" (no dot) or *.k8s.io; their alpha/beta versions are off by default or
// removed in the Kubernetes versions the chart supports, even where a schema still exists.
const isBuiltinPreGA = (apiVersion) => {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  return (!group.includes('.') || group.endsWith('.k8s.io')) && /(alpha|beta)/.test(version);
};

/** Validates rendered manifests; returns problems (strings) and the parsed objects. */
export async function validateManifests(text) {
  const reg = await models();
  const problems = [];
  const objects = [];
  let notes;
  const seen = new Set();
  // helm prefixes each document with "# Source: <chart>/templates/<file>".
  const chunks = text.split(/^---\s*$/m);
  for (const chunk of chunks) {
    const source = /^# Source: (.+)$/m.exec(chunk)?.[1]?.trim() ?? '?';
    for (const doc of parseAllDocuments(chunk, { version: '1.1' })) {
      if (doc.errors.length) {
        problems.push(`${source}: not YAML: ${doc.errors[0].message}`);
        continue;
      }
      const obj = doc.toJSON();
      if (obj === null || obj === undefined) continue;
      if (EXTRA_SOURCES.has(source)) {
        notes = obj.lintNotes;
        continue;
      }
      const id = `${obj?.kind ?? '?'}/${obj?.metadata?.name ?? '?'} (${source})`;
      if (typeof obj !== 'object' || typeof obj.apiVersion !== 'string' || typeof obj.kind !== 'string') {
        problems.push(`${id}: not a Kubernetes object (apiVersion and kind required)`);
        continue;
      }
      if (!obj.metadata?.name) problems.push(`${id}: metadata.name is missing`);
      const key = `${obj.apiVersion} ${obj.kind} ${obj.metadata?.namespace ?? ''} ${obj.metadata?.name}`;
      if (seen.has(key)) problems.push(`${id}: rendered twice`);
      seen.add(key);
      if (isBuiltinPreGA(obj.apiVersion)) problems.push(`${id}: ${obj.apiVersion} is not a GA API (the chart supports Kubernetes >= ${MIN_KUBE})`);
      const Model = reg.get(`${obj.apiVersion} ${obj.kind}`);
      if (!Model) {
        problems.push(`${id}: no schema known for apiVersion ${obj.apiVersion} kind ${obj.kind}`);
        continue;
      }
      try {
        new Model(obj).validate();
      } catch (e) {
        problems.push(`${id}: ${obj.apiVersion} ${obj.kind} schema: ${String(e?.message ?? e).replace(/\s+/g, ' ')}`);
      }
      objects.push({ id, obj });
    }
  }
  return { problems, objects, notes };
}

// The package holding each API group's models (the typed interfaces live next to the model classes).
const PACKAGE_OF_GROUP = { 'monitoring.coreos.com': '@kubernetes-models/prometheus-operator', 'cert-manager.io': '@kubernetes-models/cert-manager' };
function modelModule(apiVersion, kind) {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const pkg = PACKAGE_OF_GROUP[group] ?? 'kubernetes-models';
  return `${pkg}/${group ? `${group}/` : ''}${version}/${kind}`;
}

/**
 * Unknown (and mistyped) fields: every distinct object becomes `const oN: I<Kind> = <object>` in one
 * in-memory TypeScript file; a diagnostic inside oN names the field and the type it is not part of.
 * `entries` is [{ where: string[] (cases), id, obj }]; returns problems.
 */
export function checkFields(entries) {
  const file = join(ROOT, 'test/chart/__rendered_objects__.ts'); // never written: served by the host below
  const lines = [];
  const spans = [];
  entries.forEach((e, n) => {
    lines.push(`import type { I${e.obj.kind} as T${n} } from ${JSON.stringify(modelModule(e.obj.apiVersion, e.obj.kind))};`);
  });
  let text = lines.join('\n') + '\n';
  entries.forEach((e, n) => {
    const decl = `export const o${n}: T${n} = ${JSON.stringify(e.obj, null, 1)};\n`;
    spans.push([text.length, text.length + decl.length]);
    text += decl;
  });
  const options = {
    noEmit: true,
    strict: true,
    skipLibCheck: true,
    types: [],
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
  };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.getSourceFile = (f, lang, ...rest) => (f === file ? ts.createSourceFile(f, text, lang) : getSourceFile.call(host, f, lang, ...rest));
  host.fileExists = (f) => f === file || fileExists.call(host, f);
  host.readFile = (f) => (f === file ? text : readFile.call(host, f));
  const program = ts.createProgram([file], options, host);
  const problems = [];
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const message = ts.flattenDiagnosticMessageText(d.messageText, ' ');
    const n = d.file?.fileName === file ? spans.findIndex(([a, b]) => d.start >= a && d.start < b) : -1;
    if (n < 0) {
      problems.push(`field check: ${message}`);
      continue;
    }
    const e = entries[n];
    const path = d.file ? jsonPathAt(d.file, d.start) : '';
    const where = e.where.length > 3 ? `${e.where.slice(0, 3).join(', ')} and ${e.where.length - 3} more` : e.where.join(', ');
    problems.push(`[${where}] ${e.id}: field check${path ? ` at ${path}` : ''}: ${message}`);
  }
  return problems;
}

/** The object path (spec.template.spec.containers[0].image) of the literal at `pos` in a generated file. */
function jsonPathAt(sf, pos) {
  let node = sf;
  for (;;) {
    const child = node.getChildren(sf).find((c) => c.getStart(sf) <= pos && pos < c.getEnd());
    if (!child) break;
    node = child;
  }
  const parts = [];
  for (let n = node; n && !ts.isVariableDeclaration(n); n = n.parent) {
    if (ts.isPropertyAssignment(n)) parts.unshift(`.${n.name.getText(sf).replace(/^"|"$/g, '')}`);
    else if (n.parent && ts.isArrayLiteralExpression(n.parent)) parts.unshift(`[${n.parent.elements.indexOf(n)}]`);
  }
  return parts.join('').replace(/^\./, '');
}

function helm(args) {
  try {
    return { ok: true, out: execFileSync(HELM, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 }) };
  } catch (e) {
    return { ok: false, out: `${e.stdout ?? ''}${e.stderr ?? ''}`.trim() || String(e) };
  }
}

/** A copy of the chart with the lint-only templates (NOTES as a document, the embedded container). */
function lintCopy(chartDir) {
  const dir = mkdtempSync(join(tmpdir(), 'agents-chain-chart-lint-'));
  const copy = join(dir, 'agents-chain-sidecar');
  cpSync(chartDir, copy, { recursive: true });
  writeFileSync(join(copy, 'templates/_zz-lint-notes.tpl'), NOTES_DEFINE(readFileSync(join(chartDir, 'templates/NOTES.txt'), 'utf8')));
  writeFileSync(join(copy, 'templates/zz-lint-notes.yaml'), NOTES_DOC);
  writeFileSync(join(copy, 'templates/zz-lint-embed.yaml'), EMBED);
  // The chart as a dependency of an application chart (helm then hands it `global` values, for one).
  const parent = join(dir, 'parent');
  cpSync(copy, join(parent, 'charts/agents-chain-sidecar'), { recursive: true });
  writeFileSync(
    join(parent, 'Chart.yaml'),
    'apiVersion: v2\nname: lint-parent\nversion: 1.0.0\ndependencies:\n  - { name: agents-chain-sidecar, version: 0.1.0 }\n',
  );
  writeFileSync(join(parent, 'values.yaml'), 'global: { imageRegistry: registry.example.com }\n');
  return { dir, copy, parent };
}

export async function lintChart({ chartDir = CHART, log = (s) => process.stdout.write(`${s}\n`) } = {}) {
  if (!existsSync(HELM)) throw new Error(`helm not found at ${HELM}: run make k8s-tools, or set AGENTS_CHAIN_HELM`);
  const problems = [];
  const { dir, copy, parent } = lintCopy(chartDir);
  const distinct = new Map(); // the object's JSON -> { where, id, obj }, for the field check
  try {
    for (const c of lintCases(chartDir)) {
      const args = [...c.args];
      if (c.file) args.push('-f', c.file);
      if (c.values) {
        const f = join(dir, `values-${c.name.replace(/[^A-Za-z0-9.=-]+/g, '_')}.yaml`);
        writeFileSync(f, stringify(c.values));
        args.push('-f', f);
      }
      const lint = helm(['lint', '--strict', c.parent ? parent : chartDir, ...args]);
      if (!lint.ok) problems.push(`[${c.name}] helm lint --strict: ${lint.out}`);
      const tpl = helm(['template', 'lint', c.parent ? parent : copy, '--namespace', 'agents-chain', ...args]);
      if (!tpl.ok) {
        problems.push(`[${c.name}] helm template: ${tpl.out}`);
        continue;
      }
      const r = await validateManifests(tpl.out);
      for (const p of r.problems) problems.push(`[${c.name}] ${p}`);
      if (!r.notes || !r.notes.includes('agents-chain-sidecar')) problems.push(`[${c.name}] NOTES.txt rendered empty`);
      for (const { id, obj } of r.objects) {
        const key = JSON.stringify(obj);
        if (!distinct.has(key)) distinct.set(key, { where: [], id, obj });
        distinct.get(key).where.push(c.name);
      }
      log(
        `${r.problems.length || !lint.ok ? 'FAIL' : 'ok  '} ${c.name}: ${r.objects.length} objects (${[...new Set(r.objects.map((o) => o.obj.kind))].join(', ')})`,
      );
    }
    const fieldProblems = checkFields([...distinct.values()]);
    problems.push(...fieldProblems);
    log(`${fieldProblems.length ? 'FAIL' : 'ok  '} field check: ${distinct.size} distinct objects`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return problems;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const chartDir = process.argv[2] ? resolve(process.argv[2]) : CHART;
  const problems = await lintChart({ chartDir }).catch((e) => [String(e?.message ?? e)]);
  if (problems.length) {
    process.stderr.write(`chart-lint: ${problems.length} problem(s):\n${problems.map((p) => `  - ${p}`).join('\n')}\n`);
    process.exit(1);
  }
  process.stdout.write('chart-lint: ok\n');
}
