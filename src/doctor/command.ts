/** The body of `polar doctor --backend KIND --backend-url URL`: the set-up probe's report, exit 0 when ready. */

import { formatProbeReport, probeBackend } from '../backends/probe.ts';
import { waitForBackend } from '../backends/wait.ts';
import { EXIT, type ExitCode } from '../errors.ts';
import { type BackendFlags, backendOptions } from '../options/backend.ts';
import { DEFAULTS } from '../options/defaults.ts';
import { log } from '../util/log.ts';

export type DoctorFlags = BackendFlags & { wait?: boolean; json?: boolean };

export async function doctorCommand(f: DoctorFlags): Promise<ExitCode> {
  const options = backendOptions(f);
  if (f.wait) {
    await waitForBackend(options, {
      timeoutMs: options.timeoutMs ?? DEFAULTS.backendTimeoutMs.value,
      onWait: (left, url, why) => log.info(`waiting for ${url} (${left} s left): ${why}`),
    });
  }
  const report = await probeBackend(options);
  process.stdout.write(`${f.json ? JSON.stringify(report, null, 2) : formatProbeReport(report)}\n`);
  return report.ok ? EXIT.ok : EXIT.environment;
}
