import { nameReadings } from '../routing/query.js';

/*
 * Multipart bodies read as the app's parser would: a part named "_method"
 * under any reading, or a part named with RFC 2231 "name*". Pure.
 */

/** What a multipart body holds that some app would misread: a "_method" part, or a part named with RFC 2231 "name*". */
export type MultipartProblem = 'method' | 'extended';

/**
 * The first problem in a multipart body's part headers: a part named
 * "_method" under any name a framework reads as it (Laravel, Symfony and
 * Rack read multipart fields like form fields; PHP mangles ".method" to
 * "_method" here too), or a "name*" parameter (RFC 2231: Go's net/http and
 * Werkzeug decode "name*=utf-8''%5Fmethod" and join "name*0=_met;
 * name*1=hod"; refused rather than decoded). Parsers disagree on the header
 * block (PHP takes the last of two "name"s, busboy the first; PHP reads
 * 'single quotes', a missing "form-data;" and continuation lines), so every
 * name=value in every header line counts. A block starts after a line that
 * begins with "--" and the declared boundary (any "--" line when none is
 * declared) and ends at the first CRLF CRLF (the latest any parser ends it)
 * or the next delimiter; CR, LF and CRLF all end a line. Part contents are
 * not read, so an uploaded diff or SQL file with "--" lines passes. Linear;
 * only a body holding "method", "\\" or "name*" is scanned.
 */
export function multipartProblem(body: Buffer, boundary?: string): MultipartProblem | undefined {
  const text = body.toString('latin1');
  // "\\": a quoted name may be escaped ("_m\\ethod"), which PHP unescapes.
  if (!/method|\\|name\s*\*/i.test(text)) return undefined;
  const delimiter = `--${boundary ?? ''}`;
  let blockEnd = -1;
  for (let at = nextDelimiter(text, delimiter, 0); at !== -1;) {
    const next = nextDelimiter(text, delimiter, at + delimiter.length);
    // The header block: from the end of the delimiter line to the first CRLF CRLF, or the next delimiter.
    let start = lineEnd(text, at + delimiter.length);
    if (blockEnd < start) {
      blockEnd = text.indexOf('\r\n\r\n', start);
      if (blockEnd === -1) blockEnd = text.length; // searched once, not once per delimiter
    }
    const stop = Math.min(blockEnd, next === -1 ? text.length : next);
    while (start < stop) {
      let end = start;
      while (end < stop && text[end] !== '\r' && text[end] !== '\n') end++;
      const problem = partHeaderProblem(text.slice(start, end));
      if (problem) return problem;
      start = end + 1;
    }
    at = next;
  }
  return undefined;
}

/** True when a multipart body has a problem (see multipartProblem); kept for callers that only ask yes or no. */
export function multipartMethodOverride(body: Buffer, boundary?: string): boolean {
  return multipartProblem(body, boundary) !== undefined;
}

/** The next index at or after `from` where a line (CR, LF or CRLF ended) begins with `delimiter`, or -1. */
function nextDelimiter(text: string, delimiter: string, from: number): number {
  for (let i = text.indexOf(delimiter, from); i !== -1; i = text.indexOf(delimiter, i + 1)) {
    if (i === 0 || text[i - 1] === '\n' || text[i - 1] === '\r') return i;
  }
  return -1;
}

/** The index just past the line end (CRLF, CR or LF) at or after `i`, or the text's length. */
function lineEnd(text: string, i: number): number {
  while (i < text.length && text[i] !== '\r' && text[i] !== '\n') i++;
  if (text[i] === '\r' && text[i + 1] === '\n') return i + 2;
  return Math.min(i + 1, text.length);
}

const NAME_PARAM = /(?:^|[^a-z0-9_-])name\s*=\s*(?:"((?:[^"\\]|\\.)*)"?|'([^']*)'?|([^;,\s"']*))/gi;

/** RFC 2231 extended "name*", "name*0", "name*0*" (not "filename*", which names no field). */
const EXTENDED_NAME = /(?:^|[^a-z0-9_-])name\s*\*/i;

function partHeaderProblem(line: string): MultipartProblem | undefined {
  if (!/name/i.test(line)) return undefined;
  if (EXTENDED_NAME.test(line)) return 'extended';
  for (const m of line.matchAll(NAME_PARAM)) {
    const value = m[1] ?? m[2] ?? m[3] ?? '';
    for (const v of [value, value.replace(/\\(.)/g, '$1')]) if (nameReadings(v).has('_method')) return 'method';
  }
  return undefined;
}
