/**
 * A schema-valid policy document compiled into the `Policy` the sidecar runs: routes (the sidecar's own
 * endpoints, the egress preset's or the app's capabilities, public routes), agents, hosts, grants and the
 * settings. Every problem is reported through `at` at the key at fault; `loadPolicyText` (load.ts) throws
 * them together.
 */
import { createHash } from 'node:crypto';
import { AgentKeyError, importAgentKey, thumbprintOf } from '../identity/keys.js';
import { parseTemplate, templatesOverlap, type PathTemplate } from '../routing/template.js';
import { keyOf, type PathPart } from './issues.js';
import { PRESETS, type Preset } from '../egress/presets.js';
import { ENDPOINTS } from '../endpoints/index.js';
import { constrainedSpellings, normaliseConstraints, spellingsOf } from '../constraints/rules.js';
import { checkMcpConstraints, compileMcpServers } from './mcp.js';
import type { RawPolicy } from './raw.js';
import { SELF_REGISTERED_HOST_PREFIX } from '../registration/host-token.js';
import { RESERVED_AUDIENCES, reservedName } from './reserved.js';
import { grantKey, type Agent, type Capability, type Constraints, type Grant, type Host, type Policy, type Route } from './types.js';

export type { RawPolicy } from './raw.js';

export type At = (path: PathPart[], message: string, asKey?: boolean) => void;

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

export async function compile(raw: RawPolicy, file: string, text: string, at: At): Promise<Policy> {
  const { capabilities, routes, preset } = compileRoutes(raw, at);
  const { agents, byThumbprint } = await compileAgents(raw, at);
  const hosts = await compileHosts(raw, capabilities, byThumbprint, at);
  const dynamicHosts = compileDynamicHosts(raw, capabilities, at);
  const grants = compileGrants(raw, capabilities, at);
  checkAccessRequests(raw, at);
  return {
    file,
    hash: createHash('sha256').update(text).digest('hex'),
    audit: {
      onAuditFailure: raw.audit?.onAuditFailure ?? 'deny',
      redact: (raw.audit?.redact ?? []).flatMap((r, i) => {
        try {
          return [new RegExp(r, 'i')];
        } catch (err) {
          at(['audit', 'redact', i], `not a regular expression: ${(err as Error).message}`);
          return [];
        }
      }),
    },
    context: {
      constraintAware: raw.constraintAware ?? false,
      violationStatus: raw.violationStatus ?? 403,
      envelope: raw.envelope ?? 'errors',
    },
    accessRequests: accessRequestSettings(raw),
    provider: raw.provider,
    // In front of a remote MCP server, a path that is not its endpoint is refused unless the policy says pass.
    ...(raw.mode === 'egress' ? { egress: { ...(preset ? { preset } : {}), unmapped: raw.unmapped ?? (preset ? 'pass' : 'deny') } } : {}),
    capabilities,
    routes,
    agents,
    hosts,
    ...(dynamicHosts ? { dynamicHosts } : {}),
    grants,
  };
}

/** Routes in policy order; a route that overlaps an earlier one (the sidecar's own endpoints first) is reported. */
function routeTable(at: At): { routes: Route[]; add: (path: PathPart[], method: string, source: string, make: (t: PathTemplate) => Route) => void } {
  const routes: Route[] = [];
  const routePaths: PathPart[][] = [];
  const add = (path: PathPart[], method: string, source: string, make: (t: PathTemplate) => Route): void => {
    const t = parseTemplate(source);
    if (typeof t === 'string') return at([...path, 'path'], t);
    const route = make(t);
    routes.forEach((other, i) => {
      if (sameHandler(other.method, method) && (templatesOverlap(other.template, t) || templatesOverlap(loose(other.template), loose(t)))) {
        const owner = other.kind === 'endpoint' ? "the sidecar's own endpoint" : keyOf(routePaths[i] ?? []);
        at([...path, 'path'], `route ${method} ${source} overlaps ${owner} (${other.method} ${other.template.source})`);
      }
    });
    routes.push(route);
    routePaths.push(path);
  };
  return { routes, add };
}

