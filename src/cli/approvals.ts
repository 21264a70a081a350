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
  const needId = (): string => {
    if (!id) throw new UsageError(`${action} needs an ID\n\n${USAGE}`);
    return encodeURIComponent(id);
  };

  let method: 'GET' | 'POST' | 'DELETE' = 'GET';
  let path: string;
  let body: unknown;
  switch (action) {
    case 'list':
      path = '/approvals';
      break;
    case 'show':
      path = `/approvals/${needId()}`;
      break;
    case 'approve':
      method = 'POST';
      path = `/approvals/${needId()}/approve`;
      body = { code: args.values.code, scope: args.values.scope ?? 'once' };
      break;
    case 'deny':
      method = 'POST';
      path = `/approvals/${needId()}/deny`;
      body = { code: args.values.code, reason: args.values.reason };
      break;
    case 'code':
      method = 'POST';
      path = `/approvals/${needId()}/code`;
      body = {};
      break;
    case 'grants':
      path = '/approvals/grants';
      break;
    case 'revoke':
      method = 'DELETE';
      path = `/approvals/grants/${needId()}`;
      break;
    default:
      throw new UsageError(`unknown action "${action ?? ''}"\n\n${USAGE}`);
  }
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
 * Times as RFC 3339, as the rest of the admin API words them: the value approvals (`grants`) come
 * with createdAt / expiresAt in epoch milliseconds, which this prints as 2026-12-01T13:45:00.000Z.
 */
function rfc3339Times(key: string, value: unknown): unknown {
  return /At$/.test(key) && typeof value === 'number' && Number.isFinite(value) ? new Date(value).toISOString() : value;
}
