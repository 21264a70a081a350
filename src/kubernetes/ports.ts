/** Container ports: which one is the app's, and Kubernetes' naming rules for the ones injection writes. */

type Obj = Record<string, unknown>;
export interface ContainerPort {
  name?: string;
  containerPort: number;
  protocol?: string;
}
export interface AppPort {
  /** The container that declares the upstream port (or the first container when none does). */
  container: string;
  number: number;
  /** The port's name, when the container declares it with one. */
  name?: string;
}

export const isPortNumber = (v: unknown): v is number => Number.isInteger(v) && (v as number) > 0 && (v as number) < 65536;

/** IANA_SVC_NAME as Kubernetes validates port names: ≤ 15 chars, [a-z0-9-], a letter, no "--", no edge "-". */
export function isPortName(s: string): boolean {
  return s.length > 0 && s.length <= 15 && /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(s) && /[a-z]/.test(s) && !s.includes('--');
}

/** The name the app's port takes when the sidecar takes its old one (port capture mode). */
export function renamedPort(name: string, taken: ReadonlySet<string>): string {
  for (const prefix of ['app-', 'a-', 'x']) {
    const candidate = `${prefix}${name}`.slice(0, 15).replace(/-+$/, '');
    if (isPortName(candidate) && !taken.has(candidate)) return candidate;
  }
  for (let i = 0; ; i++) if (!taken.has(`app-port-${i}`)) return `app-port-${i}`;
}

export function portsOf(container: Obj): ContainerPort[] {
  const ports = container.ports;
  return Array.isArray(ports) ? ports.filter((p): p is ContainerPort => typeof p === 'object' && p !== null && isPortNumber((p as Obj).containerPort)) : [];
}

const tcp = (p: ContainerPort): boolean => (p.protocol ?? 'TCP') === 'TCP';

/**
 * The app's port from the upstream-port annotation (a number or a port name), or the only TCP
 * port the pod's containers declare (leaving out the ones excluded from capture). A string names what is wrong.
 */
export function appPort(containers: Obj[], annotation: string | undefined, annotationName: string, excluded: readonly number[] = []): AppPort | string {
  const declared = containers.flatMap((c) =>
    portsOf(c)
      .filter(tcp)
      .map((p) => ({ container: String(c.name), number: p.containerPort, ...(p.name ? { name: p.name } : {}) })),
  );
  if (annotation !== undefined) {
    if (/^\d+$/.test(annotation)) {
      const n = Number(annotation);
      if (!isPortNumber(n)) return `${annotationName} must be a port number (1-65535) or a container port's name, got "${annotation}"`;
      return declared.find((p) => p.number === n) ?? { container: typeof containers[0]?.name === 'string' ? containers[0].name : '', number: n };
    }
    const named = declared.find((p) => p.name === annotation);
    return named ?? `${annotationName} is "${annotation}", but no container declares a TCP port with that name`;
  }
  const candidates = declared.filter((p) => !excluded.includes(p.number)); // ports excluded from capture are not the agents' port
  if (candidates.length === 1) return candidates[0]!;
  if (candidates.length === 0) return `no container declares a TCP port: declare the app's port or set ${annotationName}`;
  return `the pod declares several TCP ports (${candidates.map((p) => `${p.container}:${p.name ?? p.number}`).join(', ')}): set ${annotationName} to the one agents call`;
}

/** "17480,17490, 9100" → [17480, 17490, 9100]; throws naming the flag (or annotation) and the bad entry. */
export function parsePortList(text: string, flag: string): number[] {
  const parts = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  return parts.map((p) => {
    const n = /^\d{1,5}$/.test(p) ? Number(p) : NaN;
    if (!isPortNumber(n)) throw new Error(`${flag} takes port numbers (1-65535) separated by commas, got "${p}"`);
    return n;
  });
}

/** parsePortList for an annotation that may be absent; a string names what is wrong. */
export function portList(value: string | undefined, annotationName: string): number[] | string {
  try {
    return parsePortList(value ?? '', annotationName);
  } catch (err) {
    return (err as Error).message;
  }
}

/** A Kubernetes resource quantity (e.g. 50m, 64Mi, 1.5Gi). */
export const isQuantity = (s: string): boolean => /^(\d+(\.\d+)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e\d+)?$/.test(s);

/** A Secret or ConfigMap name (DNS-1123 subdomain). */
export const isObjectName = (s: string): boolean => s.length <= 253 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(s);
