import type { JWK } from 'jose';
import type { Notifier } from '../approvals/notifier.js';
import type { AccessRequestStore } from '../approvals/store.js';
import type { AuditTrailOptions } from '../audit/trail.js';
import type { ReplayStore } from '../auth/replay.js';
import type { AppProbes } from '../kubernetes/app-probes.js';
import type { Logger } from '../log.js';
import type { MetricsOptions } from '../metrics/metrics.js';
import type { Policy } from '../policy/types.js';
import type { RedisSettings } from '../redis/connect.js';
import type { AgentRegistry } from '../registration/registry.js';
import { DEFAULT_LIMITS, type Limits } from './limits.js';

/** Where agents reach the sidecar when `listen` is not given: loopback, so nothing is exposed by accident. */
export const DEFAULT_LISTEN = '127.0.0.1:8080';
/** Where operators reach the admin listener when `admin` is not given: loopback, for the same reason. */
export const DEFAULT_ADMIN = '127.0.0.1:9090';
/** The header agents send their token in when `tokenHeader` is not given. */
export const DEFAULT_TOKEN_HEADER = 'authorization';
/** The highest TCP port number. */
const MAX_PORT = 65535;

export interface SidecarOptions {
  policy: Policy;
  /** The app, e.g. http://127.0.0.1:8081 */
  upstream: string;
  /** host:port for agents; port 0 picks a free one. */
  listen?: string;
  /** host:port for operators (/healthz, /readyz). */
  admin?: string;
  tokenHeader?: string;
  maxBodyBytes?: number;
  /** Caller headers accepted; more are refused with 431 too_many_headers [90]. */
  maxHeaders?: number;
  /** Query pairs accepted; more are refused with 400 too_many_query_parameters [256]. */
  maxQueryParams?: number;
  /** Calls handled at once; more are answered 503 overloaded with Retry-After [1024]. */
  maxInFlight?: number;
  /** Event-loop delay (ms) past which fewer calls are admitted at once, the rest shed [0: off]. */
  maxEventLoopDelayMs?: number;
  replay?: ReplayStore;
  /** Bound of the in-process replay window (ids); derived from the memory limit when absent. */
  replayMaxEntries?: number;
  log?: Logger;
  now?: () => number;
  /** Bearer token for the admin listener (everything but /healthz, /readyz, /metrics). */
  adminToken?: string;
  /** Serve the admin API without a token to whoever reaches it (--admin-insecure-no-token). */
  adminInsecureNoToken?: boolean;
  accessRequestStore?: AccessRequestStore;
  /** Overrides the policy's webhook (tests, embedding). */
  notifier?: Notifier;
  /** Turns the encrypted audit trail on. */
  audit?: Omit<AuditTrailOptions, 'log' | 'redactPatterns'>;
  /** The admin listener's URL as humans reach it, for approve/deny links in notifications. */
  adminPublicUrl?: string;
  /** Where secrets named in the policy (webhook urlEnv/headersEnv) are read from. */
  env?: NodeJS.ProcessEnv;
  /** Metrics options: per-agent label (opt-in, capped), process metrics. */
  metrics?: MetricsOptions;
  /** Shared state for replicas: the replay window, access requests and registered agents live in Redis. */
  redis?: RedisSettings;
  /** Overrides where registered agents are kept (tests, embedding). */
  agentRegistry?: AgentRegistry;
  /** On close: how long calls in flight (and callers waiting for a human) get before they are cut [15 s]. */
  shutdownGraceMs?: number;
  /**
   * On close: how long the listener keeps accepting new connections while /readyz already fails, before the
   * shutdown grace starts [0 here; `serve` defaults to DEFAULT_DRAIN_DELAY_MS]. Endpoint removal takes a while
   * to reach every kube-proxy, load balancer and client; calls sent meanwhile are still served.
   */
  drainDelayMs?: number;
  /** Egress mode: the agent whose calls the sidecar signs (listed in the policy), and the provider's API key. */
  /** providerKey: sent as the preset's credential header; in front of an MCP server, as Authorization: Bearer (optional there). */
  egress?: { agentId: string; agentKey: JWK; providerKey?: string };
  /** The app's probes the admin listener runs on /app-health/<container>/<kind> (iptables capture mode). */
  appProbes?: AppProbes;
}

export interface Sidecar {
  url: string;
  adminUrl: string;
  /** The active policy's SHA-256. */
  readonly policyHash: string;
  /**
   * Re-reads the policy file (or takes `text`), validates it fully and swaps
   * it in between requests; an invalid policy is refused and the last good one
   * keeps serving. Calls in flight finish under the policy they started with.
   */
  reloadPolicy(text?: string): Promise<ReloadResult>;
  /**
   * Drains and stops: readiness fails, the listener keeps accepting for the drain delay, then stops accepting
   * and lets calls finish within the shutdown grace. `drainDelayMs` overrides the option for this call; a
   * later call with 0 (a second signal) cuts a running drain delay short.
   */
  close(options?: { drainDelayMs?: number }): Promise<void>;
}

export type ReloadResult = { ok: true; changed: boolean; hash: string } | { ok: false; issues: string[] };

/** `HOST:PORT` or `[IPv6]:PORT`; an empty host means every IPv4 interface. `flag` names the option in the error. */
export function parseHostPort(s: string, flag: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(s);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > MAX_PORT) throw new Error(`${flag} must be HOST:PORT, got "${s}"`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}

/** The bounds this sidecar applies: the defaults, with what flags and the environment set through the options. */
export function limitsFrom(opts: SidecarOptions): Limits {
  return {
    ...DEFAULT_LIMITS,
    maxBodyBytes: opts.maxBodyBytes ?? DEFAULT_LIMITS.maxBodyBytes,
    maxHeaders: opts.maxHeaders ?? DEFAULT_LIMITS.maxHeaders,
    maxQueryParams: opts.maxQueryParams ?? DEFAULT_LIMITS.maxQueryParams,
    maxInFlight: opts.maxInFlight ?? DEFAULT_LIMITS.maxInFlight,
    maxEventLoopDelayMs: opts.maxEventLoopDelayMs ?? DEFAULT_LIMITS.maxEventLoopDelayMs,
    shutdownGraceMs: opts.shutdownGraceMs ?? DEFAULT_LIMITS.shutdownGraceMs,
    auditDrainMs: opts.audit?.drainMs ?? DEFAULT_LIMITS.auditDrainMs,
  };
}
