"""The official MCP Python SDK (pinned in scripts/setup.sh) against os_sup_mcp, as an agent
would use it: list tools, `status`, `start` the demo fixture, `eval`, read a resource, hear a
resource update after a `Logger.error`, get a prompt, complete a node name, `stop`.

    python_client.py TRANSPORT MODE TARGET NODE
      TRANSPORT  tcp (TARGET host:port, through socat) | stdio (TARGET the server binary,
                 launched by the SDK) | http (TARGET the /mcp URL)
      MODE       auto (server/discover: the 2026-07-28 revision) | legacy (initialize)
      NODE       the name to start the demo fixture under

Prints one line per step and exits non-zero on the first failure. Run by tests/clients/run.sh.
"""

import asyncio
import os
import sys
import tempfile
import warnings

import anyio
from mcp import Client, StdioServerParameters
from mcp.types import PromptReference, ResourceTemplateReference, ResourceUpdatedNotification

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(ROOT, "tests", "fixtures", "demo_app")
# Every wait is bounded: a hung server fails the run instead of stalling CI.
STEP_TIMEOUT = 120

warnings.simplefilter("ignore")  # the legacy half calls APIs the SDK marks deprecated


def fail(message):
    raise SystemExit(f"FAIL: {message}")


def text_of(result):
    return "\n".join(block.text for block in result.content if getattr(block, "text", None))


def check_ok(tool, result):
    if result.is_error:
        fail(f"{tool}: {text_of(result)}")
    return result


def server_for(transport, target, state_dir):
    if transport == "tcp":
        return StdioServerParameters(command="socat", args=["STDIO", f"TCP:{target}"])
    if transport == "stdio":
        return StdioServerParameters(
            command=target, args=["--stdio", "--state-dir", state_dir, "--log-level", "warn"]
        )
    if transport == "http":
        return target
    fail(f"unknown transport {transport}")


async def run(transport, mode, target, node):
    updates = asyncio.Queue()

    async def on_message(message):
        if isinstance(message, ResourceUpdatedNotification):
            updates.put_nowait(message.params.uri)

    with tempfile.TemporaryDirectory() as state_dir:
        os.chmod(state_dir, 0o700)
        client = Client(
            server_for(transport, target, state_dir),
            mode=mode,
            message_handler=on_message,
            read_timeout_seconds=STEP_TIMEOUT,
        )
        async with client:
            print(f"  protocol {client.protocol_version}")
            if mode == "auto" and client.protocol_version < "2026-07-28":
                fail(f"auto negotiated {client.protocol_version}, not 2026-07-28")
            caps = client.server_capabilities
            if not (caps.tools and caps.prompts and caps.resources and caps.completions):
                fail(f"capabilities miss something: {caps}")
            if not caps.resources.subscribe:
                fail(f"resources are not subscribable: {caps.resources}")

            tools = (await client.list_tools()).tools
            names = {tool.name for tool in tools}
            for wanted in ("status", "start", "eval", "logs", "stop"):
                if wanted not in names:
                    fail(f"tools/list lacks {wanted}: {sorted(names)}")
            print(f"  tools/list: {len(tools)} tools")

            check_ok("status", await client.call_tool("status", {}))
            started = check_ok("start", await client.call_tool("start", {"name": node, "path": DEMO}))
            print(f"  start: {text_of(started).splitlines()[0]}")
            evaluated = check_ok("eval", await client.call_tool("eval", {"name": node, "code": "1 + 41"}))
            if "42" not in text_of(evaluated):
                fail(f"eval 1 + 41: {text_of(evaluated)}")
            print("  eval: 42")

            uri = f"beam://{node}/logs"
            listed = [r.uri for r in (await client.list_resources()).resources]
            if uri not in listed:
                fail(f"resources/list lacks {uri}: {listed}")
            tree = (await client.read_resource(f"beam://{node}/tree")).contents[0].text
            if "DemoApp.Supervisor" not in tree:
                fail(f"beam://{node}/tree: {tree}")
            print("  resources/read: tree with DemoApp.Supervisor")

            marker = f"python-sdk-{transport}-{mode}"
            logger_error = f'require Logger; Logger.error("{marker}")'
            if mode == "legacy":
                await client.subscribe_resource(uri)
                check_ok("eval", await client.call_tool("eval", {"name": node, "code": logger_error}))
                with anyio.fail_after(STEP_TIMEOUT):
                    updated = await updates.get()
            else:
                async with client.listen(resource_subscriptions=[uri]) as subscription:
                    if uri not in (subscription.honored.resource_subscriptions or []):
                        fail(f"listen did not honor {uri}: {subscription.honored}")
                    check_ok("eval", await client.call_tool("eval", {"name": node, "code": logger_error}))
                    with anyio.fail_after(STEP_TIMEOUT):
                        event = await subscription.__anext__()
                    updated = event.uri
            if updated != uri:
                fail(f"update for {updated}, not {uri}")
            logs = (await client.read_resource(uri)).contents[0].text
            if marker not in logs:
                fail(f"{uri} lacks the error line {marker}: {logs[-500:]}")
            print(f"  resource update after Logger.error: {updated}")

            prompts = [p.name for p in (await client.list_prompts()).prompts]
            if "diagnose_crash" not in prompts:
                fail(f"prompts/list: {prompts}")
            prompt = await client.get_prompt("diagnose_crash", {"name": node})
            prompt_text = prompt.messages[0].content.text
            if f"`{node}`" not in prompt_text or "`logs`" not in prompt_text:
                fail(f"prompts/get diagnose_crash: {prompt_text}")
            print(f"  prompts: {', '.join(prompts)}")

            completed = await client.complete(PromptReference(name="diagnose_crash"), {"name": "name", "value": node[:3]})
            if node not in completed.completion.values:
                fail(f"completion of {node[:3]!r}: {completed.completion.values}")
            completed = await client.complete(ResourceTemplateReference(uri="beam://{name}/logs"), {"name": "name", "value": ""})
            if node not in completed.completion.values:
                fail(f"completion of the template: {completed.completion.values}")
            print(f"  completion: {completed.completion.values}")

            check_ok("stop", await client.call_tool("stop", {"name": node}))
            print("  stop: ok")


def main():
    if len(sys.argv) != 5:
        fail(__doc__)
    transport, mode, target, node = sys.argv[1:]
    print(f"python SDK over {transport}, mode {mode}")
    asyncio.run(asyncio.wait_for(run(transport, mode, target, node), STEP_TIMEOUT * 3))


if __name__ == "__main__":
    main()
