import { formatIssue, PolicyError } from '../policy/issues.js';
import { loadPolicyFile } from '../policy/load.js';
import { parseCommand, UsageError } from './args.js';

const USAGE = `Usage: agents-chain policy check FILE...

Validates policy files against config/policy.schema.json and the sidecar's
own rules (duplicate names, overlapping routes, unknown agents or
capabilities, malformed keys). Prints FILE:LINE:COLUMN: KEY: PROBLEM for each
problem and exits 1 if there is any; exits 0 when every file is valid.
`;

export async function policyCommand(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === '--help' || sub === '-h') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (sub === undefined) throw new UsageError(`give a subcommand: agents-chain policy check FILE...\n\n${USAGE}`);
  if (sub !== 'check') throw new UsageError(`unknown policy subcommand "${sub}"\n\n${USAGE}`);
  const args = parseCommand(rest, {}, USAGE, true);
  if (!args) return 0;
  if (args.positionals.length === 0) throw new UsageError(`give at least one FILE\n\n${USAGE}`);
  let failed = false;
  for (const file of args.positionals) {
    try {
      const p = await loadPolicyFile(file);
      process.stdout.write(
        `${file}: ok (${count(p.capabilities.size, 'capability', 'capabilities')}, ${count(p.agents.size, 'agent')}, ${count(p.grants.size, 'grant')}${p.hosts.size ? `, ${count(p.hosts.size, 'host')}` : ''})\n`,
      );
    } catch (err) {
      if (!(err instanceof PolicyError)) throw err;
      failed = true;
      process.stderr.write(`${err.issues.map(formatIssue).join('\n')}\n`);
    }
  }
  return failed ? 1 : 0;
}

/** "1 agent", "3 agents". */
function count(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
