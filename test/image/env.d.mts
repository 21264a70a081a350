/** test/image/env.mjs: the final stage's ENV of the Dockerfile (or of `dockerfile`, its text). */
export function imageEnv(dockerfile?: string): Record<string, string>;
