/** `npm run bench`: every benchmark, or those named (`npm run bench -- proxy build`). */
const benches: Record<string, () => Promise<void>> = {
  proxy: async () => (await import('./proxy.ts')).benchProxy(),
  build: async () => (await import('./build.ts')).benchBuild(),
  eval: async () => (await import('./eval.ts')).benchEval(),
  tokens: async () => (await import('./tokens.ts')).benchTokens(),
};

const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'));
for (const name of wanted.length ? wanted : Object.keys(benches)) {
  const run = benches[name];
  if (!run) {
    console.error(`unknown benchmark ${name}; have: ${Object.keys(benches).join(', ')}`);
    process.exitCode = 2;
    continue;
  }
  try {
    await run();
  } catch (error) {
    console.error(`bench ${name} failed: ${(error as Error).message}`);
    process.exitCode = 1;
  }
}
