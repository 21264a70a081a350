import type { Deps } from '../pipeline/deps.js';
import type { SidecarOptions } from './options.js';

/**
 * Egress: the agent's signer (its key must be the policy's key for that agent) and the provider credential
 * header; undefined in ingress mode. Every mistake is refused at startup, before a call is signed wrongly.
 */
export async function egressIdentity(opts: SidecarOptions): Promise<Deps['egress']> {
  if (!opts.policy.egress) return undefined;
  const preset = opts.policy.egress.preset;
  if (!opts.egress)
    throw new Error(
      preset
        ? `egress mode (${preset.name}) needs the agent's key (--agent-key, --agent) and the provider key (AGENTS_CHAIN_PROVIDER_KEY or --provider-key-file)`
        : "egress mode (an MCP server) needs the agent's key (--agent-key, --agent)",
    );
  const agent = opts.policy.agents.get(opts.egress.agentId);
  if (!agent) throw new Error(`--agent ${opts.egress.agentId} is not an agent in the policy`);
  // Loaded only here: the signer's JWT library is not needed by an ingress sidecar (its memory, ~9 MB).
  const { createAgentSigner } = await import('../identity/client.js');
  const signer = await createAgentSigner(opts.egress.agentKey, agent.id);
  if (signer.thumbprint !== agent.thumbprint) throw new Error(`--agent-key is not the key the policy lists for ${agent.id}`);
  const key = opts.egress.providerKey;
  // A remote MCP server: its key, if it needs one, as a bearer token; without one the agent's own headers pass.
  if (!preset) return key ? { signer, credential: ['authorization', `Bearer ${key}`] } : { signer };
  if (!key) throw new Error('the provider key is empty');
  return { signer, credential: [preset.credential.header, `${preset.credential.prefix}${key}`] };
}
