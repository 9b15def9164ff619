"""The stand-in model server: FastAPI on 127.0.0.1, run by uvicorn in a background thread.

Endpoints (what litellm 1.106.2 calls, checked in its source):

- ``POST /v1/chat/completions``: OpenAI chat completions, used by ``openai/<name>`` and
  ``hosted_vllm/<name>`` with ``api_base=http://127.0.0.1:PORT/v1``. Usage in ``usage``;
  reasoning in ``message.reasoning_content``; tool calls with JSON-string arguments.
- ``POST /api/chat``: Ollama chat, used by ``ollama_chat/<name>`` with
  ``api_base=http://127.0.0.1:PORT`` (litellm appends ``/api/chat``; ``stream`` false; tools
  in ``tools``, ``tool_choice`` dropped; options in ``options``). Usage in
  ``prompt_eval_count`` / ``eval_count``, reasoning in ``message.thinking``, the end in
  ``done_reason``, tool calls as ``{"function": {"name", "arguments": {...}}}``.
- ``POST /api/show``: what litellm's ``get_model_info`` asks an Ollama server (a ``template``
  mentioning tools when they are supported, ``model_info.<arch>.context_length``);
  ``GET /api/tags`` and ``GET /v1/models``: the model list.
- ``/_control/scenario`` (POST a scenario name or object), ``/_control/log`` (GET),
  ``/_control/reset`` (POST): the same as the in-process API, for scripts in another process.

Each request is logged (:class:`RequestRecord`) with the server's own token counts
(:func:`count_tokens`), so a test can compare a run's reported totals with them.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
import traceback
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from .brain import Answer, Brain
from .scenarios import SCENARIOS, TIDY, Scenario
from .voice import ShapedReply, shape_code, shape_debug, shape_tool

DEFAULT_MODEL = "stand-in"


def count_tokens(text: str) -> int:
    """The server's token count: one token per 4 characters, rounded up (deterministic)."""
    return (len(text) + 3) // 4


class RequestRecord(BaseModel):
    """One request as the server saw it and answered it."""

    index: int
    api: str
    """``openai`` (``/v1/chat/completions``) or ``ollama`` (``/api/chat``)."""
    model: str
    purpose: str = ""
    prompt_chars: int = 0
    tools_sent: bool = False
    status: int = 200
    shape: str = ""
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    hung: bool = False
    authorization: str | None = None
    started: float = 0.0
    seconds: float = 0.0


def _prompt_text(messages: list) -> str:
    parts = []
    for m in messages or []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            content = " ".join(str(c.get("text", "")) if isinstance(c, dict) else str(c) for c in content)
        if content:
            parts.append(str(content))
    return "\n".join(parts)


