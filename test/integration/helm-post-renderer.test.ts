import { execFile } from 'node:child_process';
import { chmodSync, existsSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { CLI, requireBuild, ROOT } from '../support/cli.js';
import { helmOrFail, skipWithoutHelm } from '../support/helm.js';
import { validateObject } from '../support/kubernetes.js';

// A chart exactly as `helm create web` (helm 3.17) makes it: a Deployment with a named `http` port and
// probes on it, a Service with `targetPort: http`. The user adds two pod annotations and nothing else.
const CHART = join(ROOT, 'test/fixtures/charts/web');
const run = promisify(execFile);
type Doc = Record<string, any>;

async function render(...set: string[]): Promise<Doc[]> {
  const dir = await mkdtemp(join(tmpdir(), 'agents-chain-helm-'));
  const defaults = join(dir, 'defaults.yaml');
  await writeFile(defaults, 'image: registry.example.com/agents-chain:0.1.0\n');
  const { stdout } = await run(
    helmOrFail(),
    [
      'template',
      'web',
      CHART,
      '--set-string',
      'podAnnotations.agents-chain\\.io/inject=true',
      '--set-string',
      'podAnnotations.agents-chain\\.io/policy=web-policy',
      ...set.flatMap((s) => ['--set-string', s]),
      '--post-renderer',
      CLI,
      '--post-renderer-args',
      'inject',
      '--post-renderer-args',
      `--defaults=${defaults}`,
    ],
    { env: { ...process.env, HELM_CACHE_HOME: dir, HELM_CONFIG_HOME: dir, HELM_DATA_HOME: dir } },
  );
  return parseAllDocuments(stdout)
    .map((d) => (d as { toJS(): Doc }).toJS())
    .filter(Boolean);
}

/** The container port a Service port reaches: the pod's container port with that name (or number). */
function resolveTargetPort(pod: Doc, target: string | number): { container: string; containerPort: number } | undefined {
  const all = [...(pod.spec.initContainers ?? []), ...pod.spec.containers] as Doc[];
  for (const c of all)
    for (const p of c.ports ?? []) if (p.name === target || p.containerPort === target) return { container: c.name, containerPort: p.containerPort };
  return undefined;
}

describe.skipIf(skipWithoutHelm('the helm post-renderer test'))('helm template --post-renderer agents-chain inject (real helm 3.17)', () => {
  beforeAll(() => {
    requireBuild();
    chmodSync(CLI, 0o755); // helm runs the post-renderer as an executable
    expect(existsSync(join(CHART, 'Chart.yaml'))).toBe(true);
  });

  it("port mode: the Service's targetPort (http) now resolves to the sidecar; the app keeps its port under a new name and its probes", async () => {
    const docs = await render('podAnnotations.agents-chain\\.io/capture=port');
    const deployment = docs.find((d) => d.kind === 'Deployment')!;
    const service = docs.find((d) => d.kind === 'Service')!;
    validateObject(deployment);
    validateObject(service);
    const pod = deployment.spec.template;
    expect(service.spec.ports[0].targetPort).toBe('http');
    expect(resolveTargetPort(pod, 'http')).toEqual({ container: 'agents-chain', containerPort: 17480 });
    const app = pod.spec.containers.find((c: Doc) => c.name === 'web');
    expect(app.ports).toEqual([{ name: 'app-http', containerPort: 80, protocol: 'TCP' }]);
    expect(app.livenessProbe.httpGet).toEqual({ path: '/', port: 'app-http' });
    const sidecar = pod.spec.containers.find((c: Doc) => c.name === 'agents-chain');
    expect(sidecar.args).toContain('http://127.0.0.1:80');
    expect(pod.spec.initContainers).toBeUndefined();
    // helm create's test pod is not annotated: unchanged.
    expect(docs.find((d) => d.kind === 'Pod')!.spec.containers.map((c: Doc) => c.name)).toEqual(['wget']);
  });

  it('iptables mode (the default): the app container, its port and its command are unchanged; the Service is unchanged; probes go through the sidecar', async () => {
    const plain = await run(helmOrFail(), ['template', 'web', CHART], { env: process.env });
    const before = parseAllDocuments(plain.stdout)
      .map((d) => (d as { toJS(): Doc }).toJS())
      .filter(Boolean);
    const docs = await render();
    const was = before.find((d) => d.kind === 'Deployment')!.spec.template.spec.containers[0];
    const deployment = docs.find((d) => d.kind === 'Deployment')!;
    validateObject(deployment);
    const pod = deployment.spec.template;
    const app = pod.spec.containers.find((c: Doc) => c.name === 'web');
    const { livenessProbe, readinessProbe, ...rest } = app;
    const { livenessProbe: wasLive, readinessProbe: wasReady, ...wasRest } = was;
    expect(rest).toEqual(wasRest);
    expect(wasLive.httpGet).toEqual({ path: '/', port: 'http' });
    expect(livenessProbe.httpGet).toEqual({ path: '/app-health/web/livez', port: 17490 });
    expect(readinessProbe.httpGet).toEqual({ path: '/app-health/web/readyz', port: 17490 });
    expect(docs.find((d) => d.kind === 'Service')).toEqual(before.find((d) => d.kind === 'Service'));
    expect(resolveTargetPort(pod, 'http')).toEqual({ container: 'web', containerPort: 80 }); // the capture rules move it to the sidecar
    const capture = pod.spec.initContainers[0];
    expect(capture.name).toBe('agents-chain-capture');
    expect(capture.args).toEqual(['capture', '--redirect-to', '17480', '--exclude-ports', '17480,17490']);
  });

  it('stops the install when a pod cannot be injected: helm fails with the object and the reason', async () => {
    const err = await render('podAnnotations.agents-chain\\.io/port=80').then(
      () => undefined,
      (e: { stderr?: string }) => e,
    );
    expect(err, 'helm should fail').toBeDefined();
    expect(err!.stderr).toMatch(/Deployment\/web: port 80 of container web is also the sidecar's/);
  });
});
