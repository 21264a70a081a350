import { describeRule } from '../context/describe.js';
import { outcomeOf, type Denial, type DenialCode } from '../errors.js';
import type { PresentedDenial } from '../http/respond.js';
import type { Constraints } from '../policy/types.js';
import type { Preset } from './presets.js';

/**
 * Egress refusals in the provider's own error shape. The agent talks to the
 * sidecar through the official OpenAI or Anthropic SDK, which reads only that
 * shape: the SDK's `err.message` is built from `error.message` (OpenAI) or
 * from the body's `message` (Anthropic), its stable code from `error.code`
 * (OpenAI) or `error.details.error_code` (Anthropic). So the words say what
 * was wrong, the code stays the sidecar's denial code, and the sidecar's own
 * body (the plain body, or the constraint-aware envelope) rides along as
 * `agents_chain`, reached as `err.error.agents_chain` in both SDKs. Pure:
 * status and JSON only; the status and headers are the sidecar's, unchanged.
 */

/** The member that carries the sidecar's own body. */
export const SIDECAR_MEMBER = 'agents_chain';

/** What the words may mention: the capability refused and the limits of its grant. */
export interface ProviderErrorContext {
  capability?: string | undefined;
  activeConstraints?: Constraints | undefined;
}

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string; [SIDECAR_MEMBER]: unknown };
}

export interface AnthropicErrorBody {
  type: 'error';
  error: { type: string; message: string; details: { error_code: string } };
  /** The Anthropic SDK builds `err.message` from a top-level `message` when there is one (else the whole body, JSON). */
  message: string;
  [SIDECAR_MEMBER]: unknown;
}

export function providerDenial(preset: Preset['name'], denial: Denial, presented: PresentedDenial, ctx: ProviderErrorContext = {}): PresentedDenial {
  // violationStatus: 200 asks for the envelope as an answer; an SDK would read an error shape as a (broken) result.
  if (presented.status < 400) return presented;
  const message = refusalMessage(denial, ctx);
  // Status and headers (Retry-After) stay the sidecar's: only the body changes shape.
  return { ...presented, body: preset === 'openai' ? openaiBody(denial, presented, message) : anthropicBody(denial, presented, message) };
}

function openaiBody(denial: Denial, presented: PresentedDenial, message: string): OpenAIErrorBody {
  return {
    error: {
      message,
      type: openaiType(presented.status),
      // OpenAI names one parameter; the first field refused (all of them are in agents_chain.violations).
      param: denial.violations?.[0]?.field ?? null,
      code: denial.code,
      [SIDECAR_MEMBER]: presented.body,
    },
  };
}

function anthropicBody(denial: Denial, presented: PresentedDenial, message: string): AnthropicErrorBody {
  return {
    type: 'error',
    error: { type: anthropicType(presented.status), message, details: { error_code: denial.code } },
    message,
    [SIDECAR_MEMBER]: presented.body,
  };
}

/** The error types both APIs use per status (the SDKs pick their error class from the status alone). */
function commonType(status: number): string | undefined {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 429) return 'rate_limit_error';
  return status < 500 ? 'invalid_request_error' : undefined;
}

function openaiType(status: number): string {
  return commonType(status) ?? 'server_error';
}

function anthropicType(status: number): string {
  return commonType(status) ?? (status === 503 ? 'overloaded_error' : 'api_error');
}

/**
 * One paragraph a developer reads in `err.message`: who refused, the code,
 * what was wrong (each field: what is allowed, what was sent), the grant's
 * limits, and whether retrying can help. Egress agents never mint tokens or
 * ask for approval themselves, so the ingress guidance (new token,
 * request_permission) does not apply here.
 */
export function refusalMessage(denial: Denial, ctx: ProviderErrorContext): string {
  const what = ctx.capability ? `this ${ctx.capability} call` : 'this call';
  const head = `agents-chain refused ${what} (${denial.code}): `;
  if (denial.code === 'constraint_violated') {
    const violations = denial.violations?.length ? denial.violations.map((v) => v.message).join('; ') : denial.message;
    const allowed = Object.entries(ctx.activeConstraints ?? {}).map(([field, rule]) => `${field} ${describeRule(rule)}`);
    return [
      head + sentence(violations),
      allowed.length ? sentence(`Allowed: ${allowed.join('; ')}`) : '',
      'Fit the call to these limits; retrying it unchanged will not help.',
    ]
      .filter(Boolean)
      .join(' ');
  }
  const next = NEXT_STEP[denial.code] ?? (outcomeOf(denial.code) === 'error' ? 'Retry later.' : '');
  return [head + sentence(denial.message), next].filter(Boolean).join(' ');
}

/** What the developer can do, where the code alone does not say it. */
const NEXT_STEP: Partial<Record<DenialCode, string>> = {
  capability_denied: 'An operator must grant the agent this capability; retrying will not help.',
  unknown_route: 'The sidecar forwards only the endpoints of its provider preset (unmapped: deny).',
};

function sentence(s: string): string {
  return /[.!?]$/.test(s) ? s : `${s}.`;
}
