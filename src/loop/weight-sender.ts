/**
 * The trainer's side of `polar loop --weight-sync nccl`: a Python process of the PyTorch worker
 * (src/train/worker/polar_train/weight_sender.py, its protocol documented there) that is rank 0 of the
 * group the inference server's workers join, and broadcasts each step's checkpoint to them while polar
 * drives the server's HTTP control plane (src/loop/publish-vllm.ts, publish-sglang.ts). One process per
 * loop run: the group is formed once (the servers' init routes are called once), each publish sends one
 * checkpoint over it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { createInterface } from 'node:readline';
import { PolarError } from '../errors.ts';
import { findPython } from '../train/env.ts';
import { WORKER_DIR } from '../train/launch.ts';
import { log } from '../util/log.ts';

/** The tensors of a checkpoint as the server's update route takes them (one entry per broadcast). */
export interface SendMeta {
  names: string[];
  dtype_names: string[];
  shapes: number[][];
}

export interface SendStats {
  tensors: number;
  bytes: number;
  seconds: number;
}

export interface SenderInit {
  server: 'vllm' | 'sglang';
  master_address: string;
  master_port: number;
  world_size: number;
  group_name?: string;
  /** nccl (the GPU path); gloo builds SGLang's group on the CPU (tests) */
  transport: 'nccl' | 'gloo';
  timeout_s?: number;
}

type Event = { event: string } & Record<string, unknown>;

export class WeightSender {
  private readonly events: Event[] = [];
  private waiting: Array<() => void> = [];
  private ended = false;
  private readonly stderr: string[] = [];

  private constructor(private readonly child: ChildProcess) {
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      try {
        this.events.push(JSON.parse(line) as Event);
      } catch {
        log.debug(`weight sender: ${line}`);
      }
      this.poke();
    });
    child.stderr!.on('data', (d: Buffer) => {
      this.stderr.push(d.toString());
      if (this.stderr.length > 50) this.stderr.shift();
    });
    child.on('close', () => {
      this.ended = true;
      this.poke();
    });
  }

  private poke(): void {
    for (const w of this.waiting.splice(0)) w();
  }

  /** Starts the sender with the trainer's Python (--python / POLAR_PYTHON, else polar's own). */
  static async start(python?: string): Promise<WeightSender> {
    const found = await findPython(python ?? process.env.POLAR_PYTHON);
    const child = spawn(found.python, ['-m', 'polar_train.weight_sender'], {
      cwd: WORKER_DIR,
      env: { ...process.env, PYTHONPATH: WORKER_DIR, PYTHONUNBUFFERED: '1', PYTHONDONTWRITEBYTECODE: '1' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    return new WeightSender(child);
  }

  private command(cmd: Record<string, unknown>): void {
    if (this.ended) throw this.failure('the weight sender has exited');
    this.child.stdin!.write(`${JSON.stringify(cmd)}\n`);
  }

  /** The next event: `want`, or a PolarError for an error event or the process's end. */
  private async next(want: string): Promise<Event> {
    for (;;) {
      const e = this.events.shift();
      if (e) {
        if (e.event === want) return e;
        if (e.event === 'error') throw this.failure(String(e.message));
        continue;
      }
      if (this.ended) throw this.failure('the weight sender exited');
      await new Promise<void>((r) => this.waiting.push(r));
    }
  }

  private failure(message: string): PolarError {
    const tail = this.stderr.join('').trim().split('\n').slice(-5).join('\n');
    return new PolarError(`weight sender (the trainer's side of --weight-sync nccl): ${message}`, {
      hint: tail
        ? `its stderr ended with:\n${tail}`
        : 'see the rendezvous address (--weight-sync-address) and the server log',
    });
  }

  /** Joins the group as rank 0; resolves once every rank joined (the server's init route runs meanwhile). */
  async init(init: SenderInit): Promise<void> {
    this.command({ cmd: 'init', ...init });
    await this.next('ready');
  }

  /** Sends `checkpoint`: its metadata first (for the server's update route), then every tensor. */
  send(checkpoint: string): { meta: Promise<SendMeta>; done: Promise<SendStats> } {
    this.command({ cmd: 'send', checkpoint });
    const meta = this.next('meta').then((e) => e as unknown as SendMeta);
    const done = meta.then(() => this.next('sent')).then((e) => e as unknown as SendStats);
    done.catch(() => {});
    return { meta, done };
  }

  /** Ends it at once (a rendezvous or broadcast the server left will never finish): SIGTERM to its pid. */
  async abort(): Promise<void> {
    if (this.ended) return;
    const exited = new Promise<void>((r) => this.child.once('close', () => r()));
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }

  /** Leaves the group: ends stdin, waits a little, then kills the process by its pid. */
  async close(): Promise<void> {
    if (this.ended) return;
    this.child.stdin!.end();
    const exited = new Promise<void>((r) => this.child.once('close', () => r()));
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  }
}

/** A free TCP port on this machine (the rendezvous of the group, which the sender hosts as rank 0). */
export function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, () => {
      const { port } = s.address() as { port: number };
      s.close(() => ok(port));
    });
  });
}

/** Where the group meets: the server's workers connect to this address, where the sender listens. */
export interface Rendezvous {
  master_address: string;
  master_port: number;
}

/**
 * Starts the sender and forms the group with the server's workers: both ends rendezvous together, so
 * `serverInit` (the server's init route, which blocks until every rank has joined) runs while the sender
 * joins as rank 0. A failure of either ends the sender (a rendezvous the server left never finishes).
 */
export async function formGroup(
  options: { python?: string; rendezvous?: { host: string; port?: number } },
  init: Omit<SenderInit, 'master_address' | 'master_port'>,
  serverInit: (at: Rendezvous) => Promise<void>,
): Promise<WeightSender> {
  const sender = await WeightSender.start(options.python);
  const rv = options.rendezvous;
  const at = { master_address: rv?.host ?? '127.0.0.1', master_port: rv?.port ?? (await freePort()) };
  try {
    const joined = sender.init({ ...init, ...at });
    joined.catch(() => {});
    await serverInit(at);
    await joined;
    return sender;
  } catch (error) {
    await sender.abort();
    throw error;
  }
}
