/**
 * A bounded cache of long values filed under a short key taken from their start (their first bytes or
 * characters), least recently used first out. The caller finds a value by comparing the candidates under
 * a key with what it holds (memcmp), since a Map keyed by the whole value would hash it on each lookup.
 * Shared by the request-body literals (src/util/json-body.ts) and the prompt ids of servers' answers
 * (src/util/prompt-ids.ts).
 */
export class PrefixCache<K, E> {
  private readonly byKey = new Map<K, E[]>();
  /** every entry, least recently used first */
  private readonly order = new Set<E>();
  private size = 0;

  /**
   * @param keyOf the key an entry is filed under (the same key the caller looks it up by)
   * @param sizeOf what an entry counts against `max`
   */
  constructor(
    private readonly keyOf: (entry: E) => K,
    private readonly sizeOf: (entry: E) => number,
    private readonly max: number,
  ) {}

  /** The entries filed under `key`, oldest first (not to be changed). */
  candidates(key: K): readonly E[] | undefined {
    return this.byKey.get(key);
  }

  /** The entry was used: it goes out last. */
  touch(entry: E): void {
    if (!this.order.delete(entry)) return;
    this.order.add(entry);
  }

  /** Adds an entry (one larger than the whole cache is not kept); the least recently used go past max. */
  add(entry: E): void {
    const size = this.sizeOf(entry);
    if (size > this.max) return;
    const key = this.keyOf(entry);
    const same = this.byKey.get(key);
    if (same) same.push(entry);
    else this.byKey.set(key, [entry]);
    this.order.add(entry);
    this.size += size;
    for (const old of this.order) {
      if (this.size <= this.max) break;
      this.drop(old);
    }
  }

  /** Removes an entry (nothing when it is not held). */
  drop(entry: E): void {
    if (!this.order.delete(entry)) return;
    this.size -= this.sizeOf(entry);
    const key = this.keyOf(entry);
    const same = this.byKey.get(key)!;
    same.splice(same.indexOf(entry), 1);
    if (same.length === 0) this.byKey.delete(key);
  }
}
