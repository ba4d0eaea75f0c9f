/** The loop learns (loop-learns-suite.ts), the strict loop (--max-staleness 0). */
import { loopLearns } from './loop-learns-suite.ts';

loopLearns(0);
