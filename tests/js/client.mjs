// Drives parley's LangGraph API (/langgraph) with @langchain/langgraph-sdk, as a front end
// would; prints one JSON line per step for tests/service/langgraph/test_js_sdk.py to check.
//
//   node client.mjs <base URL> <alice's key> <bob's key> <a proxy's URL that cuts a stream>
import { Client } from "@langchain/langgraph-sdk";

const [base, alice, bob, proxy] = process.argv.slice(2);
const client = (key, url = base) =>
  new Client({ apiUrl: `${url}/langgraph`, defaultHeaders: { Authorization: `Bearer ${key}` } });
const mine = client(alice);
// Bob's key as the SDK's own `apiKey` (sent as X-Api-Key).
const theirs = new Client({ apiUrl: `${base}/langgraph`, apiKey: bob });
const human = (text) => ({ messages: [{ type: "human", content: text }] });
const print = (step, data) => console.log(JSON.stringify({ step, ...data }));

async function collect(stream) {
  const parts = [];
  for await (const part of stream) parts.push({ event: part.event, data: part.data, id: part.id });
  return parts;
}

async function status(promise) {
  try {
    await promise;
    return 200;
  } catch (error) {
    return error.status ?? String(error);
  }
}

const assistants = await mine.assistants.search();
print("assistants", { graphs: assistants.map((a) => a.graph_id) });
print("assistant", { byName: (await mine.assistants.get("echo")).assistant_id });

const thread = await mine.threads.create();
const tid = thread.thread_id;
let created;
const live = await collect(
  mine.runs.stream(tid, "echo", {
    input: human("hi"),
    streamMode: ["values", "messages-tuple", "updates", "custom"],
    streamResumable: true,
    onRunCreated: (meta) => {
      created = meta;
    },
  }),
);
print("stream", { parts: live, created });

const runId = live[0].data.run_id;
const replay = await collect(mine.runs.joinStream(tid, runId, { lastEventId: "-1" }));
print("joinStream", { parts: replay });

const waited = await mine.runs.wait(tid, "echo", { input: human("again") });
print("wait", { values: waited });

const background = await mine.runs.create(tid, "echo", { input: human("later") });
const joined = await mine.runs.join(tid, background.run_id);
print("create", { run: background, joined, after: await mine.runs.get(tid, background.run_id) });

const history = await mine.threads.getHistory(tid);
print("history", { sizes: history.map((s) => s.values.messages.length) });
print("state", { state: await mine.threads.getState(tid) });

const slowThread = await mine.threads.create();
const slow = await mine.runs.create(slowThread.thread_id, "slow", { input: human("go") });
for await (const part of mine.runs.joinStream(slowThread.thread_id, slow.run_id, {
  lastEventId: "-1",
  streamMode: ["messages-tuple"],
})) {
  if (part.event === "messages") break; // it is running
}
await mine.runs.cancel(slowThread.thread_id, slow.run_id, true);
print("cancel", { run: await mine.runs.get(slowThread.thread_id, slow.run_id) });

const mailThread = await mine.threads.create();
const parked = await mine.runs.wait(mailThread.thread_id, "mail", { input: human("mail them") });
const resumed = await collect(
  mine.runs.stream(mailThread.thread_id, "mail", {
    command: { resume: true },
    streamMode: ["values"],
  }),
);
print("interrupt", { parked, resumed });

print("otherUser", {
  get: await status(theirs.threads.get(tid)),
  run: await status(theirs.runs.get(tid, runId)),
  stream: await status(collect(theirs.runs.joinStream(tid, runId, { lastEventId: "-1" }))),
  search: (await theirs.threads.search()).length,
});
// Its stream cut by the proxy: the SDK reconnects to `Location` with `Last-Event-ID`.
const cutThread = await mine.threads.create();
const cut = await collect(
  client(alice, proxy).runs.stream(cutThread.thread_id, "slow", {
    input: human("hi"),
    streamMode: ["values", "messages-tuple"],
  }),
);
const cutRun = cut[0].data.run_id;
const cutWhole = await collect(
  mine.runs.joinStream(cutThread.thread_id, cutRun, { lastEventId: "-1" }),
);
print("reconnect", { parts: cut, whole: cutWhole, thread: cutThread.thread_id });
print("done", {});