function compileRoutes(raw: RawPolicy, at: At): { capabilities: Map<string, Capability>; routes: Route[]; preset: Preset | undefined } {
  const capabilities = new Map<string, Capability>();
  const { routes, add: addRoute } = routeTable(at);
  // The sidecar's own endpoints on the agent port (their definitions in src/endpoints/); a policy route may not overlap them.
  for (const e of Object.values(ENDPOINTS)) {
    if (e.needs === 'accessRequests' && !(raw.constraintAware && raw.accessRequests)) continue;
    if (e.needs === 'hosts' && !raw.hosts?.length && !raw.dynamicHosts) continue;
    if (e.needs === 'ingress' && raw.mode === 'egress') continue;
    addRoute(['<sidecar>'], e.method, e.path, (template) => ({
      kind: 'endpoint',
      method: e.method,
      template,
      endpoint: e.name,
      audience: e.audience,
      auth: e.auth,
      ...(e.discoveryName ? { discoveryName: e.discoveryName } : {}),
    }));
  }

  const preset = checkMode(raw, at);
  // Egress: the preset's table is the capability list (variants are capabilities without a route of their own).
  preset?.routes.forEach((r) => {
    const cap: Capability = {
      name: r.capability,
      method: r.method,
      path: r.path,
      description: `${preset.name} ${r.method} ${r.path}`,
      ...(r.multipart ? { multipart: true, maxBodyBytes: 25 * 1024 * 1024 } : {}),
    };
    capabilities.set(cap.name, cap);
    const variants = r.variants?.map((v) => {
      const vc: Capability = {
        name: v.capability,
        method: r.method,
        path: r.path,
        description: `${preset.name} ${r.method} ${r.path} (${v.header ? `with ${v.header}` : `"${v.bodyFlag}": true`})`,
      };
      capabilities.set(vc.name, vc);
      return { capability: vc, header: v.header, bodyFlag: v.bodyFlag };
    });
    addRoute(['preset'], r.method, r.path, (template) => ({
      kind: 'capability',
      method: r.method,
      template,
      capability: cap,
      ...(variants ? { variants } : {}),
    }));
  });
  (raw.capabilities ?? []).forEach((c, i) => {
    if (capabilities.has(c.name)) return at(['capabilities', i, 'name'], `duplicate capability name "${c.name}"`);
    if (RESERVED_AUDIENCES.has(c.name)) return at(['capabilities', i, 'name'], reservedName(c.name));
    capabilities.set(c.name, c);
    addRoute(['capabilities', i], c.method, c.path, (template) => ({ kind: 'capability', method: c.method, template, capability: c }));
  });
  compileMcpServers(raw.mcp ?? [], capabilities, addRoute, at);
  (raw.public ?? []).forEach((p, i) => {
    addRoute(['public', i], p.method, p.path, (template) => ({ kind: 'public', method: p.method, template }));
  });
  return { capabilities, routes, preset };
}

/** What mode and preset a policy runs in, and whether its other sections fit them. */
function checkMode(raw: RawPolicy, at: At): Preset | undefined {
  const egress = raw.mode === 'egress';
  if (egress && !raw.preset && !raw.mcp) at(['mode'], 'egress mode needs a preset (openai or anthropic) or an mcp: section (a remote MCP server)', true);
  if (egress && raw.preset && raw.mcp) at(['mcp'], 'egress mode guards one remote: a preset or an MCP server, not both', true);
  // Servers route /MCP and /mcp/ to their /mcp endpoint too: passed through, those would skip every check.
  if (egress && raw.mcp && raw.unmapped === 'pass')
    at(['unmapped'], 'in front of an MCP server, unmapped: pass would forward look-alike paths (/MCP, /mcp/) unchecked: use deny', true);
  if (!egress && (raw.preset || raw.unmapped)) at([raw.preset ? 'preset' : 'unmapped'], 'only meaningful with mode: egress', true);
  // In egress the sidecar mints each call's token itself (seed form, unbound): these say how agents' tokens look.
  const ingressOnly = 'only meaningful in ingress: in egress the sidecar signs each call itself';
  if (egress && raw.provider.tokenProfile === 'agent-auth-v1') at(['provider', 'tokenProfile'], ingressOnly, true);
  if (egress && raw.provider.requireBinding) at(['provider', 'requireBinding'], ingressOnly, true);
  if (egress) (raw.agents ?? []).forEach((a, i) => a.requireBinding && at(['agents', i, 'requireBinding'], ingressOnly, true));
  if (egress && raw.capabilities?.length)
    at(['capabilities'], 'in egress mode the capabilities come from the preset (or the mcp: section); remove this list', true);
  if (!egress && !raw.capabilities && !raw.mcp) at([], "capabilities (the app's named operations) or mcp (its MCP servers) is required");
  return egress && raw.preset ? PRESETS[raw.preset] : undefined;
}

async function compileAgents(raw: RawPolicy, at: At): Promise<{ agents: Map<string, Agent>; byThumbprint: Map<string, string> }> {
  const agents = new Map<string, Agent>();
  const byThumbprint = new Map<string, string>();
  for (const [i, a] of (raw.agents ?? []).entries()) {
    if (agents.has(a.id)) {
      at(['agents', i, 'id'], `duplicate agent id "${a.id}"`);
      continue;
    }
    const imported = await publicKeyAt(a.publicKey, ['agents', i, 'publicKey'], at);
    if (!imported) continue;
    const { key, thumbprint } = imported;
    const owner = byThumbprint.get(thumbprint);
    if (owner) {
      at(['agents', i, 'publicKey'], `key already belongs to agent "${owner}"; give each agent its own key`);
      continue;
    }
    byThumbprint.set(thumbprint, a.id);
    agents.set(a.id, { id: a.id, name: a.name, key, thumbprint, ...(a.requireBinding ? { requireBinding: true } : {}) });
  }
  return { agents, byThumbprint };
}

