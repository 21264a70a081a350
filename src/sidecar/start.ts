import { createServer, maxHeaderSize, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { silentNotifier, WebhookNotifier, type Notifier } from '../approvals/notifier.js';
import { ApprovalService, type ApprovalEvent, type Executor } from '../approvals/service.js';
import type { AccessRequest } from '../approvals/types.js';
import { newEntryId, type AuditEntry } from '../audit/entry.js';
import { MemoryAccessRequestStore, type AccessRequestStore } from '../approvals/store.js';
import { MemoryReplayStore, replayCapacity, type ReplayStore } from '../auth/replay.js';
import { RedisReplayStore } from '../auth/replay-redis.js';
import { REPLAY_WINDOW_SECONDS } from '../auth/verify.js';
import { RedisAccessRequestStore } from '../approvals/store-redis.js';
import { connectRedis, redisReady, type RedisSettings } from '../redis/connect.js';
import type { JWK } from 'jose';
import { createAgentSigner, type AgentSigner } from '../identity/client.js';
import { RegisteredAgents } from '../registration/directory.js';
import { MemoryAgentRegistry, type AgentRegistry } from '../registration/registry.js';
import { RedisAgentRegistry } from '../registration/registry-redis.js';
import { createLogger, type Logger } from '../log.js';
import type { Policy } from '../policy/types.js';
import { formatIssue, PolicyError } from '../policy/issues.js';
import { loadPolicyFile, loadPolicyText } from '../policy/load.js';
import { adminHandler, adminStartupProblem, INSECURE_FLAG } from '../admin/handler.js';
import { Upstream } from '../app/upstream.js';
import { AuditTrail, type AuditObserver, type AuditTrailOptions } from '../audit/trail.js';
import { knownLabels, SidecarMetrics, type MetricsOptions } from '../metrics/metrics.js';
import { findActiveGrant } from '../auth/grant.js';
import { isDenial } from '../errors.js';
import { DEFAULT_MAX_HEADERS, upstreamRequestHeaders } from '../http/headers.js';
import { DEFAULT_MAX_QUERY_PARAMS } from '../routing/query.js';
import { handleCall } from '../pipeline/pipeline.js';
import type { Deps } from '../pipeline/deps.js';
import { approvalExecutor } from '../app/executor.js';
import { writeSocketError } from '../http/respond.js';
import { DEFAULT_LIMITS, DEFAULT_MAX_BODY_BYTES, DEFAULT_DRAIN_DELAY_MS, type Limits } from './limits.js';
import type { AppProbes } from '../kubernetes/app-probes.js';

export { DEFAULT_DRAIN_DELAY_MS, DEFAULT_MAX_BODY_BYTES };

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
  egress?: { agentId: string; agentKey: JWK; providerKey: string };
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

export function parseHostPort(s: string, flag: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(s);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new Error(`${flag} must be HOST:PORT, got "${s}"`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}

export async function startSidecar(opts: SidecarOptions): Promise<Sidecar> {
  const log = opts.log ?? createLogger();
  const adminProblem = adminStartupProblem({ adminToken: opts.adminToken, insecureNoToken: opts.adminInsecureNoToken, approvals: Boolean(opts.policy.accessRequests) });
  if (adminProblem) throw new Error(adminProblem);
  if (opts.adminInsecureNoToken) log.warn('admin API open without a token: anyone who reaches the admin listener reads audit entries and approves calls', { flag: INSECURE_FLAG });
  const limits: Limits = {
    ...DEFAULT_LIMITS,
    maxBodyBytes: opts.maxBodyBytes ?? DEFAULT_LIMITS.maxBodyBytes,
    maxHeaders: opts.maxHeaders ?? DEFAULT_LIMITS.maxHeaders,
    maxQueryParams: opts.maxQueryParams ?? DEFAULT_LIMITS.maxQueryParams,
    shutdownGraceMs: opts.shutdownGraceMs ?? DEFAULT_LIMITS.shutdownGraceMs,
    auditDrainMs: opts.audit?.drainMs ?? DEFAULT_LIMITS.auditDrainMs,
  };
  const upstream = new Upstream(opts.upstream, limits.upstreamConnections, opts.policy.egress ? limits.egressUpstreamHeadersTimeoutMs : limits.upstreamHeadersTimeoutMs);
  const now = opts.now ?? Date.now;
  const metrics = new SidecarMetrics(opts.metrics);
  const shared = opts.redis ? sharedStores(opts.redis, log, metrics, now) : undefined;
  metrics.policyLoaded(opts.policy.hash, now());
  // Series with labels known now start at 0, so the first denial, expiry or export failure shows in increase().
  metrics.initialise(knownLabels(opts.policy));
  if (opts.audit) metrics.auditExporters(opts.audit.exporters.map((e) => e.name));
  const audit = opts.audit ? new AuditTrail({ ...opts.audit, redactPatterns: opts.policy.audit.redact, log, observer: auditObserver(metrics) }) : undefined;
  await audit?.start();
  if (!audit) log.warn('audit trail disabled: no audit key (--audit-key-file or AGENTS_CHAIN_AUDIT_KEY)');
  const egress = opts.policy.egress ? await egressIdentity(opts) : undefined;
  // Always present (a reload may add hosts); consulted only while the policy lists hosts.
  const registered = new RegisteredAgents(opts.agentRegistry ?? (shared ? new RedisAgentRegistry(shared.client, shared.prefix) : new MemoryAgentRegistry()));
  const approvals = opts.policy.accessRequests
    ? new ApprovalService(
        opts.accessRequestStore ?? shared?.accessRequests ?? new MemoryAccessRequestStore(),
        opts.policy.accessRequests,
        opts.notifier ?? webhookFrom(opts, log),
        approvalExecutor({ upstream, policy: () => current.policy, registered, now, rules: { tokenHeader: opts.tokenHeader ?? 'authorization', egress }, limits }),
        log,
        now,
        (event, r) => {
          countApprovalEvent(metrics, event, r, now());
          void audit?.record(approvalEntry(event, r, now())).catch((err: Error) => log.error('audit record failed', { requestId: r.id, event, error: err.message }));
        },
      )
    : undefined;
  metrics.setSources({
    pendingAccessRequests: approvals ? async () => (await approvals.pending()).length : undefined,
    audit: audit && (() => ({ recorded: audit.stats.recorded, buffered: audit.buffered, spoolBytes: audit.stats.spoolBytes, oldestUnexportedAgeSeconds: audit.oldestUnexportedAgeSeconds(now()), available: audit.available })),
  });
  const deps: Deps = {
    policy: opts.policy,
    replay: opts.replay ?? shared?.replay ?? memoryReplayStore(opts.replayMaxEntries, log, now),
    tokenHeader: opts.tokenHeader ?? 'authorization',
    limits,
    now,
    upstream,
    log,
    approvals,
    audit,
    metrics,
    egress,
    registered,
  };
  let ready = false;
  // Set on close: readiness fails and responses carry `connection: close`, while the listener still accepts.
  let draining = false;

  // Each call takes the deps current when it arrives, and keeps them: a reload swaps the whole object.
  let current = deps;
  // Calls being handled, so shutdown can wait for their audit record (the socket may close before the handler ends).
  const inFlight = new Set<Promise<void>>();
  const data = createServer({ requireHostHeader: true }, (req, res) => {
    // Serve the call, but make the client open its next connection anew: by then it resolves to a ready endpoint.
    if (draining) res.setHeader('connection', 'close');
    const call = handleCall(req, res, current);
    inFlight.add(call);
    void call.finally(() => inFlight.delete(call));
  });
  // Node keeps only the first maxHeadersCount headers and drops the rest unseen: one more than the limit lets
  // checkRequestShape see that there were too many and refuse (431) instead of judging a truncated request.
  data.maxHeadersCount = limits.maxHeaders + 1;
  data.keepAliveTimeout = limits.keepAliveTimeoutMs;
  data.headersTimeout = limits.headersTimeoutMs;
  data.requestTimeout = limits.requestTimeoutMs;
  // Requests Node's parser refuses still get the JSON error shape.
  data.on('clientError', (err: NodeJS.ErrnoException, socket) => writeSocketError(socket, err));
  // Readiness: the policy was loaded (startup refuses otherwise), both listeners are up, the audit spool takes entries.
  const readiness = () => ({
    policy: true, listeners: ready,
    ...(audit ? { auditSpool: audit.available } : {}),
    ...(shared ? { redis: redisReady(shared.client) } : {}),
  });
  const admin = createServer(adminHandler({ readiness, draining: () => draining, approvals, adminToken: opts.adminToken, insecureNoToken: opts.adminInsecureNoToken, log, audit, metrics, registry: deps.registered?.registry, hasHosts: () => current.policy.hosts.size > 0, now, appProbes: opts.appProbes }));

  const dataAddr = await listen(data, parseHostPort(opts.listen ?? '127.0.0.1:8080', '--listen'), log);
  const adminAddr = await listen(admin, parseHostPort(opts.admin ?? '127.0.0.1:9090', '--admin'), log);
  ready = true;
  log.info('sidecar listening', {
    listen: urlOf(dataAddr), admin: urlOf(adminAddr), upstream: upstream.origin,
    policy: opts.policy.file, policyHash: opts.policy.hash,
  });

  let closing: Promise<void> | undefined;
  let endDrainDelay: (() => void) | undefined;
  let reloading: Promise<ReloadResult> = Promise.resolve({ ok: true, changed: false, hash: opts.policy.hash });
  const reloadOnce = async (text?: string): Promise<ReloadResult> => {
    let next: Policy;
    try {
      next = text === undefined ? await loadPolicyFile(opts.policy.file) : await loadPolicyText(text, opts.policy.file);
    } catch (err) {
      const issues = err instanceof PolicyError ? err.issues.map(formatIssue) : [(err as Error).message];
      metrics.policyReloaded({ ok: false });
      log.error('policy reload refused; the last good policy keeps serving', { policy: opts.policy.file, activeHash: current.policy.hash, issues });
      return { ok: false, issues };
    }
    if (next.hash === current.policy.hash) {
      metrics.policyReloadOk.set(1); // back to the active policy (a refused version was reverted)
      return { ok: true, changed: false, hash: next.hash };
    }
    const refused = reloadConflict(current.policy, next);
    if (refused) {
      metrics.policyReloaded({ ok: false });
      log.error('policy reload refused; the last good policy keeps serving', { policy: opts.policy.file, activeHash: current.policy.hash, issues: [refused] });
      return { ok: false, issues: [refused] };
    }
    current = { ...current, policy: next };
    audit?.setRedactPatterns(next.audit.redact);
    metrics.policyReloaded({ ok: true, hash: next.hash, nowMs: now() });
    metrics.initialise(knownLabels(next));
    log.info('policy reloaded', { policy: opts.policy.file, policyHash: next.hash });
    return { ok: true, changed: true, hash: next.hash };
  };

  return {
    url: urlOf(dataAddr),
    adminUrl: urlOf(adminAddr),
    get policyHash() {
      return current.policy.hash;
    },
    reloadPolicy(text?: string) {
      // One at a time, in order: the last file read wins.
      reloading = reloading.catch(() => undefined).then(() => reloadOnce(text));
      return reloading;
    },
    close(options) {
      const delay = options?.drainDelayMs ?? opts.drainDelayMs ?? 0;
      // One shutdown, however many signals arrive; a second one asking for no delay ends the delay now.
      if (closing) {
        if (delay === 0) endDrainDelay?.();
        return closing;
      }
      closing = (async () => {
        // Readiness first, so the endpoints controller stops sending. Clients and proxies learn of that only
        // after a while, so the listener keeps accepting (and serving) for the drain delay: a connection
        // refused in that window would be a failed call. Then stop accepting and let calls finish.
        draining = true;
        const grace = limits.shutdownGraceMs;
        if (delay > 0) {
          log.info('draining: /readyz fails, new connections are still accepted', { phase: 'drain_delay', drainDelayMs: delay, shutdownGraceMs: grace });
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, delay);
            endDrainDelay = () => { clearTimeout(timer); resolve(); };
          });
        }
        ready = false; // the data listener stops accepting now
        log.info('draining: stopped accepting; waiting for calls in flight', { phase: 'stop_accepting', inFlight: inFlight.size, shutdownGraceMs: grace });
        const deadline = Date.now() + grace;
        // Callers waiting for a human are released just before the deadline, with a status URL to poll.
        const release = setTimeout(() => approvals?.releaseWaiters(), Math.max(0, grace - 1_000));
        // The admin listener stays up meanwhile: probes see not-ready, Prometheus can still scrape.
        const cut = await closeServer(data, grace);
        if (cut) log.warn('draining: shutdown grace over; connections still open were closed', { phase: 'grace_expired', shutdownGraceMs: grace });
        clearTimeout(release);
        approvals?.releaseWaiters(); // whoever still waits (a client that hung up) stops waiting
        const left = () => Math.max(0, deadline - Date.now());
        await Promise.race([Promise.allSettled([...inFlight]), new Promise((r) => setTimeout(r, left()).unref())]);
        await approvals?.settle(Math.max(1_000, left()));
        await closeServer(admin, 1_000);
        approvals?.close();
        // Calls are done and recorded: flush and deliver what we can; the rest stays in the spool.
        if (audit) log.info('draining: calls finished; delivering the audit trail', { phase: 'audit_drain', auditDrainMs: limits.auditDrainMs });
        await audit?.drain(limits.auditDrainMs);
        await upstream.close();
        await shared?.close();
        log.info('stopped', { phase: 'stopped' });
      })();
      return closing;
    },
  };
}

