/**
 * `--config FILE` (eval, loop, gym, train, serve; issue 47 item 3): a run described in a file, as verl and
 * NeMo RL take YAML. The file is YAML or JSON (by its name: .json is JSON, anything else YAML, which JSON
 * also is); its keys are the command's long flag names (`train-set`, `backend-url`; `--` and `_` for `-`
 * are accepted), its values what the flag takes: a string or number as the word on the command line, a
 * list for a repeatable flag (or a comma list), true/false for a switch, a mapping for a JSON flag
 * (`chat-template-kwargs`) or a `key=value` one (`env-python`). Each value goes through the flag's own
 * parser (src/options/parsers.ts), so a file is checked as the command line is. Flags on the command line
 * win. A run's record (loop.json, an eval's run.json) holds the options it was given under `config`, in
 * the same form: given back as --config, that record is read, so a run repeats with one flag.
 *
 * How: readConfigFile reads and checks the file, configWords turns a value into the words its flag
 * parses, and readsConfig wires both into commander's own parse of a command: when `--config FILE` is
 * read, each key of the file sets its flag through the flag's parser, unless the command line gave that
 * flag already; a flag the command line gives later replaces the file's value (a repeatable one starts
 * again, it does not add to the file's). So flags on the command line win wherever they stand, and a
 * required flag may come from the file. The options the run was given (both sources, in the words given)
 * reach the command's action as `given`. Every command that declares CONFIG_FLAG (commands/flags.ts)
 * calls readsConfig once its flags are added.
 */
import type { EventEmitter } from 'node:events';
import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { type Command, InvalidArgumentError, type Option } from 'commander';
import { parseDocument } from 'yaml';
import { InputError, UsageError, unreadableInput } from '../errors.ts';
import { redactUrl } from '../util/redact.ts';
import { accumulates } from './accumulate.ts';
import { jsonObject } from './parsers.ts';
import { closest } from './suggest.ts';

/** A value as a config file (and a run's record) gives it. */
export type ConfigValue = string | number | boolean | null | ConfigValue[] | { [key: string]: ConfigValue };

/** The options a run was given (command line and config files), by long flag name without `--`. */
export type GivenOptions = Record<string, ConfigValue>;

/** What the words of one value are for: how the flag takes it. */
export interface ValueShape {
  /** a switch (`--resume`, `--no-envs`): true or false */
  isSwitch: boolean;
  /** each use adds to the value (`--pass-env A --pass-env B`): a list is one use per item */
  accumulates: boolean;
  /** the flag takes a JSON object (`--chat-template-kwargs`) */
  json: boolean;
}

/** `--train_set` -> `train-set`: a key as the flag's long name without dashes. */
export function configKey(key: string): string {
  return key.replace(/^--?/, '').replaceAll('_', '-');
}

/** The key path a run record keeps its given options under (loop.json, run.json). */
export const RECORD_KEY = 'config';

/**
 * A config file read: its options by key (configKey). A run's record (a mapping with a `config` mapping,
 * as loop.json and run.json are) gives that mapping. Unreadable, not YAML/JSON or not a mapping: an
 * InputError naming the file (and the line).
 */
export function readConfigFile(path: string): Record<string, ConfigValue> {
  let text: string;
  try {
    text = readFileSync(path === '-' ? 0 : path, 'utf8');
  } catch (error) {
    throw unreadableInput(path, error, { what: 'config file' });
  }
  let value: unknown;
  if (extname(path).toLowerCase() === '.json') {
    try {
      value = JSON.parse(text);
    } catch (error) {
      throw new InputError(path, undefined, undefined, `not valid JSON (${(error as Error).message})`);
    }
  } else {
    const doc = parseDocument(text, { uniqueKeys: true });
    const error = doc.errors[0];
    if (error) {
      const line = error.linePos?.[0]?.line;
      throw new InputError(path, line, undefined, `not valid YAML (${error.message.split('\n')[0]})`);
    }
    value = doc.toJS();
  }
  if (value === null || value === undefined) return {};
  if (!isMapping(value))
    throw new InputError(path, undefined, undefined, 'a config file is a mapping of flag names to values');
  const record = value[RECORD_KEY];
  const options = isMapping(record) ? record : value;
  const out: Record<string, ConfigValue> = {};
  for (const [key, v] of Object.entries(options)) out[configKey(key)] = v as ConfigValue;
  return out;
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A key that is no flag of the command: exit 2 naming the key, the file and the nearest flag. `flags`:
 * the command's long names without dashes; `fileKeys`: the other keys it reads (polar train's train.json).
 */
