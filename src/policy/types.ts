import type { KeyObject } from 'node:crypto';
import type { Preset } from '../egress/presets.js';
import type { UriTemplate } from '../mcp/uri-template.js';
import type { PathTemplate } from '../routing/template.js';

/** An Ed25519 public key, imported once when the policy loads. */
export type VerificationKey = KeyObject;

/**
 * One argument rule: the five operators of the agents-chain spec (../shared/seeds/002_9af9aaa6cc5deb37.txt),
 * max, min, in, not_in, exact (the Agent Auth Protocol's `eq` is read as `exact` when the policy loads),
 * and two modifiers saying which spellings of the call the operators read (src/constraints/rules.ts).
 */
export interface ConstraintRule {
  max?: number;
  min?: number;
  in?: Scalar[];
  not_in?: Scalar[];
  exact?: Scalar;
  /** The call may leave the field out (every spelling absent); a present value is checked as usual. */
  optional?: boolean;
  /** Other names of the same field (max_completion_tokens for max_tokens): every spelling present is checked. */
  aliases?: string[];
}
export type Scalar = string | number | boolean;
export type Constraints = Record<string, ConstraintRule>;

export interface Capability {
  name: string;
  description?: string;
  method: string;
  path: string;
  inputSchema?: Record<string, unknown>;
  maxBodyBytes?: number;
  /** multipart/form-data bodies (egress presets): forwarded unmodified, never constrained. */
  multipart?: boolean;
  /** Tokens for this capability must carry htm, htu and ath (bound to their request). */
  requireBinding?: boolean;
  /** A capability of an MCP server (its session, or one tool, prompt or resource template): `path` is the server's endpoint. */
  mcp?: McpTarget;
}

/** What an MCP capability names on its server (the `mcp:` section of the policy). */
export interface McpTarget {
  kind: 'session' | 'tool' | 'prompt' | 'resource';
  /** The server's streamable HTTP endpoint. */
  path: string;
  /** The tool's or prompt's MCP name. */
  name?: string;
  /** The resource's URI template. */
  uri?: string;
}

/**
 * One MCP server behind the sidecar, compiled: the session capability, and
 * the route each tool, prompt and resource template is checked as.
 */
export interface McpServer {
  path: string;
  session: Capability;
  /** POST on the path as the session capability: what session messages are checked as. */
  sessionRoute: McpRoute;
  tools: ReadonlyMap<string, McpRoute>;
  prompts: ReadonlyMap<string, McpRoute>;
  resources: readonly { template: UriTemplate; route: McpRoute }[];
}

/** A capability route of an MCP server (POST on its path), what a message is checked as once its target is known. */
export type McpRoute = Extract<Route, { kind: 'capability' }>;

/** A capability route read as another capability when a header is present or a JSON body flag is true. */
export interface CapabilityVariant {
  capability: Capability;
  header?: string;
  bodyFlag?: string;
}

export interface Agent {
  id: string;
  name: string;
  /** Verification key imported once at load; the only key a token is checked with. */
  key: VerificationKey;
  /** RFC 7638 thumbprint of the public key: the token's expected `iss`. */
  thumbprint: string;
  /** Set for agents a host registered (not listed in the policy): their host, and their own grants. */
  hostId?: string;
  grants?: ReadonlyMap<string, Grant>;
  /** This agent's tokens must carry htm, htu and ath. */
  requireBinding?: boolean;
}

/** A trusted host: registers agents with host+jwt tokens; its agents get at most its default capabilities. */
export interface Host {
  id: string;
  name: string;
  key: VerificationKey;
  thumbprint: string;
  /** Capability name -> the loosest constraints a registered agent may get. */
  defaults: ReadonlyMap<string, Constraints>;
  maxAgents: number;
}

/**
 * Self-registering hosts (the Agent Auth Protocol's dynamic host registration): a host the policy
 * does not list proves its key with host_public_key; its id is `hst_<thumbprint>` and its agents get
 * at most these defaults.
 */
