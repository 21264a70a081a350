import type { IncomingMessage, ServerResponse } from 'node:http';
import { deny, isDenial, type Denial } from '../errors.js';
import { writeAdminDenial, writeReply, type Reply } from '../http/respond.js';
import { adminGuard } from './guard.js';
import { ADMIN_ROUTES, type AdminContext, type AdminRoute } from './routes.js';

export { adminStartupProblem, INSECURE_ENV, INSECURE_FLAG, throttled, UNAUTHORIZED_LOG_INTERVAL_MS } from './guard.js';

export interface AdminOptions extends AdminContext {
  /** Bearer token for everything but the probes and /metrics; without one all of that is closed. */
  adminToken?: string;
  /** No token, and everything open to whoever reaches the listener (--admin-insecure-no-token: local demos only). */
  insecureNoToken?: boolean;
}

/**
 * The operator listener. Open to whoever reaches it: /healthz, /readyz and
 * /app-health/... (the kubelet) and /metrics (Prometheus). Everything else
 * (/stats, audit entries, registered agents, approvals) only with the admin
 * bearer token (one guard); with no token configured it is closed (403
 * admin_disabled), unless insecureNoToken. It never shares a port with agents.
 */
export function adminHandler(opts: AdminOptions): (req: IncomingMessage, res: ServerResponse) => void {
  const guard = adminGuard(opts);
  return (req, res) => {
    answer(req, opts, guard).then(
      (result) => (isDenial(result) ? writeAdminDenial(res, result) : writeReply(res, result)),
      (err: Error) => {
        opts.log.error('admin request failed', { error: err.message });
        writeAdminDenial(res, deny('internal_error', 'the admin request failed'));
      },
    );
  };
}

async function answer(req: IncomingMessage, ctx: AdminContext, guard: (req: IncomingMessage) => Denial | undefined): Promise<Reply | Denial> {
  const path = (req.url ?? '').split('?')[0] ?? '';
  const method = req.method ?? '';
  const found = findAdminRoute(method, path);
  // An unknown path is refused like a known one without the token: the open routes are the only ones anyone learns of.
  if (!found || found.route.access === 'token') {
    const refused = guard(req);
    if (refused) return refused;
  }
  if (!found) return deny('not_found', `no admin endpoint ${method} ${path}`);
  if (isDenial(found.params)) return found.params;
  const { route, params } = found;
  if (route.needs && !route.needs.available(ctx)) return deny('not_found', route.needs.message);
  return route.handle(req, params, ctx);
}

/** The first route whose method and path match; its parameters percent-decoded (a malformed one is invalid_path). */
export function findAdminRoute(method: string, path: string): { route: AdminRoute; params: Record<string, string> | Denial } | undefined {
  const segments = path.split('/');
  for (const route of ADMIN_ROUTES) {
    if (!route.methods.includes(method)) continue;
    const params = matchSegments(route.path.split('/'), segments);
    if (params) return { route, params };
  }
  return undefined;
}

function matchSegments(pattern: string[], segments: string[]): Record<string, string> | Denial | undefined {
  const params: Record<string, string> = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i] ?? '';
    if (p.endsWith('*') && i === pattern.length - 1) {
      if ((segments[i] ?? '').startsWith(p.slice(0, -1)) && segments.length >= pattern.length) {
        params['*'] = [(segments[i] ?? '').slice(p.length - 1), ...segments.slice(i + 1)].join('/');
        return params;
      }
      return undefined;
    }
    const s = segments[i];
    if (s === undefined) return undefined;
    if (p.startsWith('{') && p.endsWith('}')) {
      if (s === '') return undefined;
      try {
        params[p.slice(1, -1)] = decodeURIComponent(s);
      } catch {
        return deny('invalid_path', 'malformed percent-encoding in the path');
      }
    } else if (p !== s) return undefined;
  }
  return segments.length === pattern.length ? params : undefined;
}
