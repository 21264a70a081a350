import type { IncomingMessage } from 'node:http';
import type { ApprovalService } from '../approvals/service.js';
import type { AuditTrail } from '../audit/trail.js';
import { agentView } from '../endpoints/agent-view.js';
import { deny, isDenial, type Denial } from '../errors.js';
import { readJsonObject } from '../http/json-body.js';
import { jsonReply, type Reply } from '../http/respond.js';
import { APP_HEALTH_PREFIX, appHealthAnswer, type AppProbes } from '../kubernetes/app-probes.js';
import type { Logger } from '../log.js';
import type { SidecarMetrics } from '../metrics/metrics.js';
import type { AgentRegistry } from '../registration/registry.js';
import { requestView, resolveRequest, valueApprovalView } from './approvals.js';

export interface AdminContext {
  /** Each readiness check by name: true when it passes. */
  readiness: () => Record<string, boolean>;
  /** True once shutdown began: /readyz answers 503 "draining" whatever the checks say. */
  draining?: () => boolean;
  /**
   * Calls in flight, --max-in-flight, and the bound in force now (`admitting`: lower while the event loop's
   * delay bound holds it down). Reported by /readyz; saturation does not fail readiness.
   */
  load?: () => { inFlight: number; maxInFlight: number; admitting?: number };
  approvals?: ApprovalService;
  audit?: AuditTrail;
  metrics?: SidecarMetrics;
  /** Agents registered by hosts. */
  registry?: AgentRegistry;
  /** Whether the active policy lists hosts (registration is on). */
  hasHosts?: () => boolean;
  now?: () => number;
  /** The app's own probes (iptables capture mode), answered on /app-health/<container>/<kind> without a token. */
  appProbes?: AppProbes;
  log: Logger;
}

/** One admin endpoint: who may call it (`open`: the kubelet and Prometheus; `token`: operators), and its handler. */
export interface AdminRoute {
  readonly methods: readonly string[];
  /** Segments; `{name}` matches one (percent-decoded), a trailing `*` the rest. */
  readonly path: string;
  readonly access: 'open' | 'token';
  /** What must be configured for the route to exist; otherwise 404 with this message. */
  readonly needs?: { readonly available: (ctx: AdminContext) => boolean; readonly message: string };
  handle(req: IncomingMessage, params: Readonly<Record<string, string>>, ctx: AdminContext): Reply | Denial | Promise<Reply | Denial>;
}

const READ = ['GET', 'HEAD'];
const HOSTS = {
  available: (c: AdminContext) => c.registry !== undefined && (c.hasHosts?.() ?? true),
  message: 'the policy lists no hosts: no agents can be registered',
};
const APPROVALS = {
  available: (c: AdminContext) => c.approvals !== undefined,
  message: 'request_permission is not configured (constraintAware and accessRequests)',
};

