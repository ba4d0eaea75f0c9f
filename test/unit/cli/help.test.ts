/**
 * Every command's --help is made of the same parts (issue 31 item 14, issue 47 item 6): the flags of the
 * shared groups (commands/flags.ts FLAG_GROUPS) in the group's words wherever a command includes the group
 * (a command narrows a flag's help by name, listed here), `-q, --quiet` in one declaration on every command
 * that prints progress or a report on stderr, `--json` saying what goes to stdout, examples, and the exit
 * codes of the one table.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Command, Option } from 'commander';
import { FLAG_GROUPS, type Flag, longName, QUIET_FLAG } from '../../../commands/flags.ts';
import { EXIT_CODES_HELP, program } from '../../../src/cli.ts';

const root = program();
/** every command and subcommand (`env build`), by its name as typed */
const commands: Array<[string, Command]> = root.commands.flatMap((c) =>
  c.commands.length
    ? c.commands.map((s): [string, Command] => [`${c.name()} ${s.name()}`, s])
    : [[c.name(), c]],
);

/** The whole --help text of a command, as a user sees it (the text added after the options too). */
function helpOf(cmd: Command): string {
  let text = '';
  const write = (s: string): void => {
    text += s;
  };
  cmd.configureOutput({ writeOut: write, writeErr: write });
  cmd.outputHelp();
  return text;
}

/** The commands that include each shared group (commands/flags.ts), as flag-groups.test.ts lists them. */
const INCLUDED: Record<keyof typeof FLAG_GROUPS, string[]> = {
  backend: ['eval', 'loop', 'gym', 'capture', 'serve'],
  runtime: ['eval', 'loop', 'gym'],
  grading: ['eval', 'loop'],
  cluster: ['eval', 'loop'],
  judge: ['eval', 'loop', 'gym'],
};
/** The flags a command narrows (FlagChanges): its help says what the flag means there. */
const NARROWED: Record<string, string[]> = {
  eval: ['--backend-url', '--grader'],
  // training grades a flagged sample 0 by default (DEFAULTS.trainingRejectsTampering): TRAINING_TAMPERING
  loop: ['--backend-url', '--reject-test-tampering', '--no-reject-test-tampering'],
  gym: ['--backend-url'],
};
/** Commands whose output is their result, with no progress to quiet. */
const NO_PROGRESS = ['doctor', 'grade', 'inspect'];

test("a command that includes a shared group shows each of its flags in the group's words", () => {
  for (const [group, flags] of Object.entries(FLAG_GROUPS) as Array<
    [keyof typeof FLAG_GROUPS, readonly Flag[]]
  >)
    for (const name of INCLUDED[group]) {
      const cmd: Command | undefined = commands.find(([n]) => n === name)?.[1];
      assert.ok(cmd, name);
      const help = helpOf(cmd).replace(/\s+/g, ' ');
      for (const flag of flags) {
        const option: Option | undefined = cmd.options.find((o) => o.long === longName(flag));
        assert.ok(option, `polar ${name} has ${longName(flag)} (group ${group})`);
        if (flag.hidden) continue;
        assert.ok(help.includes(option.flags), `polar ${name} --help lists ${option.flags}`);
        if (NARROWED[name]?.includes(longName(flag))) assert.notEqual(option.description, flag.help);
        else
          assert.equal(
            option.description,
            flag.help,
            `polar ${name} ${longName(flag)}: the ${group} group's help`,
          );
      }
    }
});

test('-q, --quiet is one declaration on every command with progress; --json says it goes to stdout', () => {
  for (const [name, cmd] of commands) {
    const quiet = cmd.options.find((o) => o.long === '--quiet');
    if (NO_PROGRESS.includes(name)) assert.equal(quiet, undefined, `polar ${name} prints no progress`);
    else {
      assert.ok(quiet, `polar ${name} has -q, --quiet`);
      assert.equal(quiet.flags, QUIET_FLAG.flags, name);
      assert.equal(quiet.description, QUIET_FLAG.help, `polar ${name} -q: QUIET_FLAG's words`);
    }
    const json = cmd.options.find((o) => o.long === '--json');
    if (json) assert.match(json.description, / as JSON on stdout( \(.*\))?$/, `polar ${name} --json`);
  }
  // the commands docs/cli.md names for a --json summary line
  for (const name of ['capture', 'loop', 'eval', 'build', 'export', 'train'])
    assert.ok(
      commands.find(([n]) => n === name)?.[1].options.some((o) => o.long === '--json'),
      `polar ${name} has --json`,
    );
});

test('every --help shows defaults as typed, examples and the exit codes of the one table', () => {
  for (const [name, cmd] of commands) {
    const help = helpOf(cmd);
    assert.match(help, /\nExamples:\n {2}polar /, `polar ${name} --help shows examples`);
    assert.ok(help.includes(EXIT_CODES_HELP.trim()), `polar ${name} --help says the exit codes`);
    // defaults as a user types them (64MiB, polar), never quoted or raw (issue 31 item 14)
    assert.doesNotMatch(
      help,
      /\(default: ["']|\(default: false\)/,
      `polar ${name} --help: a default as typed`,
    );
  }
});