/**
 * What a live reload cannot change: the parts other components were built
 * from at start (egress identity, access-request settings). A restart applies those.
 */
function reloadConflict(active: Policy, next: Policy): string | undefined {
  if ((active.egress?.preset.name ?? 'ingress') !== (next.egress?.preset.name ?? 'ingress')) return 'mode and preset cannot change on reload; restart the sidecar';
  if (JSON.stringify(active.accessRequests ?? null) !== JSON.stringify(next.accessRequests ?? null)) return 'accessRequests settings cannot change on reload; restart the sidecar';
  return undefined;
}

/** Egress: the agent's signer (its key must be the policy's key for that agent) and the provider credential header. */
async function egressIdentity(opts: SidecarOptions): Promise<{ signer: AgentSigner; credential: [string, string] }> {
  const preset = opts.policy.egress!.preset;
  if (!opts.egress) throw new Error(`egress mode (${preset.name}) needs the agent's key (--agent-key, --agent) and the provider key (AGENTS_CHAIN_PROVIDER_KEY or --provider-key-file)`);
  const agent = opts.policy.agents.get(opts.egress.agentId);
  if (!agent) throw new Error(`--agent ${opts.egress.agentId} is not an agent in the policy`);
  const signer = await createAgentSigner(opts.egress.agentKey, agent.id);
  if (signer.thumbprint !== agent.thumbprint) throw new Error(`--agent-key is not the key the policy lists for ${agent.id}`);
  if (!opts.egress.providerKey) throw new Error('the provider key is empty');
  return { signer, credential: [preset.credential.header, `${preset.credential.prefix}${opts.egress.providerKey}`] };
}

