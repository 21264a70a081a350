import type { IncomingHttpHeaders } from 'node:http';
import type { ApprovalService } from '../approvals/service.js';
import { findActiveGrant } from '../auth/grant.js';
import { argumentLookup, planArguments, type ArgumentPlan } from '../constraints/arguments.js';
import { evaluateConstraints } from '../constraints/evaluate.js';
import { deny, isDenial, type ConstraintViolation, type Denial } from '../errors.js';
import { checkJsonRepresentation, parseContentType } from '../http/body.js';
import { parseStrictJsonBytes, StrictJsonError } from '../json/strict.js';
import type { Agent, Constraints, Grant, Policy } from '../policy/types.js';
import { keyReadAs, readConstrainedQuery } from '../routing/query.js';

/**
 * The grants an agent holds: a registered agent carries its own (its host's
 * defaults, narrowed at registration); a policy agent's are the policy's.
 * The one place that rule lives.
 */
export function grantsFor(agent: Pick<Agent, 'grants'>, policy: Pick<Policy, 'grants'>): ReadonlyMap<string, Grant> {
  return agent.grants ?? policy.grants;
}

/** Step 9: the agent's active, unexpired grant for each capability (the call's own first), or the refusal. */
export function activeGrants(
  agent: Pick<Agent, 'id' | 'grants'>,
  capabilities: readonly [string, ...string[]],
  policy: Pick<Policy, 'grants'>,
  nowMs: number,
): [Grant, ...Grant[]] | Denial {
  const grants = grantsFor(agent, policy);
  const [first, ...also] = capabilities;
  const own = findActiveGrant(grants, agent.id, first, nowMs);
  if (isDenial(own)) return own;
  const all: [Grant, ...Grant[]] = [own];
  for (const name of also) {
    const other = findActiveGrant(grants, agent.id, name, nowMs);
    // Egress: a streamed beta message is three capabilities; each needs its grant.
    if (isDenial(other)) return deny('capability_denied', `this call is also "${name}", which has no active grant`);
    all.push(other);
  }
  return all;
}

/** The parts of a request the constraints are read from, exactly as they will be forwarded. */
export interface CallArguments {
  method: string;
  /** Path parameters of the matched route. */
  params: Readonly<Record<string, string>>;
  /** The raw query string, or undefined. */
  query: string | undefined;
  body: Buffer | undefined;
  /** For the body's media type and encoding. */
  headers: IncomingHttpHeaders;
  /** The arguments already read strictly (an MCP message's tool arguments): the body is not parsed again. */
  parsed?: { value: unknown };
}

/** What authorize established: the grants, the arguments as read, and what is left of the violations. */
export interface Authorization {
  grants: readonly [Grant, ...Grant[]];
  plan: ArgumentPlan;
  query: ReadonlyMap<string, string>;
  /** The strictly parsed body, when a constraint reads it. */
  json: unknown;
  /** Every object key of `json` (collected only when asked, for the audit trail's redaction check). */
  jsonKeys: string[] | undefined;
  /** Constraint violations no human approved; empty when the call is within its limits. */
  violations: ConstraintViolation[];
  /** Fields the call left out among the violated ones (never remembered as approved values). */
  absentFields: string[];
  /** A scope=value approval covered every violation. */
  approvedByValue: boolean;
}

export interface AuthorizeContext {
  policy: Pick<Policy, 'grants'>;
  now: () => number;
  approvals?: Pick<ApprovalService, 'covering'>;
  collectKeys?: boolean;
}

/**
 * The one authorization: an active grant for the capability (and for each
 * capability the call also is), then `judgeArguments`. Violations are
 * returned, not refused: a capability route refuses them, request_permission
 * files them for a human, the approval executor runs what a human approved.
 * A capability route runs the two halves as two stages, the grant before the
 * jti is spent (step 9 before step 8) and the arguments once the body is read.
 */
export async function authorize(
  agent: Pick<Agent, 'id' | 'grants'>,
  capabilities: readonly [string, ...string[]],
  args: CallArguments,
  ctx: AuthorizeContext,
): Promise<Authorization | Denial> {
  const grants = activeGrants(agent, capabilities, ctx.policy, ctx.now());
  return isDenial(grants) ? grants : judgeArguments(agent, grants, args, ctx);
}

/**
 * Step 9b under grants already found: every constrained argument read from the
 * call as the app will read it, every constraint evaluated, and value approvals applied.
 */
