/** The Python worker's unittest modules that run training steps and processes (python-worker-suite.ts TRAIN_MODULES). */
import { pythonWorkerSuite, TRAIN_MODULES } from './python-worker-suite.ts';

pythonWorkerSuite('python worker (unittest): training runs and checkpoints', TRAIN_MODULES);
