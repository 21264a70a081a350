#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { UsageError } from './args.js';

const USAGE = `agents-chain — capability-checking sidecar for HTTP services

Usage: agents-chain <command> [options]
       agents-chain --version
       agents-chain --help | help [<command>]

Commands:
  serve         run the sidecar in front of an app
  keygen        create an Ed25519 key pair for an agent or a host
  register      register an agent with a sidecar as a trusted host (status, revoke)
  inject        add the sidecar to Kubernetes manifests (stdin to stdout; a Helm post-renderer)
  webhook       the same injection as a mutating admission webhook (HTTPS)
  capture       install the iptables rules that send a pod's inbound TCP to the sidecar (init container)
  token         mint a single-use agent+jwt for one call
  policy check  validate a policy file (exit 1 on errors)
  context       print an agent's constraint context (system-prompt block)
  approvals     list, approve or deny access requests on a sidecar's admin listener
  audit         decrypt or verify exported audit batches

Run "agents-chain <command> --help" for a command's options.
`;

/** serve and webhook run until stopped: a failure to start is a JSON log line on stdout, like their other logs. */
const SERVERS = new Set(['serve', 'webhook']);

/** The package's version, from the package.json beside dist/ (the image ships it). */
function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

type Command = (argv: string[]) => Promise<number>;
// Each command's module is loaded when it runs: --version, --help and the small commands do not load
// the whole sidecar (policy compiler, HTTP client, Redis client) first.
const COMMANDS: Record<string, () => Promise<Command>> = {
  serve: async () => (await import('./serve.js')).serveCommand,
  keygen: async () => (await import('./keygen.js')).keygenCommand,
  register: async () => (await import('./register.js')).registerCommand,
  inject: async () => (await import('./inject.js')).injectCommand,
  webhook: async () => (await import('./webhook.js')).webhookCommand,
  capture: async () => (await import('./capture.js')).captureCommand,
  token: async () => (await import('./token.js')).tokenCommand,
  policy: async () => (await import('./policy.js')).policyCommand,
  context: async () => (await import('./context.js')).contextCommand,
  approvals: async () => (await import('./approvals.js')).approvalsCommand,
  audit: async () => (await import('./audit.js')).auditCommand,
};

async function main(argv: string[]): Promise<number> {
  const [first, ...more] = argv;
  if (first === '--version' || first === '-v' || first === 'version') {
    process.stdout.write(`agents-chain ${version()}\n`);
    return 0;
  }
  // "help serve" is "serve --help"; "help" alone, like --help, prints the commands.
  const [name, ...rest] = first === 'help' && more[0] ? [more[0], '--help'] : [first, ...more];
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    (name ? process.stdout : process.stderr).write(USAGE);
    return name ? 0 : 2;
  }
  const load = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!load) {
    process.stderr.write(`agents-chain: unknown command "${name}"\n\n${USAGE}`);
    return 2;
  }
  try {
    return await (
      await load()
    )(rest);
  } catch (err) {
    if (SERVERS.has(name)) return (await import('./startup.js')).failStartup(name, err);
    if (err instanceof UsageError) {
      process.stderr.write(`agents-chain ${name}: ${err.message}\n`);
      return 2;
    }
    process.stderr.write(`agents-chain ${name}: ${(err as Error).message}\n`);
    return 1;
  }
}

const code = await main(process.argv.slice(2));
if (code !== 0 || process.argv[2] !== 'serve') process.exitCode = code;