export async function judgeArguments(
  agent: Pick<Agent, 'id'>,
  grants: readonly [Grant, ...Grant[]],
  args: CallArguments,
  ctx: Omit<AuthorizeContext, 'policy' | 'now'>,
): Promise<Authorization | Denial> {
  // A call that is several capabilities reads the fields any of their grants constrains.
  const constraints: Constraints = grants.length === 1 ? grants[0].constraints : (Object.assign({}, ...grants.map((g) => g.constraints)) as Constraints);
  const read = readArguments(constraints, args, ctx.collectKeys === true);
  if (isDenial(read)) return read;
  const lookup = argumentLookup(read.plan, args.params, read.query, read.json);
  let violations = grants.length === 1 ? evaluateConstraints(grants[0].constraints, lookup) : grants.flatMap((g) => evaluateConstraints(g.constraints, lookup));
  if (violations.length === 0) return { grants, ...read, violations, absentFields: [], approvedByValue: false };
  const absentFields = [...new Set(violations.map((v) => v.field))].filter((f) => !lookup(f).present);
  let approvedByValue = false;
  // Violations whose exact values a human approved with scope=value no longer count.
  if (ctx.approvals && (await ctx.approvals.covering(agent.id, grants[0].capability, violations))) {
    violations = [];
    approvedByValue = true;
  }
  return { grants, ...read, violations, absentFields, approvedByValue };
}

/** Reads each constrained argument from the path, the query or the JSON body; refuses what an app could read differently. */
function readArguments(
  constraints: Constraints,
  args: CallArguments,
  collectKeys: boolean,
): Pick<Authorization, 'plan' | 'query' | 'json' | 'jsonKeys'> | Denial {
  const plan = planArguments(constraints, args.method, args.params);
  const query = readConstrainedQuery(args.query, plan.query);
  if (isDenial(query)) return query;
  const pathFields = constrainedPathParameters(constraints, args.params);
  // Laravel's $request->id, PHP's $_REQUEST read a query or body copy of a path parameter before the route's value.
  const copied = pathFields && !args.parsed ? keyReadAs(args.query, pathFields) : undefined;
  if (copied) return deny('invalid_query', `"${copied}" is a constrained path parameter; it must not also be sent in the query`);
  const body = args.body;
  // An app may read a body field before the query one: a checked query needs an empty body.
  if (plan.query.size > 0 && body && body.length > 0) return deny('invalid_body', `${args.method} with constrained query parameters must not carry a body`);
  const read = { plan, query, json: undefined as unknown, jsonKeys: undefined as string[] | undefined };
  if (!plan.body) return pathFields && body && body.length > 0 && !args.parsed ? (bodyCopyOf(pathFields, body, args.headers) ?? read) : read;
  if (args.parsed) {
    // The audit trail records an MCP message's arguments from the message itself: no key list needed here.
    read.json = args.parsed.value;
    return read;
  }
  const inQuery = keyReadAs(args.query, plan.bodyRoots);
  if (inQuery) return deny('invalid_query', `"${inQuery}" is a constrained body field; it must not also be sent in the query`);
  if (!body || body.length === 0) return read; // every rule will report the field absent
  const media = checkJsonRepresentation(args.headers);
  if (media) return media;
  try {
    const keys: string[] | undefined = collectKeys ? [] : undefined;
    read.json = parseStrictJsonBytes(body, keys);
    read.jsonKeys = keys;
  } catch (err) {
    const why = err instanceof StrictJsonError ? err.message : String(err);
    return deny('invalid_body', `request body is not acceptable JSON: ${why}`);
  }
  return (pathFields && jsonCopyOf(pathFields, read.json)) ?? read;
}

/** Constrained fields that are path parameters of the matched route (undefined: none, nothing built). */
function constrainedPathParameters(constraints: Constraints, params: Readonly<Record<string, string>>): Set<string> | undefined {
  let out: Set<string> | undefined;
  for (const field in constraints) if (Object.hasOwn(params, field)) (out ??= new Set()).add(field);
  return out;
}

/** A JSON or form body that also carries a constrained path parameter (another body kind is not read by such frameworks as input). */
function bodyCopyOf(names: ReadonlySet<string>, body: Buffer, headers: IncomingHttpHeaders): Denial | undefined {
  const type = parseContentType(headers['content-type'] ?? '').essence;
  if (type === 'application/x-www-form-urlencoded') {
    const copied = keyReadAs(body.toString('latin1'), names);
    return copied ? deny('invalid_body', `"${copied}" is a constrained path parameter; it must not also be sent in the body`) : undefined;
  }
  if (type !== 'application/json' && !type.endsWith('+json')) return undefined;
  let json: unknown;
  try {
    json = parseStrictJsonBytes(body);
  } catch (err) {
    return deny('invalid_body', `request body is not acceptable JSON: ${err instanceof StrictJsonError ? err.message : String(err)}`);
  }
  return jsonCopyOf(names, json);
}

function jsonCopyOf(names: ReadonlySet<string>, json: unknown): Denial | undefined {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return undefined;
  const lowered = new Set([...names].map((n) => n.toLowerCase()));
  for (const key of Object.keys(json)) {
    if (lowered.has(key.toLowerCase())) return deny('invalid_body', `"${key}" is a constrained path parameter; it must not also be sent in the body`);
  }
  return undefined;
}
