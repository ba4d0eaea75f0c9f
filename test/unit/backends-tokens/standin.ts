/** Moved to test/support/completions-standin.ts (shared with the e2e tests); kept so old imports work. */
export { type StandIn, startStandIn } from '../../support/completions-standin.ts';
