import { readFileSync } from 'node:fs';
import { isMap, isNode, isScalar, LineCounter, parseDocument, type Node } from 'yaml';
import { DEFAULT_MAX_EVENT_LOOP_DELAY_MS, DEFAULT_MAX_IN_FLIGHT } from '../sidecar/limits.js';
import { isPortNumber } from './ports.js';

const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
export const SIDECAR_VERSION = VERSION;
export const DEFAULT_IMAGE = `ghcr.io/agents-chain/sidecar:${VERSION}`;

export type CaptureMode = 'iptables' | 'port';
export const CAPTURE_MODES: readonly CaptureMode[] = ['iptables', 'port'];
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;

/**
 * How injection builds the sidecar when a pod does not say otherwise. One file feeds the CLI
 * (`inject --defaults`), the webhook (`--defaults`, rendered by the chart as a ConfigMap) and the
 * chart's values, so all three inject the same container.
 */
export interface InjectDefaults {
  image: string;
  imagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
  captureMode: CaptureMode;
  /** Kubernetes ≥ 1.29: an init container with restartPolicy Always starts before the app and stops after it. */
  nativeSidecar: boolean;
  /** High ports, away from the ones apps use (8080, 8000, 3000, 9090), as the meshes do. */
  port: number;
  adminPort: number;
  logLevel: (typeof LOG_LEVELS)[number];
  /** After SIGTERM the sidecar keeps accepting this long while /readyz fails (endpoint removal takes time). */
  drainDelaySeconds: number;
  /** serve --max-in-flight: calls handled at once, more are shed (503 overloaded). */
  maxInFlight: number;
  /** serve --max-event-loop-delay-ms: past this delay of its event loop the sidecar admits fewer calls at once; 0: off. */
  maxEventLoopDelayMs: number;
  resources: Record<string, unknown>;
}

export const INJECT_DEFAULTS: InjectDefaults = {
  image: DEFAULT_IMAGE,
  imagePullPolicy: 'IfNotPresent',
  captureMode: 'iptables',
  nativeSidecar: false,
  port: 17480,
  adminPort: 17490,
  logLevel: 'info',
  drainDelaySeconds: 5,
  maxInFlight: DEFAULT_MAX_IN_FLIGHT,
  maxEventLoopDelayMs: DEFAULT_MAX_EVENT_LOOP_DELAY_MS,
  resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
};

/** The sidecar's own stop budget after the drain delay (serve's --shutdown-grace-ms and --audit-drain-ms defaults). */
export const SHUTDOWN_GRACE_SECONDS = 15;
export const AUDIT_DRAIN_SECONDS = 10;

const CHECKS: { [K in keyof InjectDefaults]: [(v: unknown) => boolean, string] } = {
  image: [(v) => typeof v === 'string' && v.length > 0 && !/\s/.test(v), 'an image reference'],
  imagePullPolicy: [(v) => v === 'Always' || v === 'IfNotPresent' || v === 'Never', 'Always, IfNotPresent or Never'],
  captureMode: [(v) => CAPTURE_MODES.includes(v as CaptureMode), 'iptables or port'],
  nativeSidecar: [(v) => typeof v === 'boolean', 'true or false'],
  port: [isPortNumber, 'a port number'],
  adminPort: [isPortNumber, 'a port number'],
  logLevel: [(v) => (LOG_LEVELS as readonly unknown[]).includes(v), LOG_LEVELS.join(', ')],
  drainDelaySeconds: [(v) => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 300, 'whole seconds, 0 to 300'],
  maxInFlight: [(v) => Number.isSafeInteger(v) && (v as number) > 0, 'a positive whole number'],
  maxEventLoopDelayMs: [(v) => Number.isSafeInteger(v) && (v as number) >= 0, 'whole milliseconds, 0 or more'],
  resources: [(v) => typeof v === 'object' && v !== null && !Array.isArray(v), 'a resources object (requests, limits)'],
};

/** Parses a defaults file (YAML or JSON); errors name FILE:LINE:COL and the key. Missing keys keep INJECT_DEFAULTS. */
export function parseInjectDefaults(text: string, file: string): InjectDefaults {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines });
  const at = (node: Node | null | undefined): string => {
    const p = lines.linePos(node?.range?.[0] ?? 0);
    return `${file}:${p.line}:${p.col}`;
  };
  const e = doc.errors[0];
  if (e) throw new Error(`${file}:${e.linePos?.[0]?.line ?? 1}:${e.linePos?.[0]?.col ?? 1}: ${e.message}`);
  if (doc.contents === null) return { ...INJECT_DEFAULTS };
  if (!isMap(doc.contents)) throw new Error(`${at(doc.contents)}: injection defaults must be a mapping`);
  const out: Record<string, unknown> = { ...INJECT_DEFAULTS };
  for (const pair of doc.contents.items) {
    const key = isScalar(pair.key) ? String(pair.key.value) : '?';
    const check = CHECKS[key as keyof InjectDefaults];
    if (!check) throw new Error(`${at(pair.key)}: unknown key "${key}" (known: ${Object.keys(CHECKS).join(', ')})`);
    const value: unknown = isNode(pair.value) ? pair.value.toJSON() : pair.value;
    if (!check[0](value)) throw new Error(`${at(pair.value ?? pair.key)}: ${key} must be ${check[1]}, got ${JSON.stringify(value)}`);
    out[key] = value;
  }
  const d = out as unknown as InjectDefaults;
  if (d.port === d.adminPort) throw new Error(`${file}: port and adminPort must differ (both ${d.port})`);
  return d;
}

export function loadInjectDefaults(file: string): InjectDefaults {
  return parseInjectDefaults(readFileSync(file, 'utf8'), file);
}
