// client.mjs drives Rastro's MCP server with the official TypeScript SDK
// client, for internal/mcpserver's TestNodeClients (node_test.go).
//
// Usage:
//
//	node client.mjs stdio BIN SERVER_URL CALLS   spawns `BIN mcp --server SERVER_URL`
//	node client.mjs http MCP_URL CALLS           streamable HTTP, e.g. http://127.0.0.1:4318/mcp
//
// CALLS is a JSON array of {"name": tool, "arguments": {...}, "as": key}; "as"
// (default: the tool's name) keys the result, so one tool can be called twice.
// The client connects, lists the tools, makes every call in order and prints
// one JSON document on stdout:
//
//	{"server": {name, version},
//	 "tools": [{name, hasOutputSchema, readOnly}],
//	 "results": {key: {isError, structuredContent, text}}}
//
// A call the SDK rejects (a protocol error, or structured content that does
// not match the tool's output schema, which the SDK checks) is reported as
// {"error": message} in place of its result. Anything else that goes wrong
// goes to stderr with exit status 1. The server's stderr (stdio) passes
// through to ours.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

function usage() {
  console.error("usage: node client.mjs stdio BIN SERVER_URL CALLS | node client.mjs http MCP_URL CALLS");
  process.exit(2);
}

function transport(argv) {
  switch (argv[0]) {
    case "stdio":
      if (argv.length !== 4) usage();
      return [new StdioClientTransport({ command: argv[1], args: ["mcp", "--server", argv[2]], stderr: "inherit" }), argv[3]];
    case "http":
      if (argv.length !== 3) usage();
      return [new StreamableHTTPClientTransport(new URL(argv[1])), argv[2]];
    default:
      usage();
  }
}

async function main() {
  const [t, callsJSON] = transport(process.argv.slice(2));
  const calls = JSON.parse(callsJSON);
  const client = new Client({ name: "rastro-node-test", version: "1.0.0" });
  await client.connect(t);
  try {
    const out = { server: client.getServerVersion(), tools: [], results: {} };
    // listTools also caches each tool's output schema, against which
    // callTool then validates the structured content.
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : {});
      for (const tool of page.tools) {
        out.tools.push({
          name: tool.name,
          hasOutputSchema: tool.outputSchema !== undefined,
          readOnly: tool.annotations?.readOnlyHint === true,
        });
      }
      cursor = page.nextCursor;
    } while (cursor);
    for (const call of calls) {
      const key = call.as ?? call.name;
      try {
        const r = await client.callTool({ name: call.name, arguments: call.arguments ?? {} });
        out.results[key] = {
          isError: r.isError === true,
          structuredContent: r.structuredContent ?? null,
          text: (r.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n"),
        };
      } catch (err) {
        out.results[key] = { error: String(err?.message ?? err) };
      }
    }
    process.stdout.write(JSON.stringify(out) + "\n");
  } finally {
    await client.close();
  }
}

main().catch((err) => {
  console.error(err?.stack ?? String(err));
  process.exit(1);
});
