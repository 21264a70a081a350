import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApprovalService, ResolutionError } from '../approvals/service.js';
import type { AccessRequest } from '../approvals/types.js';
import type { AuditTrail } from '../audit/trail.js';
import type { SidecarMetrics } from '../metrics/metrics.js';
import type { AgentRegistry } from '../registration/registry.js';
import { agentView } from '../endpoints/registration.js';
import { redactForReview } from '../audit/redact.js';
import type { Logger } from '../log.js';
import { readJsonObject, sendJson } from '../http/respond.js';
import { APP_HEALTH_PREFIX, answerAppHealth, type AppProbes } from '../kubernetes/app-probes.js';

export interface AdminOptions {
  /** Each readiness check by name: true when it passes. */
  readiness: () => Record<string, boolean>;
  /** True once shutdown began: /readyz answers 503 "draining" whatever the checks say. */
  draining?: () => boolean;
  approvals?: ApprovalService;
  /** Bearer token for everything but the probes and /metrics; without one all of that is closed. */
  adminToken?: string;
  /** No token, and everything open to whoever reaches the listener (--admin-insecure-no-token: local demos only). */
  insecureNoToken?: boolean;
  log: Logger;
  audit?: AuditTrail;
  metrics?: SidecarMetrics;
  /** Agents registered by hosts. */
  registry?: AgentRegistry;
  /** Whether the active policy lists hosts (registration is on). */
  hasHosts?: () => boolean;
  now?: () => number;
  /** The app's own probes (iptables capture mode), answered on /app-health/<container>/<kind> without a token. */
  appProbes?: AppProbes;
}

/** At most one "admin call without a valid token" line per this interval (the others are counted into the next line). */
export const UNAUTHORIZED_LOG_INTERVAL_MS = 10_000;

/**
 * A gate for a log line: returns how many calls were held back since the last
 * line when it is time to write one, undefined while it is not. Pure but for
 * the clock it is given.
 */
export function throttled(now: () => number, intervalMs: number): () => number | undefined {
  let last = -Infinity;
  let held = 0;
  return () => {
    const t = now();
    if (t - last < intervalMs) {
      held++;
      return undefined;
    }
    last = t;
    const n = held;
    held = 0;
    return n;
  };
}

const RESOLUTION_STATUS: Record<ResolutionError, number> = {
  not_found: 404, already_resolved: 409, invalid_code: 403, too_many_attempts: 429, invalid_scope: 400,
};

/** The flag (and its environment variable) that lets the admin API run without a token. */
export const INSECURE_FLAG = '--admin-insecure-no-token';
export const INSECURE_ENV = 'AGENTS_CHAIN_ADMIN_INSECURE_NO_TOKEN';

/**
 * Why the admin listener must not start as configured, or undefined. With
 * approvals on, the admin API changes state (approve, deny, value grants):
 * without a token nobody could approve, and opening it to whoever reaches the
 * port (in a pod: anything on the pod network) needs the explicit flag.
 */
export function adminStartupProblem(o: { adminToken?: string; insecureNoToken?: boolean; approvals: boolean }): string | undefined {
  if (o.adminToken && o.insecureNoToken) return `give an admin token or ${INSECURE_FLAG}, not both`;
  if (o.approvals && !o.adminToken && !o.insecureNoToken) {
    return 'the policy turns on human approval (accessRequests), whose admin API approves and denies calls: ' +
      `set an admin token (AGENTS_CHAIN_ADMIN_TOKEN or --admin-token-file), or pass ${INSECURE_FLAG} (${INSECURE_ENV}=true) ` +
      'to serve it to anyone who reaches the admin listener';
  }
  return undefined;
}

/**
 * The operator listener. Open to whoever reaches it: /healthz, /readyz and
 * /app-health/... (the kubelet) and /metrics (Prometheus). Everything else (/stats, audit entries,
 * registered agents, approvals) only with the admin bearer token; with no
 * token configured it is closed (403 admin_disabled), unless insecureNoToken.
 * It never shares a port with agents.
 */
