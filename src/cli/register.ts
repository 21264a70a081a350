import { readFile } from 'node:fs/promises';
import type { JWK } from 'jose';
import { request } from 'undici';
import { createHostSigner, registrationRequest } from '../identity/client.js';
import { parseCommand, required, UsageError } from './args.js';

const USAGE = `Usage: agents-chain register --host-key FILE --agent-key FILE --url URL --name NAME
                               [--capability NAME[=CONSTRAINTS_JSON]]... [--mode delegated|autonomous] [--reason TEXT]

Registers an agent with a sidecar as a trusted host: reads the service's
discovery document (URL/.well-known/agent-configuration), mints a single-use
host+jwt carrying the agent's public key and, with the agent's private key, an
agent-proof+jwt bound to that host token (proof that the host holds the agent
key), and calls the register endpoint.
Prints the answer (agent_id, host_id, status, agent_capability_grants).

Options:
  --host-key FILE      the host's private JWK (keygen --host)
  --agent-key FILE     the agent's private JWK (keygen); it signs the proof of
                       possession, only the public part and the proof are sent
  --url URL            the sidecar's agent listener, e.g. http://billing:8080
  --name NAME          the agent's name
  --capability C       a capability to ask for, optionally narrowed:
                       --capability 'createInvoice={"amount":{"max":500}}'
                       (repeatable; none = all of the host's defaults)
  --mode MODE          delegated | autonomous [autonomous]
  --reason TEXT        why the agent is registered
`;

export async function registerCommand(argv: string[]): Promise<number> {
  const args = parseCommand(
    argv,
    {
      'host-key': { type: 'string' },
      'agent-key': { type: 'string' },
      url: { type: 'string' },
      name: { type: 'string' },
      capability: { type: 'string', multiple: true },
      mode: { type: 'string' },
      reason: { type: 'string' },
    },
    USAGE,
  );
  if (!args) return 0;
  const v = args.values as Record<string, string | string[] | undefined>;
  const hostKey = JSON.parse(await readFile(required(v['host-key'] as string, '--host-key', USAGE), 'utf8')) as JWK;
  const agentKeyFile = required(v['agent-key'] as string, '--agent-key', USAGE);
  const agentKey = JSON.parse(await readFile(agentKeyFile, 'utf8')) as JWK;
  if (!agentKey.d) {
    throw new UsageError(`${agentKeyFile} is a public key: registration needs the agent's private JWK, to sign the proof that the host holds it`);
  }
  const base = required(v.url as string, '--url', USAGE).replace(/\/+$/, '');
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

  const discovery = await request(`${base}/.well-known/agent-configuration`);
  if (discovery.statusCode !== 200) throw new Error(`${base}/.well-known/agent-configuration answered ${discovery.statusCode}`);
  const config = (await discovery.body.json()) as { issuer?: string; endpoints?: { register?: string } };
  if (!config.issuer || !config.endpoints?.register) throw new Error('the discovery document has no issuer or register endpoint (does the policy list hosts?)');

  const host = await createHostSigner(hostKey);
  const { token, body } = await registrationRequest(host, agentKey, config.issuer, {
    name,
    mode: v.mode ?? 'autonomous',
    ...(v.reason ? { reason: v.reason } : {}),
    ...(capabilities ? { capabilities } : {}),
  });
  const res = await request(`${base}${config.endpoints.register}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.body.text();
  (res.statusCode < 300 ? process.stdout : process.stderr).write(`${text}\n`);
  return res.statusCode < 300 ? 0 : 1;
}
