/**
 * What injection adds to a pod: the sidecar container, the capture init container and their volumes.
 * Pure builders; `injectPodTemplate` (inject.ts) decides what goes in.
 */
import { ANNOTATION, CAPTURE_CONTAINER, CONTAINER } from './annotations.js';
import type { CaptureMode, InjectDefaults } from './defaults.js';
import type { AppPort } from './ports.js';
import type { AppProbe } from './probes.js';
import { DEFAULT_MAX_EVENT_LOOP_DELAY_MS, DEFAULT_MAX_IN_FLIGHT } from '../sidecar/limits.js';

const POLICY_DIR = '/etc/agents-chain';
const SPOOL_DIR = '/var/spool/agents-chain';
/** The image's user: numeric, so runAsNonRoot can be verified without reading /etc/passwd. */
export const SIDECAR_UID = 10001;

type Obj = Record<string, unknown>;

/** What the sidecar took, for the Service rewrite of port mode and the status annotation. */
export interface Injection {
  capture: CaptureMode;
  app: AppPort;
  port: number;
  adminPort: number;
  native: boolean;
  portName?: string;
}

/**
 * A native sidecar gets SIGTERM only after the app has exited: keeping its listener open then would only
 * answer 502 instead of refusing, and hold a Job's pod longer. A regular sidecar stops with the app, and
 * keeps accepting while the endpoint removal reaches every client.
 */
export function drainDelaySeconds(defaults: InjectDefaults, inj: Injection): number {
  return inj.native ? 0 : defaults.drainDelaySeconds;
}

const hardened = { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, seccompProfile: { type: 'RuntimeDefault' } };

export function sidecarContainer(a: Record<string, string>, defaults: InjectDefaults, inj: Injection, logLevel: string, probes: Record<string, AppProbe>): Obj {
  const args = [
    'serve',
    '--policy',
    `${POLICY_DIR}/policy.yaml`,
    '--upstream',
    `http://127.0.0.1:${inj.app.number}`,
    '--listen',
    `[::]:${inj.port}`,
    '--admin',
    `[::]:${inj.adminPort}`,
  ];
  const env: Obj[] = [
    { name: 'AGENTS_CHAIN_LOG_LEVEL', value: logLevel },
    { name: 'AGENTS_CHAIN_DRAIN_DELAY_MS', value: String(drainDelaySeconds(defaults, inj) * 1000) },
  ];
  // The admission bounds only when they differ from serve's own defaults.
  if (defaults.maxInFlight !== DEFAULT_MAX_IN_FLIGHT) env.push({ name: 'AGENTS_CHAIN_MAX_IN_FLIGHT', value: String(defaults.maxInFlight) });
  if (defaults.maxEventLoopDelayMs !== DEFAULT_MAX_EVENT_LOOP_DELAY_MS)
    env.push({ name: 'AGENTS_CHAIN_MAX_EVENT_LOOP_DELAY_MS', value: String(defaults.maxEventLoopDelayMs) });
  const secret = (name: string, key: string) => ({ valueFrom: { secretKeyRef: { name, key } } });
  const auditKey = a[ANNOTATION.auditKeySecret];
  const adminToken = a[ANNOTATION.adminTokenSecret];
  const redis = a[ANNOTATION.redisSecret];
  if (auditKey) {
    args.push('--audit-spool', SPOOL_DIR);
    env.push({ name: 'AGENTS_CHAIN_AUDIT_KEY', ...secret(auditKey, 'audit.key') });
    env.push({ name: 'AGENTS_CHAIN_AUDIT_EXPORT', value: a[ANNOTATION.auditExport] ?? 'stdout' });
  }
  if (adminToken) env.push({ name: 'AGENTS_CHAIN_ADMIN_TOKEN', ...secret(adminToken, 'token') });
  if (redis) env.push({ name: 'AGENTS_CHAIN_REDIS_URL', ...secret(redis, 'url') });
  if (Object.keys(probes).length) env.push({ name: 'AGENTS_CHAIN_APP_PROBES', value: JSON.stringify(probes) });
  const probe = (path: string, period: number): Obj => ({ httpGet: { path, port: inj.adminPort }, periodSeconds: period, timeoutSeconds: 2 });
  const resources = structuredClone(defaults.resources) as { requests?: Obj; limits?: Obj };
  if (a[ANNOTATION.cpuRequest]) (resources.requests ??= {}).cpu = a[ANNOTATION.cpuRequest];
  if (a[ANNOTATION.memoryRequest]) (resources.requests ??= {}).memory = a[ANNOTATION.memoryRequest];
  if (a[ANNOTATION.memoryLimit]) (resources.limits ??= {}).memory = a[ANNOTATION.memoryLimit];
  return {
    name: CONTAINER,
    image: defaults.image,
    ...(defaults.imagePullPolicy ? { imagePullPolicy: defaults.imagePullPolicy } : {}),
    args,
    env,
    ports: [
      { name: inj.portName ?? 'agents-chain', containerPort: inj.port, protocol: 'TCP' },
      { name: 'ac-admin', containerPort: inj.adminPort, protocol: 'TCP' },
    ],
    readinessProbe: probe('/readyz', 5),
    livenessProbe: probe('/healthz', 10),
    startupProbe: { ...probe('/healthz', 1), failureThreshold: 30 },
    resources,
    securityContext: { runAsNonRoot: true, runAsUser: SIDECAR_UID, runAsGroup: SIDECAR_UID, capabilities: { drop: ['ALL'] }, ...hardened },
    volumeMounts: [
      { name: 'agents-chain-policy', mountPath: POLICY_DIR, readOnly: true },
      { name: 'agents-chain-spool', mountPath: SPOOL_DIR },
      { name: 'agents-chain-tmp', mountPath: '/tmp' },
    ],
  };
}

/**
 * The init container that redirects inbound TCP into the sidecar (like istio-init). It alone has
 * NET_ADMIN/NET_RAW, as root; it exits before any other container starts.
 */
export function captureContainer(defaults: InjectDefaults, inj: Injection, excluded: number[]): Obj {
  return {
    name: CAPTURE_CONTAINER,
    image: defaults.image,
    ...(defaults.imagePullPolicy ? { imagePullPolicy: defaults.imagePullPolicy } : {}),
    args: ['capture', '--redirect-to', String(inj.port), '--exclude-ports', [...new Set([inj.port, inj.adminPort, ...excluded])].join(',')],
    resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { memory: '64Mi' } },
    securityContext: {
      runAsNonRoot: false,
      runAsUser: 0,
      runAsGroup: 0,
      privileged: false,
      capabilities: { drop: ['ALL'], add: ['NET_ADMIN', 'NET_RAW'] },
      ...hardened,
    },
    // iptables takes its lock under /run; the root filesystem stays read-only.
    volumeMounts: [{ name: 'agents-chain-tmp', mountPath: '/run' }],
  };
}

export function volumes(policy: string): Obj[] {
  return [
    { name: 'agents-chain-policy', configMap: { name: policy } },
    { name: 'agents-chain-spool', emptyDir: { sizeLimit: '1Gi' } },
    { name: 'agents-chain-tmp', emptyDir: { sizeLimit: '64Mi' } },
  ];
}
