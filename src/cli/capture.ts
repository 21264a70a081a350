import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { createLogger } from '../log.js';
import {
  captureOptionsProblem,
  excludedPorts,
  INBOUND_CHAIN,
  ipv6Addresses,
  parsePortList,
  restoreInput,
  verifyRules,
  type CaptureOptions,
  type Family,
} from '../kubernetes/capture.js';
import { parseCommand, UsageError } from './args.js';

const USAGE = `Usage: agents-chain capture [--redirect-to PORT] [--exclude-ports PORTS] [--dry-run]

iptables capture mode: run once in the pod's network namespace (the init container
agents-chain-capture, with NET_ADMIN and NET_RAW). Every inbound TCP connection
(nat PREROUTING, chain ${INBOUND_CHAIN}) is redirected to the sidecar's listener,
except to the excluded ports. The sidecar's own connections to the app on 127.0.0.1
are never redirected. IPv6 rules are installed too when the namespace has a
non-loopback IPv6 address (then a failure to install them is an error).
Idempotent: running it again leaves one set of rules. Exits non-zero, naming the
reason, when the rules cannot be installed or are not in place afterwards.

Options:
  --redirect-to PORT     the sidecar's listener [17480]
  --exclude-ports PORTS  comma-separated destination ports left alone [17490];
                         the --redirect-to port is always among them
  --dry-run              print the iptables-restore input and change nothing
  -h, --help             show this help
`;

export async function captureCommand(argv: string[]): Promise<number> {
  const args = parseCommand(
    argv,
    {
      'redirect-to': { type: 'string' },
      'exclude-ports': { type: 'string' },
      'dry-run': { type: 'boolean' },
    },
    USAGE,
  );
  if (!args) return 0;
  const v = args.values;
  const redirectText = v['redirect-to'] ?? '17480';
  const redirectTo = /^\d{1,5}$/.test(redirectText.trim()) ? Number(redirectText.trim()) : NaN;
  if (Number.isNaN(redirectTo)) throw new UsageError(`--redirect-to must be one port number (1-65535), got "${redirectText}"`);
  let excludePorts: number[];
  try {
    excludePorts = parsePortList(v['exclude-ports'] ?? '17490', '--exclude-ports');
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const opts: CaptureOptions = { redirectTo, excludePorts };
  const problem = captureOptionsProblem(opts);
  if (problem) throw new UsageError(problem);

  if (v['dry-run']) {
    process.stdout.write(`# iptables-restore --noflush (IPv4; the same for ip6tables-restore when the namespace has IPv6 addresses)\n${restoreInput(opts)}`);
    return 0;
  }

  const log = createLogger('info');
  try {
    // Both tables are read (and IPv6 judged) before anything changes: a namespace whose IPv6 cannot be
    // captured is refused before its IPv4 rules are touched.
    const ipv4Before = await save('ipv4');
    const v6 = await ipv6Plan();
    const ipv4 = await install('ipv4', opts, ipv4Before);
    const ipv6 = v6.current === undefined ? { installed: false, reason: v6.reason } : await installIpv6(opts, v6.current, v6.addresses);
    log.info('inbound capture installed', {
      chain: INBOUND_CHAIN,
      redirectTo: opts.redirectTo,
      excludePorts: excludedPorts(opts),
      ipv4,
      ipv6,
    });
    return 0;
  } catch (err) {
    // Both a log line for the log pipeline and the message on stderr (main prints it): the pod must not start.
    log.error('inbound capture failed: the pod must not start', { chain: INBOUND_CHAIN, error: (err as Error).message });
    throw err;
  }
}

const TOOLS: Record<Family, { save: string; restore: string; label: string }> = {
  ipv4: { save: 'iptables-save', restore: 'iptables-restore', label: 'IPv4' },
  ipv6: { save: 'ip6tables-save', restore: 'ip6tables-restore', label: 'IPv6' },
};

interface Installed {
  installed: true;
  action: 'installed' | 'already in place';
  rules: string[];
}

/** Reads the nat table, applies what is missing in one iptables-restore transaction, and checks the result. */
async function install(family: Family, opts: CaptureOptions, before: string): Promise<Installed> {
  const t = TOOLS[family];
  if (verifyRules(opts, before).length === 0) {
    await refuseLegacyRules(family, before);
    return { installed: true, action: 'already in place', rules: natText(before) };
  }
  const input = restoreInput(opts, before);
  const r = await run(t.restore, ['--noflush'], input);
  if (r.code !== 0) throw new Error(`${t.label}: ${t.restore} --noflush failed (${r.why}): ${oneLine(r.stderr) || 'no message'}${hint(r.stderr)}`);
  const after = await save(family);
  const problems = verifyRules(opts, after);
  if (problems.length) throw new Error(`${t.label}: after ${t.restore} the rules are not in place: ${problems.join('; ')}`);
  await refuseLegacyRules(family, after);
  return { installed: true, action: 'installed', rules: natText(after) };
}

const LEGACY_SAVE: Record<Family, string> = { ipv4: 'iptables-legacy-save', ipv6: 'ip6tables-legacy-save' };

/**
 * The kernel runs the legacy (x_tables) and the nf_tables nat hooks side by side, in an order capture cannot
 * know: a legacy PREROUTING rule may rewrite a connection before ours sees it. iptables-nft-save says when
 * legacy tables exist; then their nat PREROUTING must be empty.
 */
async function refuseLegacyRules(family: Family, save: string): Promise<void> {
  if (!/iptables-legacy tables present/.test(save)) return;
  const r = await run(LEGACY_SAVE[family], ['-t', 'nat']);
  const rules = r.stdout.split('\n').filter((l) => l.startsWith('-A PREROUTING'));
  if (r.code !== 0)
    throw new Error(
      `${TOOLS[family].label}: legacy iptables tables exist beside nf_tables and ${LEGACY_SAVE[family]} failed (${r.why}): their rules could send traffic around the sidecar`,
    );
  if (rules.length)
    throw new Error(
      `${TOOLS[family].label}: legacy iptables nat rules in PREROUTING (${rules.join(' / ')}) run beside the capture rules and could send traffic around the sidecar: remove them`,
    );
}

/**
 * IPv6 is captured when the namespace has a non-loopback IPv6 address (a peer could otherwise reach
 * the app around the sidecar over IPv6); then ip6tables must work. Without one there is nothing to capture.
 */
const IPV6_REMEDY = ' (give the node IPv6 nat support, turn IPv6 off in the pod, or use agents-chain.io/capture: port)';

async function ipv6Plan(): Promise<{ current?: string; addresses: string; reason: string }> {
  // No file: a kernel without IPv6. Any other read error is not "no IPv6": fail rather than skip the IPv6 rules.
  const found = ipv6Addresses(
    await readFile('/proc/net/if_inet6', 'utf8').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return '';
      throw new Error(`cannot tell whether the namespace has IPv6 addresses (/proc/net/if_inet6: ${err.message}): not capturing only half the traffic`);
    }),
  );
  if (found.length === 0) return { addresses: '', reason: 'the namespace has no non-loopback IPv6 address' };
  const addresses = found.map((a) => `${a.address} on ${a.interface}`).join(', ');
  try {
    return { current: await save('ipv6'), addresses, reason: '' };
  } catch (err) {
    throw new Error(
      `the namespace has IPv6 addresses (${addresses}) but ip6tables does not work, so IPv6 traffic would bypass the sidecar: ${(err as Error).message}${IPV6_REMEDY}`,
      { cause: err },
    );
  }
}