class StandInServer:
    """An OpenAI- and Ollama-compatible model server on 127.0.0.1 with a scenario schedule.

    Use :meth:`start` / :meth:`stop` (or the ``llm_server`` pytest fixture), :meth:`use` to pick
    a scenario (resets counters and the log), :attr:`log` / :meth:`totals` to read what it
    answered. ``data_dir`` is where the prepared competitions are (the brain reads the
    competition named in each prompt from there).
    """

    def __init__(self, data_dir: Path | None = None, scenario: Scenario = TIDY, port: int = 0):
        self.scenario = scenario
        self.brain = Brain(data_dir, scenario)
        self.port = port
        self._lock = threading.Lock()
        self._log: list[RequestRecord] = []
        self._counters: dict[str, int] = {}
        self._stopping = False
        self._server = None
        self._thread: threading.Thread | None = None
        self.app = self._build_app()

    # ------------------------------------------------------------------ lifecycle
    @property
    def openai_base(self) -> str:
        """``api_base`` for ``openai/`` and ``hosted_vllm/`` models."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def ollama_base(self) -> str:
        """``api_base`` for ``ollama_chat/`` models."""
        return f"http://127.0.0.1:{self.port}"

    def api_base_for(self, model: str) -> str:
        """The ``model.api_base`` a run of ``model`` needs (Ollama's or the OpenAI one)."""
        return self.ollama_base if model.startswith(("ollama/", "ollama_chat/")) else self.openai_base

    def start(self) -> "StandInServer":
        """Start uvicorn in a daemon thread on a free port (or :attr:`port`); returns self once
        the server accepts connections."""
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning",
                                lifespan="off", timeout_graceful_shutdown=1, access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="stand-in-llm-server", daemon=True)
        self._thread.start()
        deadline = time.time() + 20
        while not self._server.started:
            if time.time() > deadline or not self._thread.is_alive():
                raise RuntimeError("the stand-in model server did not start")
            time.sleep(0.02)
        return self

    def stop(self, timeout: float = 3.0) -> None:
        """Stop the server (hanging requests are released first); wait up to ``timeout`` s for its
        thread, a daemon: one that does not end in time dies with the process, and a warning shows
        where it was (CI saw session teardowns wait 10 s per server, never reproduced alone)."""
        self._stopping = True
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            if self._thread.is_alive():
                frame = sys._current_frames().get(self._thread.ident)
                where = "".join(traceback.format_stack(frame)[-8:]) if frame is not None else "?"
                warnings.warn(f"the stand-in model server's thread did not end within {timeout} s:\n{where}")

    def __enter__(self) -> "StandInServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ control
    def use(self, scenario: Scenario | str, data_dir: Path | None = None) -> Scenario:
        """Switch to ``scenario`` (an object or a name in :data:`SCENARIOS`): clears the
        request log, the schedule's counters and the brain's memory."""
        if isinstance(scenario, str):
            scenario = SCENARIOS[scenario]
        with self._lock:
            self.scenario = scenario
            self._log = []
            self._counters = {}
        self.brain.reset(scenario, data_dir)
        return scenario

    @property
    def log(self) -> list[RequestRecord]:
        """A copy of the request log (one record per request, in arrival order)."""
        with self._lock:
            return list(self._log)

    def totals(self) -> dict[str, int]:
        """``{requests, answered, failed, prompt_tokens, completion_tokens}`` over the log
        (tokens are those returned in answered requests' usage)."""
        log = self.log
        ok = [r for r in log if r.status == 200 and not r.hung]
        return {
            "requests": len(log),
            "answered": len(ok),
            "failed": len(log) - len(ok),
            "prompt_tokens": sum(r.prompt_tokens for r in ok),
            "completion_tokens": sum(r.completion_tokens for r in ok),
        }

    def _next(self, counter: str) -> int:
        with self._lock:
            n = self._counters.get(counter, 0)
            self._counters[counter] = n + 1
            return n

    # ------------------------------------------------------------------ the app
    def _build_app(self) -> FastAPI:
        app = FastAPI(title="swarm-evo stand-in model server")

        @app.post("/v1/chat/completions")
        async def openai_chat(request: Request):
            return await self._chat(request, "openai")

        @app.post("/chat/completions")
        async def openai_chat_no_v1(request: Request):
            return await self._chat(request, "openai")

        @app.post("/api/chat")
        async def ollama_chat(request: Request):
            return await self._chat(request, "ollama")

        @app.get("/v1/models")
        async def models():
            return {"object": "list", "data": [{"id": DEFAULT_MODEL, "object": "model", "owned_by": "stand-in"}]}

        @app.get("/api/tags")
        async def tags():
            return {"models": [{"name": f"{DEFAULT_MODEL}:latest", "model": f"{DEFAULT_MODEL}:latest",
                                "size": 1, "details": {"family": "stand-in"}}]}

        @app.post("/api/show")
        async def show():
            tools = self.scenario.tools == "supported"
            template = "{{ if .Tools }}{{ .Tools }}{{ end }}{{ .Prompt }}" if tools else "{{ .Prompt }}"
            return {"template": template, "capabilities": ["completion"] + (["tools"] if tools else []),
                    "model_info": {"general.architecture": "stand-in",
                                   "stand-in.context_length": self.scenario.context_window}}

        @app.post("/_control/scenario")
        async def control_scenario(request: Request):
            body = await request.json()
            scenario = SCENARIOS[body] if isinstance(body, str) else Scenario(**body)
            return self.use(scenario).model_dump()

        @app.post("/_control/reset")
        async def control_reset():
            self.use(self.scenario)
            return {"ok": True}

        @app.get("/_control/log")
        async def control_log():
            return {"scenario": self.scenario.name, "totals": self.totals(),
                    "requests": [r.model_dump() for r in self.log]}

        return app

    async def _chat(self, request: Request, api: str):
        body = await request.json()
        scenario = self.scenario
        started = time.time()
        with self._lock:
            index = len(self._log)
            record = RequestRecord(index=index, api=api, model=str(body.get("model", "")), started=started,
                                   authorization=request.headers.get("authorization"))
            self._log.append(record)
        prompt = _prompt_text(body.get("messages") or [])
        record.prompt_chars = len(prompt)
        tools = body.get("tools") or []
        record.tools_sent = bool(tools)

        def finish(status: int, payload: Any) -> JSONResponse:
            record.status = status
            record.seconds = time.time() - started
            return JSONResponse(payload, status_code=status)

        if scenario.expected_key is not None and record.authorization != f"Bearer {scenario.expected_key}":
            return finish(401, _error(api, 401, "Incorrect API key provided. You can find your API key in "
                                                "your account settings.", "invalid_api_key"))
        if index in scenario.http_500_requests:
            return finish(500, _error(api, 500, "The server had an error while processing your request.",
                                      "server_error"))
        if scenario.model_gone_from_request is not None and index >= scenario.model_gone_from_request:
            return finish(404, _error(api, 404, f"The model `{record.model}` does not exist or you do not have "
                                                "access to it.", "model_not_found"))
        if scenario.hang_from_request is not None and index >= scenario.hang_from_request:
            record.hung = True
            until = started + scenario.hang_seconds
            while time.time() < until and not self._stopping:
                if await request.is_disconnected():
                    break
                await asyncio.sleep(0.2)
            return finish(504, _error(api, 504, "upstream timed out", "timeout"))
        if tools and scenario.tools == "rejected":
            message = (f"registry.ollama.ai/library/{record.model} does not support tools" if api == "ollama" else
                       "tools are not supported by this server: start it with --enable-auto-tool-choice "
                       "and --tool-call-parser to use tools or tool_choice")
            return finish(400, _error(api, 400, message, "invalid_request_error"))
        if scenario.latency:
            await asyncio.sleep(scenario.latency)
        try:
            answer = await run_in_threadpool(self.brain.answer, prompt)
        except Exception as exc:  # a brain bug: answer 500 and say why (the test log shows it)
            record.purpose = "error"
            return finish(500, _error(api, 500, f"stand-in brain failed: {type(exc).__name__}: {exc}", "server_error"))
        record.purpose = answer.purpose
        reply = self._shape(answer, prompt, bool(tools) and scenario.tools == "supported")
        record.shape, record.finish_reason = reply.shape, reply.finish_reason
        record.prompt_tokens = count_tokens(prompt)
        record.completion_tokens = count_tokens(reply.completion_text())
        payload = (_openai_payload if api == "openai" else _ollama_payload)(record, reply)
        return finish(200, payload)

    def _shape(self, answer: Answer, prompt: str, tools_usable: bool) -> ShapedReply:
        from .brain import is_reask

        s = self.scenario
        reask = is_reask(prompt)
        if answer.kind == "text":
            return ShapedReply(answer.text, shape="text")
        if answer.kind in ("review", "tool"):
            shape = "tool_call" if reask else s.review_shapes[self._next("review") % len(s.review_shapes)]
            if answer.kind == "tool" and shape not in ("tool_call", "json_fenced", "json_bare"):
                shape = "tool_call"
            return shape_tool(answer, shape, tools_usable)
        if answer.purpose == "debug":
            shape = "tidy" if reask else s.debug_shapes[self._next("debug") % len(s.debug_shapes)]
            return shape_debug(answer, shape)
        shape = "tidy" if reask else s.code_shapes[self._next("code") % len(s.code_shapes)]
        if answer.purpose == "fix" and shape in ("no_markers", "cut_off"):
            shape = "think"
        return shape_code(answer, shape, remember=self.brain.remember_variant)


