import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { ANNOTATION, CAPTURE_CONTAINER, CONTAINER, injectPodTemplate, type InjectResult, type PodTemplate } from '../../../src/kubernetes/inject.js';
import { INJECT_DEFAULTS } from '../../../src/kubernetes/defaults.js';
import { injectManifests, podTemplateOf } from '../../../src/kubernetes/manifests.js';
import { validateObject } from '../../support/kubernetes.js';

const FIXTURE = new URL('../../fixtures/kubernetes/workloads.yaml', import.meta.url);
const docs = () => parseAllDocuments(readFileSync(FIXTURE, 'utf8')).map((d) => (d as { toJS(): Record<string, unknown> }).toJS());
const byName = (name: string) => docs().find((d) => (d.metadata as { name: string }).name === name)!;
const defaults = { ...INJECT_DEFAULTS, image: 'ghcr.io/agents-chain/sidecar:0.1.0' };
type C = Record<string, any>;

const injectOne = (doc: Record<string, unknown>) => {
  const r = injectManifests([doc], defaults);
  return { doc: r.docs[0]!, report: r.report, t: podTemplateOf(r.docs[0]!)! };
};
const injected = (r: InjectResult) => {
  if (r.outcome !== 'injected') throw new Error(`expected injected, got ${JSON.stringify(r)}`);
  return r;
};
const refusedWith = (r: InjectResult): string => {
  if (r.outcome !== 'refused') throw new Error(`expected refused, got ${r.outcome}`);
  return r.reasons.join('\n');
};
const pod = (annotations: Record<string, string>, spec: Record<string, unknown> = {}): PodTemplate => ({
  metadata: { labels: { app: 'web' }, annotations: { [ANNOTATION.inject]: 'true', [ANNOTATION.policy]: 'web-policy', ...annotations } },
  spec: { containers: [{ name: 'app', image: 'registry.example.com/web:1', ports: [{ name: 'http', containerPort: 8080 }] }], ...spec },
});

