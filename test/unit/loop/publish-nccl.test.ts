/**
 * `polar loop --weight-sync nccl` as far as a machine without a GPU allows (issue 48): the publisher drives
 * the stand-in servers' control plane (vLLM: init with the group's rendezvous, then per publish pause,
 * start, update_weights with the tensors' metadata, finish with the version, resume; SGLang:
 * init_weights_update_group, then update_weights_from_distributed) while the real trainer-side sender
 * (src/train/worker/polar_train/weight_sender.py, started by src/loop/weight-sender.ts) broadcasts the
 * checkpoint's tensors; the stand-ins' data plane is test/support/weight-receiver.py, which joins the group
 * as SGLang's workers do.
 *
 * What runs for real: the HTTP sequence and its concurrency (the server's init and update calls in flight
 * while the sender rendezvouses and broadcasts), the sender process and its protocol, the checkpoint read
 * from safetensors files, every tensor received with its dtype, shape and values, two publishes over one
 * group, a refused rendezvous. What does not: NCCL and a GPU (the gloo transport builds SGLang's group on
 * the CPU), and vLLM's own group (StatelessProcessGroup + PyNcclCommunicator need vLLM and CUDA): against
 * the vLLM stand-in the data plane is the SGLang-style group, so that test covers polar's control plane for
 * vLLM's NCCL backend and the sender's broadcast loop, not vLLM's rendezvous.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, describe, test } from 'node:test';
import type { Backend } from '../../../src/backends/types.ts';
import { PolarError } from '../../../src/errors.ts';
import { publisherFor } from '../../../src/loop/publish.ts';
import { findPython } from '../../../src/train/env.ts';
import { ROOT } from '../../support/cli.ts';
import { procStat } from '../../support/processes.ts';
import { startSglangChatStandin } from '../../support/sglang-standin.ts';
import { tempDir } from '../../support/temp.ts';
import { startStandin } from '../../support/vllm-standin.ts';

const python = await findPython(process.env.POLAR_PYTHON).catch(() => null);
const SKIP = python?.safetensors ? false : 'no Python with torch and safetensors (npm run setup:python)';
const tmp = tempDir('polar-nccl-');
const receivers: ChildProcess[] = [];
after(() => {
  for (const r of receivers) if (r.exitCode === null) r.kill('SIGKILL');
  rmSync(tmp, { recursive: true, force: true });
});

/** A safetensors file (the format: a u64 header length, the JSON header, the tensors' bytes). */
function safetensors(
  path: string,
  tensors: Record<string, { dtype: 'F32' | 'BF16'; shape: number[]; values: number[] }>,
) {
  const header: Record<string, unknown> = {};
  const parts: Buffer[] = [];
  let offset = 0;
  for (const [name, t] of Object.entries(tensors)) {
    const f32 = Buffer.from(new Float32Array(t.values).buffer);
    let bytes = f32;
    if (t.dtype === 'BF16') {
      bytes = Buffer.alloc(t.values.length * 2);
      for (let i = 0; i < t.values.length; i++) bytes.writeUInt16LE(f32.readUInt32LE(i * 4) >>> 16, i * 2);
    }
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + bytes.length] };
    parts.push(bytes);
    offset += bytes.length;
  }
  const json = Buffer.from(JSON.stringify(header));
  const size = Buffer.alloc(8);
  size.writeBigUInt64LE(BigInt(json.length));
  writeFileSync(path, Buffer.concat([size, json, ...parts]));
}

/** A checkpoint of step `k`: its tensors' sums are known (values exact in bf16). */
function checkpoint(k: number): { dir: string; sums: Record<string, number> } {
  const dir = join(tmp, `step-${k}`);
  mkdirSync(dir, { recursive: true });
  const a = Array.from({ length: 12 }, (_, i) => (i - 3) * 0.5 * k);
  const b = Array.from({ length: 4 }, (_, i) => i + k);
  safetensors(join(dir, 'model.safetensors'), {
    'model.embed_tokens.weight': { dtype: 'BF16', shape: [3, 4], values: a },
    'model.norm.weight': { dtype: 'F32', shape: [4], values: b },
  });
  const sum = (v: number[]) => v.reduce((x, y) => x + y, 0);
  return { dir, sums: { 'model.embed_tokens.weight': sum(a), 'model.norm.weight': sum(b) } };
}

/** The workers' side: weight-receiver.py as rank `rank_offset` of the group the init route names. */
function receiver(init: Record<string, unknown>, group: string) {
  const child = spawn(
    python!.python,
    [
      join(ROOT, 'test/support/weight-receiver.py'),
      String(init.master_address),
      String(init.master_port),
      String(init.world_size),
      String(init.rank_offset),
      group,
    ],
    { stdio: ['pipe', 'pipe', 'inherit'] },
  );
  receivers.push(child);
  const lines: Array<Record<string, unknown>> = [];
  const waiting: Array<() => void> = [];
  createInterface({ input: child.stdout! }).on('line', (l) => {
    lines.push(JSON.parse(l));
    for (const w of waiting.splice(0)) w();
  });
  const next = async () => {
    while (lines.length === 0) {
      if (child.exitCode !== null) throw new Error(`the receiver exited (${child.exitCode})`);
      await new Promise<void>((r) => waiting.push(r));
    }
    return lines.shift()!;
  };
  const got: Array<Record<string, number>> = [];
  return {
    got,
    joined: () => next(),
    async receive(meta: { names: string[]; dtype_names: string[]; shapes: number[][] }) {
      child.stdin!.write(`${JSON.stringify(meta)}\n`);
      got.push((await next()).sums as Record<string, number>);
    },
  };
}