export interface DynamicHosts {
  defaults: ReadonlyMap<string, Constraints>;
  maxAgents: number;
}

export interface Grant {
  agent: string;
  capability: string;
  status: 'active' | 'revoked';
  /** Unix ms, or undefined for no expiry. */
  expiresAt?: number;
  constraints: Constraints;
}

/** Endpoints the sidecar answers itself on the agent port (never forwarded). */
export type EndpointName =
  | 'constraint_context'
  | 'request_permission'
  | 'request_status'
  | 'discovery'
  | 'capability_list'
  | 'describe_capability'
  | 'introspect'
  | 'register'
  | 'agent_status'
  | 'revoke'
  | 'rotate_key'
  | 'execute';

/** Who may call a sidecar endpoint: an agent token, a host token, anyone, or anyone with an optional agent token. */
export type EndpointAuth = 'agent' | 'host' | 'none' | 'optional_agent';

export type Route =
  | {
      kind: 'capability';
      method: string;
      template: PathTemplate;
      capability: Capability;
      variants?: CapabilityVariant[];
      /** The path is an MCP server's endpoint: the capability is read from each JSON-RPC message. */
      mcp?: McpServer;
    }
  | { kind: 'public'; method: string; template: PathTemplate }
  | {
      kind: 'endpoint';
      method: string;
      template: PathTemplate;
      endpoint: EndpointName;
      audience: string;
      auth: EndpointAuth;
      /** Its name in the discovery document, if published. */ discoveryName?: string;
    };

/** How denials and successes are presented to agents (the context-awareness guide). */
export interface ContextSettings {
  constraintAware: boolean;
  /** Status of constraint_violated answers in constraint-aware mode. */
  violationStatus: number;
  /** 'all' wraps successful JSON responses in the envelope too. */
  envelope: 'errors' | 'all';
}

export interface WebhookSettings {
  url?: string;
  /** Name of the environment variable holding the URL (secrets stay out of the policy). */
  urlEnv?: string;
  format: 'json' | 'slack';
  /** Literal, non-secret headers. */
  headers: Record<string, string>;
  /** Header name -> environment variable name. */
  headersEnv: Record<string, string>;
  retries: number;
}

export interface AccessRequestSettings {
  ttlMs: number;
  valueApprovalTtlMs: number;
  maxPending: number;
  webhook?: WebhookSettings;
}

/** The agent+jwt form agents send (docs/reference/tokens.md): the seed's, or the Agent Auth Protocol's. */
export type TokenProfile = 'agents-chain' | 'agent-auth-v1';

export interface Provider {
  name: string;
  issuer: string;
  description?: string;
  /** Default agents-chain. */
  tokenProfile?: TokenProfile;
  /** Every agent token must carry htm, htu and ath. */
  requireBinding?: boolean;
}

/** A loaded, validated policy: everything the request path needs, precomputed. */
export interface Policy {
  file: string;
  /** SHA-256 of the policy file's bytes, hex. */
  hash: string;
  provider: Provider;
  capabilities: ReadonlyMap<string, Capability>;
  routes: readonly Route[];
  agents: ReadonlyMap<string, Agent>;
  /** Trusted hosts, keyed by their key's thumbprint (a registration token's `iss`). */
  hosts: ReadonlyMap<string, Host>;
  /** Present when hosts the policy does not list may register themselves (a host token carrying host_public_key). */
  dynamicHosts?: DynamicHosts;
  /** Keyed by grantKey(agent, capability). */
  grants: ReadonlyMap<string, Grant>;
  context: ContextSettings;
  audit: { onAuditFailure: 'deny' | 'allow'; redact: RegExp[] };
  /** Present when request_permission is on (constraintAware and accessRequests both set). */
  accessRequests?: AccessRequestSettings;
  /** Egress mode: the sidecar guards the agent's calls to a model provider (a preset) or a remote MCP server (the mcp: section). */
  egress?: { preset?: Preset; unmapped: 'pass' | 'deny' };
}

export function grantKey(agent: string, capability: string): string {
  return `${agent}\u0000${capability}`;
}