describe('injectPodTemplate (iptables capture, the default)', () => {
  it('adds the sidecar beside the app on high ports, and the capture init container; the app container is unchanged', () => {
    const { t, report } = injectOne(byName('billing'));
    expect(report.injected).toEqual(['Deployment/billing']);
    expect((t.spec!.containers as C[]).map((c) => c.name)).toEqual(['app', 'log-shipper', CONTAINER]);
    const sc = (t.spec!.containers as C[]).at(-1)!;
    expect(sc.args).toEqual([
      'serve',
      '--policy',
      '/etc/agents-chain/policy.yaml',
      '--upstream',
      'http://127.0.0.1:3000',
      '--listen',
      '[::]:17480',
      '--admin',
      '[::]:17490',
      '--audit-spool',
      '/var/spool/agents-chain',
    ]);
    expect(sc.ports).toEqual([
      { name: 'agents-chain', containerPort: 17480, protocol: 'TCP' },
      { name: 'ac-admin', containerPort: 17490, protocol: 'TCP' },
    ]);
    expect(sc.readinessProbe.httpGet).toEqual({ path: '/readyz', port: 17490 });
    expect(sc.securityContext).toMatchObject({
      runAsNonRoot: true,
      runAsUser: 10001,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    });
    expect(sc.env).toEqual([
      { name: 'AGENTS_CHAIN_LOG_LEVEL', value: 'info' },
      { name: 'AGENTS_CHAIN_DRAIN_DELAY_MS', value: '5000' },
      { name: 'AGENTS_CHAIN_AUDIT_KEY', valueFrom: { secretKeyRef: { name: 'billing-audit-key', key: 'audit.key' } } },
      { name: 'AGENTS_CHAIN_AUDIT_EXPORT', value: 'stdout' },
    ]);
    const init = (t.spec!.initContainers as C[])[0]!;
    expect(init.name).toBe(CAPTURE_CONTAINER);
    expect(init.args).toEqual(['capture', '--redirect-to', '17480', '--exclude-ports', '17480,17490']);
    expect(init.securityContext).toMatchObject({
      runAsUser: 0,
      runAsNonRoot: false,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'], add: ['NET_ADMIN', 'NET_RAW'] },
    });
    expect((t.spec!.volumes as C[]).map((v) => v.name)).toEqual(['agents-chain-policy', 'agents-chain-spool', 'agents-chain-tmp']);
    // The app container is exactly what it was: its port, command and probes.
    expect((t.spec!.containers as C[])[0]).toEqual((podTemplateOf(byName('billing'))!.spec!.containers as C[])[0]);
    expect(t.spec!.terminationGracePeriodSeconds).toBe(5 + 15 + 10 + 5);
    expect(JSON.parse(t.metadata!.annotations![ANNOTATION.status]!)).toEqual({
      version: expect.any(String),
      capture: 'iptables',
      port: 17480,
      adminPort: 17490,
      upstreamPort: 3000,
      app: 'app',
      native: false,
    });
    expect(t.metadata!.annotations!['kubectl.kubernetes.io/default-container']).toBe('app');
  });

  it("takes the app's only declared port without an annotation", () => {
    const r = injected(injectPodTemplate(pod({}), defaults));
    expect((r.template.spec!.containers as C[]).at(-1)!.args).toContain('http://127.0.0.1:8080');
    expect(r.injection.app).toEqual({ container: 'app', number: 8080, name: 'http' });
  });

  it("sends the app's probes on captured ports to the sidecar's admin port, and tells the sidecar the originals", () => {
    const t = pod(
      { [ANNOTATION.excludeInboundPorts]: '9100' },
      {
        containers: [
          {
            name: 'app',
            image: 'x',
            ports: [
              { name: 'http', containerPort: 8080 },
              { name: 'metrics', containerPort: 9100 },
            ],
            readinessProbe: { httpGet: { path: '/ready', port: 'http', httpHeaders: [{ name: 'X-Probe', value: '1' }] }, periodSeconds: 3, timeoutSeconds: 2 },
            livenessProbe: { tcpSocket: { port: 8080 } },
            startupProbe: { httpGet: { path: '/metrics', port: 'metrics' } },
          },
        ],
      },
    );
    const r = injected(injectPodTemplate(t, { ...defaults }, {}));
    const app = (r.template.spec!.containers as C[])[0]!;
    expect(app.readinessProbe).toEqual({ httpGet: { path: '/app-health/app/readyz', port: 17490 }, periodSeconds: 3, timeoutSeconds: 2 });
    expect(app.livenessProbe).toEqual({ httpGet: { path: '/app-health/app/livez', port: 17490 } });
    expect(app.startupProbe).toEqual({ httpGet: { path: '/metrics', port: 'metrics' } }); // an excluded port is not captured
    expect(app.ports).toEqual([
      { name: 'http', containerPort: 8080 },
      { name: 'metrics', containerPort: 9100 },
    ]);
    const env = (r.template.spec!.containers as C[]).at(-1)!.env as { name: string; value: string }[];
    expect(JSON.parse(env.find((e) => e.name === 'AGENTS_CHAIN_APP_PROBES')!.value)).toEqual({
      'app/readyz': { httpGet: { path: '/ready', port: 8080, scheme: 'HTTP', httpHeaders: [{ name: 'X-Probe', value: '1' }] }, timeoutSeconds: 2 },
      'app/livez': { tcpSocket: { port: 8080 } },
    });
    expect((r.template.spec!.initContainers as C[])[0]!.args).toEqual(['capture', '--redirect-to', '17480', '--exclude-ports', '17480,17490,9100']);
  });

  it('warns about other declared ports it captures, and about replicas without a shared Redis', () => {
    const t = pod(
      { [ANNOTATION.upstreamPort]: 'http' },
      {
        containers: [
          {
            name: 'app',
            image: 'x',
            ports: [
              { name: 'http', containerPort: 8080 },
              { name: 'metrics', containerPort: 9100 },
            ],
          },
        ],
      },
    );
    const r = injected(injectPodTemplate(t, defaults, { replicas: 3 }));
    expect(r.warnings.join('\n')).toMatch(/port 9100 of container app is captured too/);
    expect(r.warnings.join('\n')).toMatch(/3 replicas without agents-chain.io\/redis-secret/);
    const shared = injected(injectPodTemplate(pod({ [ANNOTATION.redisSecret]: 'redis' }), defaults, { replicas: 3 }));
    expect(shared.warnings).toEqual([]);
    expect((shared.template.spec!.containers as C[]).at(-1)!.env).toContainEqual({
      name: 'AGENTS_CHAIN_REDIS_URL',
      valueFrom: { secretKeyRef: { name: 'redis', key: 'url' } },
    });
  });

  it('warns about containers that could change the capture rules', () => {
    const t = pod({}, { initContainers: [{ name: 'tune', image: 'x', securityContext: { capabilities: { add: ['NET_ADMIN'] } } }] });
    const r = injected(injectPodTemplate(t, defaults));
    expect(r.warnings).toEqual([expect.stringMatching(/container tune is privileged or adds NET_ADMIN/)]);
    expect((r.template.spec!.initContainers as C[]).map((c) => c.name)).toEqual(['tune', CAPTURE_CONTAINER]);
  });

  it('annotations set the log level and resources', () => {
    const r = injected(injectPodTemplate(pod({ [ANNOTATION.logLevel]: 'debug', [ANNOTATION.cpuRequest]: '200m', [ANNOTATION.memoryLimit]: '1Gi' }), defaults));
    const sc = (r.template.spec!.containers as C[]).at(-1)!;
    expect(sc.env[0]).toEqual({ name: 'AGENTS_CHAIN_LOG_LEVEL', value: 'debug' });
    expect(sc.resources).toEqual({ requests: { cpu: '200m', memory: '64Mi' }, limits: { memory: '1Gi' } });
  });

  it("the defaults' admission bounds reach the sidecar as its environment, only when they differ from serve's", () => {
    const env = (d: typeof defaults) => ((injected(injectPodTemplate(pod({}), d)).template.spec!.containers as C[]).at(-1)!.env as C[]).map((e) => e.name);
    expect(env(defaults)).not.toContain('AGENTS_CHAIN_MAX_IN_FLIGHT');
    expect(env(defaults)).not.toContain('AGENTS_CHAIN_MAX_EVENT_LOOP_DELAY_MS');
    const sc = (injected(injectPodTemplate(pod({}), { ...defaults, maxInFlight: 256, maxEventLoopDelayMs: 5 })).template.spec!.containers as C[]).at(-1)!;
    expect(sc.env).toContainEqual({ name: 'AGENTS_CHAIN_MAX_IN_FLIGHT', value: '256' });
    expect(sc.env).toContainEqual({ name: 'AGENTS_CHAIN_MAX_EVENT_LOOP_DELAY_MS', value: '5' });
  });
});