const backendAt = (kind: string, url: string) => ({ kind, url }) as unknown as Backend;

/** This process's children that run the weight sender (live ones: not yet reaped zombies). */
function senders(): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const stat = procStat(pid);
    if (stat?.ppid !== process.pid || stat.state === 'Z') continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('polar_train.weight_sender')) out.push(pid);
    } catch {}
  }
  return out;
}

describe(
  '--weight-sync nccl: the control plane with the real sender (gloo in place of NCCL)',
  { skip: SKIP },
  () => {
    for (const phases of [4, 2] as const) {
      test(`vLLM (${phases === 4 ? 'four-phase' : 'older two-phase'} API): two publishes over one group`, async () => {
        let worker: ReturnType<typeof receiver> | null = null;
        const standin = await startStandin({
          devMode: true,
          weightTransfer: {
            backend: 'nccl',
            phases,
            worldSize: 1,
            init: async (info) => {
              worker = receiver(info, 'weight_update_group');
              assert.deepEqual(await worker.joined(), { joined: true });
            },
            receive: (meta) => worker!.receive(meta),
          },
        });
        const publisher = publisherFor(backendAt('vllm', standin.url), {
          backendOptions: { kind: 'vllm', url: standin.url, model: 'Qwen/Qwen3-4B' },
          transport: 'gloo',
          weightSync: 'nccl',
        });
        try {
          await publisher.prepare!(0);
          const engine = standin.engine!;
          const posts = () => engine.log.filter((l) => l.startsWith('POST'));
          const one = checkpoint(1);
          await publisher.publish({ checkpoint: one.dir, version: 1 });
          const two = checkpoint(2);
          await publisher.publish({ checkpoint: two.dir, version: 2 });
          assert.deepEqual(worker!.got, [one.sums, two.sums], 'every tensor arrived with its values');
          assert.equal(engine.weights, 'nccl:2');
          const publish =
            phases === 4
              ? ['/pause', '/start_weight_update', '/update_weights', '/finish_weight_update', '/resume']
              : ['/pause', '/update_weights', '/resume'];
          const expected = [
            '/init_weight_transfer_engine',
            ...(phases === 4 ? ['/update_weight_version'] : []),
            ...publish,
            ...publish,
          ];
          assert.deepEqual(
            posts().map((l) => l.slice('POST '.length).split('?')[0]),
            expected,
          );
          assert.equal(engine.label, phases === 4 ? '2' : null, 'the older API has no version label');
        } finally {
          await publisher.close?.();
          await standin.close();
        }
      });
    }

    test('SGLang: init_weights_update_group once, update_weights_from_distributed per publish', async () => {
      let worker: ReturnType<typeof receiver> | null = null;
      const server = await startSglangChatStandin({
        weights: {
          init: async (body) => {
            worker = receiver(body, String(body.group_name));
            await worker.joined();
          },
          receive: (body) =>
            worker!.receive({ names: body.names, dtype_names: body.dtypes, shapes: body.shapes }),
        },
      });
      const publisher = publisherFor(backendAt('sglang', server.url), {
        backendOptions: { kind: 'sglang', url: server.url, model: 'Qwen/Qwen3-4B' },
        transport: 'gloo',
        weightSync: 'nccl',
      });
      try {
        await publisher.prepare!(0);
        const init = server.engine.log.find((e) => e.path === '/init_weights_update_group')!.body;
        assert.equal(init.rank_offset, 1);
        assert.equal(init.world_size, 2);
        assert.equal(init.backend, 'gloo');
        const one = checkpoint(3);
        await publisher.publish({ checkpoint: one.dir, version: 1 });
        const update = server.engine.log.find((e) => e.path === '/update_weights_from_distributed')!.body;
        assert.deepEqual(update.names, ['model.embed_tokens.weight', 'model.norm.weight']);
        assert.deepEqual(update.dtypes, ['bfloat16', 'float32']);
        assert.deepEqual(update.shapes, [[3, 4], [4]]);
        assert.equal(update.weight_version, '1');
        assert.equal(update.group_name, init.group_name);
        assert.deepEqual(worker!.got, [one.sums]);
        assert.equal(server.state.weightVersion, '1');
      } finally {
        await publisher.close?.();
        await server.close();
      }
    });

    test('a refused rendezvous: a PublishError naming the address, and the sender is gone', async () => {
      const server = await startSglangChatStandin({
        weights: {
          init: async () => {
            throw new Error('connection to 127.0.0.1 timed out');
          },
        },
      });
      const publisher = publisherFor(backendAt('sglang', server.url), {
        backendOptions: { kind: 'sglang', url: server.url, model: 'Qwen/Qwen3-4B' },
        transport: 'gloo',
        weightSync: 'nccl',
      });
      try {
        await assert.rejects(publisher.prepare!(0), (e: unknown) => {
          assert.ok(PolarError.isInstance(e));
          assert.match(
            e.message,
            /SGLang refused to join the weight-update group at 127\.0\.0\.1:\d+ \(400: .*timed out/,
          );
          assert.match(String(e.hint), /--weight-sync-address/);
          return true;
        });
        assert.deepEqual(senders(), [], 'the sender stuck in its rendezvous was ended');
      } finally {
        await publisher.close?.();
        await server.close();
      }
    });
  },
);
