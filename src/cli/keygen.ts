import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { generateAgentKeyPair } from '../identity/keys.js';
import { parseCommand, required } from './args.js';

const USAGE = `Usage: agents-chain keygen --out DIR [--name NAME]

Creates an Ed25519 key pair for an agent:
  DIR/NAME.private.jwk.json   (mode 0600; stays with the agent)
  DIR/NAME.public.jwk.json    (goes into the policy's agents[].publicKey)
and prints the key's RFC 7638 thumbprint (the token's "iss").

Options:
  --out DIR     directory to write to (created if missing)
  --name NAME   file name prefix [agent]
`;

export async function keygenCommand(argv: string[]): Promise<number> {
  const args = parseCommand(argv, { out: { type: 'string' }, name: { type: 'string' } }, USAGE);
  if (!args) return 0;
  const out = required(args.values.out, '--out', USAGE);
  const name = args.values.name ?? 'agent';
  if (!/^[A-Za-z0-9._-]+$/.test(name)) throw new Error('--name may use letters, digits, ".", "_" and "-" only');
  const pair = await generateAgentKeyPair();
  await mkdir(out, { recursive: true });
  const privatePath = join(out, `${name}.private.jwk.json`);
  const publicPath = join(out, `${name}.public.jwk.json`);
  await writeFile(privatePath, `${JSON.stringify(pair.privateJwk, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  await writeFile(publicPath, `${JSON.stringify(pair.publicJwk, null, 2)}\n`, { flag: 'wx' });
  process.stdout.write(`${pair.thumbprint}\n`);
  process.stderr.write(
    `wrote ${privatePath} and ${publicPath}\n` +
    `policy entry:\n  - id: ${name}\n    name: ${name}\n    publicKey: { kty: OKP, crv: Ed25519, x: "${pair.publicJwk.x}" }\n`,
  );
  return 0;
}