export function adminHandler(opts: AdminOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const expected = opts.adminToken ? digest(opts.adminToken) : undefined;
  const open = !expected && opts.insecureNoToken === true;
  // Anything on the pod network can reach this port: refused calls are logged at most once per interval, with a count.
  const refusedLog = throttled(opts.now ?? Date.now, UNAUTHORIZED_LOG_INTERVAL_MS);
  return (req, res) => {
    void route(req, res).catch((err: Error) => {
      opts.log.error('admin request failed', { error: err.message });
      if (!res.headersSent) sendJson(res, 500, { error: 'internal_error', message: 'the admin request failed' });
    });
  };

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '').split('?')[0]!;
    const method = req.method ?? '';
    if (path === '/healthz' && (method === 'GET' || method === 'HEAD')) return sendJson(res, 200, { status: 'ok' });
    if (path === '/readyz' && (method === 'GET' || method === 'HEAD')) {
      const checks = opts.readiness();
      const ready = Object.values(checks).every(Boolean);
      const named = Object.fromEntries(Object.entries(checks).map(([k, ok]) => [k, ok ? 'ok' : 'failing']));
      if (opts.draining?.()) return sendJson(res, 503, { status: 'draining', message: 'shutting down: new calls should go to another endpoint', checks: named });
      return sendJson(res, ready ? 200 : 503, { status: ready ? 'ready' : 'not_ready', checks: named });
    }
    // The kubelet's probes of the app, sent here because the app's port is captured: open like /readyz.
    if (path.startsWith(APP_HEALTH_PREFIX) && (method === 'GET' || method === 'HEAD')) return answerAppHealth(res, path, opts.appProbes);
    if (path === '/metrics' && (method === 'GET' || method === 'HEAD') && opts.metrics) {
      // Like kubelet probes, Prometheus scrapes without credentials; keep the admin port inside the pod network.
      const text = await opts.metrics.metrics();
      res.writeHead(200, { 'content-type': opts.metrics.contentType, 'content-length': Buffer.byteLength(text) });
      return void res.end(method === 'HEAD' ? undefined : text);
    }
    // Past this point every endpoint needs the admin token: audit counters and entries, agents, approvals.
    if (!open) {
      if (!expected) return sendJson(res, 403, { error: 'admin_disabled', message: `set AGENTS_CHAIN_ADMIN_TOKEN or --admin-token-file to use ${method} ${path} on the admin listener` });
      if (!authorized(req, expected)) {
        const suppressed = refusedLog();
        if (suppressed !== undefined) opts.log.warn('admin call without a valid token', { method, path, ...(suppressed ? { alsoRefusedSinceLastLine: suppressed } : {}) });
        return sendJson(res, 401, { error: 'unauthorized', message: 'admin bearer token required' }, { 'www-authenticate': 'Bearer realm="agents-chain-admin"' });
      }
    }
    if (path === '/stats' && method === 'GET') {
      return sendJson(res, 200, opts.audit ? { audit: { ...opts.audit.stats, backlog: opts.audit.backlog } } : { audit: null });
    }
    if (path === '/stats/entries' && method === 'GET') {
      const limit = Math.min(500, Math.max(1, Number(new URLSearchParams((req.url ?? '').split('?')[1] ?? '').get('limit') ?? 50) || 50));
      return sendJson(res, 200, { entries: opts.audit?.recentEntries(limit) ?? [] });
    }
    if (path === '/agents' || path.startsWith('/agents/')) {
      if (!opts.registry || !(opts.hasHosts?.() ?? true)) return sendJson(res, 404, { error: 'not_found', message: 'the policy lists no hosts: no agents can be registered' });
      if (path === '/agents' && method === 'GET') return sendJson(res, 200, { agents: (await opts.registry.list()).map(agentView) });
      const m = /^\/agents\/([^/]+)\/revoke$/.exec(path);
      if (m && method === 'POST') {
        let id: string;
        try {
          id = decodeURIComponent(m[1]!);
        } catch {
          return sendJson(res, 400, { error: 'invalid_path', message: 'malformed percent-encoding in the agent id' });
        }
        const revoked = await opts.registry.revoke(id, (opts.now ?? Date.now)());
        if (revoked) opts.log.info('registered agent revoked by an operator', { agent: id });
        const current = revoked ?? (await opts.registry.get(id));
        return current ? sendJson(res, 200, agentView(current)) : sendJson(res, 404, { error: 'agent_not_found', message: `no registered agent "${id}"` });
      }
      return sendJson(res, 404, { error: 'not_found', message: `no admin endpoint ${method} ${path}` });
    }
    if (!path.startsWith('/approvals')) return sendJson(res, 404, { error: 'not_found', message: `no admin endpoint ${method} ${path}` });
    const approvals = opts.approvals;
    if (!approvals) return sendJson(res, 404, { error: 'not_found', message: 'request_permission is not configured (constraintAware and accessRequests)' });

    const parts = path.split('/').slice(1); // ['approvals', ...]
    if (parts.length === 1 && method === 'GET') {
      return sendJson(res, 200, { requests: (await approvals.pending()).map(view) });
    }
    if (parts[1] === 'grants') {
      if (parts.length === 2 && method === 'GET') return sendJson(res, 200, { grants: await approvals.valueApprovals() });
      if (parts.length === 3 && method === 'DELETE') {
        return (await approvals.revokeValueApproval(parts[2]!))
          ? sendJson(res, 200, { revoked: parts[2] })
          : sendJson(res, 404, { error: 'not_found', message: 'no such value approval' });
      }
    }
    const id = parts[1];
    if (id && parts.length === 2 && method === 'GET') {
      const r = await approvals.get(id);
      return r ? sendJson(res, 200, view(r)) : sendJson(res, 404, { error: 'not_found', message: 'no such access request' });
    }
    if (id && parts.length === 3 && method === 'POST') {
      const body = await readJsonObject(req);
      if (!body) return sendJson(res, 400, { error: 'invalid_body', message: 'expected a JSON object' });
      const action = parts[2];
      const result = action === 'approve' ? await approvals.approve(id, body.code, body.scope ?? 'once')
        : action === 'deny' ? await approvals.deny(id, body.code, body.reason)
        : action === 'code' ? await approvals.reissueCode(id)
        : undefined;
      if (result === undefined) return sendJson(res, 404, { error: 'not_found', message: `no admin action "${action}"` });
      if (typeof result === 'string') return sendJson(res, RESOLUTION_STATUS[result], { error: result, message: resolutionMessage(result) });
      if ('code' in result && 'request' in result) return sendJson(res, 200, { ...view(result.request), code: result.code });
      return sendJson(res, 200, view(result as AccessRequest));
    }
    sendJson(res, 404, { error: 'not_found', message: `no admin endpoint ${method} ${path}` });
  }
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

