#!/usr/bin/env node
import { approvalsCommand } from './approvals.js';
import { auditCommand } from './audit.js';
import { captureCommand } from './capture.js';
import { contextCommand } from './context.js';
import { injectCommand } from './inject.js';
import { keygenCommand } from './keygen.js';
import { policyCommand } from './policy.js';
import { registerCommand } from './register.js';
import { serveCommand } from './serve.js';
import { tokenCommand } from './token.js';
import { webhookCommand } from './webhook.js';
import { UsageError } from './args.js';

const USAGE = `agents-chain — capability-checking sidecar for HTTP services

Usage: agents-chain <command> [options]

Commands:
  serve         run the sidecar in front of an app
  keygen        create an Ed25519 key pair for an agent or a host
  register      register an agent with a sidecar, as a trusted host
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

const COMMANDS: Record<string, (argv: string[]) => Promise<number>> = {
  serve: serveCommand,
  keygen: keygenCommand,
  register: registerCommand,
  inject: injectCommand,
  webhook: webhookCommand,
  capture: captureCommand,
  token: tokenCommand,
  policy: policyCommand,
  context: contextCommand,
  approvals: approvalsCommand,
  audit: auditCommand,
};

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(USAGE);
    return name ? 0 : 2;
  }
  const command = COMMANDS[name];
  if (!command) {
    process.stderr.write(`agents-chain: unknown command "${name}"\n\n${USAGE}`);
    return 2;
  }
  try {
    return await command(rest);
  } catch (err) {
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