export function unknownKey(
  key: string,
  file: string,
  command: string,
  flags: readonly string[],
  fileKeys: readonly string[] = [],
): UsageError {
  const near = closest(key, [...flags, ...fileKeys]).map((n) => (flags.includes(n) ? `${n} (--${n})` : n));
  const keys = `keys are the long flag names of polar ${command} --help`;
  return new UsageError(
    `${file}: ${key} is not a flag of polar ${command}`,
    near.length ? `did you mean ${near.join(' or ')}? ${keys}` : keys,
  );
}

/**
 * The words a flag parses for a config value: null is the flag not given; a switch is true or false
 * (returned as is); a list is one word per item for a repeatable flag and one comma list otherwise; a
 * mapping is JSON for a JSON flag and `key=value` words for a repeatable one. Anything else: exit 2.
 */
export function configWords(
  value: ConfigValue,
  shape: ValueShape,
  where: { key: string; file: string },
): string[] | boolean | null {
  if (value === null) return null;
  const bad = (what: string) =>
    new UsageError(`${where.file}: ${where.key}: ${what} (got ${JSON.stringify(value)})`);
  if (shape.isSwitch) {
    if (typeof value !== 'boolean') throw bad('a switch is true or false');
    return value;
  }
  if (typeof value === 'string') return [value];
  if (typeof value === 'number') return [String(value)];
  if (typeof value === 'boolean') throw bad('expected a value, not true or false');
  if (Array.isArray(value)) {
    if (!value.every((v) => typeof v === 'string' || typeof v === 'number'))
      throw bad('a list holds strings or numbers');
    const items = value.map(String);
    return shape.accumulates ? items : [items.join(',')];
  }
  if (shape.json) return [JSON.stringify(value)];
  if (shape.accumulates) return Object.entries(value).map(([k, v]) => `${k}=${String(v)}`);
  throw bad('expected a value, not a mapping');
}

/** A key whose value is a secret: left out of a run's record (the key comes from the environment again). */
const SECRET_KEY = /(^|-)api-key$/;

/**
 * The given options as a run records them: secrets left out, URLs' credentials redacted, and the flags
 * that act on the run folder itself (`skip`: --resume, --overwrite, ...) dropped, so that the record given
 * back as --config repeats the run and never clears or continues one by itself.
 */
export function recordOf(given: GivenOptions, skip: readonly string[]): GivenOptions {
  const redact = (v: ConfigValue): ConfigValue =>
    typeof v === 'string' ? redactUrl(v) : Array.isArray(v) ? v.map(redact) : v;
  const out: GivenOptions = {};
  for (const [key, value] of Object.entries(given)) {
    if (skip.includes(key) || SECRET_KEY.test(key)) continue;
    out[key] = redact(value);
  }
  return out;
}

/** The attribute the given options reach the command's flags under. */
export const GIVEN = 'given';
/** The attribute the file's own keys (ConfigWiring.ownKeys) reach the command's flags under. */
export const OWN_KEYS = 'configKeys';

interface ConfigWiring {
  /** keys the command takes from the file itself, as `configKeys` (polar train's train.json keys without a flag) */
  ownKeys?: readonly string[];
}

const longOf = (option: Option): string => (option.long ?? '').replace(/^--/, '');

/**
 * Makes `cmd` read --config (declared with CONFIG_FLAG, or by the command itself: polar train's) and hand
 * its action the given options as `given`. Call after every flag is added.
 */
