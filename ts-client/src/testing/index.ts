// @gatekeeper/client/testing: a scripted fake of the Anthropic Messages API
// for tests and walkthroughs that drive the real Agent SDK. See README.md.

export { startFakeModel, lastToolResults } from './fake-model.js';
export type {
  FakeModel,
  FakeModelOptions,
  FakeRequest,
  FakeScriptStep,
  FakeToolCall,
  FakeToolResult,
  FakeTurn,
  FakeTurnContext,
} from './fake-model.js';
