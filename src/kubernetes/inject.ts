/**
 * Sidecar injection: one pure function that adds the agents-chain sidecar to a pod template, driven
 * by the pod's annotations and one set of defaults. The CLI (`inject`, also a Helm post-renderer),
 * the admission webhook and the chart's defaults ConfigMap all go through it.
 *
 * It fails closed: a pod that asks for the sidecar and cannot get it is refused with every reason,
 * never passed through unprotected, unless the pod itself says `allow-unprotected: "true"`.
 */
import { ANNOTATION, CAPTURE_CONTAINER, CONTAINER, DEFAULT_CONTAINER, USER_ANNOTATIONS } from './annotations.js';
import {
  AUDIT_DRAIN_SECONDS,
  CAPTURE_MODES,
  INJECT_DEFAULTS,
  LOG_LEVELS,
  SHUTDOWN_GRACE_SECONDS,
  SIDECAR_VERSION,
  type CaptureMode,
  type InjectDefaults,
} from './defaults.js';
import { appPort, isObjectName, isPortNumber, isQuantity, portList, portsOf, renamedPort, type AppPort } from './ports.js';
import { redirectProbes, renameProbePorts, type AppProbe } from './probes.js';
import { captureContainer, drainDelaySeconds, sidecarContainer, volumes, type Injection } from './sidecar-container.js';

export { ANNOTATION, CAPTURE_CONTAINER, CONTAINER } from './annotations.js';
export type { InjectDefaults } from './defaults.js';
export { SIDECAR_UID, type Injection } from './sidecar-container.js';

type Obj = Record<string, unknown>;
export interface PodTemplate {
  metadata?: { annotations?: Record<string, string>; labels?: Record<string, string>; [k: string]: unknown };
  spec?: Obj & { containers?: Obj[]; initContainers?: Obj[]; volumes?: Obj[] };
}

/** What injection knows about the workload around the template (for warnings only). */
export interface WorkloadContext {
  kind?: string;
  replicas?: number;
}

export type InjectResult =
  | { outcome: 'not-requested' }
  | { outcome: 'already-injected' }
  | { outcome: 'injected'; template: PodTemplate; injection: Injection; warnings: string[] }
  | { outcome: 'refused'; reasons: string[] }
  /** Could not inject, and the pod opted into running without the sidecar: marked, and warned about. */
  | { outcome: 'unprotected'; template: PodTemplate; reasons: string[] };

const list = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter((c): c is Obj => typeof c === 'object' && c !== null) : []);
const bool = (v: string | undefined, name: string, fallback: boolean, reasons: string[]): boolean => {
  if (v === undefined) return fallback;
  if (v === 'true' || v === 'false') return v === 'true';
  reasons.push(`${name} must be "true" or "false", got "${v}"`);
  return fallback;
};

/**
 * Adds the sidecar to a pod template when `agents-chain.io/inject: "true"`. Idempotent (a template
 * that already has the container is left alone). Returns a new object; the input is not modified.
 */
export function injectPodTemplate(input: PodTemplate, defaults: InjectDefaults = INJECT_DEFAULTS, context: WorkloadContext = {}): InjectResult {
  const a = input.metadata?.annotations ?? {};
  const reasons: string[] = [];
  const asked = a[ANNOTATION.inject];
  if (asked === undefined || asked === 'false') return { outcome: 'not-requested' };
  if (asked !== 'true') reasons.push(`${ANNOTATION.inject} must be "true" or "false", got "${asked}"`);
  const spec = input.spec ?? {};
  if ((spec.containers !== undefined && !Array.isArray(spec.containers)) || (spec.initContainers !== undefined && !Array.isArray(spec.initContainers))) {
    return { outcome: 'refused', reasons: ['spec.containers and spec.initContainers must be lists'] };
  }
  const containers = list(spec.containers);
  const inits = list(spec.initContainers);
  if ([...containers, ...inits].some((c) => c.name === CONTAINER)) {
    // Trusted by more than its name: a pod later edited (hostNetwork, a dropped capture container) or a
    // container of the user's own named agents-chain is not protected, and must not pass as injected.
    const problems = injectedProblems(input);
    if (!problems.length) return { outcome: 'already-injected' };
    return a[ANNOTATION.allowUnprotected] === 'true' ? unprotected(input, problems) : { outcome: 'refused', reasons: problems };
  }
  if (containers.length === 0) reasons.push('the pod has no containers');
  const plan = planInjection(a, spec, containers, inits, defaults, context, reasons);
  const allowUnprotected = bool(a[ANNOTATION.allowUnprotected], ANNOTATION.allowUnprotected, false, reasons);
  if (reasons.length || !plan) return allowUnprotected ? unprotected(input, reasons) : { outcome: 'refused', reasons };
  return applyPlan(input, plan, defaults, context, allowUnprotected);
}

