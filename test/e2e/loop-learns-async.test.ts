/** The loop learns (loop-learns-suite.ts), the asynchronous loop at --max-staleness 1 (issue 27 part 3): samples trained one version late. */
import { loopLearns } from './loop-learns-suite.ts';

loopLearns(1);
