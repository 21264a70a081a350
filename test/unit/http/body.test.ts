import { deflateRawSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { decodedContent } from '../../../src/http/body.js';

const b = (s: string): Buffer => Buffer.from(s);

describe('decodedContent', () => {
  it('returns an identity body itself', async () => {
    const body = b('x');
    expect(await decodedContent(body, undefined, 10)).toBe(body);
    expect(await decodedContent(body, 'identity', 10)).toBe(body);
  });

  it('refuses codings it cannot read, bodies that do not inflate, and output over the limit', async () => {
    expect(await decodedContent(b('x'), 'zstd', 10)).toMatchObject({ code: 'unsupported_media_type' });
    expect(await decodedContent(gzipSync(gzipSync('x')), 'gzip, gzip', 10)).toMatchObject({ code: 'unsupported_media_type' });
    expect(await decodedContent(b('not gzip'), 'gzip', 10)).toMatchObject({ code: 'unsupported_media_type' });
    expect(await decodedContent(b('not deflate'), 'deflate', 10)).toMatchObject({ code: 'unsupported_media_type' });
    expect(await decodedContent(gzipSync(Buffer.alloc(11)), 'gzip', 10)).toMatchObject({ code: 'body_too_large' });
    expect(await decodedContent(deflateRawSync(Buffer.alloc(11)), 'deflate', 10)).toMatchObject({ code: 'body_too_large' });
    expect(await decodedContent(gzipSync(Buffer.alloc(10)), 'gzip', 10)).toEqual(Buffer.alloc(10));
  });
});
