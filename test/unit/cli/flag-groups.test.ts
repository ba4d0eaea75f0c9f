/**
 * The shared flag groups (commands/flags.ts) are declared once: every command that includes a group takes
 * each of its flags from that one declaration (the same parser, the same default), and a flag's long name
 * (what a configuration file's key would be) belongs to one group only.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Option } from 'commander';
import { FLAG_GROUPS, type Flag, longName } from '../../../commands/flags.ts';
import { program } from '../../../src/cli.ts';

const root = program();
const command = (name: string) => root.commands.find((c) => c.name() === name)!;
const option = (cmd: string, long: string): Option | undefined =>
  command(cmd).options.find((o) => o.long === long);

/** The commands that include each group. */
const INCLUDED: Record<keyof typeof FLAG_GROUPS, string[]> = {
  backend: ['eval', 'loop', 'gym', 'capture', 'serve'],
  runtime: ['eval', 'loop', 'gym'],
  grading: ['eval', 'loop'],
  cluster: ['eval', 'loop'],
  judge: ['eval', 'loop', 'gym'],
};

test('each command that includes a group takes its flags from the one declaration', () => {
  for (const [group, flags] of Object.entries(FLAG_GROUPS) as Array<
    [keyof typeof FLAG_GROUPS, readonly Flag[]]
  >) {
    for (const cmd of INCLUDED[group]) {
      for (const flag of flags) {
        const name = longName(flag);
        const o = option(cmd, name);
        assert.ok(o, `polar ${cmd} has ${name} (group ${group})`);
        // a command may narrow --backend-url's parser (several servers); the rest parse as declared
        if (name !== '--backend-url')
          assert.equal(o.parseArg, flag.parse, `polar ${cmd} ${name} parses as the ${group} group declares`);
        assert.deepEqual(o.defaultValue, flag.default?.value, `polar ${cmd} ${name}'s default`);
      }
    }
  }
});

test("a flag's long name is in one group only", () => {
  const seen = new Map<string, string>();
  for (const [group, flags] of Object.entries(FLAG_GROUPS))
    for (const flag of flags) {
      const name = longName(flag);
      assert.equal(seen.get(name), undefined, `${name} in ${seen.get(name)} and ${group}`);
      seen.set(name, group);
    }
  assert.equal(longName({ flags: '-q, --quiet', help: '' }), '--quiet');
  assert.equal(longName({ flags: '--no-envs', help: '' }), '--no-envs');
});