async function compileHosts(raw: RawPolicy, capabilities: Map<string, Capability>, byThumbprint: Map<string, string>, at: At): Promise<Map<string, Host>> {
  const hosts = new Map<string, Host>();
  for (const [i, h] of (raw.hosts ?? []).entries()) {
    if ([...hosts.values()].some((o) => o.id === h.id)) {
      at(['hosts', i, 'id'], `duplicate host id "${h.id}"`);
      continue;
    }
    const imported = await publicKeyAt(h.publicKey, ['hosts', i, 'publicKey'], at);
    if (!imported) continue;
    const { key, thumbprint } = imported;
    const owner = byThumbprint.get(thumbprint) ?? hosts.get(thumbprint)?.id;
    if (owner) {
      at(['hosts', i, 'publicKey'], `key already belongs to "${owner}"; give each host and agent its own key`);
      continue;
    }
    // hst_<thumbprint> is how a self-registered host is named (dynamicHosts): a listed host may not take it.
    if (raw.dynamicHosts && h.id.startsWith(SELF_REGISTERED_HOST_PREFIX))
      at(['hosts', i, 'id'], 'ids beginning "hst_" name self-registered hosts (dynamicHosts)');
    const defaults = hostDefaults(h.defaultCapabilities, capabilities, ['hosts', i], at);
    hosts.set(thumbprint, { id: h.id, name: h.name, key, thumbprint, defaults, maxAgents: h.maxAgents ?? 100 });
  }
  return hosts;
}

/** The most a host's agents may get: capability names, or names with the loosest constraints. */
function hostDefaults(
  list: NonNullable<RawPolicy['hosts']>[number]['defaultCapabilities'],
  capabilities: Map<string, Capability>,
  path: PathPart[],
  at: At,
): Map<string, Constraints> {
  const defaults = new Map<string, Constraints>();
  (list ?? []).forEach((d, j) => {
    const name = typeof d === 'string' ? d : d.capability;
    const cap = capabilities.get(name);
    if (!cap) return at([...path, 'defaultCapabilities', j], `unknown capability "${name}"`);
    const constraints = checkConstraints(typeof d === 'string' ? {} : (d.constraints ?? {}), cap, [...path, 'defaultCapabilities', j, 'constraints'], at);
    defaults.set(name, constraints);
  });
  return defaults;
}

/** Self-registering hosts: off unless the policy has a dynamicHosts section. */
function compileDynamicHosts(raw: RawPolicy, capabilities: Map<string, Capability>, at: At): Policy['dynamicHosts'] {
  const d = raw.dynamicHosts;
  if (!d) return undefined;
  return { defaults: hostDefaults(d.defaultCapabilities, capabilities, ['dynamicHosts'], at), maxAgents: d.maxAgents ?? 10 };
}

function compileGrants(raw: RawPolicy, capabilities: Map<string, Capability>, at: At): Map<string, Grant> {
  const grants = new Map<string, Grant>();
  (raw.grants ?? []).forEach((g, i) => {
    const path: PathPart[] = ['grants', i];
    if (!(raw.agents ?? []).some((a) => a.id === g.agent)) at([...path, 'agent'], `unknown agent "${g.agent}"`);
    const cap = capabilities.get(g.capability);
    if (!cap) at([...path, 'capability'], `unknown capability "${g.capability}"`);
    let expiresAt: number | undefined;
    if (g.expiresAt !== undefined) {
      expiresAt = Date.parse(g.expiresAt);
      if (!RFC3339.test(g.expiresAt) || Number.isNaN(expiresAt)) at([...path, 'expiresAt'], 'must be an RFC 3339 date-time like 2027-01-01T00:00:00Z');
    }
    const constraints = cap ? checkConstraints(g.constraints ?? {}, cap, [...path, 'constraints'], at) : (g.constraints ?? {});
    if (cap?.multipart && Object.keys(constraints).length)
      at(
        [...path, 'constraints'],
        `"${cap.name}" takes multipart/form-data bodies, which the sidecar forwards unread: constraints on it could never be checked`,
      );
    const k = grantKey(g.agent, g.capability);
    if (grants.has(k)) return at(path, `second grant of "${g.capability}" to "${g.agent}"; merge them into one`);
    grants.set(k, { agent: g.agent, capability: g.capability, status: g.status, expiresAt, constraints });
  });
  return grants;
}

