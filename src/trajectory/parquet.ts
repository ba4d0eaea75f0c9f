/**
 * `polar build --format verl -o FILE.parquet`: the verl rows (formats.ts; docs/trajectory-format.md,
 * "Other format") as one Parquet file, as verl's data loaders read them (pandas / pyarrow): one column
 * per field, the token lists as Parquet LISTs (pyarrow reads list<int32> and list<double>, not JSON
 * text). The build streams its rows as JSON lines first; they are read back here into columns, so the
 * memory is that of the file's rows. Written with hyparquet-writer.
 */
import { readFile } from 'node:fs/promises';
import { parquetWriteFile } from 'hyparquet-writer';
import { splitLines } from '../util/jsonl.ts';

/** hyparquet-writer's schema element (its own hyparquet's type) */
type SchemaElement = NonNullable<Parameters<typeof parquetWriteFile>[0]['schema']>[number];

type Kind = 'string' | 'int' | 'double' | 'bool' | 'ints' | 'doubles';

/** Every field of a verl row (encodeHead + encodeTails in formats.ts), in order, with its Parquet kind. */
export const VERL_COLUMNS: ReadonlyArray<readonly [string, Kind]> = [
  ['id', 'string'],
  ['trajectory_id', 'string'],
  ['trace_index', 'int'],
  ['session', 'string'],
  ['task_id', 'string'],
  ['sample', 'int'],
  ['group_id', 'string'],
  ['uid', 'string'],
  ['status', 'string'],
  ['reward', 'double'],
  ['policy_version', 'int'],
  ['kind', 'string'],
  ['finish_reason', 'string'],
  ['truncated', 'bool'],
  ['length_stopped', 'int'],
  ['headroom', 'int'],
  ['token_exact', 'bool'],
  ['prompt_length', 'int'],
  ['input_ids', 'ints'],
  ['loss_mask', 'ints'],
  ['logprobs', 'doubles'],
];

/** A suffix that asks for Parquet. */
export function isParquetPath(path: string): boolean {
  return /\.parquet$/i.test(path);
}

const SCALAR: Record<Exclude<Kind, 'ints' | 'doubles'>, Pick<SchemaElement, 'type' | 'converted_type'>> = {
  string: { type: 'BYTE_ARRAY', converted_type: 'UTF8' },
  int: { type: 'INT64' },
  double: { type: 'DOUBLE' },
  bool: { type: 'BOOLEAN' },
};

/** A column's schema elements: nullable scalars, and lists in Parquet's three-level LIST form. */
function schemaOf(name: string, kind: Kind): SchemaElement[] {
  if (kind === 'ints' || kind === 'doubles')
    return [
      { name, repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
      { name: 'element', type: kind === 'ints' ? 'INT64' : 'DOUBLE', repetition_type: 'REQUIRED' },
    ];
  return [{ name, repetition_type: 'OPTIONAL', ...SCALAR[kind] }];
}

/** A value as its column holds it (INT64 columns take bigints). */
function cell(value: unknown, kind: Kind): unknown {
  if (value === null || value === undefined) return null;
  if (kind === 'int') return BigInt(value as number);
  if (kind === 'ints') return (value as number[]).map((v) => BigInt(v));
  return value;
}

/**
 * Writes the verl rows of the JSON-lines file `jsonl` to `parquet`; returns the rows written. A row with a
 * field VERL_COLUMNS does not name is a bug here (a field added to the rows and not to the columns).
 */
export async function writeVerlParquet(jsonl: string, parquet: string): Promise<number> {
  const rows = splitLines(await readFile(jsonl, 'utf8')).map(
    (l) => JSON.parse(l.text) as Record<string, unknown>,
  );
  const known = new Set(VERL_COLUMNS.map(([name]) => name));
  for (const row of rows)
    for (const key of Object.keys(row))
      if (!known.has(key))
        throw new Error(`verl row field ${key} has no Parquet column (src/trajectory/parquet.ts)`);
  // policy_version is in the rows of a loop's captures only: a column of nulls is left out
  const columns = VERL_COLUMNS.filter(
    ([name]) => name !== 'policy_version' || rows.some((r) => r.policy_version !== undefined),
  );
  parquetWriteFile({
    filename: parquet,
    columnData: columns.map(([name, kind]) => ({ name, data: rows.map((r) => cell(r[name], kind)) })),
    schema: [{ name: 'root', num_children: columns.length }, ...columns.flatMap(([n, k]) => schemaOf(n, k))],
  });
  return rows.length;
}