export function readsConfig(cmd: Command, { ownKeys = [] }: ConfigWiring = {}): Command {
  const given = new Map<string, { key: string; value: ConfigValue; from: 'cli' | 'config' }>();
  const before = new Map<string, { value: unknown; source: string | undefined }>();
  const own: Record<string, ConfigValue> = {};
  // commander's Command is an EventEmitter (its types do not say so): 'option:NAME' is each use of a flag
  const events = cmd as unknown as EventEmitter;
  for (const option of cmd.options) {
    const attr = option.attributeName();
    // a command-line use after the file's: the file's value goes, the flag starts from its default
    events.prependListener(`option:${option.name()}`, () => {
      if (cmd.getOptionValueSource(attr) !== 'config') return;
      const prior = before.get(attr);
      cmd.setOptionValueWithSource(attr, prior?.value, prior?.source ?? 'default');
    });
    cmd.on(`option:${option.name()}`, (value: string | undefined | null) => {
      if (option.long === '--config') return;
      const key = longOf(option);
      const word: ConfigValue = typeof value === 'string' ? value : true;
      const had = given.get(attr);
      const repeated = had?.from === 'cli' && had.key === key && accumulates(option.parseArg);
      given.set(attr, {
        key,
        from: 'cli',
        value: repeated ? [...(Array.isArray(had.value) ? had.value : [had.value]), word] : word,
      });
    });
  }
  cmd.on('option:config', (file: string) => {
    const flags = cmd.options.filter((o) => o.long && o.long !== '--config');
    const names = flags.map(longOf);
    for (const [key, value] of Object.entries(readConfigFile(file))) {
      if (key === 'config') throw new UsageError(`${file}: config: a config file cannot name another`);
      if (ownKeys.includes(key)) {
        own[key] = value;
        continue;
      }
      const option = flags.find((o) => longOf(o) === key);
      if (!option) throw unknownKey(key, file, cmd.name(), names, ownKeys);
      const attr = option.attributeName();
      if (cmd.getOptionValueSource(attr) === 'cli') continue;
      const set = applyValue(cmd, option, value, { key, file });
      if (set) given.set(attr, { key, value, from: 'config' });
    }
  });
  cmd.hook('preAction', () => {
    const record: GivenOptions = {};
    for (const { key, value } of given.values()) record[key] = value;
    cmd.setOptionValueWithSource(GIVEN, record, 'implied');
    if (Object.keys(own).length > 0) cmd.setOptionValueWithSource(OWN_KEYS, own, 'implied');
  });
  // before the file is applied (commander's own listener sets --config's value first): what each flag
  // held, for a command-line use after the file's (prependListener above)
  events.prependListener('option:config', () => {
    for (const option of cmd.options) {
      const attr = option.attributeName();
      if (!before.has(attr))
        before.set(attr, { value: cmd.getOptionValue(attr), source: cmd.getOptionValueSource(attr) });
    }
  });
  return cmd;
}

/** One key's value set through its flag's parser; false when the value is null (the flag not given). */
function applyValue(
  cmd: Command,
  option: Option,
  value: ConfigValue,
  where: { key: string; file: string },
): boolean {
  const attr = option.attributeName();
  const parse = option.parseArg as ((value: string, previous: unknown) => unknown) | undefined;
  const words = configWords(
    value,
    {
      isSwitch: !option.required && !option.optional,
      accumulates: accumulates(parse) || option.variadic,
      json: parse === (jsonObject as unknown),
    },
    where,
  );
  if (words === null) return false;
  if (typeof words === 'boolean') {
    cmd.setOptionValueWithSource(attr, option.negate ? !words : words, 'config');
    return true;
  }
  let result: unknown = option.defaultValue;
  for (const word of words) {
    try {
      result = parse ? parse(word, result) : option.variadic ? [...((result as string[]) ?? []), word] : word;
    } catch (error) {
      if (!(error instanceof InvalidArgumentError)) throw error;
      const problem = error.message;
      const text = problem.startsWith('is ') ? `${word} ${problem}` : `${word}: ${problem}`;
      throw new UsageError(`--${where.key} ${text} (in ${where.file})`);
    }
  }
  cmd.setOptionValueWithSource(attr, result, 'config');
  return true;
}
