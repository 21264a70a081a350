/**
 * Sidecar injection: one pure function that adds the agents-chain container
 * to a pod template, driven by the pod's annotations. The CLI (`inject`, also
 * a Helm post-renderer), the admission webhook and the chart all use it.
 */

export const ANNOTATION = {
  inject: 'agents-chain.io/inject',
  policy: 'agents-chain.io/policy',
  upstreamPort: 'agents-chain.io/upstream-port',
  port: 'agents-chain.io/port',
  adminPort: 'agents-chain.io/admin-port',
  auditKeySecret: 'agents-chain.io/audit-key-secret',
  auditExport: 'agents-chain.io/audit-export',
  adminTokenSecret: 'agents-chain.io/admin-token-secret',
  nativeSidecar: 'agents-chain.io/native-sidecar',
} as const;

export const CONTAINER = 'agents-chain';
const POLICY_DIR = '/etc/agents-chain';
const SPOOL_DIR = '/var/spool/agents-chain';
/** The image's user: numeric, so runAsNonRoot can be verified without reading /etc/passwd. */
export const SIDECAR_UID = 10001;

export interface InjectDefaults {
  image: string;
  /** Kubernetes ≥ 1.29: an init container with restartPolicy Always starts before the app and stops after it. */
  nativeSidecar?: boolean;
  resources?: Record<string, unknown>;
}

type Obj = Record<string, unknown>;
export interface PodTemplate {
  metadata?: { annotations?: Record<string, string>; [k: string]: unknown };
  spec?: Obj & { containers?: Obj[]; initContainers?: Obj[]; volumes?: Obj[] };
}

export type InjectResult = { injected: true; template: PodTemplate } | { injected: false; reason: string };

function port(value: string | undefined, fallback: number, name: string): number | string {
  if (value === undefined) return fallback;
  const n = Number(value);
  return Number.isInteger(n) && n > 0 && n < 65536 ? n : `annotation ${name} must be a port number, got "${value}"`;
}

/**
 * Adds the sidecar to a pod template when `agents-chain.io/inject: "true"`.
 * Idempotent (a template that already has the container is left alone) and
 * touches nothing else: other containers, their order and fields stay as
 * they were. Returns a new object; the input is not modified.
 */