async function installIpv6(opts: CaptureOptions, current: string, addresses: string): Promise<Installed> {
  try {
    return await install('ipv6', opts, current);
  } catch (err) {
    throw new Error(
      `the namespace has IPv6 addresses (${addresses}) but the IPv6 rules could not be installed, so IPv6 traffic would bypass the sidecar: ${(err as Error).message}${IPV6_REMEDY}`,
      { cause: err },
    );
  }
}

async function save(family: Family): Promise<string> {
  const t = TOOLS[family];
  const r = await run(t.save, ['-t', 'nat']);
  if (r.code !== 0) throw new Error(`${t.label}: ${t.save} -t nat failed (${r.why}): ${oneLine(r.stderr) || 'no message'}${hint(r.stderr)}`);
  // iptables-nft-save warns on stderr when legacy tables exist too; keep that as a comment line for refuseLegacyRules.
  return /iptables-legacy tables present/.test(r.stderr) ? `${r.stdout}\n# Warning: iptables-legacy tables present\n` : r.stdout;
}

/** The nat rules that matter to a reader of the log line: our chain and the PREROUTING jumps, no comments or counters. */
function natText(save: string): string[] {
  return save.split('\n').filter((l) => l.startsWith('-A ') && l.includes(INBOUND_CHAIN));
}

function hint(stderr: string): string {
  return /permission denied|operation not permitted|must be root/i.test(stderr)
    ? ' (capture needs the NET_ADMIN and NET_RAW capabilities: the agents-chain-capture init container has them, the sidecar does not)'
    : '';
}

const oneLine = (s: string): string =>
  s
    .trim()
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .join(' / ');

/** Runs a tool to completion; a missing binary is an answer too (code -1), not an exception. */
function run(cmd: string, args: string[], input?: string): Promise<{ code: number; why: string; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('error', (err: NodeJS.ErrnoException) => {
      const why = err.code === 'ENOENT' ? `${cmd} is not installed or not on PATH (the image ships Debian's iptables package)` : err.message;
      resolve({ code: -1, why: 'not run', stdout, stderr: why });
    });
    child.on('close', (code, signal) => resolve({ code: code ?? -1, why: signal ? `killed by ${signal}` : `exit ${code}`, stdout, stderr }));
    // A tool that exits before reading its input must not crash the command with EPIPE: its exit code tells.
    if (input !== undefined) child.stdin!.on('error', () => {}).end(input);
  });
}

/** Kept apart from the command for tests that check the text a user sees. */
export const CAPTURE_USAGE = USAGE;
