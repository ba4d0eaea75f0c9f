/** Where each message of the conversation sits in the ChatML rendering, for the splice (splice.ts). */
import type { CanonicalMessage } from '../protocols/canonical.ts';

export const IM_START = '<|im_start|>';
export const IM_END = '<|im_end|>';

export interface Block {
  /** offset of `<|im_start|>` */
  start: number;
  /** offset just past this block's `<|im_end|>` (or the next block's start / end of text) */
  end: number;
}

/** Maps each message to the ChatML block it renders into; null when the layout is not ChatML as expected. */
export function messageBlocks(messages: CanonicalMessage[], hasTools: boolean): number[] {
  const blocks: number[] = [];
  let next = 0;
  if (hasTools || messages[0]?.role === 'system') next = 1;
  messages.forEach((message, i) => {
    if (i === 0 && message.role === 'system') blocks.push(0);
    else if (message.role === 'tool' && i > 0 && messages[i - 1]!.role === 'tool') blocks.push(next - 1);
    else blocks.push(next++);
  });
  blocks.push(next); // the generation prompt
  return blocks;
}

export function findBlocks(text: string): Block[] {
  const starts: number[] = [];
  for (let i = text.indexOf(IM_START); i !== -1; i = text.indexOf(IM_START, i + IM_START.length))
    starts.push(i);
  return starts.map((start, k) => {
    const limit = k + 1 < starts.length ? starts[k + 1]! : text.length;
    const close = text.lastIndexOf(IM_END, limit - 1);
    const end = close >= start ? close + IM_END.length : limit;
    return { start, end: Math.min(end, limit) };
  });
}
