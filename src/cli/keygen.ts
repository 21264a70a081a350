import { createPrivateKey, createPublicKey } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { generateAgentKeyPair, importAgentKey, thumbprintOf } from '../identity/keys.js';
import { parseCommand, required } from './args.js';

const USAGE = `Usage: agents-chain keygen --out DIR [--name NAME] [--host]
       agents-chain keygen --public-of PRIVATE_JWK

Creates an Ed25519 key pair for an agent (or, with --host, a host):
  DIR/NAME.private.jwk.json   (mode 0600; stays with the agent or host,
                               e.g. in a Kubernetes Secret: the identity is
                               stable as long as this file is)
  DIR/NAME.public.jwk.json    (goes into the policy's agents[] or hosts[].publicKey)
and prints the key's RFC 7638 thumbprint (the token's "iss") on stdout, then on
stderr where the files went and a policy entry to paste under agents: (or
hosts:). An agent a host registers needs no entry: its id is agt_<thumbprint>.
--public-of prints the public JWK of an existing private key (to import a
saved identity into a policy) and its thumbprint on stderr; it refuses a key
the sidecar would refuse (small order, non-canonical, x not matching d).

Options:
  --out DIR          directory to write to (created if missing)
  --name NAME        file name prefix [agent, or host with --host]
  --host             a host key: it signs host+jwt registration tokens
  --public-of FILE   print (and vet) the public part of a private JWK
`;

export async function keygenCommand(argv: string[]): Promise<number> {
  const args = parseCommand(argv, { out: { type: 'string' }, name: { type: 'string' }, host: { type: 'boolean' }, 'public-of': { type: 'string' } }, USAGE);
  if (!args) return 0;
  const from = args.values['public-of'];
  if (from) {
    const jwk = JSON.parse(await readFile(from, 'utf8')) as Record<string, unknown>;
    if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') throw new Error(`${from} is not an Ed25519 JWK`);
    const pub = { kty: 'OKP', crv: 'Ed25519', x: jwk.x };
    if (typeof jwk.d === 'string') {
      // The public key is the one d makes, not whatever x the file says.
      // From d alone (PKCS #8 around the 32-byte seed): Node 24's JWK import already refuses a mismatched x itself, Node 20's does not.
      const seed = Buffer.from(jwk.d, 'base64url');
      if (seed.length !== 32) throw new Error(`${from}: "d" must be 32 bytes, base64url`);
      const pkcs8 = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]);
      const derived = createPublicKey(createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' })).export({ format: 'jwk' });
      if (derived.x !== jwk.x) throw new Error(`${from}: "x" is not the public key of "d" (it would be ${derived.x})`);
    }
    try {
      await importAgentKey(pub); // the same vetting as policy load and registration
    } catch (err) {
      throw new Error(`${from}: ${(err as Error).message}`, { cause: err });
    }
    process.stdout.write(`${JSON.stringify(pub)}\n`);
    process.stderr.write(`thumbprint ${await thumbprintOf(pub)}\n`);
    return 0;
  }
  const host = args.values.host === true;
  const out = required(args.values.out, '--out', USAGE);
  const name = args.values.name ?? (host ? 'host' : 'agent');
  if (!/^[A-Za-z0-9._-]+$/.test(name)) throw new Error('--name may use letters, digits, ".", "_" and "-" only');
  const pair = await generateAgentKeyPair();
  await mkdir(out, { recursive: true });
  const privatePath = join(out, `${name}.private.jwk.json`);
  const publicPath = join(out, `${name}.public.jwk.json`);
  await writeFile(privatePath, `${JSON.stringify(pair.privateJwk, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  await writeFile(publicPath, `${JSON.stringify(pair.publicJwk, null, 2)}\n`, { flag: 'wx' });
  process.stdout.write(`${pair.thumbprint}\n`);
  process.stderr.write(`wrote ${privatePath} and ${publicPath}\n${policyEntry(host, name, pair.publicJwk.x as string)}`);
  return 0;
}

/** The entry to paste under the policy's `agents:` (or, for a host key, `hosts:`), announced by one header line. */
export function policyEntry(host: boolean, name: string, x: string): string {
  const entry = `  - id: ${name}\n    name: ${name}\n    publicKey: { kty: OKP, crv: Ed25519, x: "${x}" }\n`;
  return host
    ? `policy entry (paste under hosts:):\n${entry}    defaultCapabilities: []\n    maxAgents: 100\n`
    : `policy entry (paste under agents:):\n${entry}`;
}