describe('injectPodTemplate (port capture)', () => {
  it("takes the app's named port: the app's port is renamed, probes follow it, the sidecar declares the old name", () => {
    const t = pod(
      { [ANNOTATION.capture]: 'port' },
      {
        containers: [
          {
            name: 'app',
            image: 'x',
            command: ['web'],
            ports: [{ name: 'http', containerPort: 8080 }],
            readinessProbe: { httpGet: { path: '/', port: 'http' } },
          },
        ],
      },
    );
    const r = injected(injectPodTemplate(t, defaults));
    const [app, sc] = r.template.spec!.containers as C[];
    expect(app!.ports).toEqual([{ name: 'app-http', containerPort: 8080 }]);
    expect(app!.readinessProbe).toEqual({ httpGet: { path: '/', port: 'app-http' } });
    expect(app!.command).toEqual(['web']);
    expect(sc!.ports[0]).toEqual({ name: 'http', containerPort: 17480, protocol: 'TCP' });
    expect(r.template.spec!.initContainers).toBeUndefined(); // no privileged init container
  });

  it('refuses an unnamed app port (a Service could only reach it by number, around the sidecar)', () => {
    const t = pod({ [ANNOTATION.capture]: 'port' }, { containers: [{ name: 'app', image: 'x', ports: [{ containerPort: 8080 }] }] });
    expect(refusedWith(injectPodTemplate(t, defaults))).toMatch(/capture mode "port" takes the app's port by name/);
  });
});

describe('injectPodTemplate fails closed', () => {
  it.each<[string, PodTemplate, RegExp]>([
    [
      'no policy',
      { metadata: { annotations: { [ANNOTATION.inject]: 'true' } }, spec: { containers: [{ name: 'app', image: 'x', ports: [{ containerPort: 80 }] }] } },
      /agents-chain.io\/policy .* is required/,
    ],
    ['a bad port', pod({ [ANNOTATION.port]: 'eighty' }), /agents-chain.io\/port must be a port number/],
    ['a port out of range', pod({ [ANNOTATION.upstreamPort]: '70000' }), /upstream-port must be a port number/],
    [
      "an app already on the sidecar's port",
      pod({}, { containers: [{ name: 'app', image: 'x', ports: [{ containerPort: 17480 }] }] }),
      /port 17480 of container app is also the sidecar's/,
    ],
    ['an app port named in the annotation but not declared', pod({ [ANNOTATION.upstreamPort]: 'web' }), /no container declares a TCP port with that name/],
    [
      'several ports and no annotation',
      pod({}, { containers: [{ name: 'app', image: 'x', ports: [{ containerPort: 80 }, { containerPort: 81 }] }] }),
      /several TCP ports .* set agents-chain.io\/upstream-port/,
    ],
    ['no port at all', pod({}, { containers: [{ name: 'app', image: 'x' }] }), /no container declares a TCP port/],
    ['an unknown capture mode', pod({ [ANNOTATION.capture]: 'ebpf' }), /capture must be iptables or port/],
    ['a typo in an annotation', pod({ 'agents-chain.io/upstrem-port': '8080' }), /unknown annotation agents-chain.io\/upstrem-port/],
    ['inject: "yes"', pod({ [ANNOTATION.inject]: 'yes' }), /inject must be "true" or "false"/],
    [
      "the app's port excluded from capture",
      pod({ [ANNOTATION.upstreamPort]: '8080', [ANNOTATION.excludeInboundPorts]: '8080' }),
      /exclude-inbound-ports lists the app's port 8080/,
    ],
    ['a bad Secret name', pod({ [ANNOTATION.redisSecret]: 'Redis URL' }), /redis-secret must be a Secret name/],
    [
      'a Job with native-sidecar "false"',
      pod({ [ANNOTATION.nativeSidecar]: 'false' }, { restartPolicy: 'Never' }),
      /runs to completion .* must be a native sidecar/,
    ],
    ["hostNetwork: true (the app's port is the node's)", pod({}, { hostNetwork: true }), /hostNetwork: true/],
    [
      'an Istio sidecar in iptables mode (two inbound redirects)',
      pod({}, { initContainers: [{ name: 'istio-init', image: 'istio/proxyv2' }] }),
      /has istio-init .* use agents-chain.io\/capture: port/,
    ],
    [
      'a gRPC probe on a captured port',
      pod({}, { containers: [{ name: 'app', image: 'x', ports: [{ containerPort: 8080 }], livenessProbe: { grpc: { port: 8080 } } }] }),
      /gRPC probe on captured port 8080/,
    ],
  ])('refuses %s, with the reason', (_what, t, reason) => {
    expect(refusedWith(injectPodTemplate(t, defaults))).toMatch(reason);
  });

  it.each<[string, PodTemplate, RegExp]>([
    [
      "another container declares the app's port name",
      pod(
        { [ANNOTATION.capture]: 'port', [ANNOTATION.upstreamPort]: 'http' },
        {
          containers: [
            { name: 'app', image: 'x', ports: [{ name: 'http', containerPort: 8080 }] },
            { name: 'proxy', image: 'y', ports: [{ name: 'http', containerPort: 9000 }] },
          ],
        },
      ),
      /container proxy also declares a port named "http"/,
    ],
    [
      "the app's port number under a second name",
      pod(
        { [ANNOTATION.capture]: 'port', [ANNOTATION.upstreamPort]: 'http' },
        {
          containers: [
            {
              name: 'app',
              image: 'x',
              ports: [
                { name: 'http', containerPort: 8080 },
                { name: 'web', containerPort: 8080 },
              ],
            },
          ],
        },
      ),
      /port 8080 is also declared as "web"/,
    ],
    [
      "a hostPort on the app's port",
      pod({ [ANNOTATION.capture]: 'port' }, { containers: [{ name: 'app', image: 'x', ports: [{ name: 'http', containerPort: 8080, hostPort: 8080 }] }] }),
      /has a hostPort/,
    ],
  ])('port mode refuses %s (a way around the sidecar)', (_what, t, reason) => {
    expect(refusedWith(injectPodTemplate(t, defaults))).toMatch(reason);
  });

  it('an "already injected" pod is checked, not trusted by its container name', () => {
    const done = injected(injectPodTemplate(pod({}), defaults)).template;
    const onHost = structuredClone(done);
    onHost.spec!.hostNetwork = true;
    expect(refusedWith(injectPodTemplate(onHost, defaults))).toMatch(/has the sidecar but uses hostNetwork: true/);
    const noCapture = structuredClone(done);
    noCapture.spec!.initContainers = [];
    expect(refusedWith(injectPodTemplate(noCapture, defaults))).toMatch(/no agents-chain-capture init container/);
    const meshAfter = structuredClone(done);
    meshAfter.spec!.containers = [...(meshAfter.spec!.containers as C[]), { name: 'istio-proxy', image: 'istio/proxyv2' }];
    expect(refusedWith(injectPodTemplate(meshAfter, defaults))).toMatch(/has istio-proxy/);
    expect(
      injected(
        injectPodTemplate(
          pod(
            { [ANNOTATION.capture]: 'port' },
            {
              containers: [
                { name: 'app', image: 'x', ports: [{ name: 'http', containerPort: 8080 }] },
                { name: 'istio-proxy', image: 'i' },
              ],
            },
          ),
          defaults,
        ),
      ).injection.capture,
    ).toBe('port');
    const ownContainer = pod(
      {},
      {
        containers: [
          { name: 'app', image: 'x', ports: [{ containerPort: 8080 }] },
          { name: CONTAINER, image: 'not-ours' },
        ],
      },
    );
    expect(refusedWith(injectPodTemplate(ownContainer, defaults))).toMatch(/a container is named agents-chain but agents-chain.io\/status does not say/);
  });

  it('lists every reason at once', () => {
    const reasons = refusedWith(injectPodTemplate(pod({ [ANNOTATION.port]: 'x', [ANNOTATION.logLevel]: 'loud', [ANNOTATION.capture]: 'ebpf' }), defaults));
    expect(reasons.split('\n')).toHaveLength(3);
  });

  it('admits an un-injectable pod only when it opts in, and marks it', () => {
    const r = injectPodTemplate(pod({ [ANNOTATION.port]: 'x', [ANNOTATION.allowUnprotected]: 'true' }), defaults);
    expect(r.outcome).toBe('unprotected');
    if (r.outcome !== 'unprotected') return;
    expect(JSON.parse(r.template.metadata!.annotations![ANNOTATION.status]!)).toEqual({
      injected: false,
      unprotected: true,
      reasons: [expect.stringMatching(/port must be a port number/)],
    });
    expect((r.template.spec!.containers as C[]).map((c) => c.name)).toEqual(['app']);
  });

  it('leaves pods that do not ask alone, and does not inject twice', () => {
    expect(injectPodTemplate({ spec: { containers: [{ name: 'app' }] } }, defaults)).toEqual({ outcome: 'not-requested' });
    expect(injectPodTemplate(pod({ [ANNOTATION.inject]: 'false' }), defaults)).toEqual({ outcome: 'not-requested' });
    const once = injected(injectPodTemplate(pod({}), defaults)).template;
    expect(injectPodTemplate(once, defaults)).toEqual({ outcome: 'already-injected' });
  });
});

describe('native sidecars, Jobs and CronJobs', () => {
  it("as a native sidecar: first, then the pod's own init containers, then capture (last: nothing after it can flush its rules)", () => {
    const { t } = injectOne(byName('ledger'));
    expect((t.spec!.initContainers as C[]).map((c) => [c.name, c.restartPolicy])).toEqual([
      [CONTAINER, 'Always'],
      ['migrate', undefined],
      [CAPTURE_CONTAINER, undefined],
    ]);
    expect((t.spec!.containers as C[]).map((c) => c.name)).toEqual(['ledger']);
    expect((t.spec!.volumes as C[]).map((v) => v.name)).toEqual(['data', 'agents-chain-policy', 'agents-chain-spool', 'agents-chain-tmp']);
  });

  it("a Job's pod gets the native form (a plain container would keep the Job from completing)", () => {
    const { t } = injectOne(byName('nightly-report'));
    const sc = (t.spec!.initContainers as C[]).find((c) => c.name === CONTAINER)!;
    expect(sc.restartPolicy).toBe('Always');
    expect(sc.ports.map((p: C) => p.containerPort)).toEqual([18080, 17490]);
    // A native sidecar is stopped after the app: no drain delay, so Kubernetes' default 30 s grace covers 15 + 10 + 5.
    expect(sc.env).toContainEqual({ name: 'AGENTS_CHAIN_DRAIN_DELAY_MS', value: '0' });
    expect(t.spec!.terminationGracePeriodSeconds).toBeUndefined();
    expect((t.spec!.containers as C[]).map((c) => c.name)).toEqual(['report']);
    const cron = injectOne(byName('cleanup')).t;
    expect((cron.spec!.initContainers as C[]).map((c) => [c.name, c.restartPolicy])).toEqual([[CONTAINER, 'Always']]); // port mode: no capture container
  });
});

describe("injectManifests (the post-renderer's stream)", () => {
  it("port mode: a Service selecting the pod that targets the app's port by number (or by default) is pointed at the sidecar", () => {
    const deployment = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web' },
      spec: { selector: { matchLabels: { app: 'web' } }, template: pod({ [ANNOTATION.capture]: 'port' }) },
    };
    const svc = (name: string, ports: C[], selector: Record<string, string> = { app: 'web' }) => ({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name },
      spec: { selector, ports },
    });
    const r = injectManifests(
      [
        deployment,
        svc('by-number', [{ port: 80, targetPort: 8080 }]),
        svc('by-default', [{ port: 8080 }]),
        svc('by-name', [{ port: 80, targetPort: 'http' }]),
        svc('other-app', [{ port: 80, targetPort: 8080 }], { app: 'other' }),
      ],
      defaults,
    );
    const ports = (i: number) => (r.docs[i]!.spec as C).ports;
    expect(ports(1)).toEqual([{ port: 80, targetPort: 'http' }]);
    expect(ports(2)).toEqual([{ port: 8080, targetPort: 'http' }]);
    expect(ports(3)).toEqual([{ port: 80, targetPort: 'http' }]);
    expect(ports(4)).toEqual([{ port: 80, targetPort: 8080 }]);
    expect(r.changed).toEqual([true, true, true, false, false]);
    expect(r.report.servicesRewritten).toEqual([
      expect.stringMatching(/^Service\/by-number: port 80 → targetPort http \(was 8080\)/),
      expect.stringMatching(/^Service\/by-default/),
    ]);
  });

  it('typed lists, the annotation on the wrong object, kinds it does not know, a namespace on one side only', () => {
    const deployment = (extra: Record<string, unknown> = {}) => ({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web', ...extra },
      spec: { selector: { matchLabels: { app: 'web' } }, template: pod({ [ANNOTATION.capture]: 'port' }) },
    });
    const list = injectManifests([{ apiVersion: 'v1', kind: 'DeploymentList', items: [deployment()] }], defaults);
    expect(list.report.injected).toEqual(['Deployment/web']);
    const onWorkload = {
      ...deployment({ annotations: { [ANNOTATION.inject]: 'true' } }),
      spec: { selector: {}, template: { spec: { containers: [{ name: 'app', image: 'x' }] } } },
    };
    expect(injectManifests([onWorkload], defaults).report.refused).toEqual([
      expect.stringMatching(/^Deployment\/web: agents-chain.io\/inject is on the Deployment itself; put it on the pod template/),
    ]);
    const rollout = { apiVersion: 'argoproj.io/v1alpha1', kind: 'Rollout', metadata: { name: 'web' }, spec: { template: pod({}) } };
    expect(injectManifests([rollout], defaults).report.warnings).toEqual([
      expect.stringMatching(/^Rollout\/web: a pod template asks for the sidecar in a kind inject does not know/),
    ]);
    const svc = { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web' }, spec: { selector: { app: 'web' }, ports: [{ port: 80, targetPort: 8080 }] } };
    const r = injectManifests([deployment({ namespace: 'prod' }), svc], defaults);
    expect((r.docs[1]!.spec as C).ports[0].targetPort).toBe('http');
  });

  it('collects each refused object with its reasons, and is idempotent', () => {
    const bad = structuredClone(byName('billing')) as C;
    delete bad.spec.template.metadata.annotations[ANNOTATION.policy];
    expect(injectManifests([bad], defaults).report.refused).toEqual(["Deployment/billing: agents-chain.io/policy (the policy ConfigMap's name) is required"]);
    const once = injectManifests(docs(), defaults);
    expect(once.report.refused).toEqual([]);
    const twice = injectManifests(once.docs, defaults);
    expect(twice.docs).toEqual(once.docs);
    expect(twice.changed.every((c) => !c)).toBe(true);
  });

  it('every injected object is a valid Kubernetes object', () => {
    for (const doc of injectManifests(docs(), defaults).docs) {
      expect(() => validateObject(doc), `${String(doc.kind)}/${String((doc.metadata as { name: string }).name)}`).not.toThrow();
    }
  });

  it('the schema check is real: a malformed container is refused', () => {
    const bad = structuredClone(byName('billing')) as C;
    bad.spec.template.spec.containers[0].ports[0].containerPort = 'http';
    expect(() => validateObject(bad)).toThrow();
  });
});
