import { readFile } from 'node:fs/promises';
import type { JWK } from 'jose';
import { createAgentSigner, MAX_TOKEN_LIFETIME_SECONDS } from '../identity/client.js';
import { parseCommand, required, UsageError } from './args.js';

const USAGE = `Usage: agents-chain token --key PRIVATE_JWK --agent ID --capability CAP [--ttl SECONDS]

Prints a fresh single-use agent+jwt for one call, e.g.
  curl -H "Authorization: Bearer $(agents-chain token --key k.json --agent a --capability createInvoice)" ...

Options:
  --key FILE          the agent's private JWK (from keygen)
  --agent ID          the agent id in the policy (the token's "sub")
  --capability CAP    the capability to call (the token's "aud")
  --ttl SECONDS       lifetime, 1 to ${MAX_TOKEN_LIFETIME_SECONDS} [${MAX_TOKEN_LIFETIME_SECONDS}]
`;

export async function tokenCommand(argv: string[]): Promise<number> {
  const args = parseCommand(
    argv,
    {
      key: { type: 'string' },
      agent: { type: 'string' },
      capability: { type: 'string' },
      ttl: { type: 'string' },
    },
    USAGE,
  );
  if (!args) return 0;
  const v = args.values;
  const keyFile = required(v.key, '--key', USAGE);
  const agent = required(v.agent, '--agent', USAGE);
  const capability = required(v.capability, '--capability', USAGE);
  const ttl = v.ttl === undefined ? MAX_TOKEN_LIFETIME_SECONDS : Number(v.ttl);
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > MAX_TOKEN_LIFETIME_SECONDS) {
    throw new UsageError(`--ttl must be a whole number from 1 to ${MAX_TOKEN_LIFETIME_SECONDS}`);
  }
  const jwk = JSON.parse(await readFile(keyFile, 'utf8')) as JWK;
  const signer = await createAgentSigner(jwk, agent);
  process.stdout.write(`${await signer.sign(capability, { ttlSeconds: ttl })}\n`);
  return 0;
}