/** One command connection (auto-pipelined) and one subscriber, shared by the Redis-backed stores. */
function sharedStores(settings: RedisSettings, log: Logger, metrics: SidecarMetrics, now: () => number) {
  const client = connectRedis(settings, log);
  const subscriber = connectRedis(settings, log, 'subscriber');
  const cluster = (settings.cluster?.length ?? 0) > 0;
  return {
    client,
    prefix: settings.prefix,
    // One namespace for token ids on this Redis, whatever the prefix; a Cluster spreads it over 16 hash tags.
    replay: new RedisReplayStore(client, {
      log, now, windowMs: REPLAY_WINDOW_SECONDS * 1000, slotGroups: cluster ? 16 : 1, watchServer: !cluster,
      onReset: (cause) => metrics.replayStoreResets.inc({ cause }),
    }),
    accessRequests: new RedisAccessRequestStore(client, subscriber, settings.prefix),
    async close() {
      client.disconnect();
      subscriber.disconnect();
    },
  };
}

function auditObserver(m: SidecarMetrics): AuditObserver {
  return {
    exported: (exporter) => m.auditBatchesExported.inc({ exporter }),
    exportFailed: (exporter) => m.auditExportFailures.inc({ exporter }),
    servedWhileUnavailable: () => m.auditUnaudited.inc(),
    dropped: (entries) => m.auditDropped.inc(entries),
  };
}