def _error(api: str, status: int, message: str, code: str) -> dict:
    if api == "ollama":
        return {"error": message}
    return {"error": {"message": message, "type": code if status >= 500 else "invalid_request_error",
                      "param": None, "code": code}}


def _openai_payload(record: RequestRecord, reply: ShapedReply) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        message["tool_calls"] = [{"id": f"call_{record.index}_{i}", "type": "function",
                                  "function": {"name": c["name"], "arguments": c["arguments"]}}
                                 for i, c in enumerate(reply.tool_calls)]
    return {
        "id": f"chatcmpl-standin-{record.index}",
        "object": "chat.completion",
        "created": int(record.started),
        "model": record.model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}],
        "usage": {"prompt_tokens": record.prompt_tokens, "completion_tokens": record.completion_tokens,
                  "total_tokens": record.prompt_tokens + record.completion_tokens},
    }


def _ollama_payload(record: RequestRecord, reply: ShapedReply) -> dict:
    import json

    message: dict[str, Any] = {"role": "assistant", "content": reply.content or ""}
    if reply.reasoning:
        message["thinking"] = reply.reasoning
    if reply.tool_calls:
        calls = []
        for c in reply.tool_calls:
            try:
                arguments: Any = json.loads(c["arguments"])
            except json.JSONDecodeError:
                arguments = c["arguments"]
            calls.append({"function": {"name": c["name"], "arguments": arguments}})
        message["tool_calls"] = calls
    return {
        "model": record.model,
        "created_at": datetime.fromtimestamp(record.started, tz=timezone.utc).isoformat(),
        "message": message,
        "done": True,
        "done_reason": "length" if reply.finish_reason == "length" else "stop",
        "total_duration": int(record.seconds * 1e9),
        "prompt_eval_count": record.prompt_tokens,
        "eval_count": record.completion_tokens,
    }


def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (an endpoint that is down)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
