import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { parseInjectDefaults } from '../../src/kubernetes/defaults.js';
import { helmOrFail, runHelm, skipWithoutHelm } from '../support/helm.js';

// The chart rendered by the real helm (make k8s-tools), checked the way a cluster operator would read it.
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CHART = join(ROOT, 'charts/agents-chain-sidecar');
const LINT = join(ROOT, 'test/chart/lint.mjs');
const CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIBtest\n-----END CERTIFICATE-----\n';

interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  // Rendered objects: the tests read them field by field, as a reviewer would.
  spec?: any;
  data?: Record<string, string>;
  webhooks?: any[];
}
interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }[];
}

/** Kubernetes label-selector semantics (an empty selector selects everything). */
function selects(sel: LabelSelector, labels: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const ok = {
      In: has && (e.values ?? []).includes(labels[e.key]!),
      NotIn: !has || !(e.values ?? []).includes(labels[e.key]!),
      Exists: has,
      DoesNotExist: !has,
    }[e.operator];
    if (!ok) return false;
  }
  return true;
}

let work: string;
let n = 0;

/** helm template of the chart with `values` (a values file, like a user's -f), in namespace agents-chain. */
function render(values: Record<string, unknown> = {}, args: string[] = []): { code: number; stderr: string; objects: K8sObject[] } {
  const file = join(work, `values-${n++}.yaml`);
  writeFileSync(file, stringify(values));
  const r = runHelm(['template', 'ac', CHART, '--namespace', 'agents-chain', '-f', file, ...args]);
  const objects =
    r.code === 0
      ? parseAllDocuments(r.stdout)
          .map((d) => d.toJSON() as K8sObject)
          .filter(Boolean)
      : [];
  return { code: r.code, stderr: r.stderr, objects };
}

function find(objects: K8sObject[], kind: string, name?: string): K8sObject[] {
  return objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
}

function webhookDeployment(objects: K8sObject[]): K8sObject {
  const [d] = find(objects, 'Deployment', 'ac-agents-chain-sidecar-webhook');
  expect(d, 'the webhook Deployment').toBeDefined();
  return d!;
}