function countApprovalEvent(m: SidecarMetrics, event: ApprovalEvent, r: AccessRequest, nowMs: number): void {
  if (event === 'created') m.accessRequestsCreated.inc({ capability: r.capability });
  else if (event === 'approved' || event === 'denied' || event === 'expired') m.accessRequestResolved(r.capability, event, (nowMs - r.createdAt) / 1000);
}

/** The in-process replay window, bounded so that it refuses calls before the process runs out of memory. */
function memoryReplayStore(maxEntries: number | undefined, log: Logger, now: () => number): MemoryReplayStore {
  const limit = process.constrainedMemory?.();
  const capacity = maxEntries ?? replayCapacity(limit);
  log.info('replay window in memory', { maxEntries: capacity, memoryLimitBytes: limit || null, source: maxEntries ? '--replay-max-entries' : 'memory limit' });
  return new MemoryReplayStore(capacity, now);
}

/** The audit entry of an approval event. */
function approvalEntry(event: ApprovalEvent, r: AccessRequest, nowMs: number): AuditEntry {
  const result: AuditEntry['result'] = event === 'approved' || event === 'created' || (event === 'executed' && (r.outcome?.status ?? 500) < 500) ? 'success'
    : event === 'executed' ? 'error' : 'denied';
  return {
    id: newEntryId(), agentId: r.agentId, agentName: r.agentName, capability: r.capability, args: r.args, result,
    ...(result === 'denied' ? { denialReason: event } : {}), jti: null, timestamp: nowMs, durationMs: nowMs - r.createdAt,
    method: r.method, path: r.target, status: r.outcome?.status ?? 0,
    ...(r.outcome ? { upstreamStatus: r.outcome.status } : {}),
    requestId: r.id, event: `approval.${event}`,
    ...(event === 'approved' || event === 'executed' ? { permission: 'approved' as const } : event === 'expired' ? { permission: 'expired' as const } : event === 'denied' ? { permission: 'denied' as const } : {}),
  };
}