/** What the annotations (and defaults) ask for, checked; every problem goes to `reasons`. */
interface Plan {
  policy: string;
  capture: CaptureMode;
  port: number;
  adminPort: number;
  logLevel: string;
  excluded: number[];
  app: AppPort;
  native: boolean;
}
type Settings = Omit<Plan, 'policy' | 'excluded' | 'app' | 'native'> & { policy: string | undefined; excluded: number[] | string };

function planInjection(
  a: Record<string, string>,
  spec: NonNullable<PodTemplate['spec']>,
  containers: Obj[],
  inits: Obj[],
  defaults: InjectDefaults,
  context: WorkloadContext,
  reasons: string[],
): Plan | undefined {
  const settings = readAnnotations(a, defaults, reasons);
  const { policy, port, adminPort, excluded } = settings;
  const app = appPort(containers, a[ANNOTATION.upstreamPort], ANNOTATION.upstreamPort, Array.isArray(excluded) ? excluded : []);
  if (typeof app === 'string') reasons.push(app);
  else appPortReasons(app, containers, settings, reasons);
  for (const c of [...containers, ...inits]) {
    for (const p of portsOf(c)) {
      if (p.containerPort === port || p.containerPort === adminPort)
        reasons.push(
          `port ${p.containerPort} of container ${String(c.name)} is also the sidecar's; set ${ANNOTATION.port} / ${ANNOTATION.adminPort} to free ports`,
        );
    }
  }
  const mesh = meshProblem([...containers, ...inits], settings.capture);
  if (mesh) reasons.push(mesh);
  // In the node's network namespace the capture rules would redirect the node's own traffic, and the app's
  // port is the node's: no NetworkPolicy applies to it either. Neither mode can protect such a pod.
  if (spec.hostNetwork !== undefined && spec.hostNetwork !== false)
    reasons.push("the pod uses hostNetwork: true, where the app's port is the node's and neither capture mode can keep traffic from going around the sidecar");
  const native = nativeSidecar(a, spec, defaults, context, reasons);
  if (typeof app === 'string' || typeof excluded === 'string' || !policy) return undefined;
  return { ...settings, policy, excluded, app, native };
}