describe.skipIf(skipWithoutHelm('the Helm chart tests (test/integration/chart.test.ts)'))('Helm chart, rendered by the real helm', () => {
  beforeAll(() => {
    helmOrFail();
    work = mkdtempSync(join(tmpdir(), 'agents-chain-chart-test-'));
  });
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  describe('make chart-lint (test/chart/lint.mjs)', () => {
    const lint = (chartDir?: string) =>
      spawnSync(process.execPath, [LINT, ...(chartDir ? [chartDir] : [])], {
        encoding: 'utf8',
        env: { ...process.env, AGENTS_CHAIN_HELM: helmOrFail() },
        maxBuffer: 64 << 20,
      });

    it('passes on the chart: lint --strict and a validated render for the defaults, every example and each toggle on and off', () => {
      const r = lint();
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      expect(r.stdout).toContain('chart-lint: ok');
      expect(r.stdout).toMatch(/^ok {3}default values:/m);
      expect(r.stdout).toMatch(/^ok {3}default values, Kubernetes 1\.27\.0:/m);
      expect(r.stdout).toMatch(/^ok {3}as a subchart/m);
      for (const f of readdirSync(join(CHART, 'examples'))) expect(r.stdout).toMatch(new RegExp(`^ok {3}examples/${f.replace('.', '\\.')}:`, 'm'));
      // Every boolean in values.yaml, found here independently of the script.
      const toggles: string[] = [];
      const walk = (o: Record<string, unknown>, p: string[]) => {
        for (const [k, v] of Object.entries(o)) {
          if (typeof v === 'boolean') toggles.push([...p, k].join('.'));
          else if (v && typeof v === 'object' && !Array.isArray(v)) walk(v as Record<string, unknown>, [...p, k]);
        }
      };
      walk(parse(readFileSync(join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>, []);
      expect(toggles).toEqual(
        expect.arrayContaining(['webhook.enabled', 'webhook.tls.certManager.enabled', 'networkPolicy.enabled', 'injection.nativeSidecar']),
      );
      for (const t of toggles) for (const v of [true, false]) expect(r.stdout).toMatch(new RegExp(`^ok {3}toggle ${t.replace(/\./g, '\\.')}=${v}:`, 'm'));
      expect(r.stdout).toMatch(/^ok {3}field check: \d+ distinct objects/m);
    }, 120_000);

    it('fails on a broken chart, naming the case, the object and the schema error', () => {
      const copy = join(work, 'broken/agents-chain-sidecar');
      cpSync(CHART, copy, { recursive: true });
      const webhook = join(copy, 'templates/webhook.yaml');
      const text = readFileSync(webhook, 'utf8');
      // A mistyped field (the OpenAPI schemas allow extra keys; the field check does not), a wrong type,
      // and an object nobody has a schema for.
      const broken = text
        .replace('livenessProbe: { httpGet: { path: /healthz', 'livenesProbe: { httpGet: { path: /healthz')
        .replace('timeoutSeconds: 5', 'timeoutSeconds: "5"');
      expect(broken).not.toBe(text);
      writeFileSync(webhook, broken);
      writeFileSync(join(copy, 'templates/widget.yaml'), 'apiVersion: example.com/v1\nkind: Widget\nmetadata: { name: gadget }\n');
      const r = lint(copy);
      expect(r.status).toBe(1);
      expect(r.stderr).toMatch(
        /\[default values\] Widget\/gadget \(agents-chain-sidecar\/templates\/widget\.yaml\): no schema known for apiVersion example\.com\/v1 kind Widget/,
      );
      expect(r.stderr).toMatch(
        /\[default values\] MutatingWebhookConfiguration\/lint-agents-chain-sidecar-webhook .*webhooks\/0\/timeoutSeconds must be integer/,
      );
      expect(r.stderr).toMatch(
        /Deployment\/lint-agents-chain-sidecar-webhook .*field check at spec\.template\.spec\.containers\[0\]\.livenesProbe: .*does not exist in type 'IContainer'/,
      );
    }, 120_000);
  });

  describe('TLS material', () => {
    it('default values: cert-manager issues the certificate and injects the CA', () => {
      const { code, objects } = render();
      expect(code).toBe(0);
      expect(find(objects, 'Certificate')).toHaveLength(1);
      expect(find(objects, 'MutatingWebhookConfiguration')[0]!.metadata.annotations).toEqual({
        'cert-manager.io/inject-ca-from': 'agents-chain/ac-agents-chain-sidecar-webhook',
      });
    });

    it('render fails with a clear message when there is none or half of it', () => {
      const noCertManager = { webhook: { tls: { certManager: { enabled: false } } } };
      let r = render(noCertManager);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain('webhook.tls: no TLS material for the webhook');
      expect(r.stderr).toContain('webhook.tls.existingSecret');

      r = render({ webhook: { tls: { certManager: { enabled: false }, existingSecret: 'my-tls' } } });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain('webhook.tls: existingSecret "my-tls" is set but caBundle is empty');

      r = render({
        webhook: { tls: { certManager: { enabled: false }, existingSecret: 'my-tls', caBundle: Buffer.from('not a certificate').toString('base64') } },
      });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain('caBundle must be the base64 of a PEM certificate');

      r = render({ webhook: { tls: { existingSecret: 'my-tls' } } });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain('cert-manager would overwrite that Secret');
    });

    it('an existing Secret and its CA: mounted, and the CA bundle is in the webhook configuration', () => {
      const caBundle = Buffer.from(CA_PEM).toString('base64');
      const { code, objects } = render({ webhook: { tls: { certManager: { enabled: false }, existingSecret: 'my-tls', caBundle } } });
      expect(code).toBe(0);
      expect(find(objects, 'Certificate')).toHaveLength(0);
      expect(find(objects, 'MutatingWebhookConfiguration')[0]!.webhooks![0].clientConfig.caBundle).toBe(caBundle);
      expect(webhookDeployment(objects).spec.template.spec.volumes).toContainEqual({ name: 'tls', secret: { secretName: 'my-tls' } });
    });

    it('with the webhook disabled, no TLS is needed', () => {
      const { code, objects } = render({ webhook: { enabled: false, tls: { certManager: { enabled: false } } } });
      expect(code).toBe(0);
      expect(find(objects, 'MutatingWebhookConfiguration')).toHaveLength(0);
    });
  });

  describe('NetworkPolicy', () => {
    const app = { app: 'billing', 'app.kubernetes.io/name': 'billing' };

    it('lives in the app namespace, selects the app pods and never the webhook pods, and opens only the sidecar ports', () => {
      const { code, objects } = render({ networkPolicy: { enabled: true, namespace: 'billing', podSelector: { matchLabels: { app: 'billing' } } } });
      expect(code).toBe(0);
      const [np, ...more] = find(objects, 'NetworkPolicy');
      expect(more).toHaveLength(0);
      expect(np!.metadata.namespace).toBe('billing');
      const sel = np!.spec.podSelector as LabelSelector;
      expect(selects(sel, app)).toBe(true);
      expect(selects(sel, { app: 'shipping' })).toBe(false);
      // The webhook's own pod template, as rendered, and a webhook pod that also carries the app's labels.
      const webhookPod = webhookDeployment(objects).spec.template.metadata.labels as Record<string, string>;
      expect(selects(sel, webhookPod)).toBe(false);
      expect(selects(sel, { ...webhookPod, ...app })).toBe(false);
      expect(np!.spec.policyTypes).toEqual(['Ingress']);
      // A rule without ports would open every port: each rule names ports, and together only the sidecar's.
      const rules = np!.spec.ingress as { ports?: { port: number; protocol: string }[] }[];
      expect(rules.every((r) => (r.ports?.length ?? 0) > 0)).toBe(true);
      expect(rules.flatMap((r) => r.ports!).sort((a, b) => a.port - b.port)).toEqual([
        { port: 17480, protocol: 'TCP' },
        { port: 17490, protocol: 'TCP' },
      ]);
    });

    it('defaults to the release namespace, keeps the user matchExpressions, and follows the injection ports', () => {
      const { code, objects } = render({
        injection: { port: 18480, adminPort: 18490 },
        networkPolicy: { enabled: true, podSelector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['billing'] }] } },
      });
      expect(code).toBe(0);
      const [np] = find(objects, 'NetworkPolicy');
      expect(np!.metadata.namespace).toBe('agents-chain');
      expect(selects(np!.spec.podSelector, app)).toBe(true);
      expect(selects(np!.spec.podSelector, { app: 'billing', 'app.kubernetes.io/component': 'webhook' })).toBe(false);
      expect(np!.spec.ingress.flatMap((r: { ports: { port: number }[] }) => r.ports.map((p) => p.port))).toEqual([18480, 18490]);
    });

    it('refuses an empty podSelector (it would select every pod of the namespace)', () => {
      for (const podSelector of [{}, { matchLabels: {} }]) {
        const r = render({ networkPolicy: { enabled: true, podSelector } });
        expect(r.code).not.toBe(0);
        expect(r.stderr).toContain("networkPolicy.podSelector must select the app's pods");
      }
    });
  });

  describe('webhook availability', () => {
    it('failurePolicy Fail with 2 replicas: a PodDisruptionBudget (minAvailable 1) and preferred anti-affinity by hostname', () => {
      const { code, objects } = render({ webhook: { failurePolicy: 'Fail', replicas: 2 } });
      expect(code).toBe(0);
      const pod = webhookDeployment(objects).spec.template;
      const [pdb, ...more] = find(objects, 'PodDisruptionBudget');
      expect(more).toHaveLength(0);
      expect(pdb!.apiVersion).toBe('policy/v1');
      expect(pdb!.spec.minAvailable).toBe(1);
      expect(selects(pdb!.spec.selector, pod.metadata.labels)).toBe(true);
      const terms = pod.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution;
      expect(pod.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution).toBeUndefined();
      expect(terms).toHaveLength(1);
      expect(terms[0].podAffinityTerm.topologyKey).toBe('kubernetes.io/hostname');
      expect(selects(terms[0].podAffinityTerm.labelSelector, pod.metadata.labels)).toBe(true);
    });

    it('no PodDisruptionBudget with failurePolicy Ignore, or with one replica (it would block every node drain)', () => {
      for (const webhook of [
        { failurePolicy: 'Ignore', replicas: 2 },
        { failurePolicy: 'Fail', replicas: 1 },
      ]) {
        const { code, objects } = render({ webhook });
        expect(code).toBe(0);
        expect(find(objects, 'PodDisruptionBudget'), JSON.stringify(webhook)).toHaveLength(0);
        expect(webhookDeployment(objects).spec.template.spec.affinity, JSON.stringify(webhook)).toBeUndefined();
      }
    });
  });

  describe('injection defaults', () => {
    const injection = {
      captureMode: 'port',
      nativeSidecar: true,
      port: 18480,
      adminPort: 18490,
      logLevel: 'debug',
      drainDelaySeconds: 9,
      maxInFlight: 256,
      maxEventLoopDelayMs: 5,
      resources: { requests: { cpu: '100m', memory: '96Mi' }, limits: { memory: '384Mi' } },
    };
    const image = { repository: 'registry.example.com/agents-chain', tag: '0.1.0', digest: `sha256:${'a'.repeat(64)}`, pullPolicy: 'Always' };

    it('the ConfigMap <fullname>-injection holds the values, as the webhook and `inject --defaults` read them', () => {
      const { code, objects } = render({ image, injection });
      expect(code).toBe(0);
      const [cm] = find(objects, 'ConfigMap', 'ac-agents-chain-sidecar-injection');
      expect(cm!.metadata.namespace).toBe('agents-chain');
      expect(Object.keys(cm!.data!)).toEqual(['defaults.yaml']);
      expect(parseInjectDefaults(cm!.data!['defaults.yaml']!, 'defaults.yaml')).toEqual({
        image: `registry.example.com/agents-chain@sha256:${'a'.repeat(64)}`,
        imagePullPolicy: 'Always',
        ...injection,
      });
    });

    it('the default values give the shared defaults (ports 17480/17490, iptables)', () => {
      const { objects } = render();
      const d = parseInjectDefaults(find(objects, 'ConfigMap', 'ac-agents-chain-sidecar-injection')[0]!.data!['defaults.yaml']!, 'defaults.yaml');
      expect(d).toMatchObject({
        image: 'ghcr.io/agents-chain/sidecar:0.1.0',
        captureMode: 'iptables',
        nativeSidecar: false,
        port: 17480,
        adminPort: 17490,
        logLevel: 'info',
        drainDelaySeconds: 5,
      });
    });

    it('the webhook mounts it and reads it with --defaults; a change of the defaults rolls the webhook', () => {
      const a = webhookDeployment(render().objects).spec.template;
      const [container] = a.spec.containers;
      expect(container.args).toContain('--defaults=/etc/agents-chain-injection/defaults.yaml');
      expect(container.args.filter((x: string) => /^--(image|native-sidecar)/.test(x))).toEqual([]);
      expect(container.volumeMounts).toContainEqual({ name: 'injection-defaults', mountPath: '/etc/agents-chain-injection', readOnly: true });
      expect(a.spec.volumes).toContainEqual({ name: 'injection-defaults', configMap: { name: 'ac-agents-chain-sidecar-injection' } });
      const checksum = (t: { metadata: { annotations: Record<string, string> } }) => t.metadata.annotations['checksum/injection-defaults'];
      expect(checksum(a)).toMatch(/^[0-9a-f]{64}$/);
      expect(checksum(webhookDeployment(render({ metrics: { dashboard: { enabled: false } } }).objects).spec.template)).toBe(checksum(a));
      expect(checksum(webhookDeployment(render({ injection: { logLevel: 'debug' } }).objects).spec.template)).not.toBe(checksum(a));
    });

    it('native sidecars by default need Kubernetes 1.29', () => {
      const r = render({ injection: { nativeSidecar: true } }, ['--kube-version', '1.28.5']);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain('injection.nativeSidecar needs Kubernetes >= 1.29');
      expect(render({ injection: { nativeSidecar: true } }, ['--kube-version', '1.29.0']).code).toBe(0);
    });
  });

  describe('the "agents-chain-sidecar.container" named template, in a chart that embeds it', () => {
    /** A parent chart with this chart as a subchart, whose Deployment includes the template with `params`. */
    function embed(params: string): { code: number; stderr: string; container?: any; volumes?: any } {
      const parent = join(work, `embed-${n++}`);
      cpSync(CHART, join(parent, 'charts/agents-chain-sidecar'), { recursive: true });
      writeFileSync(
        join(parent, 'Chart.yaml'),
        'apiVersion: v2\nname: billing\nversion: 1.0.0\ndependencies:\n  - { name: agents-chain-sidecar, version: 0.1.0 }\n',
      );
      writeFileSync(join(parent, 'values.yaml'), 'agents-chain-sidecar:\n  webhook: { enabled: false }\n');
      mkdirSync(join(parent, 'templates'));
      writeFileSync(
        join(parent, 'templates/deployment.yaml'),
        [
          'apiVersion: apps/v1',
          'kind: Deployment',
          'metadata: { name: billing }',
          'spec:',
          '  selector: { matchLabels: { app: billing } }',
          '  template:',
          '    metadata: { labels: { app: billing } }',
          '    spec:',
          '      containers:',
          '        - { name: app, image: "example/billing:1.0" }',
          `        {{- include "agents-chain-sidecar.container" (dict ${params}) | nindent 8 }}`,
          '      volumes:',
          '        {{- include "agents-chain-sidecar.volumes" (dict "policyConfigMap" "billing-policy") | nindent 8 }}',
          '',
        ].join('\n'),
      );
      const r = runHelm(['template', 'billing', parent, '--show-only', 'templates/deployment.yaml']);
      if (r.code !== 0) return { code: r.code, stderr: r.stderr };
      const d = parse(r.stdout) as K8sObject;
      return { code: 0, stderr: r.stderr, container: d.spec.template.spec.containers[1], volumes: d.spec.template.spec.volumes };
    }

    it('listens on 17480/17490 by default and forwards to the app on 127.0.0.1:<upstreamPort>', () => {
      const r = embed('"image" "ghcr.io/agents-chain/sidecar:0.1.0" "upstreamPort" 3000 "logLevel" "debug"');
      expect(r.stderr).toBe('');
      expect(r.container.args).toEqual([
        'serve',
        '--policy',
        '/etc/agents-chain/policy.yaml',
        '--upstream',
        'http://127.0.0.1:3000',
        '--listen',
        '[::]:17480',
        '--admin',
        '[::]:17490',
      ]);
      expect(r.container.ports).toEqual([
        { name: 'agents-chain', containerPort: 17480, protocol: 'TCP' },
        { name: 'ac-admin', containerPort: 17490, protocol: 'TCP' },
      ]);
      expect(r.container.env).toEqual([{ name: 'AGENTS_CHAIN_LOG_LEVEL', value: 'debug' }]);
      for (const p of ['readinessProbe', 'livenessProbe', 'startupProbe']) expect(r.container[p].httpGet.port, p).toBe(17490);
      expect(r.volumes.map((v: { name: string }) => v.name)).toEqual(['agents-chain-policy', 'agents-chain-spool', 'agents-chain-tmp']);
    });

    it('refuses what would not work: no upstreamPort, a port clash, approvals without an admin token', () => {
      let r = embed('"image" "x:1"');
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain('upstreamPort is required');
      r = embed('"image" "x:1" "upstreamPort" 17480');
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain('must all differ');
      r = embed('"image" "x:1" "upstreamPort" 3000 "approvals" true');
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain('approvals are on: give adminTokenSecret');
      r = embed('"image" "x:1" "upstreamPort" 3000 "approvals" true "adminTokenSecret" "billing-admin"');
      expect(r.container.env).toEqual([{ name: 'AGENTS_CHAIN_ADMIN_TOKEN', valueFrom: { secretKeyRef: { name: 'billing-admin', key: 'token' } } }]);
    });

    it('renders the admission bounds it is given (0 included: it turns the delay bound off)', () => {
      const r = embed('"image" "x:1" "upstreamPort" 3000 "maxInFlight" 256 "maxEventLoopDelayMs" 0');
      expect(r.stderr).toBe('');
      expect(r.container.env).toEqual([
        { name: 'AGENTS_CHAIN_MAX_IN_FLIGHT', value: '256' },
        { name: 'AGENTS_CHAIN_MAX_EVENT_LOOP_DELAY_MS', value: '0' },
      ]);
    });
  });

  it('policy.create: the policy ConfigMap lands in the app namespace with the content as given; empty content is refused', () => {
    const content = 'version: 1\nprovider: { name: billing-service, issuer: https://billing.example.com }\n';
    const { code, objects } = render({ policy: { create: true, name: 'billing-policy', namespace: 'billing', content } });
    expect(code).toBe(0);
    const [cm] = find(objects, 'ConfigMap', 'billing-policy');
    expect(cm!.metadata.namespace).toBe('billing');
    expect(cm!.data).toEqual({ 'policy.yaml': content });
    const r = render({ policy: { create: true } });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('policy.create: policy.content is empty');
  });

  it('kube-prometheus-stack: the release label is settable on the PodMonitor and the PrometheusRule', () => {
    const labels = { release: 'kube-prometheus-stack' };
    const { code, objects } = render({ metrics: { podMonitor: { labels }, prometheusRule: { labels } } });
    expect(code).toBe(0);
    expect(find(objects, 'PodMonitor')[0]!.metadata.labels).toMatchObject(labels);
    expect(find(objects, 'PrometheusRule')[0]!.metadata.labels).toMatchObject(labels);
  });

  it('Kubernetes older than 1.27 is refused (Chart.yaml kubeVersion)', () => {
    const r = render({}, ['--kube-version', '1.26.0']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('kubeVersion');
  });
});
