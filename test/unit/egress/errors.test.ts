import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { providerDenial, refusalMessage } from '../../../src/egress/errors.js';
import { deny, denialBody, violationDenial, type ConstraintViolation } from '../../../src/errors.js';

const temperature: ConstraintViolation = { field: 'temperature', constraint: 'max', expected: 1, actual: 1.5, message: 'temperature must be <= 1, got 1.5' };
const model: ConstraintViolation = {
  field: 'model',
  constraint: 'in',
  expected: ['gpt-4o-mini'],
  actual: 'gpt-4o',
  message: 'model must be one of ["gpt-4o-mini"], got "gpt-4o"',
};
const violated = violationDenial([temperature, model]);
const limits = { temperature: { max: 1 }, model: { in: ['gpt-4o-mini'] } };
const plain = (d: ReturnType<typeof deny>, status: number) => ({ status, body: denialBody(d) });

describe('refusalMessage', () => {
  it('names every field refused, what was sent and what the grant allows', () => {
    const m = refusalMessage(violated, { capability: 'chat.completion', activeConstraints: limits });
    expect(m).toBe(
      'agents-chain refused this chat.completion call (constraint_violated): temperature must be <= 1, got 1.5; model must be one of ["gpt-4o-mini"], got "gpt-4o". ' +
        'Allowed: temperature must be a number no greater than 1; model must be one of ["gpt-4o-mini"]. Fit the call to these limits; retrying it unchanged will not help.',
    );
  });

  it('says when retrying can help (a dependency failed) and when it cannot (a missing grant)', () => {
    expect(refusalMessage(deny('upstream_unavailable', 'the app did not answer: ECONNREFUSED'), {})).toBe(
      'agents-chain refused this call (upstream_unavailable): the app did not answer: ECONNREFUSED. Retry later.',
    );
    expect(refusalMessage(deny('capability_denied', 'agent "a" has no grant for "moderation"'), { capability: 'moderation' })).toMatch(
      /^agents-chain refused this moderation call \(capability_denied\): agent "a" has no grant for "moderation"\. An operator must grant/,
    );
    expect(refusalMessage(deny('body_too_large', 'request body exceeds 10 bytes.'), {})).toBe(
      'agents-chain refused this call (body_too_large): request body exceeds 10 bytes.',
    );
  });
});

describe('providerDenial: OpenAI', () => {
  it('is the OpenAI error object: words in message, the sidecar code in code, the first field in param, the sidecar body beside', () => {
    const presented = plain(violated, 403);
    const shaped = providerDenial('openai', violated, presented, { capability: 'chat.completion', activeConstraints: limits });
    expect(shaped.status).toBe(403);
    expect(shaped.body).toEqual({
      error: {
        message: refusalMessage(violated, { capability: 'chat.completion', activeConstraints: limits }),
        type: 'permission_error',
        param: 'temperature',
        code: 'constraint_violated',
        agents_chain: presented.body,
      },
    });
  });

  it('is read by the openai SDK: message, code, param, type, status, and the sidecar body in err.error', () => {
    const presented = plain(violated, 403);
    const body = providerDenial('openai', violated, presented, { capability: 'chat.completion' }).body as Record<string, unknown>;
    const err = OpenAI.APIError.generate(403, body, undefined, new Headers());
    expect(err).toBeInstanceOf(OpenAI.PermissionDeniedError);
    expect(err.message).toMatch(/^403 agents-chain refused this chat\.completion call \(constraint_violated\): temperature must be <= 1, got 1\.5; model/);
    expect(err).toMatchObject({ status: 403, code: 'constraint_violated', param: 'temperature', type: 'permission_error' });
    expect((err.error as { agents_chain: unknown }).agents_chain).toEqual(presented.body);
  });

  it('maps each status to an OpenAI error type', () => {
    const type = (status: number) =>
      (providerDenial('openai', deny('internal_error', 'x'), { status, body: {} }).body as { error: { type: string; param: null } }).error;
    expect([400, 401, 403, 404, 413, 415, 422, 429, 500, 502, 503].map((s) => type(s).type)).toEqual([
      'invalid_request_error',
      'authentication_error',
      'permission_error',
      'not_found_error',
      'invalid_request_error',
      'invalid_request_error',
      'invalid_request_error',
      'rate_limit_error',
      'server_error',
      'server_error',
      'server_error',
    ]);
    expect(type(400).param).toBeNull();
  });
});

describe('providerDenial: Anthropic', () => {
  it('is the Anthropic error response, with the code in details.error_code and a top-level message for the SDK', () => {
    const presented = plain(violated, 403);
    const shaped = providerDenial('anthropic', violated, presented, { capability: 'message' });
    const message = refusalMessage(violated, { capability: 'message' });
    expect(shaped).toEqual({
      status: 403,
      body: {
        type: 'error',
        error: { type: 'permission_error', message, details: { error_code: 'constraint_violated' } },
        message,
        agents_chain: presented.body,
      },
    });
  });

  it('is read by the Anthropic SDK: err.message is the words (not the whole body as JSON), errorCode the sidecar code', () => {
    const presented = plain(violated, 403);
    const body = providerDenial('anthropic', violated, presented, { capability: 'message' }).body as Record<string, unknown>;
    const client = new Anthropic({ apiKey: 'unused' });
    const err = (
      client as unknown as { makeStatusError: (s: number, e: object, m: undefined, h: Headers) => InstanceType<typeof Anthropic.APIError> }
    ).makeStatusError(403, body, undefined, new Headers());
    expect(err).toBeInstanceOf(Anthropic.PermissionDeniedError);
    expect(err.message).toBe(`403 ${refusalMessage(violated, { capability: 'message' })}`);
    expect(err).toMatchObject({ status: 403, type: 'permission_error', errorCode: 'constraint_violated', apiMessage: body.message });
    expect((err.error as { agents_chain: unknown }).agents_chain).toEqual(presented.body);
  });

  it('maps each status to an Anthropic error type (503 overloaded)', () => {
    const type = (status: number) =>
      (providerDenial('anthropic', deny('internal_error', 'x'), { status, body: {} }).body as { error: { type: string } }).error.type;
    expect([400, 401, 403, 404, 413, 429, 500, 502, 503].map(type)).toEqual([
      'invalid_request_error',
      'authentication_error',
      'permission_error',
      'not_found_error',
      'invalid_request_error',
      'rate_limit_error',
      'api_error',
      'api_error',
      'overloaded_error',
    ]);
  });
});

describe('providerDenial: what it leaves alone', () => {
  it('keeps the status and headers; a refusal answered with 200 (violationStatus: 200) stays the envelope', () => {
    const envelope = { status: 200, body: { success: false, error: 'constraint_violated' } };
    expect(providerDenial('openai', violated, envelope)).toBe(envelope);
    expect(providerDenial('anthropic', deny('token_replayed', 'x'), { status: 401, body: {} }).status).toBe(401);
    const retry = { status: 503, body: {}, headers: { 'retry-after': '5' } };
    expect(providerDenial('openai', deny('shutting_down', 'x'), retry)).toMatchObject({ status: 503, headers: { 'retry-after': '5' } });
  });
});
