import { readFile } from 'node:fs/promises';
import { request } from 'undici';
import { parseCommand, UsageError } from './args.js';

const USAGE = `Usage: agents-chain approvals <action> [options]

Talks to a sidecar's admin listener (never the agent port).

Actions:
  list                                   pending access requests
  show ID                                one request
  approve ID --code CODE [--scope once|value]
  deny ID --code CODE [--reason TEXT]
  code ID                                issue a new code (when the notification was lost)
  grants                                 value approvals in force
  revoke GRANT_ID                        remove a value approval

Options:
  --admin URL              admin listener [http://127.0.0.1:9090]   AGENTS_CHAIN_ADMIN_URL
  --admin-token-file FILE  file holding the admin bearer token       AGENTS_CHAIN_ADMIN_TOKEN
`;

export async function approvalsCommand(argv: string[]): Promise<number> {
  const args = parseCommand(
    argv,
    {
      admin: { type: 'string' },
      'admin-token-file': { type: 'string' },
      code: { type: 'string' },
      scope: { type: 'string' },
      reason: { type: 'string' },
    },
    USAGE,
    true,
  );
  if (!args) return 0;
  const [action, id] = args.positionals;
  const base = (args.values.admin ?? process.env.AGENTS_CHAIN_ADMIN_URL ?? 'http://127.0.0.1:9090').replace(/\/$/, '');
  const file = args.values['admin-token-file'];
  const token = file ? (await readFile(file, 'utf8')).trim() : process.env.AGENTS_CHAIN_ADMIN_TOKEN;
  if (!token) throw new UsageError(`an admin token is required (AGENTS_CHAIN_ADMIN_TOKEN or --admin-token-file)\n\n${USAGE}`);
  const { method, path, body } = adminCall(action, id, args.values);
  const res = await request(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.body.text();
  let pretty = text;
  try {
    pretty = JSON.stringify(JSON.parse(text, rfc3339Times), null, 2);
  } catch {
    /* not JSON */
  }
  (res.statusCode < 300 ? process.stdout : process.stderr).write(`${pretty}\n`);
  return res.statusCode < 300 ? 0 : 1;
}

/**
 * Times as RFC 3339, as the admin API words them: a sidecar of the previous release answered the value
 * approvals (`grants`) with createdAt / expiresAt in epoch milliseconds, printed as 2026-12-01T13:45:00.000Z.
 */
function rfc3339Times(key: string, value: unknown): unknown {
  return /At$/.test(key) && typeof value === 'number' && Number.isFinite(value) ? new Date(value).toISOString() : value;
}

/** The admin API call for an action; an unknown action, or a missing ID, is a usage error. */
function adminCall(
  action: string | undefined,
  id: string | undefined,
  v: { code?: string; scope?: string; reason?: string },
): { method: 'GET' | 'POST' | 'DELETE'; path: string; body?: unknown } {
  const needId = (): string => {
    if (!id) throw new UsageError(`${action} needs an ID\n\n${USAGE}`);
    return encodeURIComponent(id);
  };
  switch (action) {
    case 'list':
      return { method: 'GET', path: '/approvals' };
    case 'show':
      return { method: 'GET', path: `/approvals/${needId()}` };
    case 'approve':
      return { method: 'POST', path: `/approvals/${needId()}/approve`, body: { code: v.code, scope: v.scope ?? 'once' } };
    case 'deny':
      return { method: 'POST', path: `/approvals/${needId()}/deny`, body: { code: v.code, reason: v.reason } };
    case 'code':
      return { method: 'POST', path: `/approvals/${needId()}/code`, body: {} };
    case 'grants':
      return { method: 'GET', path: '/approvals/grants' };
    case 'revoke':
      return { method: 'DELETE', path: `/approvals/grants/${needId()}` };
    case undefined:
    default:
      throw new UsageError(`unknown action "${action ?? ''}"\n\n${USAGE}`);
  }
}