function checkAccessRequests(raw: RawPolicy, at: At): void {
  const webhook = raw.accessRequests?.notifier?.webhook;
  if (webhook && !webhook.url === !webhook.urlEnv) at(['accessRequests', 'notifier', 'webhook'], 'give exactly one of url or urlEnv');
  if (raw.accessRequests?.ttl !== undefined && durationMs(raw.accessRequests.ttl, 0) > 24 * 3_600_000) {
    at(['accessRequests', 'ttl'], 'must be at most 24h: an agent holds its HTTP request open while it waits');
  }
  if (raw.accessRequests && !raw.constraintAware) {
    at(['accessRequests'], 'request_permission needs constraintAware: true as well; without it accessRequests has no effect');
  }
}

/** Access requests are on only with constraintAware: true as well (checkAccessRequests says so otherwise). */
function accessRequestSettings(raw: RawPolicy): Policy['accessRequests'] {
  if (!raw.constraintAware || !raw.accessRequests) return undefined;
  const webhook = raw.accessRequests.notifier?.webhook;
  return {
    ttlMs: durationMs(raw.accessRequests.ttl, 5 * 60_000),
    valueApprovalTtlMs: durationMs(raw.accessRequests.valueApprovalTtl, 24 * 3_600_000),
    maxPending: raw.accessRequests.maxPending ?? 1000,
    webhook: webhook && {
      url: webhook.url,
      urlEnv: webhook.urlEnv,
      format: webhook.format ?? 'json',
      headers: webhook.headers ?? {},
      headersEnv: webhook.headersEnv ?? {},
      retries: webhook.retries ?? 3,
    },
  };
}

/**
 * An agent's or host's public key, imported once; a malformed or unsafe one
 * (small order, non-canonical) is reported at the member at fault.
 */
async function publicKeyAt(jwk: Record<string, string>, path: PathPart[], at: At): Promise<{ key: Agent['key']; thumbprint: string } | undefined> {
  try {
    return { key: await importAgentKey(jwk), thumbprint: await thumbprintOf(jwk) };
  } catch (err) {
    const member = err instanceof AgentKeyError && err.member && err.member in jwk ? err.member : undefined;
    at(member ? [...path, member] : path, `Ed25519 public key refused: ${(err as Error).message}`);
    return undefined;
  }
}

/** Many frameworks run the GET handler for HEAD: the two methods share routes. */
function sameHandler(a: string, b: string): boolean {
  const m = (x: string) => (x === 'HEAD' ? 'GET' : x);
  return m(a) === m(b);
}

/** A template as case-insensitive, trailing-slash-agnostic routers see it. */
function loose(t: PathTemplate): PathTemplate {
  const segments = t.segments.map((s) => ('literal' in s ? { literal: s.literal.toLowerCase() } : s));
  if (segments.length > 1 && 'literal' in segments.at(-1)! && (segments.at(-1) as { literal: string }).literal === '') segments.pop();
  return { source: t.source, segments };
}

const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Integer seconds or "90s" / "5m" / "24h" / "7d" (validated by the schema). */
export function durationMs(v: number | string | undefined, fallback: number): number {
  if (v === undefined) return fallback;
  if (typeof v === 'number') return v * 1000;
  return Number(v.slice(0, -1)) * UNIT_MS[v.slice(-1) as keyof typeof UNIT_MS];
}

/** Checks a grant's or host default's rules and returns them normalised (`eq` read as `exact`: src/constraints/rules.ts). */
function checkConstraints(written: Constraints, cap: Capability, path: PathPart[], at: At): Constraints {
  const { constraints, problems } = normaliseConstraints(written);
  // A problem of the rule or of its eq key points at the key; one of an alias at the alias.
  for (const p of problems) at([...path, p.field, ...(p.key === undefined ? [] : [p.key].flat())], p.message, !Array.isArray(p.key));
  const params = new Set((parseTemplate(cap.path) as PathTemplate).segments?.flatMap((s) => ('param' in s ? [s.param] : [])) ?? []);
  for (const [field, rule] of Object.entries(constraints)) {
    const here = [...path, field];
    for (const [i, spelling] of spellingsOf(field, rule).entries()) {
      const head = spelling.split('.')[0]!;
      const where = i === 0 ? here : [...here, 'aliases', i - 1];
      if (params.has(head) && head !== spelling) at(where, `"${head}" is a path parameter (a string); it has no nested fields`, i === 0);
    }
    if (rule.min !== undefined && rule.max !== undefined && rule.min > rule.max) at(here, `min (${rule.min}) is greater than max (${rule.max})`, true);
  }
  // An MCP resource's aliases must be URI variables too: check every spelling as a field.
  checkMcpConstraints(Object.fromEntries(constrainedSpellings(constraints).map((s) => [s, {}])), cap, path, at);
  return constraints;
}