/** The policy's webhook, with its secrets read from the environment. */
function webhookFrom(opts: SidecarOptions, log: Logger): Notifier {
  const hook = opts.policy.accessRequests?.webhook;
  if (!hook) return silentNotifier;
  const env = opts.env ?? process.env;
  const url = hook.url ?? env[hook.urlEnv!];
  if (!url) throw new Error(`accessRequests.notifier.webhook.urlEnv names ${hook.urlEnv}, which is not set`);
  const headers: Record<string, string> = { ...hook.headers };
  for (const [name, variable] of Object.entries(hook.headersEnv)) {
    const value = env[variable];
    if (value === undefined) throw new Error(`accessRequests.notifier.webhook.headersEnv.${name} names ${variable}, which is not set`);
    headers[name] = value;
  }
  return new WebhookNotifier({ url, format: hook.format, headers, retries: hook.retries, log, adminUrl: opts.adminPublicUrl });
}

/**
 * Binds `at`. "::" (what injection uses: IPv4 and IPv6 callers alike, and IPv6-only clusters) falls back
 * to 0.0.0.0 on a kernel without IPv6, where binding "::" fails.
 */
async function listen(server: Server, at: { host: string; port: number }, log?: Logger): Promise<AddressInfo> {
  try {
    return await bind(server, at);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (at.host !== '::' || (code !== 'EAFNOSUPPORT' && code !== 'EADDRNOTAVAIL')) throw err;
    log?.warn('no IPv6 on this host: listening on 0.0.0.0 instead of [::]', { port: at.port, code });
    return bind(server, { host: '0.0.0.0', port: at.port });
  }
}

function bind(server: Server, at: { host: string; port: number }): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(at.port, at.host, () => {
      server.off('error', reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

/**
 * Stops accepting, lets in-flight calls finish for up to `graceMs`, then cuts
 * what is left. Keep-alive connections are closed as soon as they go idle
 * (server.close alone closes only those idle at the moment it is called).
 * Resolves true when the grace ran out and connections were cut.
 */
function closeServer(server: Server, graceMs = 5_000): Promise<boolean> {
  return new Promise((resolve) => {
    let cut = false;
    const deadline = setTimeout(() => { cut = true; server.closeAllConnections(); }, graceMs);
    const sweep = setInterval(() => server.closeIdleConnections(), 50);
    deadline.unref();
    sweep.unref();
    server.close(() => { clearTimeout(deadline); clearInterval(sweep); resolve(cut); });
    server.closeIdleConnections();
  });
}

function urlOf(a: AddressInfo): string {
  const host = a.family === 'IPv6' ? `[${a.address}]` : a.address;
  return `http://${host}:${a.port}`;
}
