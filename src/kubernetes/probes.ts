/**
 * The app's probes after injection. In iptables capture mode the kubelet's probe to a captured
 * port would land in the sidecar and fail without a token, so (as Istio does) each such probe is
 * sent to the sidecar's admin port, which runs the original probe against 127.0.0.1. In port mode
 * the app's port is renamed, so probes that named it follow the new name.
 */
import { portsOf } from './ports.js';

type Obj = Record<string, unknown>;
export const PROBE_KINDS = { livenessProbe: 'livez', readinessProbe: 'readyz', startupProbe: 'startupz' } as const;

/** What the sidecar runs for one rewritten probe (AGENTS_CHAIN_APP_PROBES). */
export type AppProbe =
  | { httpGet: { path: string; port: number; scheme: string; httpHeaders?: { name: string; value: string }[] }; timeoutSeconds?: number }
  | { tcpSocket: { port: number }; timeoutSeconds?: number };

function probePort(container: Obj, port: unknown): number | undefined {
  if (typeof port === 'number') return port;
  if (typeof port === 'string' && /^\d+$/.test(port)) return Number(port);
  return portsOf(container).find((p) => p.name === port)?.containerPort;
}

/**
 * Rewrites in place the probes of `container` whose port is captured. Returns the original probes by
 * key ("<container>/<kind>") for the sidecar, or a string saying why a probe cannot be kept working.
 */
export function redirectProbes(container: Obj, captured: (port: number) => boolean, adminPort: number): Record<string, AppProbe> | string {
  const out: Record<string, AppProbe> = {};
  const name = String(container.name);
  for (const [field, kind] of Object.entries(PROBE_KINDS)) {
    const probe = container[field] as Obj | undefined;
    if (!probe || typeof probe !== 'object') continue;
    const timeout = typeof probe.timeoutSeconds === 'number' ? { timeoutSeconds: probe.timeoutSeconds } : {};
    const http = probe.httpGet as Obj | undefined;
    const socket = probe.tcpSocket as Obj | undefined;
    const grpc = probe.grpc as Obj | undefined;
    const target = http ?? socket ?? grpc;
    if (!target || target.host !== undefined) continue; // exec probes and probes of another host are not captured
    const port = probePort(container, target.port);
    if (port === undefined) return `container ${name}: ${field} names port "${String(target.port)}", which the container does not declare`;
    if (!captured(port)) continue;
    if (grpc)
      return `container ${name}: ${field} is a gRPC probe on captured port ${port}: list the port in agents-chain.io/exclude-inbound-ports or use agents-chain.io/capture: port`;
    out[`${name}/${kind}`] = http
      ? {
          httpGet: {
            path: typeof http.path === 'string' ? http.path : '/',
            port,
            scheme: typeof http.scheme === 'string' ? http.scheme : 'HTTP',
            ...(Array.isArray(http.httpHeaders) ? { httpHeaders: http.httpHeaders as { name: string; value: string }[] } : {}),
          },
          ...timeout,
        }
      : { tcpSocket: { port }, ...timeout };
    const { httpGet: _h, tcpSocket: _t, ...rest } = probe;
    container[field] = { ...rest, httpGet: { path: `/app-health/${name}/${kind}`, port: adminPort } };
  }
  return out;
}

/** Port mode: probes that named the app's port by its old name follow it to the new one. */
export function renameProbePorts(container: Obj, from: string, to: string): void {
  for (const field of Object.keys(PROBE_KINDS)) {
    const probe = container[field] as Obj | undefined;
    for (const action of ['httpGet', 'tcpSocket'] as const) {
      const target = probe?.[action] as Obj | undefined;
      if (target?.port === from) target.port = to;
    }
  }
}