function authorized(req: IncomingMessage, expected: Buffer): boolean {
  const m = /^Bearer +(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  return m !== null && timingSafeEqual(digest(m[1]!), expected);
}

/** What operators see of a request: never the code hash; args with secrets redacted, and which ones (`redacted`). */
function view(r: AccessRequest): Record<string, unknown> {
  const shown = redactForReview(r.args);
  return {
    id: r.id, state: r.state, agentId: r.agentId, agentName: r.agentName, capability: r.capability,
    method: r.method, path: r.target, args: shown.value, redacted: shown.redacted, reason: r.reason, violations: r.violations,
    createdAt: new Date(r.createdAt).toISOString(), expiresAt: new Date(r.expiresAt).toISOString(),
    notified: r.notified, scope: r.scope, denyReason: r.denyReason,
    resolvedAt: r.resolvedAt === undefined ? undefined : new Date(r.resolvedAt).toISOString(),
    resultStatus: r.outcome?.status,
  };
}

function resolutionMessage(e: ResolutionError): string {
  switch (e) {
    case 'not_found': return 'no such access request';
    case 'already_resolved': return 'this request was already approved, denied or expired';
    case 'invalid_code': return 'wrong approval code; the request is still pending';
    case 'too_many_attempts': return 'too many wrong codes for this request; wait a minute';
    case 'invalid_scope': return 'scope must be "once" or "value"';
  }
}
