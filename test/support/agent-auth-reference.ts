/**
 * The Agent Auth Protocol's reference server (@better-auth/agent-auth on
 * better-auth with its memory adapter), in this process on a loopback port:
 * the oracle the sidecar's agent-auth-v1 profile is compared with. Agents and
 * grants are seeded straight into the memory store, so both sides hold the
 * same agent (same id, same key) with the same grants.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { agentAuth } from '@better-auth/agent-auth';
import { betterAuth } from 'better-auth';
import { memoryAdapter } from 'better-auth/adapters/memory';
import { toNodeHandler } from 'better-auth/node';
import type { JWK } from 'jose';

export interface ReferenceAgent {
  id: string;
  name: string;
  publicJwk: JWK;
  grants: { capability: string; constraints?: Record<string, unknown> }[];
}

export interface ReferenceServer {
  /** The server's issuer (its base URL with better-auth's base path): what `aud` names. */
  issuer: string;
  /** Its origin, where /.well-known/agent-configuration answers. */
  origin: string;
  /** The calls its execute handler ran. */
  executed: { capability: string; arguments: unknown }[];
  db: Record<string, Record<string, unknown>[]>;
  close(): Promise<void>;
}

export async function startReference(o: {
  capabilities: { name: string; description: string; input?: Record<string, unknown> }[];
  agents: ReferenceAgent[];
  allowDynamicHostRegistration?: boolean;
}): Promise<ReferenceServer> {
  const now = new Date();
  const db: Record<string, Record<string, unknown>[]> = {
    user: [{ id: 'user-1', name: 'Owner', email: 'owner@example.com', emailVerified: true, createdAt: now, updatedAt: now }],
    session: [],
    account: [],
    verification: [],
    agent: o.agents.map((a) => ({
      id: a.id,
      name: a.name,
      userId: 'user-1',
      hostId: null,
      status: 'active',
      mode: 'autonomous',
      publicKey: JSON.stringify(a.publicJwk),
      kid: null,
      jwksUrl: null,
      lastUsedAt: null,
      activatedAt: now,
      expiresAt: null,
      metadata: null,
      createdAt: now,
      updatedAt: now,
    })),
    agentHost: [],
    agentCapabilityGrant: o.agents.flatMap((a) =>
      a.grants.map((g, i) => ({
        id: `${a.id}-grant-${i}`,
        agentId: a.id,
        capability: g.capability,
        deniedBy: null,
        grantedBy: 'user-1',
        expiresAt: null,
        status: 'active',
        reason: null,
        constraints: g.constraints ?? null,
        createdAt: now,
        updatedAt: now,
      })),
    ),
    approvalRequest: [],
  };
  const executed: ReferenceServer['executed'] = [];
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const auth = betterAuth({
    baseURL: base,
    basePath: '/api/auth',
    secret: 'agents-chain-differential-tests-not-a-secret-0123456789',
    logger: { disabled: true },
    database: memoryAdapter(db),
    plugins: [
      agentAuth({
        providerName: 'billing-service',
        capabilities: o.capabilities,
        allowDynamicHostRegistration: o.allowDynamicHostRegistration ?? false,
        onExecute: ({ capability, arguments: args }) => {
          executed.push({ capability, arguments: args });
          return { capability, arguments: args ?? {} };
        },
      }),
    ],
  });
  const handler = toNodeHandler(auth);
  // The plugin serves discovery under its base path and asks the operator to expose it at the well-known URL: done here.
  server.on('request', (req, res) => {
    if (req.url === '/.well-known/agent-configuration') req.url = '/api/auth/agent-configuration';
    void handler(req, res);
  });
  return {
    issuer: `${base}/api/auth`,
    origin: base,
    executed,
    db,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
