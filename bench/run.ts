/** `npm run bench`: every benchmark, or those named (`npm run bench -- proxy build`). */
const benches: Record<string, () => Promise<void>> = {
  proxy: async () => (await import('./proxy.ts')).benchProxy(),
  // where a call's time goes, phase by phase, bare against polar (node:http's diagnostics channels)
  'proxy-phases': async () => (await import('./proxy-phases.ts')).benchProxyPhases(),
  // the proxy's CPU per call as instructions under valgrind (a count the machine's load does not move)
  'proxy-instructions': async () => (await import('./proxy-instructions.ts')).benchProxyInstructions(),
  build: async () => (await import('./build.ts')).benchBuild(),
  capture: async () => (await import('./capture.ts')).benchCapture(),
  eval: async () => (await import('./eval.ts')).benchEval(),
  env: async () => (await import('./env.ts')).benchEnv(),
  sandbox: async () => (await import('./sandbox.ts')).benchSandbox(),
  // Ray on network-namespace nodes of this machine (needs root, .venv with ray): samples/s on 1-3 nodes
  cluster: async () => (await import('./cluster.ts')).benchCluster(),
  tokens: async () => (await import('./tokens.ts')).benchTokens(),
  'tokens-http': async () => (await import('./tokens-http.ts')).benchTokensHttp(),
  startup: async () => (await import('./startup.ts')).benchStartup(),
  // polar loop at --max-staleness 0, 1, 2: a simulated long-tail cluster driving the real scheduler, then
  // the real tiny CPU loop (POLAR_BENCH_LOOP_REAL=0 skips it)
  loop: async () => (await import('./loop.ts')).benchLoop(),
  // Python: on a CUDA machine the GPU step benchmark (bench/train_gpu.py, Qwen3.5 ~4B at 16k tokens); on
  // a CPU the trainer's overhead against a plain transformers forward+backward of the same tokens
  // (bench/train_cpu.py, tiny Qwen3 and Qwen3.5), then train_gpu.py --tiny to show that script runs
  train: async () => {
    const { execa } = await import('execa');
    const { findPython, probePython } = await import('../src/train/env.ts');
    const probe = await findPython(process.env.POLAR_PYTHON, probePython);
    const devices = await execa(probe.python, ['-c', 'import torch; print(torch.cuda.device_count())']);
    const runs =
      Number(devices.stdout.trim()) > 0
        ? [['bench/train_gpu.py']]
        : [['bench/train_cpu.py'], ['bench/train_gpu.py', '--tiny']];
    for (const args of runs) {
      console.log(`\n## train: ${probe.python} ${args.join(' ')}`);
      await execa(probe.python, args, { stdio: 'inherit' });
    }
  },
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