function readAnnotations(a: Record<string, string>, defaults: InjectDefaults, reasons: string[]): Settings {
  for (const key of Object.keys(a)) {
    if (key.startsWith('agents-chain.io/') && !USER_ANNOTATIONS.has(key) && key !== ANNOTATION.status)
      reasons.push(`unknown annotation ${key} (a typo? known: ${[...USER_ANNOTATIONS].join(', ')})`);
  }
  const policy = a[ANNOTATION.policy];
  if (!policy) reasons.push(`${ANNOTATION.policy} (the policy ConfigMap's name) is required`);
  else if (!isObjectName(policy)) reasons.push(`${ANNOTATION.policy} must be a ConfigMap name, got "${policy}"`);
  for (const key of [ANNOTATION.redisSecret, ANNOTATION.adminTokenSecret, ANNOTATION.auditKeySecret]) {
    if (a[key] !== undefined && !isObjectName(a[key])) reasons.push(`${key} must be a Secret name, got "${a[key]}"`);
  }
  const capture = (a[ANNOTATION.capture] ?? defaults.captureMode) as CaptureMode;
  if (!CAPTURE_MODES.includes(capture)) reasons.push(`${ANNOTATION.capture} must be ${CAPTURE_MODES.join(' or ')}, got "${capture}"`);
  const port = sidecarPort(a[ANNOTATION.port], defaults.port, ANNOTATION.port, reasons);
  const adminPort = sidecarPort(a[ANNOTATION.adminPort], defaults.adminPort, ANNOTATION.adminPort, reasons);
  if (port === adminPort) reasons.push(`${ANNOTATION.port} and ${ANNOTATION.adminPort} must differ (both ${port})`);
  const logLevel = a[ANNOTATION.logLevel] ?? defaults.logLevel;
  if (!(LOG_LEVELS as readonly string[]).includes(logLevel)) reasons.push(`${ANNOTATION.logLevel} must be ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  for (const key of [ANNOTATION.cpuRequest, ANNOTATION.memoryRequest, ANNOTATION.memoryLimit]) {
    if (a[key] !== undefined && !isQuantity(a[key])) reasons.push(`${key} must be a resource quantity (e.g. 100m, 128Mi), got "${a[key]}"`);
  }
  const excluded = portList(a[ANNOTATION.excludeInboundPorts], ANNOTATION.excludeInboundPorts);
  if (typeof excluded === 'string') reasons.push(excluded);
  return { policy, capture, port, adminPort, logLevel, excluded };
}

/** The app's port must be reachable only through the sidecar. */
function appPortReasons(app: AppPort, containers: Obj[], { capture, port, adminPort, excluded }: Settings, reasons: string[]): void {
  if (app.number === port || app.number === adminPort)
    reasons.push(`the app's port ${app.number} is also the sidecar's; set ${ANNOTATION.port} / ${ANNOTATION.adminPort} to free ports`);
  if (Array.isArray(excluded) && excluded.includes(app.number))
    reasons.push(`${ANNOTATION.excludeInboundPorts} lists the app's port ${app.number}: that would leave it unprotected`);
  if (capture === 'port' && app.name) {
    // A Service resolves targetPort by name to the first container declaring it (the app before the sidecar).
    for (const c of containers) {
      for (const p of portsOf(c)) {
        if (c.name !== app.container && p.name === app.name)
          reasons.push(
            `capture mode "port": container ${String(c.name)} also declares a port named "${app.name}", which a Service would reach instead of the sidecar`,
          );
        if (c.name === app.container && p.containerPort === app.number && p.name && p.name !== app.name)
          reasons.push(`capture mode "port": port ${app.number} is also declared as "${p.name}", a name a Service could reach the app by around the sidecar`);
        if (c.name === app.container && p.containerPort === app.number && (p as { hostPort?: unknown }).hostPort !== undefined)
          reasons.push(
            `capture mode "port": port ${app.number} has a hostPort, which reaches the app from the node around the sidecar; use capture mode iptables`,
          );
      }
    }
  }
  if (capture === 'port' && !app.name)
    reasons.push(
      `capture mode "port" takes the app's port by name, and port ${app.number} of container ${app.container} has none: name it (and target it by name in the Service), or use capture mode iptables`,
    );
}

/** A Job's pod ends when its containers end: a plain sidecar container would keep it running forever. */
function nativeSidecar(
  a: Record<string, string>,
  spec: NonNullable<PodTemplate['spec']>,
  defaults: InjectDefaults,
  context: WorkloadContext,
  reasons: string[],
): boolean {
  const restartPolicy = spec.restartPolicy;
  const runsToCompletion = restartPolicy === 'Never' || restartPolicy === 'OnFailure' || context.kind === 'Job' || context.kind === 'CronJob';
  const native = bool(a[ANNOTATION.nativeSidecar], ANNOTATION.nativeSidecar, defaults.nativeSidecar, reasons);
  if (!runsToCompletion) return native;
  const shown = typeof restartPolicy === 'string' ? restartPolicy : 'of a Job';
  if (a[ANNOTATION.nativeSidecar] === 'false')
    reasons.push(
      `the pod runs to completion (restartPolicy ${shown}): the sidecar must be a native sidecar (an init container with restartPolicy Always, Kubernetes >= 1.29), but ${ANNOTATION.nativeSidecar} is "false"`,
    );
  return true;
}

/** The checked plan applied to a copy of the template. */
function applyPlan(input: PodTemplate, plan: Plan, defaults: InjectDefaults, context: WorkloadContext, allowUnprotected: boolean): InjectResult {
  const a = input.metadata?.annotations ?? {};
  const { capture, app, port, adminPort, native } = plan;
  const next: PodTemplate = structuredClone(input);
  const s = (next.spec ??= {});
  const nextContainers = list(s.containers);
  const nextInits = list(s.initContainers);
  const warnings: string[] = [];
  const injection: Injection = { capture, app, port, adminPort, native };
  let probes: Record<string, AppProbe> = {};
  if (capture === 'iptables') {
    const r = prepareIptables(nextContainers, nextInits, plan, warnings);
    if (typeof r === 'string') return allowUnprotected ? unprotected(input, [r]) : { outcome: 'refused', reasons: [r] };
    probes = r;
  } else {
    const portName = renameAppPort(nextContainers, nextInits, app);
    if (portName !== undefined) injection.portName = portName;
  }
  if ((context.replicas ?? 1) > 1 && !a[ANNOTATION.redisSecret]) {
    warnings.push(
      `${context.replicas} replicas without ${ANNOTATION.redisSecret}: each sidecar keeps its own replay window, so one token can be used once per replica; give the replicas a shared Redis`,
    );
  }

  const sidecar = sidecarContainer(a, defaults, injection, plan.logLevel, probes);
  // Capture runs last of the init containers: capture is inbound only, so running first protects nothing,
  // and a later init container with NET_ADMIN could flush its rules.
  const last = capture === 'iptables' ? [captureContainer(defaults, injection, plan.excluded)] : [];
  if (native) s.initContainers = [{ ...sidecar, restartPolicy: 'Always' }, ...nextInits, ...last];
  else {
    s.containers = [...nextContainers, sidecar];
    if (last.length) s.initContainers = [...nextInits, ...last];
  }
  s.volumes = [...list(s.volumes).filter((v) => !String(v.name).startsWith('agents-chain-')), ...volumes(plan.policy)];
  const grace = drainDelaySeconds(defaults, injection) + SHUTDOWN_GRACE_SECONDS + AUDIT_DRAIN_SECONDS + 5;
  const current = typeof s.terminationGracePeriodSeconds === 'number' ? s.terminationGracePeriodSeconds : 30;
  if (current < grace) s.terminationGracePeriodSeconds = grace;
  const meta = (next.metadata ??= {});
  meta.annotations = {
    ...meta.annotations,
    [ANNOTATION.status]: JSON.stringify({ version: SIDECAR_VERSION, capture, port, adminPort, upstreamPort: app.number, app: app.container, native }),
    ...(meta.annotations?.[DEFAULT_CONTAINER] ? {} : { [DEFAULT_CONTAINER]: app.container }),
  };
  return { outcome: 'injected', template: next, injection, warnings };
}

/**
 * iptables mode: probes on captured ports are redirected through the sidecar's admin port (their
 * targets returned for AGENTS_CHAIN_APP_PROBES), or the reason they cannot be; warnings for other captured
 * ports and for containers that could change the capture rules.
 */
function prepareIptables(containers: Obj[], inits: Obj[], { port, adminPort, excluded, app }: Plan, warnings: string[]): Record<string, AppProbe> | string {
  let probes: Record<string, AppProbe> = {};
  const skip = new Set([port, adminPort, ...excluded]);
  for (const c of [...containers, ...inits.filter((i) => i.restartPolicy === 'Always')]) {
    const r = redirectProbes(c, (p) => !skip.has(p), adminPort);
    if (typeof r === 'string') return r;
    probes = { ...probes, ...r };
    for (const p of portsOf(c)) {
      if (!skip.has(p.containerPort) && p.containerPort !== app.number && (p.protocol ?? 'TCP') === 'TCP') {
        warnings.push(
          `port ${p.containerPort} of container ${String(c.name)} is captured too, and its traffic goes to the app's port ${app.number}; list it in ${ANNOTATION.excludeInboundPorts} if agents do not call it`,
        );
      }
    }
  }
  for (const c of [...containers, ...inits]) {
    const sc = (c.securityContext ?? {}) as { privileged?: unknown; capabilities?: { add?: unknown } };
    const added = Array.isArray(sc.capabilities?.add) ? (sc.capabilities.add as unknown[]).map(String) : [];
    if (sc.privileged === true || added.some((x) => ['NET_ADMIN', 'SYS_ADMIN', 'ALL'].includes(x.toUpperCase().replace(/^CAP_/, '')))) {
      warnings.push(
        `container ${String(c.name)} is privileged or adds NET_ADMIN/SYS_ADMIN: it can change the pod's capture rules and reach the app around the sidecar`,
      );
    }
  }
  return probes;
}

/**
 * Port mode: the sidecar takes the app's port name (so Services that target it by name reach the sidecar);
 * the app's port is renamed, its probes follow. Returns the name taken (planInjection refused an unnamed one).
 */
function renameAppPort(containers: Obj[], inits: Obj[], app: AppPort): string | undefined {
  const name = app.name;
  const owner = containers.find((c) => c.name === app.container);
  if (!owner || !name) return undefined;
  const taken = new Set(
    [...containers, ...inits].flatMap((c) =>
      portsOf(c)
        .map((p) => p.name)
        .filter((n): n is string => !!n),
    ),
  );
  const renamed = renamedPort(name, taken);
  for (const p of portsOf(owner)) if (p.name === name) p.name = renamed;
  renameProbePorts(owner, name, renamed);
  return name;
}

function sidecarPort(value: string | undefined, fallback: number, name: string, reasons: string[]): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (/^\d+$/.test(value) && isPortNumber(n)) return n;
  reasons.push(`${name} must be a port number (1-65535), got "${value}"`);
  return fallback;
}

