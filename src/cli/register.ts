import { readFile } from 'node:fs/promises';
import type { JWK } from 'jose';
import { request } from 'undici';
import { createHostSigner, registrationRequest, type HostSigner } from '../identity/client.js';
import { parseCommand, required, UsageError } from './args.js';

const USAGE = `Usage: agents-chain register --host-key FILE --agent-key FILE --url URL --name NAME
                               [--capability NAME[=CONSTRAINTS_JSON]]... [--mode delegated|autonomous] [--reason TEXT]
                               [--self-registered [--host-name NAME]]
       agents-chain register status --host-key FILE --url URL --agent-id ID [--self-registered]
       agents-chain register revoke --host-key FILE --url URL --agent-id ID [--self-registered]

Registers an agent with a sidecar as a trusted host: reads the service's
discovery document (URL/.well-known/agent-configuration), mints a single-use
host+jwt carrying the agent's public key and, with the agent's private key, an
agent-proof+jwt bound to that host token (proof that the host holds the agent
key), and calls the register endpoint.
Prints the answer (agent_id, host_id, status, agent_capability_grants).

"status" prints one of the host's agents; "revoke" revokes it (its next call
is refused). Both sign a fresh host token with the host key.

The endpoints are read from the discovery document; an absolute endpoint URL
on the service's issuer (its public name) is called at URL, with its path.

Options:
  --host-key FILE      the host's private JWK (keygen --host)
  --agent-key FILE     the agent's private JWK (keygen); it signs the proof of
                       possession, only the public part and the proof are sent
  --url URL            where this command reaches the service's origin (the
                       sidecar's agent listener), e.g. http://billing:8080
  --name NAME          the agent's name
  --capability C       a capability to ask for, optionally narrowed:
                       --capability 'createInvoice={"amount":{"max":500}}'
                       (repeatable; none = all of the host's defaults)
  --mode MODE          delegated | autonomous [autonomous]
  --reason TEXT        why the agent is registered
  --agent-id ID        status, revoke: the agent (agt_...)
  --self-registered    the host is not listed in the policy and registers
                       itself (the policy's dynamicHosts): every host token
                       carries its public key as host_public_key
  --host-name NAME     with --self-registered: the host's name (host_name)
`;

const OPTIONS = {
  'host-key': { type: 'string' },
  'agent-key': { type: 'string' },
  url: { type: 'string' },
  name: { type: 'string' },
  capability: { type: 'string', multiple: true },
  mode: { type: 'string' },
  reason: { type: 'string' },
  'agent-id': { type: 'string' },
  'self-registered': { type: 'boolean' },
  'host-name': { type: 'string' },
} as const;

type Values = Record<string, string | string[] | boolean | undefined>;

export async function registerCommand(argv: string[]): Promise<number> {
  const [first, ...rest] = argv;
  const action = first === 'status' || first === 'revoke' ? first : undefined;
  const args = parseCommand(action ? rest : argv, OPTIONS, USAGE);
  if (!args) return 0;
  const v = args.values as Values;
  const base = required(v.url as string, '--url', USAGE).replace(/\/+$/, '');
  const host = await hostSigner(v);
  if (action) {
    required(v['agent-id'] as string, '--agent-id', USAGE);
    return manage(action, v, host, base, await discover(base));
  }

  const agentKeyFile = required(v['agent-key'] as string, '--agent-key', USAGE);
  const agentKey = JSON.parse(await readFile(agentKeyFile, 'utf8')) as JWK;
  if (!agentKey.d) {
    throw new UsageError(`${agentKeyFile} is a public key: registration needs the agent's private JWK, to sign the proof that the host holds it`);
  }
  const name = required(v.name as string, '--name', USAGE);
  const capabilities = (v.capability as string[] | undefined)?.map((c) => {
    const eq = c.indexOf('=');
    if (eq < 0) return c;
    try {
      return { name: c.slice(0, eq), constraints: JSON.parse(c.slice(eq + 1)) as unknown };
    } catch {
      throw new UsageError(`--capability ${c.slice(0, eq)}: the constraints after "=" must be JSON`);
    }
  });
  const config = await discover(base);
  const { token, body } = await registrationRequest(host, agentKey, config.issuer, {
    name,
    mode: v.mode ?? 'autonomous',
    ...(v.reason ? { reason: v.reason } : {}),
    ...(capabilities ? { capabilities } : {}),
  });
  return answer(
    await request(endpointUrl(base, config, 'register'), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }),
  );
}

/** status and revoke: one fresh host token each, for the host's own agent. */
async function manage(action: 'status' | 'revoke', v: Values, host: HostSigner, base: string, config: Discovery): Promise<number> {
  const id = v['agent-id'] as string;
  const token = await host.sign(config.issuer);
  const headers = { authorization: `Bearer ${token}` };
  if (action === 'status') {
    const url = new URL(endpointUrl(base, config, 'status'));
    url.searchParams.set('agent_id', id);
    return answer(await request(url, { headers }));
  }
  return answer(
    await request(endpointUrl(base, config, 'revoke'), {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ agent_id: id }),
    }),
  );
}

async function hostSigner(v: Values): Promise<HostSigner> {
  const hostKey = JSON.parse(await readFile(required(v['host-key'] as string, '--host-key', USAGE), 'utf8')) as JWK;
  if (v['host-name'] !== undefined && !v['self-registered']) throw new UsageError(`--host-name goes with --self-registered\n\n${USAGE}`);
  return createHostSigner(hostKey, v['self-registered'] ? { selfRegistering: true, ...(v['host-name'] ? { name: v['host-name'] as string } : {}) } : {});
}

interface Discovery {
  issuer: string;
  endpoints: Record<string, unknown>;
}

async function discover(base: string): Promise<Discovery> {
  const discovery = await request(`${base}/.well-known/agent-configuration`);
  if (discovery.statusCode !== 200) throw new Error(`${base}/.well-known/agent-configuration answered ${discovery.statusCode}`);
  const config = (await discovery.body.json()) as { issuer?: unknown; endpoints?: unknown };
  if (typeof config.issuer !== 'string' || typeof config.endpoints !== 'object' || config.endpoints === null)
    throw new Error('the discovery document has no issuer or endpoints');
  return { issuer: config.issuer, endpoints: config.endpoints as Record<string, unknown> };
}

/**
 * Where to call an endpoint the discovery document names: a path (older
 * sidecars publish paths) or an absolute URL on the issuer's origin goes to
 * --url with that path, since the issuer is the service's public name and
 * --url is where this command reaches it; an absolute URL elsewhere is
 * called as published.
 */
export function endpointUrl(base: string, config: Discovery, name: 'register' | 'status' | 'revoke'): string {
  const published = config.endpoints[name];
  if (typeof published !== 'string' || published === '')
    throw new Error(`the discovery document has no ${name} endpoint (does the policy list hosts, or allow dynamicHosts?)`);
  if (published.startsWith('/')) return `${base}${published}`;
  let url: URL;
  try {
    url = new URL(published);
  } catch {
    throw new Error(`the discovery document's ${name} endpoint is neither a path nor a URL: ${published}`);
  }
  if (url.origin === originOf(config.issuer)) return `${base}${url.pathname}${url.search}`;
  return url.href;
}

function originOf(issuer: string): string | undefined {
  try {
    return new URL(issuer).origin;
  } catch {
    return undefined;
  }
}

async function answer(res: Awaited<ReturnType<typeof request>>): Promise<number> {
  const text = await res.body.text();
  (res.statusCode < 300 ? process.stdout : process.stderr).write(`${text}\n`);
  return res.statusCode < 300 ? 0 : 1;
}
