/**
 * The body of `polar doctor`: with --backend/--backend-url/--model, the inference server's set-up probe
 * (the embedded backend: whether its model is in the cache or the hub answers, src/doctor/model.ts);
 * with --runtime, whether that runtime works here (sandbox: bubblewrap, and which limits apply, with the
 * fix for known failures; containers: the engine answers). Exit 0 when everything asked for is ready.
 */

import { formatProbeReport, probeBackend } from '../backends/probe.ts';
import { waitForBackend } from '../backends/wait.ts';
import { EXIT, type ExitCode } from '../errors.ts';
import { type BackendFlags, backendOptions } from '../options/backend.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { apptainerDialect } from '../rollout/runtime/apptainer.ts';
import { ContainerRuntime } from '../rollout/runtime/docker.ts';
import { formatSandboxProbe, probeSandbox } from '../rollout/runtime/probe.ts';
import type { RuntimeKind } from '../rollout/runtime/types.ts';
import { isLocalPath } from '../tokenizer/chat-tokenizer.ts';
import { log } from '../util/log.ts';
import { embeddedModelCheck } from './model.ts';

export type DoctorFlags = BackendFlags & {
  wait?: boolean;
  json?: boolean;
  runtime?: RuntimeKind;
  network?: string;
  cgroupParent?: string;
};

interface RuntimeReport {
  runtime: RuntimeKind;
  ok: boolean;
  [key: string]: unknown;
}

async function checkRuntime(
  f: DoctorFlags,
  kind: RuntimeKind,
): Promise<{ report: RuntimeReport; text: string }> {
  if (kind === 'sandbox') {
    const probe = await probeSandbox({
      ...(f.network === 'host' ? { network: 'host' as const } : {}),
      ...(f.cgroupParent ? { cgroupParent: f.cgroupParent } : {}),
    });
    return { report: { runtime: kind, ...probe }, text: formatSandboxProbe(probe) };
  }
  if (kind === 'local')
    return {
      report: { runtime: kind, ok: true },
      text: 'local: works (unsandboxed: agents run with your rights)',
    };
  try {
    await new ContainerRuntime({
      engine: kind,
      ...(kind === 'apptainer' ? { dialect: apptainerDialect() } : {}),
    }).check();
    return { report: { runtime: kind, ok: true }, text: `${kind}: the engine answers` };
  } catch (error) {
    const e = error as Error & { hint?: string };
    return {
      report: { runtime: kind, ok: false, error: e.message, fix: e.hint ?? null },
      text: `${kind}: does not work\n  error: ${e.message}${e.hint ? `\n  fix: ${e.hint}` : ''}`,
    };
  }
}

export async function doctorCommand(f: DoctorFlags): Promise<ExitCode> {
  const wantsBackend = Boolean(f.backend || f.backendUrl || f.model) || !f.runtime;
  const out: Record<string, unknown> = {};
  const text: string[] = [];
  let ok = true;
  if (wantsBackend) {
    const options = backendOptions(f);
    if (f.wait) {
      await waitForBackend(options, {
        timeoutMs: options.timeoutMs ?? DEFAULTS.backendTimeoutMs.value,
        onWait: (left, url, why) => log.info(`waiting for ${url} (${left} s left): ${why}`),
      });
    }
    const report = await probeBackend(options);
    if (options.kind === 'embedded') {
      // the in-process engine has no server to probe: whether its model can be loaded here
      const model = options.model === 'default' ? DEFAULTS.embeddedModel.value : options.model;
      const local = isLocalPath(model);
      const check = await embeddedModelCheck(
        model,
        process.env.POLAR_EMBEDDED_DTYPE ?? (local ? 'fp32' : 'q4'),
      );
      report.checks.push(check);
      report.ok &&= check.status !== 'fail';
    }
    ok &&= report.ok;
    out.backend = report;
    text.push(formatProbeReport(report));
  }
  if (f.runtime) {
    const { report, text: lines } = await checkRuntime(f, f.runtime);
    ok &&= report.ok;
    out.runtime = report;
    text.push(lines);
  }
  // one check alone prints its own report as before (scripts read `polar doctor --json` of a backend)
  const json = Object.keys(out).length === 1 ? Object.values(out)[0] : out;
  process.stdout.write(`${f.json ? JSON.stringify(json, null, 2) : text.join('\n')}\n`);
  return ok ? EXIT.ok : EXIT.environment;
}
