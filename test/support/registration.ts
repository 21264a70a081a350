import type { AgentKeyPair } from '../../src/identity/keys.js';

export const ISSUER = 'https://billing.example.com';

/** A billing policy with one trusted host that may register up to two agents. */
export function registrationPolicy(host: AgentKeyPair): string {
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
`;
}