export function injectPodTemplate(input: PodTemplate, defaults: InjectDefaults): InjectResult {
  const a = input.metadata?.annotations ?? {};
  if (a[ANNOTATION.inject] !== 'true') return { injected: false, reason: `no ${ANNOTATION.inject}: "true" annotation` };
  const spec = input.spec ?? {};
  const list = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter((c): c is Obj => typeof c === 'object' && c !== null) : []);
  if ((spec.containers !== undefined && !Array.isArray(spec.containers)) || (spec.initContainers !== undefined && !Array.isArray(spec.initContainers))) {
    return { injected: false, reason: 'spec.containers and spec.initContainers must be lists' };
  }
  const all = [...list(spec.containers), ...list(spec.initContainers)];
  if (all.some((c) => c.name === CONTAINER)) return { injected: false, reason: 'already injected' };
  const policy = a[ANNOTATION.policy];
  if (!policy) return { injected: false, reason: `${ANNOTATION.policy} (the policy ConfigMap's name) is required` };
  const upstream = port(a[ANNOTATION.upstreamPort], 8081, ANNOTATION.upstreamPort);
  const listen = port(a[ANNOTATION.port], 8080, ANNOTATION.port);
  const admin = port(a[ANNOTATION.adminPort], 9090, ANNOTATION.adminPort);
  for (const p of [upstream, listen, admin]) if (typeof p === 'string') return { injected: false, reason: p };
  const taken = new Set(all.flatMap((c) => ((c.ports as Obj[] | undefined) ?? []).map((p) => p.containerPort)));
  for (const p of [listen, admin]) if (taken.has(p)) return { injected: false, reason: `port ${p} is already used by another container; set ${ANNOTATION.port} / ${ANNOTATION.adminPort}` };

  const auditSecret = a[ANNOTATION.auditKeySecret];
  const args = ['serve', '--policy', `${POLICY_DIR}/policy.yaml`, '--upstream', `http://127.0.0.1:${upstream}`, '--listen', `0.0.0.0:${listen}`, '--admin', `0.0.0.0:${admin}`];
  const env: Obj[] = [];
  if (auditSecret) {
    args.push('--audit-spool', SPOOL_DIR);
    env.push({ name: 'AGENTS_CHAIN_AUDIT_KEY', valueFrom: { secretKeyRef: { name: auditSecret, key: 'audit.key' } } });
    env.push({ name: 'AGENTS_CHAIN_AUDIT_EXPORT', value: a[ANNOTATION.auditExport] ?? 'stdout' });
  }
  if (a[ANNOTATION.adminTokenSecret]) env.push({ name: 'AGENTS_CHAIN_ADMIN_TOKEN', valueFrom: { secretKeyRef: { name: a[ANNOTATION.adminTokenSecret], key: 'token' } } });
  const probe = (path: string, period: number): Obj => ({ httpGet: { path, port: admin }, periodSeconds: period, timeoutSeconds: 2 });
  const container: Obj = {
    name: CONTAINER,
    image: defaults.image,
    args,
    ...(env.length ? { env } : {}),
    ports: [{ name: 'agents-chain', containerPort: listen, protocol: 'TCP' }, { name: 'ac-admin', containerPort: admin, protocol: 'TCP' }],
    readinessProbe: probe('/readyz', 5),
    livenessProbe: probe('/healthz', 10),
    startupProbe: { ...probe('/healthz', 1), failureThreshold: 30 },
    resources: defaults.resources ?? { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
    securityContext: {
      runAsNonRoot: true, runAsUser: SIDECAR_UID, runAsGroup: SIDECAR_UID, readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' },
    },
    volumeMounts: [
      { name: 'agents-chain-policy', mountPath: POLICY_DIR, readOnly: true },
      { name: 'agents-chain-spool', mountPath: SPOOL_DIR },
      { name: 'agents-chain-tmp', mountPath: '/tmp' },
    ],
  };
  const volumes: Obj[] = [
    { name: 'agents-chain-policy', configMap: { name: policy } },
    { name: 'agents-chain-spool', emptyDir: { sizeLimit: '1Gi' } },
    { name: 'agents-chain-tmp', emptyDir: { sizeLimit: '64Mi' } },
  ];
  const native = a[ANNOTATION.nativeSidecar] !== undefined ? a[ANNOTATION.nativeSidecar] === 'true' : defaults.nativeSidecar === true;
  const next: PodTemplate = structuredClone(input);
  const s = (next.spec ??= {});
  if (native) s.initContainers = [{ ...container, restartPolicy: 'Always' }, ...(s.initContainers ?? [])];
  else s.containers = [...(s.containers ?? []), container];
  s.volumes = [...(s.volumes ?? []).filter((v) => !String(v.name).startsWith('agents-chain-')), ...volumes];
  return { injected: true, template: next };
}

/** Where a workload keeps its pod template. */
export function podTemplateOf(doc: Obj): PodTemplate | undefined {
  const kind = doc.kind;
  const spec = doc.spec as Obj | undefined;
  if (kind === 'Pod') return doc as PodTemplate;
  if (['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job', 'ReplicationController'].includes(String(kind))) return spec?.template as PodTemplate | undefined;
  if (kind === 'CronJob') return ((spec?.jobTemplate as Obj | undefined)?.spec as Obj | undefined)?.template as PodTemplate | undefined;
  return undefined;
}

/** Injects into one Kubernetes object (a List's items too); returns the object unchanged when nothing applies. */
export function injectObject(doc: Obj, defaults: InjectDefaults): { doc: Obj; injected: number; skipped: string[] } {
  if (doc.kind === 'List' && Array.isArray(doc.items)) {
    let injected = 0;
    const skipped: string[] = [];
    const items = (doc.items as Obj[]).map((item) => {
      const r = injectObject(item, defaults);
      injected += r.injected;
      skipped.push(...r.skipped);
      return r.doc;
    });
    return { doc: { ...doc, items }, injected, skipped };
  }
  const template = podTemplateOf(doc);
  if (!template) return { doc, injected: 0, skipped: [] };
  const r = injectPodTemplate(template, defaults);
  const name = `${String(doc.kind)}/${String((doc.metadata as Obj | undefined)?.name ?? '?')}`;
  const wanted = template.metadata?.annotations?.[ANNOTATION.inject] === 'true' && r.injected === false && r.reason !== 'already injected';
  if (!r.injected) return { doc, injected: 0, skipped: wanted ? [`${name}: ${r.reason}`] : [] };
  const copy = structuredClone(doc);
  const target = podTemplateOf(copy)!;
  target.spec = r.template.spec;
  return { doc: copy, injected: 1, skipped: [] };
}
