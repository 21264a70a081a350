/**
 * iptables capture mode, the pure part: which nat rules the `agents-chain-capture` init container
 * installs in the pod's network namespace, the iptables-restore input that gets there from whatever
 * is installed now, and the check that what iptables-save reports afterwards is exactly that.
 *
 * The rules (one set per address family, same text for iptables and ip6tables):
 *   PREROUTING, first rule:   -p tcp -j AGENTS_CHAIN_INBOUND
 *   AGENTS_CHAIN_INBOUND:     -p tcp -m tcp --dport <excluded> -j RETURN   (one per excluded port)
 *                             -p tcp -j REDIRECT --to-ports <sidecar port>
 * Only PREROUTING: it sees packets that enter the namespace (other pods, the node, the kubelet).
 * The sidecar's own connection to 127.0.0.1:<app port> starts in OUTPUT and is never redirected.
 */

import { isPortNumber } from './ports.js';
export const INBOUND_CHAIN = 'AGENTS_CHAIN_INBOUND';

export interface CaptureOptions {
  /** The sidecar's listener: every captured inbound TCP connection lands here. */
  redirectTo: number;
  /** Destination ports that are not redirected (the sidecar's own ports, ports the user excludes). */
  excludePorts: number[];
}

export type Family = 'ipv4' | 'ipv6';

export { parsePortList } from './ports.js';

/** A problem with the options, or undefined. */
export function captureOptionsProblem(o: CaptureOptions): string | undefined {
  if (!isPortNumber(o.redirectTo)) return `--redirect-to must be one port number (1-65535), got ${String(o.redirectTo)}`;
  const bad = o.excludePorts.find((p) => !isPortNumber(p));
  if (bad !== undefined) return `--exclude-ports must hold port numbers (1-65535), got ${String(bad)}`;
  return undefined;
}

/** Excluded ports, the redirect port always among them (a connection to it needs no redirect), sorted, once each. */
export function excludedPorts(o: CaptureOptions): number[] {
  return [...new Set([o.redirectTo, ...o.excludePorts])].sort((a, b) => a - b);
}

/** The jump from PREROUTING, as iptables-save prints it. */
export const JUMP_SPEC = `-p tcp -j ${INBOUND_CHAIN}`;

/** The rules of AGENTS_CHAIN_INBOUND, in order, as iptables-save prints them (so they compare as text). */
export function chainRules(o: CaptureOptions): string[] {
  return [
    ...excludedPorts(o).map((p) => `-A ${INBOUND_CHAIN} -p tcp -m tcp --dport ${p} -j RETURN`),
    `-A ${INBOUND_CHAIN} -p tcp -j REDIRECT --to-ports ${o.redirectTo}`,
  ];
}

/** The rule lines of one chain in the *nat section of iptables-save output ("-A CHAIN ..."), in order. */
export function natRules(save: string, chain: string): string[] {
  const out: string[] = [];
  let inNat = false;
  for (const raw of save.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('*')) inNat = line === '*nat';
    else if (line === 'COMMIT') inNat = false;
    else if (inNat && line.startsWith(`-A ${chain} `)) out.push(line);
  }
  return out;
}

/** Whether iptables-save output declares the chain in its nat table. */
function hasChain(save: string): boolean {
  let inNat = false;
  for (const raw of save.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('*')) inNat = line === '*nat';
    else if (inNat && line.startsWith(`:${INBOUND_CHAIN} `)) return true;
  }
  return false;
}

/** PREROUTING rules that send packets to our chain (ours, duplicates, or variants someone else wrote). */
function jumps(save: string): string[] {
  return natRules(save, 'PREROUTING').filter((l) => / -[jg] AGENTS_CHAIN_INBOUND(\s|$)/.test(l));
}

/**
 * The `iptables-restore --noflush` input that turns the nat table described by `currentSave`
 * (iptables-save -t nat output; "" for a fresh namespace) into exactly the capture rules, touching
 * nothing else. Declaring the chain flushes and refills it; the PREROUTING jump is left alone when it
 * is already the one first rule that jumps there, otherwise every jump to the chain is deleted and one
 * is inserted first, so a restarted init container never leaves two. One COMMIT: the table changes
 * all at once or not at all.
 */
export function restoreInput(o: CaptureOptions, currentSave = ''): string {
  const existing = jumps(currentSave);
  const first = natRules(currentSave, 'PREROUTING')[0];
  const settled = existing.length === 1 && first === `-A PREROUTING ${JUMP_SPEC}`;
  const lines = ['*nat', `:${INBOUND_CHAIN} - [0:0]`];
  if (!settled) {
    for (const rule of existing) lines.push(rule.replace(/^-A /, '-D '));
    lines.push(`-I PREROUTING 1 ${JUMP_SPEC}`);
  }
  lines.push(...chainRules(o), 'COMMIT', '');
  return lines.join('\n');
}

/** What is wrong with the nat table (iptables-save output) compared with the capture rules; [] when it is exactly them. */
export function verifyRules(o: CaptureOptions, save: string): string[] {
  const problems: string[] = [];
  if (!hasChain(save)) return [`the nat table has no chain ${INBOUND_CHAIN}`];
  const existing = jumps(save);
  const first = natRules(save, 'PREROUTING')[0];
  if (existing.length !== 1) problems.push(`PREROUTING jumps to ${INBOUND_CHAIN} ${existing.length} times (expected once)`);
  if (first !== `-A PREROUTING ${JUMP_SPEC}`)
    problems.push(`the first PREROUTING rule is ${first ? `"${first}"` : 'missing'}, not "-A PREROUTING ${JUMP_SPEC}"`);
  const want = chainRules(o);
  const have = natRules(save, INBOUND_CHAIN);
  if (want.join('\n') !== have.join('\n')) problems.push(`${INBOUND_CHAIN} holds [${have.join('; ')}], expected [${want.join('; ')}]`);
  return problems;
}

/**
 * Non-loopback IPv6 addresses from /proc/net/if_inet6 text ("<32 hex> <ifindex> <prefix> <scope>
 * <flags> <ifname>" per line). Link-local addresses count: a peer on the link can connect to them.
 */
export function ipv6Addresses(ifInet6: string): { address: string; interface: string }[] {
  const out: { address: string; interface: string }[] = [];
  for (const line of ifInet6.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 6 || !/^[0-9a-f]{32}$/i.test(f[0]!)) continue;
    const hex = f[0]!.toLowerCase();
    if (f[5] === 'lo' || hex === '00000000000000000000000000000001') continue;
    out.push({ address: compressIpv6(hex), interface: f[5]! });
  }
  return out;
}

/** 32 hex digits → the usual text form (longest run of zero groups as "::"). */
function compressIpv6(hex: string): string {
  const groups = (hex.match(/.{4}/g) ?? []).map((g) => g.replace(/^0+(?=.)/, ''));
  let best = { at: -1, len: 0 };
  for (let i = 0; i < groups.length;) {
    if (groups[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < groups.length && groups[j] === '0') j++;
    if (j - i > best.len && j - i > 1) best = { at: i, len: j - i };
    i = j;
  }
  if (best.at < 0) return groups.join(':');
  return `${groups.slice(0, best.at).join(':')}::${groups.slice(best.at + best.len).join(':')}`;
}
