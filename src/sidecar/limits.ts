import type { IncomingMessage } from 'node:http';
import { DEFAULT_MAX_HEADERS } from '../http/headers.js';
import { DEFAULT_MAX_QUERY_PARAMS } from '../routing/query.js';

/**
 * Every bound the sidecar applies, in one place, with its reason. Flags and
 * environment set the first ones (`serve --max-body-bytes`, `--max-headers`,
 * `--max-query-params`, `--max-in-flight`, `--max-event-loop-delay-ms`) and the shutdown grace and audit drain
 * (`--shutdown-grace-ms`, `--audit-drain-ms`), through SidecarOptions
 * (`limitsFrom` in options.ts); the others are fixed here.
 */
export interface Limits {
  /** Request body bytes buffered and checked (a capability's `maxBodyBytes` overrides it). */
  maxBodyBytes: number;
  /** Caller headers accepted; more are refused with 431 (an app reading only its first N would miss what was checked). */
  maxHeaders: number;
  /** Query pairs accepted; more are refused (Node's querystring and qs stop reading at 1000). */
  maxQueryParams: number;
  /** Small JSON bodies of the sidecar's own endpoints (registration, revoke, admin API). */
  maxControlBodyBytes: number;
  /**
   * Calls this process handles at once; a call past it is answered at once with 503 overloaded and
   * Retry-After (Envoy's overload manager): queued calls would only wait, time out and be retried.
   */
  maxInFlight: number;
  /**
   * Event-loop delay, in ms, past which the sidecar admits fewer calls at once (src/sidecar/admission.ts);
   * 0 turns the adaptive bound off. Calls wait in the kernel's socket buffers while the loop is busy, where
   * no count of calls in flight sees them: a loop this late, turn after turn, has more work than CPU.
   */
  maxEventLoopDelayMs: number;
  /** Keep-alive connections to the app. */
  upstreamConnections: number;
  /** How long the app may take to send its response headers; a model provider answers long completions late. */
  upstreamHeadersTimeoutMs: number;
  egressUpstreamHeadersTimeoutMs: number;
  /** An approved call, run by the sidecar: its answer is buffered, so it is bounded in time (and by maxBodyBytes in size). */
  approvedCallTimeoutMs: number;
  /** Agents' idle keep-alive: longer than common load balancers' (60 s), so they close first. */
  keepAliveTimeoutMs: number;
  /** A caller gets this long to send its headers ... */
  headersTimeoutMs: number;
  /** ... and this long for the whole request (slow-body callers are cut off). */
  requestTimeoutMs: number;
  /** On close: how long calls in flight (and callers waiting for a human) get before they are cut. */
  shutdownGraceMs: number;
  /** On close: how long the audit trail gets to deliver what is spooled. */
  auditDrainMs: number;
  /**
   * On close: callers waiting for a human are released this long before the shutdown grace ends, so their
   * 503 shutting_down (with the status URL to poll) is written before open connections are cut.
   */
  waiterReleaseLeadMs: number;
  /** On close: approved calls being run get at least this long to finish and be recorded, even when the grace is spent. */
  approvalSettleMinMs: number;
  /** On close: the admin listener's grace; its calls (probes, scrapes, approvals API) are short. */
  adminCloseGraceMs: number;
  /** MCP sessions remembered with the agent that opened them; past it the least recently used is forgotten (its client starts anew). */
  mcpMaxSessions: number;
  /** MCP sessions one agent may hold; opening one more forgets its own least recently used. */
  mcpSessionsPerAgent: number;
  /** An MCP session unused this long is forgotten. */
  mcpSessionIdleMs: number;
  /** MCP server streams (GET) one agent may hold open at once: each holds a connection to the server. */
  mcpStreamsPerAgent: number;
}

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
/** Far above what one core serves at the latencies apps answer in (2000 calls/s at 100 ms is 200 in flight). */
export const DEFAULT_MAX_IN_FLIGHT = 1024;
/**
 * The event-loop delay the adaptive bound keeps to (src/sidecar/admission.ts): off unless set, as Envoy's
 * adaptive concurrency is. On, it refused a few dozen calls per few seconds at half the sustainable rate
 * after long collections, and CFS throttling under a tight CPU limit stops the loop with no more work
 * waiting: an operator turns it on knowing the pod's CPU. 5 is what the overload bench runs with (at three
 * times the sustainable rate refusals take most of the core, and an admitted call crosses the loop about
 * three times: with 10 ms admitted calls reached 120–230 ms at p99 in tuning runs, with 5 ms 56–240 ms).
 */
export const DEFAULT_MAX_EVENT_LOOP_DELAY_MS = 0;
/** Seconds a shed caller is told to wait. */
export const OVERLOAD_RETRY_AFTER_SECONDS = 1;
/**
 * A shed call's unread body up to this size (a declared Content-Length) is read and dropped by Node, and the
 * connection kept: a refusal on a kept connection costs the sidecar less than the client's reconnect
 * (accept, socket, parser). A larger or chunked body closes the connection instead of being read for nothing.
 */
export const SHED_DRAIN_MAX_BYTES = 64 * 1024;

/** Whether a refused call's body is small enough to drain, keeping the connection (see SHED_DRAIN_MAX_BYTES). */
export function drainable(req: IncomingMessage): boolean {
  if (req.complete) return true;
  const length = req.headers['content-length'];
  return length !== undefined && req.headers['transfer-encoding'] === undefined && Number(length) <= SHED_DRAIN_MAX_BYTES;
}
/** `serve`'s drain delay: longer than endpoint removal usually takes to reach kube-proxy and ingress controllers. */
export const DEFAULT_DRAIN_DELAY_MS = 5_000;

export const DEFAULT_LIMITS: Readonly<Limits> = {
  maxBodyBytes: DEFAULT_MAX_BODY_BYTES,
  maxHeaders: DEFAULT_MAX_HEADERS,
  maxQueryParams: DEFAULT_MAX_QUERY_PARAMS,
  maxControlBodyBytes: 64 * 1024,
  maxInFlight: DEFAULT_MAX_IN_FLIGHT,
  maxEventLoopDelayMs: DEFAULT_MAX_EVENT_LOOP_DELAY_MS,
  upstreamConnections: 128,
  upstreamHeadersTimeoutMs: 60_000,
  egressUpstreamHeadersTimeoutMs: 600_000,
  approvedCallTimeoutMs: 30_000,
  keepAliveTimeoutMs: 65_000,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  shutdownGraceMs: 15_000,
  auditDrainMs: 10_000,
  waiterReleaseLeadMs: 1_000,
  approvalSettleMinMs: 1_000,
  adminCloseGraceMs: 1_000,
  mcpMaxSessions: 100_000,
  mcpSessionsPerAgent: 64,
  mcpSessionIdleMs: 24 * 3_600_000,
  mcpStreamsPerAgent: 8,
};