/** Containers other meshes add; their init containers redirect inbound traffic too, and only one redirect can win. */
const MESH_CONTAINERS = new Set(['istio-proxy', 'istio-init', 'istio-validation', 'linkerd-proxy', 'linkerd-init']);

function meshProblem(containers: Obj[], capture: unknown): string | undefined {
  const mesh = containers.map((c) => String(c.name)).find((n) => MESH_CONTAINERS.has(n));
  return mesh && capture === 'iptables'
    ? `the pod has ${mesh} (another mesh's inbound capture): use ${ANNOTATION.capture}: port, which runs behind it`
    : undefined;
}

/** What makes an already injected pod not protected (empty: it is as injection left it). Pure; the guard uses it too. */
export function injectedProblems(pod: PodTemplate): string[] {
  const spec = pod.spec ?? {};
  const problems: string[] = [];
  if (spec.hostNetwork !== undefined && spec.hostNetwork !== false)
    problems.push('the pod has the sidecar but uses hostNetwork: true, where capture cannot protect the app');
  let status: { capture?: unknown } | undefined;
  try {
    status = JSON.parse(pod.metadata?.annotations?.[ANNOTATION.status] ?? 'null') as { capture?: unknown } | undefined;
  } catch {
    status = undefined;
  }
  if (!status || !CAPTURE_MODES.includes(status.capture as CaptureMode)) {
    problems.push(
      `a container is named ${CONTAINER} but ${ANNOTATION.status} does not say what injection added: it was not injected (rename the container, or remove it and let injection add the sidecar)`,
    );
  } else if (status.capture === 'iptables' && !list(spec.initContainers).some((c) => c.name === CAPTURE_CONTAINER)) {
    problems.push(`the pod was injected in iptables mode but has no ${CAPTURE_CONTAINER} init container: traffic would reach the app around the sidecar`);
  }
  // A mesh webhook that ran after ours (we are called again: reinvocationPolicy IfNeeded) added its own capture.
  const mesh = meshProblem([...list(spec.containers), ...list(spec.initContainers)], status?.capture);
  if (mesh) problems.push(mesh);
  return problems;
}

/** The pod opted into running without the sidecar: it says so on itself, so `kubectl get` shows it. */
function unprotected(input: PodTemplate, reasons: string[]): InjectResult {
  const next = structuredClone(input);
  const meta = (next.metadata ??= {});
  meta.annotations = { ...meta.annotations, [ANNOTATION.status]: JSON.stringify({ injected: false, unprotected: true, reasons }) };
  return { outcome: 'unprotected', template: next, reasons };
}
