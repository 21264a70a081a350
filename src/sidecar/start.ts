import { mcpSessionStore } from '../mcp/sessions.js';
import { createServer, type Server } from 'node:http';
import { adminHandler, adminStartupProblem, INSECURE_FLAG } from '../admin/handler.js';
import type { ApprovalService } from '../approvals/service.js';
import { Upstream } from '../app/upstream.js';
import type { AuditTrail } from '../audit/trail.js';
import { createLogger, type Logger } from '../log.js';
import type { SidecarMetrics } from '../metrics/metrics.js';
import { redisReady } from '../redis/connect.js';
import { RegisteredAgents } from '../registration/directory.js';
import { approvalService } from './approvals.js';
import { egressIdentity } from './egress.js';
import { PolicyReloader, Shutdown } from './lifecycle.js';
import { Admission } from './admission.js';
import { dataServer, listen, urlOf } from './listeners.js';
import { ED25519 } from '../auth/ed25519-verify.js';
import { DEFAULT_DRAIN_DELAY_MS, DEFAULT_MAX_BODY_BYTES } from './limits.js';
import { DEFAULT_ADMIN, DEFAULT_LISTEN, DEFAULT_TOKEN_HEADER, limitsFrom, parseHostPort, type Sidecar, type SidecarOptions } from './options.js';
import { SidecarState } from './state.js';
import { agentRegistry, memoryReplayStore, sharedStores, type SharedStores } from './stores.js';
import { metricSources, startAudit, startMetrics } from './telemetry.js';

// The sidecar's public API, importable from here whichever file holds each part.
export { DEFAULT_DRAIN_DELAY_MS, DEFAULT_MAX_BODY_BYTES, parseHostPort };
export type { ReloadResult, Sidecar, SidecarOptions } from './options.js';

/**
 * The composition root: builds the stores, metrics, audit trail and approvals, hands them to the request
 * path as one `Deps`, starts both listeners, and returns the handle that reloads and stops the sidecar.
 */
export async function startSidecar(opts: SidecarOptions): Promise<Sidecar> {
  const log = opts.log ?? createLogger();
  refuseUnsafeAdmin(opts, log);
  const limits = limitsFrom(opts);
  const now = opts.now ?? Date.now;
  const tokenHeader = opts.tokenHeader ?? DEFAULT_TOKEN_HEADER;
  const upstream = new Upstream(
    opts.upstream,
    limits.upstreamConnections,
    opts.policy.egress ? limits.egressUpstreamHeadersTimeoutMs : limits.upstreamHeadersTimeoutMs,
  );

  const metrics = startMetrics(opts, now);
  const shared = opts.redis ? await sharedStores(opts.redis, log, metrics, now) : undefined;
  const audit = await startAudit(opts, log, metrics);
  const egress = await egressIdentity(opts);
  // Always present (a reload may add hosts); consulted only while the policy lists hosts.
  const registered = new RegisteredAgents(agentRegistry(opts, shared));
  const mcpSessions = mcpSessionStore({ maxSessions: limits.mcpMaxSessions, perOwner: limits.mcpSessionsPerAgent, idleMs: limits.mcpSessionIdleMs, now });
  const approvals = approvalService({
    opts,
    log,
    now,
    metrics,
    audit,
    sharedStore: shared?.accessRequests,
    // A human answers later: the approved call runs under the policy active then, which `state` (below) holds.
    executor: { upstream, policy: () => state.current.policy, registered, now, rules: { tokenHeader, egress }, limits, mcpSessions },
  });
  const replay = opts.replay ?? shared?.replay ?? memoryReplayStore(opts.replayMaxEntries, log, now);
  const core = { policy: opts.policy, replay, tokenHeader, limits, now, upstream, log };
  const state = new SidecarState({ ...core, approvals, audit, metrics, egress, registered, mcpSessions });
  const admission = new Admission(limits); // its limit: --max-in-flight, or lower while the loop's delay holds it down
  metrics.setSources({ ...metricSources(approvals, audit, now), inFlight: () => ({ current: state.inFlight.size, limit: admission.limit }) });
  const data = dataServer(state, limits, admission);
  const admin = adminServer(opts, state, { approvals, audit, metrics, registered, shared, log, now, admission });
  const dataAddr = await listen(data, parseHostPort(opts.listen ?? DEFAULT_LISTEN, '--listen'), log);
  // A busy admin port must not leave the agent port bound (an embedding caller would hold it after the error).
  const adminAddr = await listen(admin, parseHostPort(opts.admin ?? DEFAULT_ADMIN, '--admin'), log).catch((err: unknown) => {
    data.close();
    throw err;
  });
  state.ready = true;
  log.info('sidecar listening', {
    listen: urlOf(dataAddr),
    admin: urlOf(adminAddr),
    upstream: upstream.origin,
    policy: opts.policy.file,
    policyHash: opts.policy.hash,
    ed25519: ED25519.verifier.name,
  });
  warnOnVerifierFallback(log);

  const reloader = new PolicyReloader({ state, file: opts.policy.file, metrics, audit, log, now });
  const shutdown = new Shutdown({ state, data, admin, approvals, audit, upstream, shared, limits, log, drainDelayMs: opts.drainDelayMs ?? 0 });
  return {
    url: urlOf(dataAddr),
    adminUrl: urlOf(adminAddr),
    get policyHash() {
      return state.current.policy.hash;
    },
    reloadPolicy: (text?: string) => reloader.reload(text),
    close: (options?: { drainDelayMs?: number }) => shutdown.close(options),
  };
}

