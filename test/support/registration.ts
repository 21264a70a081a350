import { registrationRequest, type HostSigner } from '../../src/identity/client.js';
import type { AgentKeyPair } from '../../src/identity/keys.js';

export const ISSUER = 'https://billing.example.com';

/**
 * A registration as an honest host makes it: the host token with the agent's
 * public key, and the body with the agent's proof of possession bound to it.
 */
export function registration(
  host: HostSigner,
  agent: Pick<AgentKeyPair, 'privateJwk'>,
  body: Record<string, unknown>,
): Promise<{ token: string; body: Record<string, unknown> }> {
  return registrationRequest(host, agent.privateJwk, ISSUER, body);
}

/** A billing policy with one trusted host that may register up to two agents (and, given, a second host). */
export function registrationPolicy(host: AgentKeyPair, other?: AgentKeyPair): string {
  return `
version: 1
provider: { name: billing-service, issuer: ${ISSUER}, description: Billing API }
capabilities:
  - { name: createInvoice, description: Create an invoice, method: POST, path: /invoices }
  - { name: getInvoice, method: GET, path: "/invoices/{id}" }
  - { name: deleteInvoice, method: DELETE, path: "/invoices/{id}" }
hosts:
  - id: laptop-host
    name: Build laptop
    publicKey: { kty: OKP, crv: Ed25519, x: "${host.publicJwk.x}" }
    maxAgents: 2
    defaultCapabilities:
      - getInvoice
      - capability: createInvoice
        constraints:
          amount: { max: 1000 }
          currency: { in: [USD, EUR] }
${
  other
    ? `  - id: other-host
    name: Another team's host
    publicKey: { kty: OKP, crv: Ed25519, x: "${other.publicJwk.x}" }
    defaultCapabilities: [getInvoice]
`
    : ''
}`;
}