/** The admin listener, as a table. Open routes first; everything else needs the admin token. */
export const ADMIN_ROUTES: readonly AdminRoute[] = [
  { methods: READ, path: '/healthz', access: 'open', handle: () => jsonReply(200, { status: 'ok' }) },
  { methods: READ, path: '/readyz', access: 'open', handle: (_req, _p, ctx) => readiness(ctx) },
  // The kubelet's probes of the app, sent here because the app's port is captured: open like /readyz.
  {
    methods: READ,
    path: `${APP_HEALTH_PREFIX}*`,
    access: 'open',
    handle: async (req, p, ctx) => {
      const { status, body } = await appHealthAnswer(`${APP_HEALTH_PREFIX}${p['*'] ?? ''}`, ctx.appProbes);
      return jsonReply(status, body);
    },
  },
  // Like kubelet probes, Prometheus scrapes without credentials; keep the admin port inside the pod network.
  {
    methods: READ,
    path: '/metrics',
    access: 'open',
    needs: { available: (c) => c.metrics !== undefined, message: 'metrics are off' },
    handle: async (req, _p, ctx) => {
      const metrics = ctx.metrics;
      if (!metrics) return deny('not_found', 'metrics are off');
      return { status: 200, text: await metrics.metrics(), contentType: metrics.contentType, headOnly: req.method === 'HEAD' };
    },
  },
  {
    methods: ['GET'],
    path: '/stats',
    access: 'token',
    handle: (_req, _p, { audit }) => jsonReply(200, audit ? { audit: { ...audit.stats, backlog: audit.backlog } } : { audit: null }),
  },
  { methods: ['GET'], path: '/stats/entries', access: 'token', handle: recentEntries },
  {
    methods: ['GET'],
    path: '/agents',
    access: 'token',
    needs: HOSTS,
    handle: async (_req, _p, ctx) => jsonReply(200, { agents: (await registryOf(ctx).list()).map(agentView) }),
  },
  { methods: ['POST'], path: '/agents/{id}/revoke', access: 'token', needs: HOSTS, handle: revokeAgent },
  {
    methods: ['GET'],
    path: '/approvals',
    access: 'token',
    needs: APPROVALS,
    handle: async (_req, _p, ctx) => jsonReply(200, { requests: (await approvalsOf(ctx).pending()).map(requestView) }),
  },
  {
    methods: ['GET'],
    path: '/approvals/grants',
    access: 'token',
    needs: APPROVALS,
    handle: async (_req, _p, ctx) => jsonReply(200, { grants: (await approvalsOf(ctx).valueApprovals()).map(valueApprovalView) }),
  },
  {
    methods: ['DELETE'],
    path: '/approvals/grants/{id}',
    access: 'token',
    needs: APPROVALS,
    handle: async (_req, p, ctx) => {
      const id = p.id ?? '';
      return (await approvalsOf(ctx).revokeValueApproval(id)) ? jsonReply(200, { revoked: id }) : deny('not_found', 'no such value approval');
    },
  },
  {
    methods: ['GET'],
    path: '/approvals/{id}',
    access: 'token',
    needs: APPROVALS,
    handle: async (_req, p, ctx) => {
      const r = await approvalsOf(ctx).get(p.id ?? '');
      return r ? jsonReply(200, requestView(r)) : deny('not_found', 'no such access request');
    },
  },
  // The action is a literal segment (never percent-decoded): a front proxy's rule on ".../approve" sees what runs.
  ...(['approve', 'deny', 'code'] as const).map((action): AdminRoute => ({
    methods: ['POST'],
    path: `/approvals/{id}/${action}`,
    access: 'token',
    needs: APPROVALS,
    handle: async (req, p, ctx) => {
      const body = await readJsonObject(req, 'expected a JSON object');
      return isDenial(body) ? body : resolveRequest(approvalsOf(ctx), p.id ?? '', action, body);
    },
  })),
  {
    methods: ['POST'],
    path: '/approvals/{id}/{action}',
    access: 'token',
    needs: APPROVALS,
    handle: (_req, p) => deny('not_found', `no admin action "${p.action ?? ''}"`),
  },
];

function readiness(ctx: AdminContext): Reply {
  const checks = ctx.readiness();
  const ready = Object.values(checks).every(Boolean);
  const named = Object.fromEntries(Object.entries(checks).map(([k, ok]) => [k, ok ? 'ok' : 'failing']));
  if (ctx.draining?.()) return jsonReply(503, { status: 'draining', message: 'shutting down: new calls should go to another endpoint', checks: named });
  const load = ctx.load?.();
  // Saturated is reported, not failed: a pod that leaves the Service under load only moves the load to its peers.
  const saturation = load ? { load: { ...load, saturated: load.inFlight >= Math.min(load.maxInFlight, load.admitting ?? Infinity) } } : {};
  return jsonReply(ready ? 200 : 503, { status: ready ? 'ready' : 'not_ready', checks: named, ...saturation });
}

/** GET /stats/entries?limit=N (1 to 500, default 50): the newest audit entries, decrypted, in memory only. */
function recentEntries(req: IncomingMessage, _p: Readonly<Record<string, string>>, { audit }: AdminContext): Reply | Denial {
  const query = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
  if (query.getAll('limit').length > 1) return deny('invalid_query', 'give limit once');
  const raw = query.get('limit');
  const limit = raw === null ? 50 : Number(raw);
  if (!/^\d{1,3}$/.test(raw ?? '50') || !Number.isSafeInteger(limit) || limit < 1 || limit > 500)
    return deny('invalid_query', 'limit must be a whole number from 1 to 500');
  return jsonReply(200, { entries: audit?.recentEntries(limit) ?? [] });
}

async function revokeAgent(_req: IncomingMessage, p: Readonly<Record<string, string>>, ctx: AdminContext): Promise<Reply | Denial> {
  const id = p.id ?? '';
  const registry = registryOf(ctx);
  const revoked = await registry.revoke(id, (ctx.now ?? Date.now)());
  if (revoked) ctx.log.info('registered agent revoked by an operator', { agent: id });
  const current = revoked ?? (await registry.get(id));
  return current ? jsonReply(200, agentView(current)) : deny('not_found', `no registered agent "${id}"`);
}

/** Routes with `needs` run only when it holds, so these are present there. */
function registryOf(ctx: AdminContext): AgentRegistry {
  if (!ctx.registry) throw new Error('admin route without a registry');
  return ctx.registry;
}

function approvalsOf(ctx: AdminContext): ApprovalService {
  if (!ctx.approvals) throw new Error('admin route without approvals');
  return ctx.approvals;
}