/** An admin API that approves calls is refused without a token; an open one (the insecure flag) is said aloud. */
function refuseUnsafeAdmin(opts: SidecarOptions, log: Logger): void {
  const problem = adminStartupProblem({
    adminToken: opts.adminToken,
    insecureNoToken: opts.adminInsecureNoToken,
    approvals: Boolean(opts.policy.accessRequests),
  });
  if (problem) throw new Error(problem);
  if (opts.adminInsecureNoToken)
    log.warn('admin API open without a token: anyone who reaches the admin listener reads audit entries and approves calls', { flag: INSECURE_FLAG });
}

/** Said once at startup: a platform without the prebuilt binary (musl, old glibc) verifies with node:crypto. */
function warnOnVerifierFallback(log: Logger): void {
  if (ED25519.fallbackReason)
    log.warn('libsodium (sodium-native) did not load: Ed25519 is verified with node:crypto, about 2x the CPU', { reason: ED25519.fallbackReason });
}

interface AdminParts {
  approvals?: ApprovalService;
  audit?: AuditTrail;
  metrics: SidecarMetrics;
  registered: RegisteredAgents;
  shared?: SharedStores;
  log: Logger;
  now: () => number;
  admission: Admission;
}

/** The operators' listener: probes, metrics, and the token-guarded admin API. */
function adminServer(opts: SidecarOptions, state: SidecarState, p: AdminParts): Server {
  const { approvals, audit, metrics, registered, shared, log, now, admission } = p;
  // Readiness: the policy was loaded (startup refuses otherwise), both listeners are up, the audit spool takes entries.
  const readiness = () => ({
    policy: true,
    listeners: state.ready,
    ...(audit ? { auditSpool: audit.available } : {}),
    ...(shared ? { redis: redisReady(shared.client) } : {}),
  });
  return createServer(
    adminHandler({
      readiness,
      draining: () => state.draining,
      load: () => ({ inFlight: state.inFlight.size, maxInFlight: state.current.limits.maxInFlight, admitting: admission.limit }),
      approvals,
      adminToken: opts.adminToken,
      insecureNoToken: opts.adminInsecureNoToken,
      log,
      audit,
      metrics,
      registry: registered.registry,
      hasHosts: () => state.current.policy.hosts.size > 0 || state.current.policy.dynamicHosts !== undefined,
      now,
      appProbes: opts.appProbes,
    }),
  );
}
