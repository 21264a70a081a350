import { parseArgs, type ParseArgsConfig } from 'node:util';

export class UsageError extends Error {}

type Options = NonNullable<ParseArgsConfig['options']>;

/** parseArgs with a --help flag and usage errors that name the command. */
export function parseCommand<O extends Options>(argv: string[], options: O, usage: string, allowPositionals = false) {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals, strict: true });
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n\n${usage}`);
  }
  if ((parsed.values as Record<string, unknown>).help) {
    process.stdout.write(usage);
    return undefined;
  }
  return parsed as { values: { [K in keyof O]?: O[K]['type'] extends 'boolean' ? boolean : string }; positionals: string[] };
}

export function required(value: string | undefined, flag: string, usage: string): string {
  if (!value) throw new UsageError(`${flag} is required\n\n${usage}`);
  return value;
}
