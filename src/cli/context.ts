import { constraintContext } from '../context/constraint-context.js';
import { loadPolicyFile } from '../policy/load.js';
import { parseCommand, required } from './args.js';

const USAGE = `Usage: agents-chain context --policy FILE --agent ID [--json]

Prints the constraint context for one agent: the system-prompt block that
GET /agent/constraints serves, computed offline from the policy. The output
is stable (sorted by capability and field), so it can be diffed in Git.

Options:
  --policy FILE   policy YAML
  --agent ID      agent id
  --json          print the JSON form instead of text
`;

export async function contextCommand(argv: string[]): Promise<number> {
  const args = parseCommand(argv, { policy: { type: 'string' }, agent: { type: 'string' }, json: { type: 'boolean' } }, USAGE);
  if (!args) return 0;
  const policy = await loadPolicyFile(required(args.values.policy, '--policy', USAGE));
  const agent = required(args.values.agent, '--agent', USAGE);
  if (!policy.agents.has(agent)) throw new Error(`no agent "${agent}" in ${policy.file}`);
  const ctx = constraintContext(policy, agent, Date.now());
  process.stdout.write(args.values.json ? `${JSON.stringify(ctx, null, 2)}\n` : ctx.text);
  return 0;
}
